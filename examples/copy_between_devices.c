/* examples/copy_between_devices.c: data moves between devices only by an explicit copy.
 *
 *   PyTorch:  Z = X.cuda(1); Y + Z                 (X + Y across devices raises an error)
 *             Z.cuda(1) is Z                       (no copy when it is already there)
 *   cuttle:   ct_to(t, device, flags); an op across devices fails and says how to fix it, and
 *             every host<->device copy is counted in the ledger, because copies are slow. */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  ct_device gpu = ct_try_gpu(0);
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, CT_DEVICE_CPU);
  ct_tensor *Y = ct_rand(2, (int64_t[]){2, 3}, 0, 1, CT_F32, gpu, NULL);

  ct_tensor *bad = ct_add(X, Y); /* fails when Y is on a GPU: nothing is copied behind your back */
  if (!bad) printf("as expected: %s\n\n", ct_last_error());
  ct_tensor_free(bad);

  ct_tensor *Z = ct_to(X, gpu, 0); /* the explicit copy */
  ct_tensor *S = ct_add(Y, Z);
  ct_tensor_print(S, stdout);

  ct_tensor *Z2 = ct_to(Z, gpu, 0); /* already there: the same tensor, one more reference */
  printf("ct_to(Z, its own device) returns Z itself: %s\n", Z2 == Z ? "yes" : "no");

  ct_ledger_print(stdout); /* h2d/d2h copies and synchronizations so far */
  ct_tensor_free(X), ct_tensor_free(Y), ct_tensor_free(Z), ct_tensor_free(Z2), ct_tensor_free(S);
  return 0;
}
