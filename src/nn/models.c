/* src/nn/models.c: the reference networks of `cuttle train` (see ct_model_new in nn.h). */
#include <string.h>
#include "cuttle/nn.h"
#include "core/internal.h"

static ct_module *mlp(ct_device dev, ct_generator *gen) {
  ct_module *c[] = {ct_flatten_new(),         ct_linear_new(784, 256, 1, dev, gen), ct_relu_new(),
                    ct_linear_new(256, 128, 1, dev, gen), ct_relu_new(),            ct_linear_new(128, 10, 1, dev, gen)};
  return ct_sequential_new(6, c);
}

static ct_module *cnn(ct_device dev, ct_generator *gen) {
  ct_conv2d_opts pad1 = {.padding = {1, 1}};
  ct_pool2d_opts pool2 = {.kernel = {2, 2}};
  ct_module *c[] = {ct_conv2d_new(1, 32, 3, &pad1, 1, dev, gen),
                    ct_relu_new(),
                    ct_max_pool2d_new(&pool2),
                    ct_conv2d_new(32, 64, 3, &pad1, 1, dev, gen),
                    ct_relu_new(),
                    ct_max_pool2d_new(&pool2),
                    ct_flatten_new(),
                    ct_linear_new(3136, 128, 1, dev, gen),
                    ct_relu_new(),
                    ct_linear_new(128, 10, 1, dev, gen)};
  return ct_sequential_new(10, c);
}

ct_module *ct_model_new(const char *name, ct_device dev, ct_generator *gen) {
  int is_mlp = name && strcmp(name, "mlp") == 0, is_cnn = name && strcmp(name, "cnn") == 0;
  if (!is_mlp && !is_cnn)
    CT_FAIL_NULL(CT_EINVAL, "ct_model_new: unknown model \"%s\"; use \"mlp\" or \"cnn\"", name ? name : "(null)");
  if (!ct__check_device("ct_model_new", dev)) return NULL;
  ct_module *m = is_mlp ? mlp(dev, gen) : cnn(dev, gen);
  if (!m) ct__error_prefix("ct_model_new (%s)", name);
  return m;
}
