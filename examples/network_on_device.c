/* examples/network_on_device.c: a network whose parameters live on a device.
 *
 *   PyTorch:  net = nn.Sequential(nn.Linear(3, 1)); net = net.to(device=try_gpu())
 *             net(X); net[0].weight.data.device
 *   cuttle:   ct_module_to moves every parameter and buffer; inputs must be on the same device.
 * The program checks what it prints (tests/CMakeLists.txt runs it) and exits 1 when a check fails. */
#include <math.h>
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32];
  ct_device dev = ct_try_gpu(0);
  ct_module *net = ct_sequential_new(1, (ct_module *[]){ct_linear_new(3, 1, 1, CT_DEVICE_CPU, NULL)});
  if (!net || ct_module_to(net, dev) != CT_OK) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  int ok = 1;
  ct_named_tensor params[4];
  int n = ct_module_named_tensors(net, 0, params, 4);
  for (int i = 0; i < n; i++) {
    printf("%s lives on %s\n", params[i].name, ct_device_str(ct_tensor_device(params[i].tensor), name, sizeof name));
    ok &= ct_device_eq(ct_tensor_device(params[i].tensor), dev);
  }
  ok &= n == 2;

  ct_scope_begin(); /* the temporaries of this block are released at its end */
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, dev);
  ct_tensor *out = ct_module_forward(net, X);
  float w[3], b, y[2];
  if (!out || ct_to_host(params[0].tensor, w, sizeof w, CT_F32) != CT_OK ||
      ct_to_host(params[1].tensor, &b, sizeof b, CT_F32) != CT_OK || ct_to_host(out, y, sizeof y, CT_F32) != CT_OK) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    ct_scope_end();
    ct_module_free(net);
    return 1;
  }
  ct_tensor_print(out, stdout);
  /* A row of ones times the weights plus the bias: the sum of the weights plus the bias. */
  float want = w[0] + w[1] + w[2] + b;
  int match = fabsf(y[0] - want) <= 1e-6f && fabsf(y[1] - want) <= 1e-6f;
  printf("net(ones) = %.4f, w0 + w1 + w2 + b = %.4f: %s\n", y[0], want, match ? "match" : "MISMATCH");
  ok &= match;
  ct_scope_end();

  ct_module_free(net);
  return ok ? 0 : 1;
}
