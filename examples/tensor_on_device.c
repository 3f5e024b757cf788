/* examples/tensor_on_device.c: a tensor lives on a device, chosen when it is created.
 *
 *   PyTorch:  x = torch.tensor([1, 2, 3]); x.device
 *             X = torch.ones(2, 3, device=try_gpu())
 *             Y = torch.rand(2, 3, device=try_gpu(1))
 *   cuttle:   every constructor takes a device; there is no "current device". */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32];
  float v[3] = {1, 2, 3};
  ct_tensor *x = ct_from_host(v, 1, (int64_t[]){3}, CT_F32, CT_DEVICE_CPU);
  printf("x lives on %s\n", ct_device_str(ct_tensor_device(x), name, sizeof name));

  ct_device dev = ct_try_gpu(0); /* GPU 0 if there is one, else the CPU */
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, dev);
  ct_tensor *Y = ct_rand(2, (int64_t[]){2, 3}, 0, 1, CT_F32, ct_try_gpu(1), NULL);
  if (!X || !Y) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  ct_tensor_print(X, stdout);
  ct_tensor_print(Y, stdout);
  ct_tensor_free(x), ct_tensor_free(X), ct_tensor_free(Y);
  return 0;
}
