/* examples/tensor_on_device.c: a tensor lives on a device, chosen when it is created.
 *
 *   PyTorch:  x = torch.tensor([1, 2, 3]); x.device
 *             X = torch.ones(2, 3, device=try_gpu())
 *             Y = torch.rand(2, 3, device=try_gpu(1))
 *   cuttle:   every constructor takes a device; there is no "current device".
 * The program checks what it prints (tests/CMakeLists.txt runs it) and exits 1 when a check fails. */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32];
  float v[3] = {1, 2, 3};
  ct_tensor *x = ct_from_host(v, 1, (int64_t[]){3}, CT_F32, CT_DEVICE_CPU);
  ct_device dev = ct_try_gpu(0); /* GPU 0 if there is one, else the CPU */
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, dev);
  ct_tensor *Y = ct_rand(2, (int64_t[]){2, 3}, 0, 1, CT_F32, ct_try_gpu(1), NULL);
  if (!x || !X || !Y) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  printf("x lives on %s\n", ct_device_str(ct_tensor_device(x), name, sizeof name));
  printf("X lives on %s\n", ct_device_str(ct_tensor_device(X), name, sizeof name));
  ct_tensor_print(X, stdout);
  ct_tensor_print(Y, stdout);

  /* Reading values back to the host is an explicit copy too (and a synchronization on a GPU). */
  float hx[3], hX[6], hY[6];
  if (ct_to_host(x, hx, sizeof hx, CT_F32) != CT_OK || ct_to_host(X, hX, sizeof hX, CT_F32) != CT_OK ||
      ct_to_host(Y, hY, sizeof hY, CT_F32) != CT_OK) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  float sum_X = 0;
  int y_in_range = 1;
  for (int i = 0; i < 6; i++) sum_X += hX[i], y_in_range &= hY[i] >= 0 && hY[i] < 1;
  printf("x = [%g, %g, %g], sum of X = %g, every Y in [0, 1): %s\n", hx[0], hx[1], hx[2], sum_X,
         y_in_range ? "yes" : "no");
  int ok = hx[0] == 1 && hx[1] == 2 && hx[2] == 3 && sum_X == 6 && y_in_range &&
           ct_device_eq(ct_tensor_device(X), dev);
  ct_tensor_free(x), ct_tensor_free(X), ct_tensor_free(Y);
  return ok ? 0 : 1;
}
