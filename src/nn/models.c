/* src/nn/models.c: the networks of `cuttle train` by name (see ct_model_new in nn.h); the ResNets are
 * resnet.c's. */
#include <string.h>
#include "cuttle/nn.h"
#include "core/internal.h"

static ct_module *mlp(const int64_t s[4], ct_device dev, ct_generator *gen) {
  ct_module *c[] = {ct_flatten_new(),         ct_linear_new(s[0] * s[1] * s[2], 256, 1, dev, gen), ct_relu_new(),
                    ct_linear_new(256, 128, 1, dev, gen), ct_relu_new(),            ct_linear_new(128, s[3], 1, dev, gen)};
  return ct_sequential_new(6, c);
}

/* Two 2x2 max-pools (floor) leave 64 x (H/2/2) x (W/2/2) features for the first Linear. */
static ct_module *cnn(const int64_t s[4], ct_device dev, ct_generator *gen) {
  ct_conv2d_opts pad1 = {.padding = {1, 1}};
  ct_pool2d_opts pool2 = {.kernel = {2, 2}};
  ct_module *c[] = {ct_conv2d_new(s[0], 32, 3, &pad1, 1, dev, gen),
                    ct_relu_new(),
                    ct_max_pool2d_new(&pool2),
                    ct_conv2d_new(32, 64, 3, &pad1, 1, dev, gen),
                    ct_relu_new(),
                    ct_max_pool2d_new(&pool2),
                    ct_flatten_new(),
                    ct_linear_new(64 * (s[1] / 2 / 2) * (s[2] / 2 / 2), 128, 1, dev, gen),
                    ct_relu_new(),
                    ct_linear_new(128, s[3], 1, dev, gen)};
  return ct_sequential_new(10, c);
}

/* Both constructors; fn names the one called, in the messages. */
/* "resnet18" -> 18, "resnet50-small" -> 50 with *small = 1; 0 for another name. */
static int resnet_depth(const char *name, int *small) {
  static const char *const names[] = {"resnet18", "resnet34", "resnet50"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(names[i]);
    if (strncmp(name, names[i], n) != 0) continue;
    if (name[n] && strcmp(name + n, "-small") != 0) return 0;
    *small = name[n] != 0;
    return i == 0 ? 18 : i == 1 ? 34 : 50;
  }
  return 0;
}

static ct_module *build(const char *fn, const char *name, const int64_t s[4], ct_device dev, ct_generator *gen) {
  int is_mlp = name && strcmp(name, "mlp") == 0, is_cnn = name && strcmp(name, "cnn") == 0, small = 0;
  int depth = name ? resnet_depth(name, &small) : 0;
  if (!is_mlp && !is_cnn && !depth)
    CT_FAIL_NULL(CT_EINVAL, "%s: unknown model \"%s\"; use \"mlp\", \"cnn\", \"resnet18\", \"resnet34\" or \"resnet50\" (with "
                 "\"-small\" for the 3x3 stem of small images)", fn, name ? name : "(null)");
  int64_t min = is_cnn ? 4 : 1, big = (int64_t)1 << 20;
  if (s[0] < 1 || s[1] < min || s[2] < min || s[3] < 1 || s[0] > big || s[1] > big || s[2] > big || s[3] > big ||
      s[0] * s[1] * s[2] > ((int64_t)1 << 31))
    CT_FAIL_NULL(CT_EINVAL, "%s: %s for (%lld, %lld, %lld) inputs and %lld classes: the channels and classes must be "
                 ">= 1 and the image at least %lld x %lld (and at most 2^31 values)",
                 fn, name, (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3], (long long)min, (long long)min);
  if (!ct__check_device(fn, dev)) return NULL;
  ct_resnet_opts ro = {.in_channels = s[0], .num_classes = s[3], .small_input = small};
  ct_module *m = is_mlp ? mlp(s, dev, gen) : is_cnn ? cnn(s, dev, gen) : ct_resnet_new(depth, &ro, dev, gen);
  if (!m) ct__error_prefix("%s (%s)", fn, name);
  return m;
}

ct_module *ct_model_new(const char *name, ct_device dev, ct_generator *gen) {
  return build("ct_model_new", name, (const int64_t[4]){1, 28, 28, 10}, dev, gen);
}

ct_module *ct_model_new_for(const char *name, int64_t in_channels, int64_t h, int64_t w, int64_t num_classes,
                            ct_device dev, ct_generator *gen) {
  return build("ct_model_new_for", name, (const int64_t[4]){in_channels, h, w, num_classes}, dev, gen);
}
