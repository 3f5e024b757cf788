/* tests/ops/test_errors.c: the error paths of the ops: each returns NULL (or a negative status)
 * with the right code and a message naming the op, the shapes, dtypes or devices, and the fix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"

static ct_tensor *randn(int ndim, const int64_t *shape) {
  ct_generator g = ct_generator_new(3);
  return ct_assert_nonnull(ct_randn(ndim, shape, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
}

static void expect_fail(ct_tensor *r, ct_status code) {
  if (r) ct_tensor_free(r);
  assert_null(r);
  if (ct_last_status() != code) fprintf(stderr, "status %d (%s)\n", ct_last_status(), ct_last_error());
  assert_int_equal(ct_last_status(), code);
}

static void test_shape_errors(void **state) {
  (void)state;
  ct_tensor *a = randn(2, (int64_t[]){2, 3}), *b = randn(1, (int64_t[]){4});
  expect_fail(ct_add(a, b), CT_ESHAPE);
  ct_assert_error_contains("add");
  ct_assert_error_contains("(2, 3)");
  ct_assert_error_contains("(4,)");
  expect_fail(ct_mul(a, b), CT_ESHAPE);
  ct_assert_error_contains("mul");
  ct_tensor *m = randn(2, (int64_t[]){4, 5});
  expect_fail(ct_matmul(a, m), CT_ESHAPE);
  ct_assert_error_contains("matmul");
  ct_assert_error_contains("(2, 3)");
  ct_assert_error_contains("(4, 5)");
  ct_tensor *s = ct_scalar(1, CT_F32, CT_DEVICE_CPU);
  expect_fail(ct_matmul(s, m), CT_ESHAPE);
  expect_fail(ct_linear(a, m, NULL), CT_ESHAPE);
  ct_assert_error_contains("linear");
  /* conv2d: weight channels that do not match the input, a 3-D weight, a bad bias, too small input */
  ct_tensor *x = randn(4, (int64_t[]){1, 3, 5, 5}), *w = randn(4, (int64_t[]){4, 2, 3, 3});
  expect_fail(ct_conv2d(x, w, NULL, NULL), CT_ESHAPE);
  ct_assert_error_contains("conv2d");
  ct_assert_error_contains("(1, 3, 5, 5)");
  ct_assert_error_contains("(4, 2, 3, 3)");
  ct_tensor *w3 = randn(3, (int64_t[]){4, 3, 3});
  expect_fail(ct_conv2d(x, w3, NULL, NULL), CT_ESHAPE);
  ct_tensor *wk = randn(4, (int64_t[]){4, 3, 7, 7}), *wb = randn(4, (int64_t[]){4, 3, 3, 3});
  expect_fail(ct_conv2d(x, wk, NULL, NULL), CT_ESHAPE);
  ct_tensor *b5 = randn(1, (int64_t[]){5});
  expect_fail(ct_conv2d(x, wb, b5, NULL), CT_ESHAPE);
  ct_assert_error_contains("bias");
  expect_fail(ct_conv2d(x, wb, NULL, &(ct_conv2d_opts){.groups = 2}), CT_ESHAPE);
  /* a kernel larger than the input with a stride that would round the negative span up to one output */
  expect_fail(ct_conv2d(x, wk, NULL, &(ct_conv2d_opts){.stride = {3, 3}}), CT_ESHAPE);
  ct_assert_error_contains("smaller than");
  expect_fail(ct_max_pool2d(x, &(ct_pool2d_opts){.kernel = {7, 7}, .stride = {3, 3}}), CT_ESHAPE);
  ct_assert_error_contains("smaller than the kernel");
  /* the fused conv2d + relu + max_pool2d: the same checks under its own name, and the pooling's */
  ct_pool2d_opts p2 = {.kernel = {2, 2}};
  expect_fail(ct_conv2d_relu_max_pool2d(x, w, NULL, NULL, &p2), CT_ESHAPE);
  ct_assert_error_contains("conv2d_relu_max_pool2d");
  ct_assert_error_contains("(4, 2, 3, 3)");
  expect_fail(ct_conv2d_relu_max_pool2d(x, wb, b5, NULL, &p2), CT_ESHAPE);
  ct_assert_error_contains("bias");
  expect_fail(ct_conv2d_relu_max_pool2d(x, wb, NULL, NULL, NULL), CT_EINVAL);
  ct_assert_error_contains("kernel size");
  expect_fail(ct_conv2d_relu_max_pool2d(x, wb, NULL, NULL, &(ct_pool2d_opts){.kernel = {5, 5}}), CT_ESHAPE);
  expect_fail(ct_relu_max_pool2d(w3, &p2), CT_ESHAPE);
  /* torch's pooling options: avg_pool2d has no dilation; padding at most half the kernel, dilated
   * or not (torch: "pad should be smaller than or equal to half of kernel size"); divisor_override
   * positive; the avg options refused by max pooling, never ignored */
  expect_fail(ct_avg_pool2d(x, &(ct_pool2d_opts){.kernel = {2, 2}, .dilation = {2, 2}}), CT_EINVAL);
  ct_assert_error_contains("avg_pool2d");
  ct_assert_error_contains("dilation");
  expect_fail(ct_max_pool2d(x, &(ct_pool2d_opts){.kernel = {3, 3}, .padding = {2, 2}, .dilation = {2, 2}}), CT_EINVAL);
  ct_assert_error_contains("max_pool2d");
  ct_assert_error_contains("padding");
  ct_assert_error_contains("kernel/2 = 1");
  expect_fail(ct_avg_pool2d(x, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = -3}), CT_EINVAL);
  ct_assert_error_contains("divisor_override");
  ct_assert_error_contains("-3");
  expect_fail(ct_max_pool2d(x, &(ct_pool2d_opts){.kernel = {2, 2}, .exclude_pad = 1}), CT_EINVAL);
  ct_assert_error_contains("count_include_pad");
  expect_fail(ct_relu_max_pool2d(x, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = 4}), CT_EINVAL);
  ct_assert_error_contains("relu_max_pool2d");
  expect_fail(ct_conv2d_relu_max_pool2d(x, wb, NULL, NULL, &(ct_pool2d_opts){.kernel = {2, 2}, .exclude_pad = 1}), CT_EINVAL);
  ct_assert_error_contains("conv2d_relu_max_pool2d");
  /* a dilated kernel larger than the padded input; ceil_mode does not make room for it */
  expect_fail(ct_max_pool2d(x, &(ct_pool2d_opts){.kernel = {3, 3}, .dilation = {4, 1}, .ceil_mode = 1}), CT_ESHAPE);
  ct_assert_error_contains("too small");
  /* reductions and views */
  expect_fail(ct_sum(a, 1, (int[]){2}, 0), CT_ESHAPE);
  expect_fail(ct_max(a, -3, 0, NULL), CT_ESHAPE);
  expect_fail(ct_softmax(a, 2), CT_ESHAPE);
  expect_fail(ct_reshape(a, 1, (int64_t[]){7}), CT_ESHAPE);
  ct_assert_error_contains("(2, 3)");
  expect_fail(ct_cat(2, (ct_tensor *[]){a, m}, 0), CT_ESHAPE);
  expect_fail(ct_stack(2, (ct_tensor *[]){a, m}, 0), CT_ESHAPE);
  expect_fail(ct_mse_loss(a, m, CT_REDUCTION_MEAN), CT_ESHAPE);
  expect_fail(ct_batch_norm(b, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5), CT_ESHAPE);
  ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(m), ct_tensor_free(s), ct_tensor_free(x), ct_tensor_free(w);
  ct_tensor_free(w3), ct_tensor_free(wk), ct_tensor_free(wb), ct_tensor_free(b5);
}

/* The same conv2d with a matching (4,) bias works (the failures above are not spurious). */
static void test_conv_bias_ok(void **state) {
  (void)state;
  ct_tensor *x = randn(4, (int64_t[]){1, 3, 5, 5}), *w = randn(4, (int64_t[]){4, 3, 3, 3}), *b = randn(1, (int64_t[]){4});
  ct_tensor *y = ct_assert_nonnull(ct_conv2d(x, w, b, NULL));
  assert_int_equal(ct_tensor_shape(y)[2], 3);
  ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(y);
}

static void test_value_errors(void **state) {
  (void)state;
  ct_tensor *logits = randn(2, (int64_t[]){3, 4});
  int64_t t[3] = {0, 4, 1}, n = 3;
  ct_tensor *target = ct_assert_nonnull(ct_from_host(t, 1, &n, CT_I64, CT_DEVICE_CPU));
  expect_fail(ct_cross_entropy(logits, target, CT_REDUCTION_MEAN, 0), CT_EINVAL);
  ct_assert_error_contains("cross_entropy");
  ct_assert_error_contains("4");
  int64_t tn[3] = {0, -1, 1};
  ct_tensor *tneg = ct_from_host(tn, 1, &n, CT_I64, CT_DEVICE_CPU);
  expect_fail(ct_cross_entropy(logits, tneg, CT_REDUCTION_MEAN, 0), CT_EINVAL);
  ct_tensor *tf = ct_cast(target, CT_F32);
  expect_fail(ct_cross_entropy(logits, tf, CT_REDUCTION_MEAN, 0), CT_EDTYPE);
  expect_fail(ct_index_select(logits, 1, target), CT_EINVAL);
  ct_assert_error_contains("index_select");
  /* lo > hi is torch's clamp too: hi everywhere, gradient 0 (not a refusal) */
  {
    ct_tensor *lg = ct_detach(logits);
    ct_assert_ok(ct_requires_grad_(lg, 1));
    ct_tensor *c = ct_assert_nonnull(ct_clamp(lg, 1, -1));
    float cv[12];
    ct_assert_ok(ct_to_host(c, cv, sizeof cv, CT_F32));
    for (int k = 0; k < 12; k++) assert_true(cv[k] == -1.0f);
    ct_tensor *s = ct_assert_nonnull(ct_sum(c, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    float gv[12];
    ct_assert_ok(ct_to_host(ct_grad(lg), gv, sizeof gv, CT_F32));
    for (int k = 0; k < 12; k++) assert_true(gv[k] == 0.0f);
    ct_tensor_free(s), ct_tensor_free(c), ct_tensor_free(lg);
  }
  expect_fail(ct_clamp(logits, NAN, 1), CT_EINVAL);
  expect_fail(ct_dropout(logits, 1.5, 1, NULL), CT_EINVAL);
  ct_tensor *ti = ct_cast(logits, CT_I32);
  expect_fail(ct_mean(ti, 0, NULL, 0), CT_EDTYPE);
  expect_fail(ct_arange(0, 1, 0, CT_F32, CT_DEVICE_CPU), CT_EINVAL);
  ct_tensor_free(logits), ct_tensor_free(target), ct_tensor_free(tneg), ct_tensor_free(tf), ct_tensor_free(ti);
}

static void test_null_propagates(void **state) {
  (void)state;
  ct_tensor *x = randn(1, (int64_t[]){3});
  ct_clear_error();
  assert_null(ct_add(NULL, x));
  assert_null(ct_add(x, NULL));
  assert_null(ct_exp(NULL));
  assert_null(ct_sum(NULL, 0, NULL, 0));
  assert_null(ct_matmul(NULL, x));
  assert_null(ct_reshape(NULL, 1, (int64_t[]){3}));
  assert_null(ct_softmax(NULL, 0));
  assert_null(ct_cross_entropy(NULL, x, CT_REDUCTION_MEAN, 0));
  assert_null(ct_where(NULL, x, x));
  /* a chain checked once at its end (the scope frees what the chain made) */
  ct_scope_begin();
  ct_tensor *bad = ct_add(x, randn(1, (int64_t[]){4}));
  assert_null(ct_sum(ct_exp(ct_mul(bad, x)), 0, NULL, 0));
  assert_int_equal(ct_last_status(), CT_ESHAPE); /* the first error is kept */
  ct_scope_end();
  ct_tensor_free(x);
}

static void test_autograd_errors(void **state) {
  (void)state;
  ct_tensor *x = randn(1, (int64_t[]){3});
  ct_assert_ok(ct_requires_grad_(x, 1));
  ct_tensor *y = ct_assert_nonnull(ct_mul(x, x));
  assert_int_equal(ct_backward(y), CT_EAUTOGRAD); /* not a scalar */
  ct_assert_error_contains("(3,)");
  assert_int_equal(ct_requires_grad_(y, 0), CT_EAUTOGRAD); /* not a leaf */
  ct_tensor *i = ct_arange(0, 3, 1, CT_I64, CT_DEVICE_CPU);
  assert_int_equal(ct_requires_grad_(i, 1), CT_EDTYPE);
  ct_assert_error_contains("int64");
  ct_tensor *c = randn(1, (int64_t[]){1});
  assert_int_equal(ct_backward(c), CT_EAUTOGRAD); /* no graph */
  ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(i), ct_tensor_free(c);
}

/* A CUDA tensor cannot be made here, so pretend: set one tensor's device field, check the message,
 * and restore it before freeing (the storage really lives on the CPU). */
static void test_device_mismatch(void **state) {
  (void)state;
  ct_tensor *a = randn(2, (int64_t[]){2, 2}), *b = randn(2, (int64_t[]){2, 2});
  b->device = CT_DEVICE_CUDA(0);
  expect_fail(ct_add(a, b), CT_EDEVICE);
  ct_assert_error_contains("add");
  ct_assert_error_contains("cpu");
  ct_assert_error_contains("cuda:0");
  ct_assert_error_contains("ct_to");
  expect_fail(ct_matmul(a, b), CT_EDEVICE);
  ct_assert_error_contains("matmul");
  ct_assert_error_contains("cuda:0");
  expect_fail(ct_where(a, b, a), CT_EDEVICE);
  ct_assert_error_contains("where");
  ct_tensor *w = randn(4, (int64_t[]){1, 2, 1, 1});
  w->device = CT_DEVICE_CUDA(0);
  ct_tensor *x = randn(4, (int64_t[]){1, 2, 3, 3});
  expect_fail(ct_conv2d(x, w, NULL, NULL), CT_EDEVICE);
  ct_assert_error_contains("conv2d");
  ct_assert_error_contains("weight");
  w->device = CT_DEVICE_CPU;
  expect_fail(ct_cat(2, (ct_tensor *[]){a, b}, 0), CT_EDEVICE);
  b->device = CT_DEVICE_CPU;
  ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(w), ct_tensor_free(x);
}

/* Files that do not exist or are not what they claim fail with CT_EIO / CT_EFORMAT and name the
 * path. */
static void test_bad_files(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  ct_assert_nonnull(dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/missing.safetensors", dir);
  ct_module *m = ct_assert_nonnull(ct_linear_new(2, 2, 1, CT_DEVICE_CPU, NULL));
  assert_null(ct_safetensors_open(path));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("missing.safetensors");
  assert_int_equal(ct_checkpoint_load(path, m, NULL, NULL), CT_EIO);
  snprintf(path, sizeof path, "%s/garbage.safetensors", dir);
  FILE *f = fopen(path, "wb");
  fputs("this is not a safetensors file at all", f);
  fclose(f);
  assert_null(ct_safetensors_open(path));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("garbage.safetensors");
  assert_int_equal(ct_checkpoint_load(path, m, NULL, NULL), CT_EFORMAT);
  f = fopen(path, "wb"); /* a header length that runs past the end of the file */
  fwrite("\xff\x00\x00\x00\x00\x00\x00\x00{}", 1, 10, f);
  fclose(f);
  assert_null(ct_safetensors_open(path));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shape_errors),    cmocka_unit_test(test_conv_bias_ok),   cmocka_unit_test(test_value_errors),
      cmocka_unit_test(test_null_propagates), cmocka_unit_test(test_autograd_errors), cmocka_unit_test(test_device_mismatch),
      cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
