/* tests/nn/test_nn.c: modules (shapes, state_dict names, PyTorch's default init, BatchNorm's
 * buffers, train/eval, moving to a device), optimizers against hand-computed torch.optim updates,
 * and learning-rate schedules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static ct_tensor *param(ct_module *m, const char *name) {
  ct_named_tensor nt[32];
  int n = ct_module_named_tensors(m, 1, nt, 32);
  for (int i = 0; i < n && i < 32; i++)
    if (strcmp(nt[i].name, name) == 0) return nt[i].tensor;
  fprintf(stderr, "no tensor named %s\n", name);
  fail();
  return NULL;
}

static void expect_shape(ct_tensor *t, int ndim, const int64_t *shape) {
  assert_int_equal(ct_tensor_ndim(t), ndim);
  for (int d = 0; d < ndim; d++) assert_int_equal(ct_tensor_shape(t)[d], shape[d]);
}

/* All values within +-bound, spread over the range, not all equal. */
static void expect_uniform_init(ct_tensor *t, double bound) {
  double *v = ct_test_values(t), mx = 0;
  int64_t n = ct_tensor_numel(t);
  int all_equal = 1;
  for (int64_t i = 0; i < n; i++) {
    assert_true(fabs(v[i]) <= bound * (1 + 1e-6));
    if (fabs(v[i]) > mx) mx = fabs(v[i]);
    if (v[i] != v[0]) all_equal = 0;
  }
  assert_false(all_equal);
  if (n >= 100) assert_true(mx > 0.9 * bound);
  free(v);
}

/* Sequential runs ReLU then MaxPool2d as the fused op: the same output and input gradient as the
 * two modules run one after the other, including windows with no positive element and NaNs. */
static void test_sequential_fuses_relu_max_pool(void **state) {
  (void)state;
  int64_t sh[4] = {2, 3, 8, 10};
  ct_generator g = ct_generator_new(11);
  ct_tensor *x0 = ct_assert_nonnull(ct_randn(4, sh, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g));
  float *xv = malloc(2 * 3 * 8 * 10 * sizeof *xv);
  ct_assert_ok(ct_to_host(x0, xv, 2 * 3 * 8 * 10 * sizeof *xv, CT_F32));
  xv[0] = NAN, xv[12] = NAN, xv[13] = NAN; /* a NaN next to numbers, and a window of two NaNs */
  ct_tensor *xs[2], *ys[2];
  ct_pool2d_opts po = {.kernel = {2, 2}};
  ct_module *seq = ct_assert_nonnull(ct_sequential_new(2, (ct_module *[]){ct_relu_new(), ct_max_pool2d_new(&po)}));
  for (int k = 0; k < 2; k++) {
    xs[k] = ct_assert_nonnull(ct_from_host(xv, 4, sh, CT_F32, CT_DEVICE_CPU));
    ct_assert_ok(ct_requires_grad_(xs[k], 1));
    if (k == 0) ys[k] = ct_assert_nonnull(ct_module_forward(seq, xs[k]));
    else {
      ct_tensor *r = ct_assert_nonnull(ct_relu(xs[k]));
      ys[k] = ct_assert_nonnull(ct_max_pool2d(r, &po));
      ct_tensor_free(r);
    }
    ct_tensor *w = ct_assert_nonnull(ct_arange(0, 2 * 3 * 4 * 5, 1, CT_F32, CT_DEVICE_CPU));
    ct_tensor *wv = ct_assert_nonnull(ct_reshape(w, 4, ct_tensor_shape(ys[k])));
    ct_tensor *p = ct_assert_nonnull(ct_mul(ys[k], wv)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(wv), ct_tensor_free(w);
  }
  double *y0 = ct_test_values(ys[0]), *y1 = ct_test_values(ys[1]);
  double *g0 = ct_test_values(ct_grad(xs[0])), *g1 = ct_test_values(ct_grad(xs[1]));
  int64_t zero_windows = 0, nan_windows = 0;
  for (int i = 0; i < 2 * 3 * 4 * 5; i++) {
    assert_true(isnan(y0[i]) ? isnan(y1[i]) : y0[i] == y1[i]);
    zero_windows += y0[i] == 0, nan_windows += isnan(y0[i]);
  }
  assert_true(zero_windows > 0); /* the no-gradient path ran */
  assert_int_equal(nan_windows, 2); /* relu passes NaN, as torch's */
  for (int i = 0; i < 2 * 3 * 8 * 10; i++) assert_true(g0[i] == g1[i]);
  free(y0), free(y1), free(g0), free(g1), free(xv);
  for (int k = 0; k < 2; k++) ct_tensor_free(xs[k]), ct_tensor_free(ys[k]);
  ct_tensor_free(x0);
  ct_module_free(seq);
}

/* Sequential runs Conv2d, ReLU, MaxPool2d as the fused op: bit for bit the output and the input,
 * weight and bias gradients of the three ops run one after the other (the same per-image code). */
static void test_sequential_fuses_conv_relu_max_pool(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(5);
  ct_conv2d_opts co = {.padding = {1, 1}};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  ct_module *seq = ct_assert_nonnull(ct_sequential_new(
      3, (ct_module *[]){ct_conv2d_new(3, 4, 3, &co, 1, CT_DEVICE_CPU, &g), ct_relu_new(), ct_max_pool2d_new(&po)}));
  ct_tensor *w = param(seq, "0.weight"), *b = param(seq, "0.bias");
  int64_t sh[4] = {3, 3, 9, 10};
  ct_tensor *x0 = ct_assert_nonnull(ct_randn(4, sh, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *up = ct_assert_nonnull(ct_randn(4, (int64_t[]){3, 4, 4, 5}, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g));
  double *vals[2][4];
  for (int k = 0; k < 2; k++) {
    ct_tensor *x = ct_assert_nonnull(ct_contiguous(x0));
    ct_tensor *xd = ct_assert_nonnull(ct_cast(x, CT_F32)); /* a fresh leaf */
    ct_tensor_free(x);
    x = ct_assert_nonnull(ct_mul_scalar(xd, 1.0));
    ct_tensor_free(xd);
    ct_assert_ok(ct_requires_grad_(x, 1));
    ct_tensor *y;
    if (k == 0) y = ct_assert_nonnull(ct_module_forward(seq, x));
    else {
      ct_tensor *c = ct_assert_nonnull(ct_conv2d(x, w, b, &co)), *r = ct_assert_nonnull(ct_relu(c));
      y = ct_assert_nonnull(ct_max_pool2d(r, &po));
      ct_tensor_free(c), ct_tensor_free(r);
    }
    ct_tensor *p = ct_assert_nonnull(ct_mul(y, up)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    vals[k][0] = ct_test_values(y), vals[k][1] = ct_test_values(ct_grad(x));
    vals[k][2] = ct_test_values(ct_grad(w)), vals[k][3] = ct_test_values(ct_grad(b));
    ct_zero_grad(w), ct_zero_grad(b);
    ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(y), ct_tensor_free(x);
  }
  int64_t n[4] = {3 * 4 * 4 * 5, 3 * 3 * 9 * 10, 4 * 3 * 3 * 3, 4};
  for (int t = 0; t < 4; t++)
    for (int64_t i = 0; i < n[t]; i++) assert_true(vals[0][t][i] == vals[1][t][i]);
  for (int k = 0; k < 2; k++)
    for (int t = 0; t < 4; t++) free(vals[k][t]);
  ct_tensor_free(x0), ct_tensor_free(up);
  ct_module_free(seq);
}

/* ct_model_new_for: the same networks for other data (CIFAR's (3, 32, 32) and 100 classes, a
 * grayscale 30 x 20 folder), the keys unchanged; the first Linear takes what the pools leave. */
static void test_models_for_other_shapes(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(2);
  ct_module *m = ct_assert_nonnull(ct_model_new_for("cnn", 3, 32, 32, 100, CT_DEVICE_CPU, &g));
  expect_shape(param(m, "0.weight"), 4, (int64_t[]){32, 3, 3, 3});
  expect_shape(param(m, "7.weight"), 2, (int64_t[]){128, 64 * 8 * 8});
  expect_shape(param(m, "9.weight"), 2, (int64_t[]){100, 128});
  ct_tensor *x = ct_randn(4, (int64_t[]){2, 3, 32, 32}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
  expect_shape(y, 2, (int64_t[]){2, 100});
  ct_tensor_free(x), ct_tensor_free(y);
  ct_module_free(m);
  m = ct_assert_nonnull(ct_model_new_for("cnn", 1, 30, 21, 7, CT_DEVICE_CPU, &g)); /* pools floor: 7 x 5 */
  expect_shape(param(m, "7.weight"), 2, (int64_t[]){128, 64 * 7 * 5});
  x = ct_randn(4, (int64_t[]){3, 1, 30, 21}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  y = ct_assert_nonnull(ct_module_forward(m, x));
  expect_shape(y, 2, (int64_t[]){3, 7});
  ct_tensor_free(x), ct_tensor_free(y);
  ct_module_free(m);
  m = ct_assert_nonnull(ct_model_new_for("mlp", 3, 32, 32, 10, CT_DEVICE_CPU, &g));
  expect_shape(param(m, "1.weight"), 2, (int64_t[]){256, 3072});
  expect_shape(param(m, "5.weight"), 2, (int64_t[]){10, 128});
  ct_module_free(m);
  /* ct_model_new is the Fashion-MNIST case */
  m = ct_assert_nonnull(ct_model_new_for("cnn", 1, 28, 28, 10, CT_DEVICE_CPU, &g));
  expect_shape(param(m, "7.weight"), 2, (int64_t[]){128, 3136});
  ct_module_free(m);
  assert_null(ct_model_new_for("cnn", 3, 3, 3, 10, CT_DEVICE_CPU, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("at least 4 x 4");
}

static void test_cnn_state_dict(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(1);
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CT_DEVICE_CPU, &g));
  const char *want[] = {"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight", "9.bias"};
  ct_named_tensor nt[16];
  int n = ct_module_named_tensors(m, 1, nt, 16);
  assert_int_equal(n, 8);
  for (int i = 0; i < 8; i++) assert_string_equal(nt[i].name, want[i]);
  assert_int_equal(ct_module_named_tensors(m, 0, NULL, 0), 8);
  expect_shape(param(m, "0.weight"), 4, (int64_t[]){32, 1, 3, 3});
  expect_shape(param(m, "3.weight"), 4, (int64_t[]){64, 32, 3, 3});
  expect_shape(param(m, "7.weight"), 2, (int64_t[]){128, 3136});
  expect_shape(param(m, "9.bias"), 1, (int64_t[]){10});
  assert_int_equal(ct_module_num_params(m), 32 * 9 + 32 + 64 * 32 * 9 + 64 + 128 * 3136 + 128 + 1280 + 10);
  /* PyTorch's defaults: weight and bias within 1/sqrt(fan_in) */
  expect_uniform_init(param(m, "0.weight"), 1 / sqrt(9.0));
  expect_uniform_init(param(m, "0.bias"), 1 / sqrt(9.0));
  expect_uniform_init(param(m, "3.weight"), 1 / sqrt(32 * 9.0));
  expect_uniform_init(param(m, "7.weight"), 1 / sqrt(3136.0));
  expect_uniform_init(param(m, "9.weight"), 1 / sqrt(128.0));
  expect_uniform_init(param(m, "9.bias"), 1 / sqrt(128.0));
  ct_tensor *x = ct_randn(4, (int64_t[]){2, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
  expect_shape(y, 2, (int64_t[]){2, 10});
  assert_string_equal(ct_module_type(m), "Sequential");
  ct_tensor_free(x), ct_tensor_free(y);
  ct_module_free(m);
  assert_null(ct_model_new("resnet", CT_DEVICE_CPU, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("mlp");
}

static void test_linear_conv_modules(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(2);
  ct_module *lin = ct_assert_nonnull(ct_linear_new(5, 3, 1, CT_DEVICE_CPU, &g));
  expect_shape(param(lin, "weight"), 2, (int64_t[]){3, 5});
  expect_shape(param(lin, "bias"), 1, (int64_t[]){3});
  assert_true(ct_requires_grad(param(lin, "weight")));
  ct_tensor *x = ct_randn(2, (int64_t[]){4, 5}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y = ct_module_forward(lin, x), *r = ct_linear(x, param(lin, "weight"), param(lin, "bias"));
  ct_assert_close(y, r, 0, 0);
  ct_module *nb = ct_assert_nonnull(ct_linear_new(5, 3, 0, CT_DEVICE_CPU, &g));
  assert_int_equal(ct_module_named_tensors(nb, 1, NULL, 0), 1);
  ct_conv2d_opts o = {.padding = {1, 1}, .groups = 2};
  ct_module *conv = ct_assert_nonnull(ct_conv2d_new(4, 6, 3, &o, 1, CT_DEVICE_CPU, &g));
  expect_shape(param(conv, "weight"), 4, (int64_t[]){6, 2, 3, 3});
  expect_uniform_init(param(conv, "weight"), 1 / sqrt(2 * 9.0));
  expect_uniform_init(param(conv, "bias"), 1 / sqrt(2 * 9.0));
  assert_string_equal(ct_module_type(conv), "Conv2d");
  assert_null(ct_linear_new(0, 3, 1, CT_DEVICE_CPU, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_conv2d_new(3, 6, 3, &o, 1, CT_DEVICE_CPU, NULL)); /* 3 channels in 2 groups */
  ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(r);
  ct_module_free(lin), ct_module_free(nb), ct_module_free(conv);
}

static void test_batchnorm_and_train_eval(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(3);
  ct_module *bn = ct_assert_nonnull(ct_batchnorm2d_new(3, 0, 0, CT_DEVICE_CPU));
  ct_named_tensor nt[8];
  int n = ct_module_named_tensors(bn, 1, nt, 8);
  assert_true(n >= 4);
  assert_string_equal(nt[0].name, "weight");
  assert_string_equal(nt[1].name, "bias");
  assert_string_equal(nt[2].name, "running_mean");
  assert_string_equal(nt[3].name, "running_var");
  assert_true(nt[2].is_buffer && nt[3].is_buffer && !nt[0].is_buffer);
  assert_int_equal(ct_module_named_tensors(bn, 0, NULL, 0), 2);
  ct_tensor *rm = nt[2].tensor, *rv = nt[3].tensor;
  ct_tensor *x = ct_randn(4, (int64_t[]){4, 3, 2, 2}, 1, 2, CT_F32, CT_DEVICE_CPU, &g);
  /* train: running stats move by momentum 0.1 toward the batch statistics */
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(bn, x));
  ct_tensor *bm = ct_mean(x, 3, (int[]){0, 2, 3}, 0), *bv = ct_var(x, 3, (int[]){0, 2, 3}, 1, 0);
  ct_tensor *wm = ct_mul_scalar(bm, 0.1), *wv0 = ct_mul_scalar(bv, 0.1), *wv = ct_add_scalar(wv0, 0.9);
  ct_assert_close(rm, wm, 1e-6, 1e-5);
  ct_assert_close(rv, wv, 1e-6, 1e-5);
  /* eval: running stats unchanged, output uses them */
  ct_module_train(bn, 0);
  ct_tensor *before = ct_to(rm, CT_DEVICE_CPU, CT_COPY);
  ct_tensor *ye = ct_assert_nonnull(ct_module_forward(bn, x));
  ct_assert_close(rm, before, 0, 0);
  ct_tensor *ref = ct_batch_norm(x, rm, rv, nt[0].tensor, nt[1].tensor, 0, 0.1, 1e-5);
  ct_assert_close(ye, ref, 1e-6, 1e-5);
  /* dropout follows train/eval, also inside a Sequential */
  ct_module *drop = ct_dropout_new(0.5);
  ct_module *seq = ct_sequential_new(1, &drop);
  ct_tensor *ones = ct_ones(1, (int64_t[]){1000}, CT_F32, CT_DEVICE_CPU);
  ct_tensor *d1 = ct_module_forward(seq, ones);
  double *v = ct_test_values(d1);
  int zeros = 0;
  for (int i = 0; i < 1000; i++) zeros += v[i] == 0;
  assert_true(zeros > 400 && zeros < 600);
  free(v);
  ct_module_train(seq, 0);
  ct_tensor *d2 = ct_module_forward(seq, ones);
  ct_assert_close(d2, ones, 0, 0);
  ct_tensor *all[] = {x, y, bm, bv, wm, wv0, wv, before, ye, ref, ones, d1, d2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
  ct_module_free(bn), ct_module_free(seq);
}

static void test_module_to_keeps_handles(void **state) {
  (void)state;
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, NULL));
  ct_named_tensor a[16], b[16];
  int n = ct_module_named_tensors(m, 1, a, 16);
  ct_assert_ok(ct_module_to(m, CT_DEVICE_CPU));
  assert_int_equal(ct_module_named_tensors(m, 1, b, 16), n);
  for (int i = 0; i < n; i++) assert_ptr_equal(a[i].tensor, b[i].tensor);
  if (ct_device_count(CT_CUDA) == 0) {
    assert_int_equal(ct_module_to(m, CT_DEVICE_CUDA(0)), CT_EDEVICE);
    ct_module_named_tensors(m, 1, b, 16);
    for (int i = 0; i < n; i++) assert_true(ct_device_eq(ct_tensor_device(b[i].tensor), CT_DEVICE_CPU));
  }
  ct_module_free(m);
}

/* ---- optimizers on one Linear(2, 1, bias=False) weight p with loss sum(p * c): gradient c. */
static const double P0[2] = {0.5, -1.0}, C[2] = {0.1, -0.3};

static ct_module *tiny(void) {
  ct_module *m = ct_assert_nonnull(ct_linear_new(2, 1, 0, CT_DEVICE_CPU, NULL));
  ct_tensor *h = ct_from_host(P0, 2, (int64_t[]){1, 2}, CT_F64, CT_DEVICE_CPU);
  ct_assert_ok(ct_copy_(param(m, "weight"), h));
  ct_tensor_free(h);
  return m;
}

static void grad_step(ct_module *m, ct_optimizer *o) {
  ct_optimizer_zero_grad(o);
  ct_scope_begin();
  ct_tensor *c = ct_from_host(C, 2, (int64_t[]){1, 2}, CT_F64, CT_DEVICE_CPU);
  ct_assert_ok(ct_backward(ct_sum(ct_mul(param(m, "weight"), c), 0, NULL, 0)));
  ct_scope_end();
  ct_assert_ok(ct_optimizer_step(o));
}

/* torch.optim's formulas in double, three steps from P0 with the constant gradient C. */
static void reference(const ct_optim_opts *o, int steps, double *p) {
  double m[2] = {0}, v[2] = {0}, buf[2] = {0};
  double b1 = o->beta1 ? o->beta1 : 0.9, b2 = o->beta2 ? o->beta2 : 0.999, eps = o->eps ? o->eps : 1e-8;
  double wd = o->kind == CT_OPTIM_ADAMW && o->weight_decay == 0 ? 1e-2 : o->weight_decay;
  memcpy(p, P0, sizeof P0);
  for (int t = 1; t <= steps; t++)
    for (int i = 0; i < 2; i++) {
      double g = C[i];
      if (o->kind == CT_OPTIM_SGD) {
        g += wd * p[i];
        if (o->momentum > 0) {
          buf[i] = t == 1 ? g : o->momentum * buf[i] + (1 - o->dampening) * g;
          g = o->nesterov ? g + o->momentum * buf[i] : buf[i];
        }
        p[i] -= o->lr * g;
        continue;
      }
      if (o->kind == CT_OPTIM_ADAMW) p[i] *= 1 - o->lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
      p[i] -= o->lr * mh / (sqrt(vh) + eps);
    }
}

static void test_optimizer_steps(void **state) {
  (void)state;
  ct_optim_opts cases[] = {
      {.kind = CT_OPTIM_SGD, .lr = 0.1},
      {.kind = CT_OPTIM_SGD, .lr = 0.1, .momentum = 0.9},
      {.kind = CT_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .nesterov = 1, .weight_decay = 0.01},
      {.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.5, .dampening = 0.3, .weight_decay = 0.1},
      {.kind = CT_OPTIM_ADAM, .lr = 0.01},
      {.kind = CT_OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.1, .beta1 = 0.8, .beta2 = 0.99},
      {.kind = CT_OPTIM_ADAMW, .lr = 0.01},
      {.kind = CT_OPTIM_ADAMW, .lr = 0.02, .weight_decay = 0.5, .eps = 1e-6},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ct_module *m = tiny();
    ct_optimizer *o = ct_assert_nonnull(ct_optimizer_new(m, &cases[k]));
    for (int s = 1; s <= 3; s++) {
      grad_step(m, o);
      double want[2];
      reference(&cases[k], s, want);
      double *got = ct_test_values(param(m, "weight"));
      for (int i = 0; i < 2; i++) {
        if (fabs(got[i] - want[i]) > 1e-6) fprintf(stderr, "case %zu step %d: p[%d] = %.9g, want %.9g\n", k, s, i, got[i], want[i]);
        assert_true(fabs(got[i] - want[i]) <= 1e-6);
      }
      free(got);
    }
    assert_int_equal(ct_optimizer_steps(o), 3);
    ct_optimizer_free(o);
    ct_module_free(m);
  }
  ct_module *m = tiny();
  assert_null(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = -1}));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .nesterov = 1}));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_optimizer *o = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  assert_true(ct_optimizer_lr(o) == 1e-3);
  ct_optimizer_set_lr(o, 0.5);
  assert_true(ct_optimizer_lr(o) == 0.5);
  ct_optimizer_free(o);
  o = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD}));
  assert_true(ct_optimizer_lr(o) == 1e-2);
  ct_optimizer_free(o);
  ct_module_free(m);
}

/* A few steps on a quadratic decrease the loss, for every optimizer. */
static void test_quadratic_descent(void **state) {
  (void)state;
  ct_optim_kind kinds[] = {CT_OPTIM_SGD, CT_OPTIM_ADAM, CT_OPTIM_ADAMW};
  for (int k = 0; k < 3; k++) {
    ct_generator g = ct_generator_new(4);
    ct_module *m = ct_assert_nonnull(ct_linear_new(8, 2, 1, CT_DEVICE_CPU, &g));
    ct_optimizer *o = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = kinds[k], .lr = 0.05, .momentum = 0.5}));
    ct_tensor *x = ct_randn(2, (int64_t[]){16, 8}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
    ct_tensor *t = ct_randn(2, (int64_t[]){16, 2}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
    double first = 0, last = 0;
    for (int s = 0; s < 20; s++) {
      ct_scope_begin();
      ct_optimizer_zero_grad(o);
      ct_tensor *l = ct_mse_loss(ct_module_forward(m, x), t, CT_REDUCTION_MEAN);
      double v = ct_item(l);
      if (s == 0) first = v;
      last = v;
      ct_assert_ok(ct_backward(l));
      ct_assert_ok(ct_optimizer_step(o));
      ct_scope_end();
    }
    if (!(last < 0.8 * first)) fprintf(stderr, "optimizer %d: loss %g -> %g\n", k, first, last);
    assert_true(last < 0.8 * first);
    ct_tensor_free(x), ct_tensor_free(t);
    ct_optimizer_free(o);
    ct_module_free(m);
  }
}

static void test_schedules(void **state) {
  (void)state;
  ct_sched_opts st = {.kind = CT_SCHED_STEP, .step_size = 3, .gamma = 0.5};
  assert_true(fabs(ct_sched_lr(&st, 0.1, 0) - 0.1) < 1e-15);
  assert_true(fabs(ct_sched_lr(&st, 0.1, 2) - 0.1) < 1e-15);
  assert_true(fabs(ct_sched_lr(&st, 0.1, 3) - 0.05) < 1e-15);
  assert_true(fabs(ct_sched_lr(&st, 0.1, 7) - 0.025) < 1e-15);
  ct_sched_opts sd = {.kind = CT_SCHED_STEP, .step_size = 2};
  assert_true(fabs(ct_sched_lr(&sd, 1.0, 4) - 0.01) < 1e-12); /* gamma 0 = 0.1 */
  ct_sched_opts cs = {.kind = CT_SCHED_COSINE, .t_max = 10, .eta_min = 0.001};
  assert_true(fabs(ct_sched_lr(&cs, 0.1, 0) - 0.1) < 1e-15);
  assert_true(fabs(ct_sched_lr(&cs, 0.1, 5) - (0.1 + 0.001) / 2) < 1e-15);
  assert_true(fabs(ct_sched_lr(&cs, 0.1, 10) - 0.001) < 1e-15);
  double e3 = 0.001 + (0.1 - 0.001) * (1 + cos(M_PI * 3 / 10)) / 2;
  assert_true(fabs(ct_sched_lr(&cs, 0.1, 3) - e3) < 1e-15);
  ct_sched_opts cc = {.kind = CT_SCHED_CONSTANT};
  assert_true(ct_sched_lr(&cc, 0.3, 100) == 0.3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cnn_state_dict), cmocka_unit_test(test_models_for_other_shapes),         cmocka_unit_test(test_linear_conv_modules),
      cmocka_unit_test(test_batchnorm_and_train_eval), cmocka_unit_test(test_module_to_keeps_handles),
      cmocka_unit_test(test_optimizer_steps),        cmocka_unit_test(test_quadratic_descent),
      cmocka_unit_test(test_schedules),              cmocka_unit_test(test_sequential_fuses_relu_max_pool),
      cmocka_unit_test(test_sequential_fuses_conv_relu_max_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
