/* tests/nn/test_user_module.c: modules that users define (ct_module_new): registration and its
 * errors, state_dict names and order as torch.nn.Module's, lookup by path, forward, train/eval
 * and num_batches_tracked, optimizers, checkpoints, memory format, printing; and the ResNets built
 * from them (torchvision's parameter counts and key counts, the small-input stem). Every optimizer
 * against the equivalent Sequential, and the GradScaler under float16 autocast, on user modules
 * whose children hold BatchNorm buffers. */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "residual_module.h" /* bn_block_forward */

/* y = relu(bn(conv(x)) * scale + x): a residual block with its own parameter and buffer. */
static ct_tensor *block_forward(ct_module *self, ct_tensor *x) {
  int *calls = ct_module_ctx(self);
  if (calls) (*calls)++;
  ct_scope_begin();
  ct_tensor *h = ct_module_forward(ct_module_child(self, "conv"), x);
  h = ct_module_forward(ct_module_child(self, "bn"), h);
  h = ct_mul(h, ct_module_tensor(self, "scale"));
  ct_tensor *y = ct_relu(ct_add(h, x));
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

static ct_module *block_new(int channels, int *calls, ct_generator *gen) {
  ct_module *b = ct_assert_nonnull(ct_module_new("Block", block_forward, calls, NULL));
  ct_conv2d_opts o = {.padding = {1, 1}};
  ct_assert_ok(ct_module_register_parameter(b, "scale", ct_full(1, (int64_t[]){1}, 0.5, CT_F32, CT_DEVICE_CPU)));
  ct_assert_ok(ct_module_register_buffer(b, "steps", ct_zeros(0, NULL, CT_I64, CT_DEVICE_CPU)));
  ct_assert_ok(ct_module_add_child(b, "conv", ct_conv2d_new(channels, channels, 3, &o, 0, CT_DEVICE_CPU, gen)));
  ct_assert_ok(ct_module_add_child(b, "bn", ct_batchnorm2d_new(channels, 0, 0, CT_DEVICE_CPU)));
  return b;
}

/* Net: stem conv, two blocks in a Sequential, global pool, flatten, fc. */
static ct_tensor *net_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *h = ct_module_forward(ct_module_child(self, "stem"), x);
  h = ct_module_forward(ct_module_child(self, "blocks"), h);
  h = ct_module_forward(ct_module_child(self, "pool"), h);
  h = ct_module_forward(ct_module_child(self, "fc"), ct_flatten(h, 1, -1));
  if (h) ct_scope_keep(h);
  ct_scope_end();
  return h;
}

static ct_module *net_new(int *calls, ct_generator *gen) {
  ct_module *m = ct_assert_nonnull(ct_module_new("Net", net_forward, NULL, NULL));
  ct_conv2d_opts o = {.padding = {1, 1}};
  ct_assert_ok(ct_module_add_child(m, "stem", ct_conv2d_new(1, 4, 3, &o, 1, CT_DEVICE_CPU, gen)));
  ct_module *blocks[2] = {block_new(4, calls, gen), block_new(4, calls, gen)};
  ct_assert_ok(ct_module_add_child(m, "blocks", ct_sequential_new(2, blocks)));
  ct_assert_ok(ct_module_add_child(m, "pool", ct_adaptive_avg_pool2d_new(1, 1)));
  ct_assert_ok(ct_module_add_child(m, "fc", ct_linear_new(4, 3, 1, CT_DEVICE_CPU, gen)));
  return m;
}

static void test_names_and_lookup(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(1);
  ct_module *m = net_new(NULL, &g);
  /* torch.nn.Module.state_dict's order: own parameters, own buffers, then each child's */
  static const char *const want[] = {
      "stem.weight", "stem.bias", "blocks.0.scale", "blocks.0.steps", "blocks.0.conv.weight", "blocks.0.bn.weight",
      "blocks.0.bn.bias", "blocks.0.bn.running_mean", "blocks.0.bn.running_var", "blocks.0.bn.num_batches_tracked",
      "blocks.1.scale", "blocks.1.steps", "blocks.1.conv.weight", "blocks.1.bn.weight", "blocks.1.bn.bias",
      "blocks.1.bn.running_mean", "blocks.1.bn.running_var", "blocks.1.bn.num_batches_tracked", "fc.weight", "fc.bias"};
  int nw = (int)(sizeof want / sizeof *want);
  ct_named_tensor nt[32];
  assert_int_equal(ct_module_named_tensors(m, 1, nt, 32), nw);
  for (int i = 0; i < nw; i++) {
    assert_string_equal(nt[i].name, want[i]);
    assert_ptr_equal(ct_module_tensor(m, want[i]), nt[i].tensor);
  }
  /* parameters only: what an optimizer sees (buffers and num_batches_tracked left out) */
  int np = ct_module_named_tensors(m, 0, nt, 32);
  assert_int_equal(np, 12);
  for (int i = 0; i < np; i++) assert_false(nt[i].is_buffer);
  assert_int_equal(ct_tensor_dtype(ct_module_tensor(m, "blocks.1.bn.num_batches_tracked")), CT_I64);
  assert_int_equal(ct_tensor_ndim(ct_module_tensor(m, "blocks.1.bn.num_batches_tracked")), 0);
  assert_true(ct_requires_grad(ct_module_tensor(m, "blocks.0.scale")));
  assert_false(ct_requires_grad(ct_module_tensor(m, "blocks.0.steps")));
  assert_int_equal(ct_module_num_params(m), 4 * 9 + 4 + 2 * (1 + 4 * 4 * 9 + 4 + 4) + 4 * 3 + 3);

  ct_module *blk = ct_assert_nonnull(ct_module_child(m, "blocks.1"));
  assert_string_equal(ct_module_type(blk), "Block");
  assert_string_equal(ct_module_type(ct_module_child(m, "blocks.1.bn")), "BatchNorm2d");
  assert_int_equal(ct_module_num_children(m), 4);
  const char *nm = NULL;
  assert_ptr_equal(ct_module_child_at(m, 1, &nm), ct_module_child(m, "blocks"));
  assert_string_equal(nm, "blocks");
  assert_null(ct_module_child_at(m, 4, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_module_child(m, "blocks.2.conv"));
  ct_assert_error_contains("no child \"2\"");
  assert_null(ct_module_tensor(m, "blocks.0.conv.bias"));
  ct_assert_error_contains("no tensor \"bias\"");
  assert_null(ct_module_tensor(m, "head.weight"));
  ct_assert_error_contains("no child \"head\"");
  assert_null(ct_module_ctx(blk)); /* made with NULL ctx */
  ct_module_free(m);
}

static int freed_ctx;
static void count_free(void *ctx) { freed_ctx += *(int *)ctx; }

static void test_registration_errors(void **state) {
  (void)state;
  ct_module *b = ct_assert_nonnull(ct_module_new(NULL, block_forward, NULL, NULL));
  assert_string_equal(ct_module_type(b), "Module");
  ct_assert_ok(ct_module_add_child(b, "conv", ct_relu_new()));
  /* a name taken by a child or a tensor, a '.', an empty name */
  assert_int_equal(ct_module_add_child(b, "conv", ct_relu_new()), CT_EINVAL);
  ct_assert_error_contains("already has a child named \"conv\"");
  assert_int_equal(ct_module_register_parameter(b, "conv", ct_ones(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU)), CT_EINVAL);
  assert_int_equal(ct_module_register_buffer(b, "a.b", ct_ones(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU)), CT_EINVAL);
  ct_assert_error_contains("contains '.'");
  assert_int_equal(ct_module_add_child(b, "", ct_relu_new()), CT_EINVAL);
  /* an integer parameter, a parameter that is an op's result */
  assert_int_equal(ct_module_register_parameter(b, "n", ct_zeros(1, (int64_t[]){2}, CT_I64, CT_DEVICE_CPU)), CT_EDTYPE);
  ct_tensor *leaf = ct_ones(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU);
  ct_requires_grad_(leaf, 1);
  assert_int_equal(ct_module_register_parameter(b, "p", ct_mul_scalar(leaf, 2)), CT_EINVAL);
  ct_assert_error_contains("is the result of an op; register a leaf");
  ct_tensor_free(leaf);
  /* a NULL child keeps the failed constructor's error */
  assert_int_equal(ct_module_add_child(b, "lin", ct_linear_new(0, 3, 1, CT_DEVICE_CPU, NULL)), CT_EINVAL);
  ct_assert_error_contains("ct_linear_new");
  /* built-in layers take no new children */
  ct_module *lin = ct_assert_nonnull(ct_linear_new(2, 2, 1, CT_DEVICE_CPU, NULL));
  assert_int_equal(ct_module_add_child(lin, "x", ct_relu_new()), CT_EINVAL);
  ct_assert_error_contains("only modules made with ct_module_new");
  assert_int_equal(ct_module_named_tensors(b, 1, NULL, 0), 0); /* nothing was half-registered */
  assert_int_equal(ct_module_num_children(b), 1);
  ct_module_free(lin);
  ct_module_free(b);
  /* a NULL forward is an error, and ctx is freed */
  int v = 5;
  freed_ctx = 0;
  assert_null(ct_module_new("X", NULL, &v, count_free));
  assert_int_equal(freed_ctx, 5);
  ct_module *c = ct_assert_nonnull(ct_module_new("X", block_forward, &v, count_free));
  ct_module_free(c);
  assert_int_equal(freed_ctx, 10);
}

/* forward against the same ops by hand; train/eval reach the children; num_batches_tracked counts
 * training forwards only; an error inside names the modules. */
static void test_forward_train_eval(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(2);
  int calls = 0;
  ct_module *b = block_new(3, &calls, &g);
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){2, 3, 5, 5}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *conv_w = ct_module_tensor(b, "conv.weight");
  ct_conv2d_opts o = {.padding = {1, 1}};
  /* the reference first (batch statistics, as in training mode), then forward */
  ct_assert_ok(ct_scope_begin());
  ct_tensor *c = ct_conv2d(x, conv_w, NULL, &o);
  ct_tensor *mean = ct_mean(c, 3, (int[]){0, 2, 3}, 1), *var = ct_var(c, 3, (int[]){0, 2, 3}, 0, 1);
  ct_tensor *d = ct_sub(c, mean), *sd = ct_sqrt(ct_add_scalar(var, 1e-5));
  ct_tensor *ref = ct_assert_nonnull(ct_relu(ct_add(ct_mul_scalar(ct_div(d, sd), 0.5), x)));
  ct_scope_keep(ref);
  ct_scope_end();
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(b, x));
  ct_assert_close(y, ref, 1e-5, 1e-5);
  assert_int_equal(calls, 1);
  ct_tensor *nbt = ct_module_tensor(b, "bn.num_batches_tracked");
  assert_int_equal((int64_t)ct_item(nbt), 1);
  ct_module_train(b, 0);
  assert_false(ct_module_is_training(b));
  assert_false(ct_module_is_training(ct_module_child(b, "bn")));
  ct_tensor *y2 = ct_assert_nonnull(ct_module_forward(b, x));
  assert_int_equal((int64_t)ct_item(nbt), 1); /* eval: not counted */
  ct_module_train(b, 1);
  assert_true(ct_module_is_training(ct_module_child(b, "conv")));
  /* a wrong input: the error names the user module and the layer */
  ct_tensor *bad = ct_assert_nonnull(ct_zeros(4, (int64_t[]){2, 4, 5, 5}, CT_F32, CT_DEVICE_CPU));
  assert_null(ct_module_forward(b, bad));
  ct_assert_error_contains("ct_module_forward (Block)");
  ct_assert_error_contains("Conv2d(3, 3, kernel_size=3, padding=1)");
  ct_tensor *all[] = {x, ref, y, y2, bad};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) ct_tensor_free(all[i]);
  ct_module_free(b);
}

/* An optimizer trains every parameter of the tree, the user's own included; a checkpoint saves
 * and loads the whole tree (buffers, num_batches_tracked and the optimizer state) by its names. */
static void test_optimizer_and_checkpoint(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(3), g2 = ct_generator_new(99);
  ct_module *m = net_new(NULL, &g), *other = net_new(NULL, &g2);
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-2}));
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){8, 1, 6, 6}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *t = ct_assert_nonnull(ct_randint(1, (int64_t[]){8}, 0, 3, CT_I64, CT_DEVICE_CPU, &g));
  ct_tensor *scale0 = ct_to(ct_module_tensor(m, "blocks.0.scale"), CT_DEVICE_CPU, CT_COPY);
  double first = 0, last = 0;
  for (int s = 0; s < 20; s++) {
    ct_scope_begin();
    ct_optimizer_zero_grad(opt);
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, x), t, CT_REDUCTION_MEAN, 0);
    ct_assert_ok(ct_backward(loss));
    ct_assert_ok(ct_optimizer_step(opt));
    if (s == 0) first = ct_item(loss);
    last = ct_item(loss);
    ct_scope_end();
  }
  assert_true(last < first);
  assert_true(fabs(ct_item(scale0) - ct_item(ct_module_tensor(m, "blocks.0.scale"))) > 1e-3); /* the user's parameter trained */
  assert_int_equal((int64_t)ct_item(ct_module_tensor(m, "blocks.1.bn.num_batches_tracked")), 20);

  char *dir = ct_assert_nonnull(ct_test_tmpdir()), path[4200];
  snprintf(path, sizeof path, "%s/net.safetensors", dir);
  ct_assert_ok(ct_checkpoint_save(path, m, opt, &(ct_checkpoint_meta){.epoch = 1}));
  ct_optimizer *opt2 = ct_assert_nonnull(ct_optimizer_new(other, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-2}));
  ct_assert_ok(ct_checkpoint_load(path, other, opt2, NULL));
  ct_named_tensor a[32], b[32];
  int n = ct_module_named_tensors(m, 1, a, 32);
  assert_int_equal(ct_module_named_tensors(other, 1, b, 32), n);
  for (int i = 0; i < n; i++) {
    assert_string_equal(a[i].name, b[i].name);
    ct_assert_close(a[i].tensor, b[i].tensor, 0, 0);
  }
  /* the next step is the same on both: the Adam moments came along */
  ct_module_train(m, 0), ct_module_train(other, 0);
  for (int k = 0; k < 2; k++) {
    ct_module *mm = k ? other : m;
    ct_optimizer *oo = k ? opt2 : opt;
    ct_scope_begin();
    ct_optimizer_zero_grad(oo);
    ct_assert_ok(ct_backward(ct_cross_entropy(ct_module_forward(mm, x), t, CT_REDUCTION_MEAN, 0)));
    ct_assert_ok(ct_optimizer_step(oo));
    ct_scope_end();
  }
  for (int i = 0; i < n; i++) ct_assert_close(a[i].tensor, b[i].tensor, 1e-6, 1e-6);
  ct_test_rmdir(dir);
  ct_tensor_free(scale0), ct_tensor_free(x), ct_tensor_free(t);
  ct_optimizer_free(opt), ct_optimizer_free(opt2);
  ct_module_free(m), ct_module_free(other);
}

/* channels_last reaches the convs inside user modules; autocast reaches the ops their forward
 * calls; ct_module_to keeps the handles. */
static void test_memory_format_autocast_to(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(4);
  ct_module *m = net_new(NULL, &g);
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){2, 1, 6, 6}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_module_train(m, 0);
  ct_tensor *y0 = ct_assert_nonnull(ct_module_forward(m, x));
  ct_tensor *w = ct_module_tensor(m, "blocks.0.conv.weight");
  ct_assert_ok(ct_module_to_memory_format(m, CT_CHANNELS_LAST));
  assert_int_equal(ct_tensor_suggest_memory_format(w), CT_CHANNELS_LAST);
  assert_ptr_equal(ct_module_tensor(m, "blocks.0.conv.weight"), w); /* same handle */
  ct_tensor *y1 = ct_assert_nonnull(ct_module_forward(m, x));
  ct_assert_close(y1, y0, 1e-5, 1e-5);
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
  ct_tensor *y2 = ct_assert_nonnull(ct_module_forward(m, x));
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct_tensor_dtype(y2), CT_BF16); /* the fc ran in bfloat16 */
  ct_assert_close(y2, y0, 5e-2, 5e-2);
  ct_assert_ok(ct_module_to(m, CT_DEVICE_CPU));
  assert_ptr_equal(ct_module_tensor(m, "blocks.0.conv.weight"), w);
  ct_tensor_free(x), ct_tensor_free(y0), ct_tensor_free(y1), ct_tensor_free(y2);
  ct_module_free(m);
}

static void test_print(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(5);
  ct_module *m = net_new(NULL, &g);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ct_module_print(m, f);
  fclose(f);
  assert_non_null(strstr(buf, "Net(\n  (stem): Conv2d(1, 4, kernel_size=(3, 3)"));
  assert_non_null(strstr(buf, "  (blocks): Sequential(\n    (0): Block(\n      (conv): Conv2d(4, 4"));
  assert_non_null(strstr(buf, "      (bn): BatchNorm2d(4, eps=1e-05, momentum=0.1)"));
  assert_non_null(strstr(buf, "  (pool): AdaptiveAvgPool2d(output_size=(1, 1))"));
  assert_non_null(strstr(buf, "  (fc): Linear(in_features=4, out_features=3, bias=True)\n)"));
  free(buf);
  ct_module_free(m);
}

/* torchvision's figures: parameters of resnet18/34/50 (11,689,512, 21,797,672, 25,557,032 with 3
 * channels and 1000 classes) and state_dict keys (122, 218, 320); the 1-channel, 10-class resnet18
 * of Fashion-MNIST; the small-input stem. */
static void test_resnets(void **state) {
  (void)state;
  static const struct { int depth; int64_t params; int keys; } want[] = {{18, 11689512, 122}, {34, 21797672, 218},
                                                                        {50, 25557032, 320}};
  for (int i = 0; i < 3; i++) {
    ct_module *r = ct_assert_nonnull(ct_resnet_new(want[i].depth, NULL, CT_DEVICE_CPU, NULL));
    assert_int_equal(ct_module_num_params(r), want[i].params);
    assert_int_equal(ct_module_named_tensors(r, 1, NULL, 0), want[i].keys);
    assert_string_equal(ct_module_type(r), "ResNet");
    assert_string_equal(ct_module_type(ct_module_child(r, "layer1.0")), want[i].depth == 50 ? "Bottleneck" : "BasicBlock");
    ct_module_free(r);
  }
  ct_generator g = ct_generator_new(6);
  ct_module *r = ct_assert_nonnull(ct_model_new("resnet18", CT_DEVICE_CPU, &g));
  assert_int_equal(ct_module_num_params(r), 11689512 - 64 * 2 * 49 - 513 * 990);
  ct_tensor *w = ct_module_tensor(r, "conv1.weight");
  assert_int_equal(ct_tensor_shape(w)[1], 1);
  assert_int_equal(ct_tensor_shape(w)[2], 7);
  assert_non_null(ct_module_tensor(r, "layer2.0.downsample.1.running_var"));
  assert_null(ct_module_tensor(r, "layer1.0.downsample.0.weight")); /* layer1 keeps the shape: no downsample */
  /* kaiming_normal_(fan_out, relu): std sqrt(2 / (64 * 49)) for conv1 */
  double *v = ct_test_values(w), s2 = 0;
  for (int k = 0; k < 64 * 49; k++) s2 += v[k] * v[k];
  free(v);
  double std = sqrt(s2 / (64 * 49)), want_std = sqrt(2.0 / (64 * 49));
  assert_true(fabs(std - want_std) < 0.1 * want_std);
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){2, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(r, x));
  assert_int_equal(ct_tensor_shape(y)[0], 2);
  assert_int_equal(ct_tensor_shape(y)[1], 10);
  ct_tensor_free(y), ct_tensor_free(x);
  ct_module_free(r);

  ct_module *s = ct_assert_nonnull(ct_resnet_new(18, &(ct_resnet_opts){.in_channels = 3, .num_classes = 100, .small_input = 1},
                                                 CT_DEVICE_CPU, &g));
  assert_int_equal(ct_tensor_shape(ct_module_tensor(s, "conv1.weight"))[2], 3);
  assert_null(ct_module_child(s, "maxpool"));
  assert_int_equal(ct_module_named_tensors(s, 1, NULL, 0), 122); /* the same keys */
  x = ct_assert_nonnull(ct_randn(4, (int64_t[]){2, 3, 32, 32}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  y = ct_assert_nonnull(ct_module_forward(s, x));
  assert_int_equal(ct_tensor_shape(y)[1], 100);
  ct_tensor_free(y), ct_tensor_free(x);
  ct_module_free(s);
  assert_null(ct_resnet_new(20, NULL, CT_DEVICE_CPU, NULL));
  ct_assert_error_contains("pass 18, 34 or 50");
  assert_null(ct_model_new("resnet18-big", CT_DEVICE_CPU, NULL));
  ct_assert_error_contains("unknown model");
}

/* The layer modules of issue 19 run their ops, with PyTorch's state_dict names and reprs. */
static void test_layers(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(8);
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){2, 3, 6, 6}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_pool2d_opts p2 = {.kernel = {2, 2}};
  struct { ct_module *m; ct_tensor *want; const char *repr; } rows[] = {
      {ct_sigmoid_new(), ct_sigmoid(x), "Sigmoid()"},
      {ct_tanh_new(), ct_tanh(x), "Tanh()"},
      {ct_silu_new(), ct_silu(x), "SiLU()"},
      {ct_gelu_new(0), ct_gelu(x), "GELU(approximate='none')"},
      {ct_gelu_new(1), ct_gelu_tanh(x), "GELU(approximate='tanh')"},
      {ct_identity_new(), ct_tensor_retain(x), "Identity()"},
      {ct_avg_pool2d_new(&p2), ct_avg_pool2d(x, &p2), "AvgPool2d(kernel_size=2, stride=2, padding=0)"},
      {ct_adaptive_avg_pool2d_new(4, 3), ct_adaptive_avg_pool2d(x, 4, 3), "AdaptiveAvgPool2d(output_size=(4, 3))"},
  };
  for (int i = 0; i < 8; i++) {
    ct_module *m = ct_assert_nonnull(rows[i].m);
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    ct_assert_close(y, rows[i].want, 0, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ct_module_print(m, f);
    fclose(f);
    if (strncmp(buf, rows[i].repr, strlen(rows[i].repr)) != 0) fprintf(stderr, "repr %s, expected %s\n", buf, rows[i].repr);
    assert_memory_equal(buf, rows[i].repr, strlen(rows[i].repr));
    free(buf);
    ct_tensor_free(y), ct_tensor_free(rows[i].want);
    ct_module_free(m);
  }
  /* LayerNorm: weight 1 and bias 0 of normalized_shape; forward is ct_layer_norm with them */
  ct_module *ln = ct_assert_nonnull(ct_layernorm_new(2, (int64_t[]){6, 6}, 0, 1, CT_DEVICE_CPU));
  ct_named_tensor nt[4];
  assert_int_equal(ct_module_named_tensors(ln, 1, nt, 4), 2);
  assert_string_equal(nt[0].name, "weight");
  assert_int_equal(ct_tensor_ndim(nt[0].tensor), 2);
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(ln, x));
  ct_tensor *want = ct_layer_norm(x, 2, NULL, NULL, 1e-5);
  ct_assert_close(y, want, 1e-6, 1e-6);
  ct_tensor_free(y), ct_tensor_free(want);
  ct_tensor *bad = ct_zeros(2, (int64_t[]){3, 5}, CT_F32, CT_DEVICE_CPU);
  assert_null(ct_module_forward(ln, bad));
  ct_assert_error_contains("not normalized_shape (6, 6)");
  ct_module_free(ln);
  ln = ct_assert_nonnull(ct_layernorm_new(1, (int64_t[]){6}, 0, 0, CT_DEVICE_CPU));
  assert_int_equal(ct_module_named_tensors(ln, 1, NULL, 0), 0); /* elementwise_affine=False */
  ct_module_free(ln);
  /* BatchNorm1d on (N, C) and (N, C, L), not on (N, C, H, W) */
  ct_module *bn = ct_assert_nonnull(ct_batchnorm1d_new(3, 0, 0, CT_DEVICE_CPU));
  assert_int_equal(ct_module_named_tensors(bn, 1, nt, 4), 5); /* with num_batches_tracked */
  assert_string_equal(nt[3].name, "running_var");
  ct_tensor *x2 = ct_randn(2, (int64_t[]){8, 3}, 1, 2, CT_F32, CT_DEVICE_CPU, &g), *x3 = ct_randn(3, (int64_t[]){8, 3, 4}, 1, 2, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y2 = ct_assert_nonnull(ct_module_forward(bn, x2)), *y3 = ct_assert_nonnull(ct_module_forward(bn, x3));
  assert_int_equal((int64_t)ct_item(ct_module_tensor(bn, "num_batches_tracked")), 2);
  assert_null(ct_module_forward(bn, x));
  ct_assert_error_contains("expected (N, 3) or (N, 3, L)");
  ct_tensor_free(x2), ct_tensor_free(x3), ct_tensor_free(y2), ct_tensor_free(y3), ct_tensor_free(bad);
  ct_module_free(bn);
  assert_null(ct_gelu_new(3));
  ct_tensor_free(x);
}

/* ---- every optimizer, and the GradScaler, on a user module with BatchNorm buffers (issue 19) */

/* "Head": head(relu(block(x))), the same ops in the same order as
 * Sequential(Linear(6, 5), BatchNorm1d(5), ReLU(), Linear(5, 3)). */
static ct_tensor *head_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *h = ct_relu(ct_module_forward(ct_module_child(self, "block"), x));
  ct_tensor *y = ct_module_forward(ct_module_child(self, "head"), h);
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

static ct_module *lin_bn_user_new(ct_generator *g) {
  /* "LinBN": bn(fc(x)), a user module whose child holds BatchNorm1d's buffers */
  ct_module *b = ct_assert_nonnull(ct_module_new("LinBN", bn_block_forward, NULL, NULL));
  ct_assert_ok(ct_module_add_child(b, "fc", ct_linear_new(6, 5, 1, CT_DEVICE_CPU, g)));
  ct_assert_ok(ct_module_add_child(b, "bn", ct_batchnorm1d_new(5, 0, 0, CT_DEVICE_CPU)));
  ct_module *m = ct_assert_nonnull(ct_module_new("Head", head_forward, NULL, NULL));
  ct_assert_ok(ct_module_add_child(m, "block", b));
  ct_assert_ok(ct_module_add_child(m, "head", ct_linear_new(5, 3, 1, CT_DEVICE_CPU, g)));
  return m;
}

static ct_module *lin_bn_sequential_new(ct_generator *g) {
  ct_module *l[4] = {ct_linear_new(6, 5, 1, CT_DEVICE_CPU, g), ct_batchnorm1d_new(5, 0, 0, CT_DEVICE_CPU), ct_relu_new(),
                     ct_linear_new(5, 3, 1, CT_DEVICE_CPU, g)};
  for (int i = 0; i < 4; i++) ct_assert_nonnull(l[i]);
  return ct_assert_nonnull(ct_sequential_new(4, l));
}

/* One training step of m on batch s (8 samples of 6 features, 3 classes), the same for every m. */
static void train_step(ct_module *m, ct_optimizer *opt, int s) {
  ct_generator g = ct_generator_new(100 + (uint64_t)s);
  ct_scope_begin();
  ct_tensor *x = ct_randn(2, (int64_t[]){8, 6}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *t = ct_randint(1, (int64_t[]){8}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  ct_optimizer_zero_grad(opt);
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_cross_entropy(ct_module_forward(m, x), t, CT_REDUCTION_MEAN, 0))));
  ct_assert_ok(ct_optimizer_step(opt));
  ct_scope_end();
}

/* SGD with momentum, Adam and AdamW (each with weight decay, AdamW's decoupled) take 3 steps on a
 * user module whose child holds BatchNorm buffers, and on the Sequential that runs the same ops
 * with the same weights: every parameter, every buffer (running statistics, num_batches_tracked)
 * and every optimizer state tensor must be equal bit for bit, position by position (the tree's
 * state_dict order is the Sequential's). So the optimizer found every parameter of the nested
 * children, left the buffers alone, and keeps its state per parameter under the tree's names. */
static void test_every_optimizer_matches_sequential(void **state) {
  (void)state;
  static const ct_optim_opts kinds[3] = {
      {.kind = CT_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2},
      {.kind = CT_OPTIM_ADAM, .lr = 0.05, .weight_decay = 1e-2},
      {.kind = CT_OPTIM_ADAMW, .lr = 0.05, .weight_decay = 0.1},
  };
  static const char *const user_names[9] = {
      "block.fc.weight", "block.fc.bias", "block.bn.weight", "block.bn.bias", "block.bn.running_mean",
      "block.bn.running_var", "block.bn.num_batches_tracked", "head.weight", "head.bias"};
  for (int k = 0; k < 3; k++) {
    ct_generator g = ct_generator_new(20 + (uint64_t)k), g2 = ct_generator_new(50);
    ct_module *seq = lin_bn_sequential_new(&g), *user = lin_bn_user_new(&g2);
    ct_named_tensor a[9], b[9];
    assert_int_equal(ct_module_named_tensors(seq, 1, a, 9), 9);
    assert_int_equal(ct_module_named_tensors(user, 1, b, 9), 9);
    /* the Sequential's weights, BatchNorm's affine parameters drawn too (not 1 and 0), into the
     * user module; init keeps them to see that every parameter moved */
    ct_tensor *init[9] = {0};
    ct_no_grad_begin();
    for (int i = 0; i < 9; i++) {
      assert_string_equal(b[i].name, user_names[i]);
      assert_int_equal(a[i].is_buffer, b[i].is_buffer);
      if (!a[i].is_buffer) {
        ct_tensor *r = ct_assert_nonnull(ct_randn(ct_tensor_ndim(a[i].tensor), ct_tensor_shape(a[i].tensor), 0.5, 0.5,
                                                  CT_F32, CT_DEVICE_CPU, &g));
        ct_assert_ok(ct_copy_(a[i].tensor, r));
        ct_tensor_free(r);
      }
      ct_assert_ok(ct_copy_(b[i].tensor, a[i].tensor));
      init[i] = ct_assert_nonnull(ct_to(a[i].tensor, CT_DEVICE_CPU, CT_COPY));
    }
    ct_no_grad_end();
    ct_optimizer *os = ct_assert_nonnull(ct_optimizer_new(seq, &kinds[k]));
    ct_optimizer *ou = ct_assert_nonnull(ct_optimizer_new(user, &kinds[k]));
    for (int s = 0; s < 3; s++) train_step(seq, os, s), train_step(user, ou, s);
    for (int i = 0; i < 9; i++) ct_assert_close(b[i].tensor, a[i].tensor, 0, 0);
    /* the steps did something to every parameter (block.fc.bias too: BatchNorm cancels its
     * gradient, but weight decay moves it) and to the running statistics */
    for (int i = 0; i < 9; i++) {
      if (i == 6) continue; /* num_batches_tracked: below */
      double *v = ct_test_values(b[i].tensor), *w = ct_test_values(init[i]), moved = 0;
      for (int64_t j = 0; j < ct_tensor_numel(init[i]); j++) moved = fmax(moved, fabs(v[j] - w[j]));
      free(v), free(w);
      if (moved < 1e-4) fprintf(stderr, "optimizer %d: %s moved %g\n", k, b[i].name, moved);
      assert_true(moved >= 1e-4);
    }
    assert_int_equal((int64_t)ct_item(ct_module_tensor(user, "block.bn.num_batches_tracked")), 3);
    assert_int_equal(ct_optimizer_steps(ou), 3);
    /* the state: one slot (momentum_buffer) or two (exp_avg, exp_avg_sq) per parameter, none for
     * a buffer, named by the tree, equal to the Sequential's */
    int slots = kinds[k].kind == CT_OPTIM_SGD ? 1 : 2;
    ct_named_tensor sa[16], sb[16];
    assert_int_equal(ct_optimizer_named_state(os, sa, 16), 6 * slots);
    assert_int_equal(ct_optimizer_named_state(ou, sb, 16), 6 * slots);
    assert_string_equal(sb[0].name, slots == 1 ? "state.block.fc.weight.momentum_buffer" : "state.block.fc.weight.exp_avg");
    assert_string_equal(sb[6 * slots - 1].name, slots == 1 ? "state.head.bias.momentum_buffer" : "state.head.bias.exp_avg_sq");
    for (int i = 0; i < 6 * slots; i++) ct_assert_close(sb[i].tensor, sa[i].tensor, 0, 0);
    for (int i = 0; i < 9; i++) ct_tensor_free(init[i]);
    ct_optimizer_free(os), ct_optimizer_free(ou);
    ct_module_free(seq), ct_module_free(user);
  }
}

/* Host copies of every named tensor (ct_module_named_tensors or ct_optimizer_named_state). */
static void snapshot(const ct_named_tensor *nt, int n, ct_tensor **out) {
  for (int i = 0; i < n; i++) out[i] = ct_assert_nonnull(ct_to(nt[i].tensor, CT_DEVICE_CPU, CT_COPY));
}

/* One float16 autocast step with the scaler; returns ct_grad_scaler_step's result. */
static int scaled_step(ct_module *m, ct_optimizer *opt, ct_grad_scaler *gs, ct_tensor *x, ct_tensor *t, int *inf_grad) {
  ct_scope_begin();
  ct_optimizer_zero_grad(opt);
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  ct_tensor *out = ct_assert_nonnull(ct_module_forward(m, x));
  ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(out, t, CT_REDUCTION_MEAN, 0));
  ct_assert_ok(ct_autocast_end()); /* backward and the step outside the region, as torch says */
  assert_int_equal(ct_tensor_dtype(out), CT_F16); /* fc ran in float16 */
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_grad_scaler_scale(gs, loss))));
  /* whether backward overflowed float16 somewhere (read before step unscales the gradients) */
  ct_named_tensor p[32];
  int np = ct_module_named_tensors(m, 0, p, 32);
  *inf_grad = 0;
  for (int i = 0; i < np; i++) {
    double *v = ct_test_values(ct_assert_nonnull(ct_grad(p[i].tensor)));
    for (int64_t j = 0; j < ct_tensor_numel(p[i].tensor); j++) *inf_grad |= !isfinite(v[j]);
    free(v);
  }
  int r = ct_grad_scaler_step(gs, opt);
  ct_assert_ok(ct_grad_scaler_update(gs));
  ct_scope_end();
  return r;
}

/* The GradScaler on a user module (net_new: convs, BatchNorm buffers and the user's own parameter
 * in nested user modules) whose forward runs under float16 autocast on the CPU:
 * - finite steps (scale 1024): the update of every parameter equals that of the same module
 *   trained in float32 without a scaler, within float16's rounding (SGD with momentum, whose
 *   update is proportional to the gradient, so a gradient left scaled or a step not taken shows);
 * - a step whose backward overflows float16 (the scale set to 2^40: the forward is finite, the
 *   gradient of the float16 logits is not) is skipped: the parameters and the optimizer state
 *   (momentum buffers; Adam's moments and its step count, which its bias correction reads) stay
 *   bit for bit, and update halves the scale. (The BatchNorm buffers are not compared there: the
 *   forward ran and updated them, as in PyTorch.) */
static void test_grad_scaler_f16_autocast(void **state) {
  (void)state;
  static const ct_optim_opts kinds[2] = {{.kind = CT_OPTIM_SGD, .lr = 0.1, .momentum = 0.9},
                                         {.kind = CT_OPTIM_ADAM, .lr = 1e-2}};
  for (int k = 0; k < 2; k++) {
    ct_generator g = ct_generator_new(30), g2 = ct_generator_new(30), gx = ct_generator_new(31);
    ct_module *m = net_new(NULL, &g), *ref = net_new(NULL, &g2);
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){8, 1, 6, 6}, 0, 1, CT_F32, CT_DEVICE_CPU, &gx));
    ct_tensor *t = ct_assert_nonnull(ct_randint(1, (int64_t[]){8}, 0, 3, CT_I64, CT_DEVICE_CPU, &gx));
    ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &kinds[k]));
    ct_optimizer *ropt = ct_assert_nonnull(ct_optimizer_new(ref, &kinds[k]));
    ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = 1024}));
    ct_named_tensor p[32], rp[32];
    int np = ct_module_named_tensors(m, 0, p, 32);
    assert_int_equal(ct_module_named_tensors(ref, 0, rp, 32), np);
    ct_tensor *before[32], *rbefore[32];
    for (int s = 0; s < 2; s++) {
      snapshot(p, np, before), snapshot(rp, np, rbefore);
      int inf_grad = 1;
      assert_int_equal(scaled_step(m, opt, gs, x, t, &inf_grad), 1);
      assert_false(inf_grad);
      assert_true(ct_grad_scaler_scale_value(gs) == 1024); /* growth_interval 2000: unchanged */
      ct_scope_begin();
      ct_optimizer_zero_grad(ropt);
      ct_assert_ok(ct_backward(ct_cross_entropy(ct_module_forward(ref, x), t, CT_REDUCTION_MEAN, 0)));
      ct_assert_ok(ct_optimizer_step(ropt));
      double biggest = 0;
      for (int i = 0; i < np; i++) {
        ct_tensor *du = ct_sub(p[i].tensor, before[i]), *dr = ct_sub(rp[i].tensor, rbefore[i]);
        double *v = ct_test_values(dr);
        for (int64_t j = 0; j < ct_tensor_numel(dr); j++) biggest = fmax(biggest, fabs(v[j]));
        free(v);
        /* float16's rounding of activations and gradients (2^-11 relative); Adam normalizes each
         * entry, so where a gradient is near zero a relative error of it moves the update by up to
         * 2 lr: compared only for SGD */
        if (k == 0) ct_assert_close(du, dr, 5e-5, 5e-3);
      }
      assert_true(biggest > 1e-3); /* the reference moved: a skipped step would show */
      ct_scope_end();
      for (int i = 0; i < np; i++) ct_tensor_free(before[i]), ct_tensor_free(rbefore[i]);
    }
    assert_int_equal(ct_grad_scaler_steps_taken(gs), 2);
    /* an overflowing backward: skipped, nothing of the optimizer's touched, the scale halved */
    ct_grad_scaler_state st;
    ct_assert_ok(ct_grad_scaler_state_get(gs, &st));
    st.scale = 0x1p40;
    ct_assert_ok(ct_grad_scaler_state_set(gs, &st));
    ct_named_tensor os[64];
    int ns = ct_optimizer_named_state(opt, os, 64);
    assert_int_equal(ns, np * (k == 0 ? 1 : 2));
    ct_tensor *sbefore[64];
    snapshot(p, np, before), snapshot(os, ns, sbefore);
    int64_t steps = ct_optimizer_steps(opt);
    int inf_grad = 0;
    assert_int_equal(scaled_step(m, opt, gs, x, t, &inf_grad), 0);
    assert_true(inf_grad);
    for (int i = 0; i < np; i++) ct_assert_close(p[i].tensor, before[i], 0, 0);
    assert_int_equal(ct_optimizer_named_state(opt, os, 64), ns);
    for (int i = 0; i < ns; i++) ct_assert_close(os[i].tensor, sbefore[i], 0, 0);
    assert_int_equal(ct_optimizer_steps(opt), steps);
    assert_true(ct_grad_scaler_scale_value(gs) == 0x1p39);
    assert_int_equal(ct_grad_scaler_last_step_skipped(gs), 1);
    assert_int_equal(ct_grad_scaler_steps_skipped(gs), 1);
    assert_int_equal(ct_grad_scaler_steps_taken(gs), 2);
    for (int i = 0; i < np; i++) ct_tensor_free(before[i]);
    for (int i = 0; i < ns; i++) ct_tensor_free(sbefore[i]);
    ct_grad_scaler_free(gs);
    ct_optimizer_free(opt), ct_optimizer_free(ropt);
    ct_tensor_free(x), ct_tensor_free(t);
    ct_module_free(m), ct_module_free(ref);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_lookup),       cmocka_unit_test(test_registration_errors),
      cmocka_unit_test(test_forward_train_eval),     cmocka_unit_test(test_optimizer_and_checkpoint),
      cmocka_unit_test(test_memory_format_autocast_to), cmocka_unit_test(test_print),
      cmocka_unit_test(test_resnets),                cmocka_unit_test(test_layers),
      cmocka_unit_test(test_every_optimizer_matches_sequential), cmocka_unit_test(test_grad_scaler_f16_autocast),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
