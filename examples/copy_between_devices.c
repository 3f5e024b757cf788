/* examples/copy_between_devices.c: data moves between devices only by an explicit copy.
 *
 *   PyTorch:  Z = X.cuda(1); Y + Z                 (X + Y across devices raises an error)
 *             Z.cuda(1) is Z                       (no copy when it is already there)
 *   cuttle:   ct_to(t, device, flags); an op across devices fails and says how to fix it, and
 *             every host<->device copy is counted in the ledger, because copies are slow.
 * Without a GPU, ct_try_gpu(0) is the CPU: X + Y is then allowed and ct_to copies nothing. The
 * program checks what it prints (tests/CMakeLists.txt runs it) and exits 1 when a check fails. */
#include <math.h>
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32];
  ct_device gpu = ct_try_gpu(0);
  int same = ct_device_eq(gpu, CT_DEVICE_CPU);
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, CT_DEVICE_CPU);
  ct_tensor *Y = ct_rand(2, (int64_t[]){2, 3}, 0, 1, CT_F32, gpu, NULL);
  if (!X || !Y) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }

  ct_tensor *bad = ct_add(X, Y); /* fails when Y is on a GPU: nothing is copied behind your back */
  if (!bad && !same) {
    printf("X + Y across devices: refused, as expected: %s\n", ct_last_error());
  } else if (bad && same) {
    printf("X + Y: computed, both on %s\n", ct_device_str(gpu, name, sizeof name));
  } else {
    fprintf(stderr, "error: X + Y with X on cpu and Y on %s %s\n", ct_device_str(gpu, name, sizeof name),
            bad ? "was computed" : ct_last_error());
    return 1;
  }
  ct_tensor_free(bad);

  ct_ledger_reset();
  ct_tensor *Z = ct_to(X, gpu, 0); /* the explicit copy */
  ct_ledger copies = ct_ledger_get();
  ct_tensor *S = ct_add(Y, Z);
  if (!Z || !S) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  ct_tensor_print(S, stdout);
  float s[6], y[6];
  if (ct_to_host(S, s, sizeof s, CT_F32) != CT_OK || ct_to_host(Y, y, sizeof y, CT_F32) != CT_OK) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= fabsf(s[i] - (y[i] + 1.0f)) <= 1e-6f;
  printf("Y + Z = Y + 1 everywhere: %s\n", ok ? "yes" : "no");
  printf("ct_to(X, %s) copied host to device %llu time(s), as expected: %s\n", ct_device_str(gpu, name, sizeof name),
         (unsigned long long)copies.h2d_copies, copies.h2d_copies == (same ? 0u : 1u) ? "yes" : "no");
  ok &= copies.h2d_copies == (same ? 0u : 1u);

  ct_tensor *Z2 = ct_to(Z, gpu, 0); /* already there: the same tensor, one more reference */
  printf("ct_to(Z, its own device) returns Z itself: %s\n", Z2 == Z ? "yes" : "no");
  ok &= Z2 == Z;

  ct_ledger_print(stdout); /* h2d/d2h copies and synchronizations since the reset */
  ct_tensor_free(X), ct_tensor_free(Y), ct_tensor_free(Z), ct_tensor_free(Z2), ct_tensor_free(S);
  return ok ? 0 : 1;
}
