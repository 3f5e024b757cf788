/* examples/network_on_device.c: a network whose parameters live on a device.
 *
 *   PyTorch:  net = nn.Sequential(nn.Linear(3, 1)); net = net.to(device=try_gpu())
 *             net(X); net[0].weight.data.device
 *   cuttle:   ct_module_to moves every parameter and buffer; inputs must be on the same device. */
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
  ct_named_tensor params[4];
  int n = ct_module_named_tensors(net, 0, params, 4);
  for (int i = 0; i < n; i++)
    printf("%s lives on %s\n", params[i].name, ct_device_str(ct_tensor_device(params[i].tensor), name, sizeof name));

  ct_scope_begin(); /* the temporaries of this block are released at its end */
  ct_tensor *X = ct_ones(2, (int64_t[]){2, 3}, CT_F32, dev);
  ct_tensor *out = ct_module_forward(net, X);
  ct_tensor_print(out, stdout);
  ct_scope_end();

  ct_module_free(net);
  return 0;
}
