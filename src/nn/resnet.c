/* src/nn/resnet.c: torchvision's ResNets (resnet18, resnet34, resnet50), built as user modules
 * through the public API of cuttle/nn.h, the way a user would write them.
 *
 * The structure, names, shapes and initialization follow torchvision/models/resnet.py (v0.13 and
 * later, "ResNet V1.5": a Bottleneck strides in its 3x3 conv): conv1, bn1, relu, maxpool,
 * layer1..layer4 (Sequentials of BasicBlock or Bottleneck, each with conv1, bn1, conv2, bn2
 * [conv3, bn3], relu and, where the shape changes, downsample = Sequential(conv1x1, BatchNorm2d)),
 * avgpool (AdaptiveAvgPool2d((1, 1))), fc. So the state_dict keys are torchvision's
 * ("layer1.0.conv1.weight", "layer2.0.downsample.1.running_var", "fc.bias"). */
#include <math.h>
#include <string.h>
#include "cuttle/nn.h"
#include "core/internal.h"

/* Run self's child name on h and free h (NULL in, NULL out: the error is already set). */
static ct_tensor *then(ct_module *self, const char *name, ct_tensor *h) {
  if (!h) return NULL;
  ct_module *c = ct_module_child(self, name);
  ct_tensor *y = c ? ct_module_forward(c, h) : NULL;
  if (!y) ct__error_prefix("%s", name); /* the child's name in the path: "layer2: child 0, BasicBlock: conv1: ..." */
  ct_tensor_free(h);
  return y;
}

static ct_tensor *relu_then_free(ct_tensor *h) {
  ct_tensor *y = h ? ct_relu(h) : NULL;
  ct_tensor_free(h);
  return y;
}

/* self's child name, or NULL without an error: the children a block or stem may lack
 * (downsample, maxpool). */
static ct_module *optional_child(ct_module *self, const char *name) {
  for (int i = 0, n = ct_module_num_children(self); i < n; i++) {
    const char *nm;
    ct_module *c = ct_module_child_at(self, i, &nm);
    if (strcmp(nm, name) == 0) return c;
  }
  return NULL;
}

/* out + shortcut, then relu; the shortcut is x itself or downsample(x). Frees out. */
static ct_tensor *add_shortcut(ct_module *self, ct_tensor *out, ct_tensor *x) {
  if (!out) return NULL;
  ct_module *ds = optional_child(self, "downsample");
  ct_tensor *id = ds ? ct_module_forward(ds, x) : x;
  ct_tensor *sum = id ? ct_add(out, id) : NULL;
  if (ds) ct_tensor_free(id);
  ct_tensor_free(out);
  return relu_then_free(sum);
}

/* torchvision's BasicBlock.forward */
static ct_tensor *basic_block_forward(ct_module *self, ct_tensor *x) {
  ct_tensor *h = then(self, "conv1", ct_tensor_retain(x));
  h = relu_then_free(then(self, "bn1", h));
  h = then(self, "bn2", then(self, "conv2", h));
  return add_shortcut(self, h, x);
}

/* torchvision's Bottleneck.forward */
static ct_tensor *bottleneck_forward(ct_module *self, ct_tensor *x) {
  ct_tensor *h = then(self, "conv1", ct_tensor_retain(x));
  h = relu_then_free(then(self, "bn1", h));
  h = relu_then_free(then(self, "bn2", then(self, "conv2", h)));
  h = then(self, "bn3", then(self, "conv3", h));
  return add_shortcut(self, h, x);
}

/* torchvision's ResNet._forward_impl; the stem's maxpool is absent with small_input. */
static ct_tensor *resnet_forward(ct_module *self, ct_tensor *x) {
  ct_tensor *h = then(self, "conv1", ct_tensor_retain(x));
  h = relu_then_free(then(self, "bn1", h));
  if (optional_child(self, "maxpool")) h = then(self, "maxpool", h);
  static const char *const stages[] = {"layer1", "layer2", "layer3", "layer4", "avgpool"};
  for (int i = 0; i < 5; i++) h = then(self, stages[i], h);
  ct_tensor *f = h ? ct_flatten(h, 1, -1) : NULL;
  ct_tensor_free(h);
  return then(self, "fc", f);
}

/* Conv2d without bias, initialized as torchvision's ResNet.__init__ does:
 * kaiming_normal_(mode="fan_out", nonlinearity="relu"), std = sqrt(2 / (out_channels k k)). */
static ct_module *conv(int64_t in, int64_t out, int k, int stride, ct_device dev, ct_generator *gen) {
  ct_conv2d_opts o = {.stride = {stride, stride}, .padding = {k / 2, k / 2}};
  ct_module *c = ct_conv2d_new(in, out, k, &o, 0, dev, gen);
  if (!c) return NULL;
  ct_tensor *w = ct_module_tensor(c, "weight");
  int64_t shape[4] = {out, in, k, k};
  ct_tensor *r = ct_randn(4, shape, 0.0, sqrt(2.0 / (double)(out * k * k)), CT_F32, dev, gen);
  ct_no_grad_begin();
  ct_status s = r ? ct_copy_(w, r) : ct_last_status();
  ct_no_grad_end();
  ct_tensor_free(r);
  if (s != CT_OK) return ct_module_free(c), NULL;
  return c;
}

/* One block of torchvision's _make_layer: planes, stride, and a downsample where the shape
 * changes. expansion 1: BasicBlock, 4: Bottleneck. */
static ct_module *block(int expansion, int64_t inplanes, int64_t planes, int stride, ct_device dev, ct_generator *gen) {
  int bottleneck = expansion == 4;
  ct_module *b = ct_module_new(bottleneck ? "Bottleneck" : "BasicBlock", bottleneck ? bottleneck_forward : basic_block_forward,
                               NULL, NULL);
  if (!b) return NULL;
  ct_status s;
  if (bottleneck) {
    s = ct_module_add_child(b, "conv1", conv(inplanes, planes, 1, 1, dev, gen));
    if (s == CT_OK) s = ct_module_add_child(b, "bn1", ct_batchnorm2d_new(planes, 0, 0, dev));
    if (s == CT_OK) s = ct_module_add_child(b, "conv2", conv(planes, planes, 3, stride, dev, gen));
    if (s == CT_OK) s = ct_module_add_child(b, "bn2", ct_batchnorm2d_new(planes, 0, 0, dev));
    if (s == CT_OK) s = ct_module_add_child(b, "conv3", conv(planes, planes * 4, 1, 1, dev, gen));
    if (s == CT_OK) s = ct_module_add_child(b, "bn3", ct_batchnorm2d_new(planes * 4, 0, 0, dev));
  } else {
    s = ct_module_add_child(b, "conv1", conv(inplanes, planes, 3, stride, dev, gen));
    if (s == CT_OK) s = ct_module_add_child(b, "bn1", ct_batchnorm2d_new(planes, 0, 0, dev));
    if (s == CT_OK) s = ct_module_add_child(b, "conv2", conv(planes, planes, 3, 1, dev, gen));
    if (s == CT_OK) s = ct_module_add_child(b, "bn2", ct_batchnorm2d_new(planes, 0, 0, dev));
  }
  if (s == CT_OK) s = ct_module_add_child(b, "relu", ct_relu_new());
  if (s == CT_OK && (stride != 1 || inplanes != planes * expansion)) {
    ct_module *d[2] = {conv(inplanes, planes * expansion, 1, stride, dev, gen), ct_batchnorm2d_new(planes * expansion, 0, 0, dev)};
    s = ct_module_add_child(b, "downsample", ct_sequential_new(2, d));
  }
  if (s != CT_OK) return ct_module_free(b), NULL;
  return b;
}

static ct_module *stage(int expansion, int64_t *inplanes, int64_t planes, int blocks, int stride, ct_device dev,
                        ct_generator *gen) {
  ct_module *b[8] = {0};
  for (int i = 0; i < blocks; i++) {
    b[i] = block(expansion, *inplanes, planes, i == 0 ? stride : 1, dev, gen);
    *inplanes = planes * expansion;
  }
  return ct_sequential_new(blocks, b); /* frees them all if one is NULL, keeping its error */
}

ct_module *ct_resnet_new(int depth, const ct_resnet_opts *opts, ct_device dev, ct_generator *gen) {
  const char *op = "ct_resnet_new";
  ct_resnet_opts o = opts ? *opts : (ct_resnet_opts){0};
  int64_t in_ch = o.in_channels ? o.in_channels : 3, classes = o.num_classes ? o.num_classes : 1000;
  static const int counts[3][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 6, 3}};
  int which = depth == 18 ? 0 : depth == 34 ? 1 : depth == 50 ? 2 : -1;
  if (which < 0) CT_FAIL_NULL(CT_EINVAL, "%s: depth %d is not offered; pass 18, 34 or 50", op, depth);
  if (in_ch < 1 || classes < 1 || in_ch > (1 << 20) || classes > (1 << 24))
    CT_FAIL_NULL(CT_EINVAL, "%s: in_channels %lld and num_classes %lld must be >= 1 (0 takes 3 and 1000)", op,
                 (long long)o.in_channels, (long long)o.num_classes);
  if (!ct__check_device(op, dev)) return NULL;
  int expansion = which == 2 ? 4 : 1;
  ct_module *m = ct_module_new("ResNet", resnet_forward, NULL, NULL);
  if (!m) return ct__error_prefix("%s", op), NULL;
  ct_pool2d_opts mp = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  ct_status s = ct_module_add_child(m, "conv1", o.small_input ? conv(in_ch, 64, 3, 1, dev, gen) : conv(in_ch, 64, 7, 2, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(m, "bn1", ct_batchnorm2d_new(64, 0, 0, dev));
  if (s == CT_OK) s = ct_module_add_child(m, "relu", ct_relu_new());
  if (s == CT_OK && !o.small_input) s = ct_module_add_child(m, "maxpool", ct_max_pool2d_new(&mp));
  int64_t inplanes = 64;
  static const char *const names[4] = {"layer1", "layer2", "layer3", "layer4"};
  for (int i = 0; i < 4 && s == CT_OK; i++)
    s = ct_module_add_child(m, names[i], stage(expansion, &inplanes, 64 << i, counts[which][i], i ? 2 : 1, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(m, "avgpool", ct_adaptive_avg_pool2d_new(1, 1));
  if (s == CT_OK) s = ct_module_add_child(m, "fc", ct_linear_new(512 * expansion, classes, 1, dev, gen));
  if (s != CT_OK) return ct__error_prefix("%s (resnet%d)", op, depth), ct_module_free(m), NULL;
  return m;
}
