/* tests/install/consumer/main.c: a program written against an installed cuttle, as a user would
 * write one. tests/install/run.sh copies this folder out of the source tree and builds it twice,
 * with pkg-config and with find_package(cuttle), against a temporary install prefix.
 *
 * It makes a random batch, trains the "mlp" model one step with Adam on the CPU, saves a checkpoint
 * to the path given as its argument, prints ct_version() and the loss, and exits 0 only when every
 * call succeeded, the loss is finite and the version matches the headers it was compiled with. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cuttle.h"

#define STR2(x) #x
#define STR(x) STR2(x)

/* Print the failed call with cuttle's own message, and give the exit status. */
static int fail(const char *what) {
  fprintf(stderr, "consumer: %s failed: %s\n", what, ct_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer CHECKPOINT\n");
    return 2;
  }
  const char *headers = STR(CT_VERSION_MAJOR) "." STR(CT_VERSION_MINOR) "." STR(CT_VERSION_PATCH);
  if (strcmp(ct_version(), headers) != 0) {
    fprintf(stderr, "consumer: library %s, headers %s\n", ct_version(), headers);
    return 1;
  }
  ct_device dev = CT_DEVICE_CPU;
  ct_generator gen = ct_generator_new(42);
  ct_module *net = ct_model_new("mlp", dev, &gen);
  if (!net) return fail("ct_model_new");
  ct_optimizer *opt = ct_optimizer_new(net, &(ct_optim_opts){.kind = CT_OPTIM_ADAM});
  if (!opt) {
    ct_module_free(net);
    return fail("ct_optimizer_new");
  }
  int rc = 0;
  double loss_value = NAN;
  /* A batch of 8 random images (8, 1, 28, 28) and labels in [0, 10); the scope owns every tensor
   * of the step. */
  if (ct_scope_begin() != CT_OK) rc = fail("ct_scope_begin");
  else {
    const int64_t xs[] = {8, 1, 28, 28}, ys[] = {8};
    ct_tensor *x = ct_randn(4, xs, 0.0, 1.0, CT_F32, dev, &gen);
    ct_tensor *y = ct_randint(1, ys, 0, 10, CT_I64, dev, &gen);
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(net, x), y, CT_REDUCTION_MEAN, 0);
    if (!loss) rc = fail("the forward pass");
    else if (ct_backward(loss) != CT_OK) rc = fail("ct_backward");
    else if (ct_optimizer_step(opt) != CT_OK) rc = fail("ct_optimizer_step");
    else loss_value = ct_item(loss);
    ct_optimizer_zero_grad(opt);
    ct_scope_end();
  }
  if (!rc && ct_checkpoint_save(argv[1], net, opt, NULL) != CT_OK) rc = fail("ct_checkpoint_save");
  if (!rc && !isfinite(loss_value)) {
    fprintf(stderr, "consumer: the loss is not finite\n");
    rc = 1;
  }
  if (!rc) printf("cuttle %s: one Adam step of mlp, loss %.4f, steps %lld, checkpoint %s\n", ct_version(), loss_value,
                  (long long)ct_optimizer_steps(opt), argv[1]);
  ct_optimizer_free(opt);
  ct_module_free(net);
  return rc;
}
