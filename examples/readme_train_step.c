/* examples/readme_train_step.c: a few training steps of the "mlp" on GPU 0 or the CPU, on one batch
 * of random images of Fashion-MNIST's shape. README.md shows this file verbatim (CTest readme_example). */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  ct_device dev = ct_try_gpu(0);                       /* GPU 0, or the CPU */
  ct_module *net = ct_model_new("mlp", dev, NULL);
  ct_optimizer *opt = net ? ct_optimizer_new(net, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}) : NULL;
  /* A batch as a loader gives it, on the CPU: 64 images (64, 1, 28, 28) and their labels (64). */
  ct_tensor *batch_x = ct_randn(4, (int64_t[]){64, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, NULL);
  ct_tensor *batch_y = ct_randint(1, (int64_t[]){64}, 0, 10, CT_I64, CT_DEVICE_CPU, NULL);
  int ok = opt && batch_x && batch_y;                  /* errors never abort: NULL or a status < 0 */
  for (int step = 1; ok && step <= 5; step++) {
    ct_scope_begin();                                  /* owns this step's temporaries */
    ct_tensor *x = ct_to(batch_x, dev, 0), *y = ct_to(batch_y, dev, 0);   /* explicit copies */
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(net, x), y, CT_REDUCTION_MEAN, 0);
    ok = loss && ct_backward(loss) == CT_OK && ct_optimizer_step(opt) == CT_OK;
    if (ok) printf("step %d: loss %.4f\n", step, ct_item(loss));
    ct_optimizer_zero_grad(opt);
    ct_scope_end();                                    /* frees x, y, the logits and the loss */
  }
  if (!ok) fprintf(stderr, "error: %s\n", ct_last_error());   /* which op, which arguments, the fix */
  ct_tensor_free(batch_x);
  ct_tensor_free(batch_y);
  ct_optimizer_free(opt);
  ct_module_free(net);
  return ok ? 0 : 1;
}
