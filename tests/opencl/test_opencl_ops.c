/* tests/opencl/test_opencl_ops.c: every row of the op table on opencl:0 (PoCL in CI), against the
 * CPU backend, with gradchecks on the device: the harness and its tolerances are tests/ops/
 * op_device.h, shared with the CUDA test; then the float16 / bfloat16 checks of lowp_checks.h.
 * Never skips: deps.sh installs PoCL, so the device exists wherever the tests run. */
#include <math.h>
#include "../ops/op_device.h"
#include "../ops/lowp_checks.h"
#include "../ops/cast_checks.h"

/* The fused conv2d + relu + MaxPool2d(2) (src/backend/opencl/conv_relu_pool.c) goes through its
 * images in chunks of an 8 MB scratch; the op table's inputs fit one chunk, so the cnn's second
 * layer with 40 images (three chunks of at most 16) checks the chunk offsets, the weight gradient
 * summed over chunks and the pooling of each chunk, against the CPU backend, in float32 and in
 * both halves (values and the three gradients). Tolerances: float32 sums of 288 products in
 * another order (the GEMMs) on both; the halves' one rounding of the same float32 values, which a
 * reordered sum can move to a neighbouring half (2 ulps: 2^-10 and 2^-7 relative), and their
 * gradients' roundings as in op_device.h (16 ulps). */
static void test_fused_conv_pool_chunks(void **state) {
  (void)state;
  const int64_t N = 40, C = 32, O = 64, H = 14, W = 14;
  ct_dtype dts[3] = {CT_F32, CT_F16, CT_BF16};
  double vtol[3] = {1e-4, 2.0 / 1024, 2.0 / 128}, gtol[3] = {1e-3, 16.0 / 2048, 16.0 / 256};
  ct_conv2d_opts co = {.padding = {1, 1}};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  for (int k = 0; k < 3; k++) {
    ct_generator gen = ct_generator_new(3 + (uint64_t)k);
    ct_tensor *src[4] = {ct_randn(4, (int64_t[]){N, C, H, W}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(4, (int64_t[]){O, C, 3, 3}, 0, 0.1, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(1, (int64_t[]){O}, 0, 0.1, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(4, (int64_t[]){N, O, H / 2, W / 2}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen)};
    ct_tensor *y[2], *gr[2][3];
    ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_OPENCL(0)};
    for (int d = 0; d < 2; d++) {
      ct_tensor *in[4];
      for (int i = 0; i < 4; i++) {
        ct_tensor *c = ct_assert_nonnull(ct_cast(ct_assert_nonnull(src[i]), dts[k]));
        ct_tensor *t = ct_assert_nonnull(ct_to(c, devs[d], 0));
        in[i] = ct_assert_nonnull(ct_detach(t)); /* a leaf, to mark */
        ct_tensor_free(t), ct_tensor_free(c);
        if (i < 3) ct_assert_ok(ct_requires_grad_(in[i], 1));
      }
      ct_tensor *yd = ct_assert_nonnull(ct_conv2d_relu_max_pool2d(in[0], in[1], in[2], &co, &po));
      ct_tensor *p = ct_assert_nonnull(ct_mul(yd, in[3])), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
      ct_assert_ok(ct_backward(s));
      y[d] = ct_assert_nonnull(ct_to(yd, CT_DEVICE_CPU, 0));
      for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_tensor_dtype(ct_grad(in[i])), dts[k]);
        ct_tensor *gc = ct_assert_nonnull(ct_to(ct_grad(in[i]), CT_DEVICE_CPU, 0));
        gr[d][i] = ct_assert_nonnull(ct_cast(gc, CT_F64));
        ct_tensor_free(gc);
      }
      ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(yd);
      for (int i = 0; i < 4; i++) ct_tensor_free(in[i]);
    }
    assert_int_equal(ct_tensor_dtype(y[1]), dts[k]);
    ct_assert_close(y[1], y[0], vtol[k], vtol[k]);
    for (int i = 0; i < 3; i++) ct_assert_close(gr[1][i], gr[0][i], gtol[k], gtol[k]);
    for (int d = 0; d < 2; d++) {
      ct_tensor_free(y[d]);
      for (int i = 0; i < 3; i++) ct_tensor_free(gr[d][i]);
    }
    for (int i = 0; i < 4; i++) ct_tensor_free(src[i]);
  }
}

/* layer norm runs on opencl:0's kernels (kernels/norm.cl: one node, named layer_norm) and matches
 * the CPU's kernels on a transformer's LayerNorm(96) over 64 rows with weight and bias: y and the
 * three gradients, float32 sums of 96 terms in another order on each side. */
static void test_layer_norm_kernels(void **state) {
  (void)state;
  int64_t xs[2] = {64, 96}, D = 96;
  ct_generator g = ct_generator_new(11);
  ct_tensor *src[4] = {ct_randn(2, xs, 1.0, 2.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(1, &D, 1.0, 0.3, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &D, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(2, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g)};
  ct_tensor *y[2], *gr[2][3];
  ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_OPENCL(0)};
  for (int d = 0; d < 2; d++) {
    ct_tensor *in[4];
    for (int k = 0; k < 4; k++) {
      ct_tensor *t = ct_assert_nonnull(ct_to(ct_assert_nonnull(src[k]), devs[d], 0));
      in[k] = ct_assert_nonnull(ct_detach(t)); /* a leaf on the device */
      ct_tensor_free(t);
      if (k < 3) ct_assert_ok(ct_requires_grad_(in[k], 1));
    }
    y[d] = ct_assert_nonnull(ct_layer_norm(in[0], 1, in[1], in[2], 1e-5));
    assert_string_equal(ct_grad_fn_name(y[d]), "layer_norm");
    ct_tensor *p = ct_assert_nonnull(ct_mul(y[d], in[3])), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(l));
    for (int k = 0; k < 3; k++) gr[d][k] = ct_assert_nonnull(ct_to(ct_grad(in[k]), CT_DEVICE_CPU, 0));
    ct_tensor *yc = ct_assert_nonnull(ct_to(y[d], CT_DEVICE_CPU, 0));
    ct_tensor_free(y[d]), y[d] = yc;
    ct_tensor_free(p), ct_tensor_free(l);
    for (int k = 0; k < 4; k++) ct_tensor_free(in[k]);
  }
  ct_assert_close(y[1], y[0], 1e-5, 1e-4);
  for (int k = 0; k < 3; k++) ct_assert_close(gr[1][k], gr[0][k], 1e-4, 1e-4);
  for (int d = 0; d < 2; d++) {
    ct_tensor_free(y[d]);
    for (int k = 0; k < 3; k++) ct_tensor_free(gr[d][k]);
  }
  for (int k = 0; k < 4; k++) ct_tensor_free(src[k]);
}

/* batch norm runs on opencl:0's kernels (kernels/norm.cl: one node, named batch_norm) and matches
 * the CPU's kernels on a resnet block's BatchNorm2d(32) over (12, 32, 6, 6), in three cases:
 * training with running statistics (both updated in place), training on a channels_last input
 * (the kernels see its (N H W, C) rows; y and gx stay channels_last), and eval from the running
 * statistics. y, the running statistics and the three gradients, float32 sums of 432 terms in
 * another order on each side. */
static void test_batch_norm_kernels(void **state) {
  (void)state;
  int64_t xs[4] = {12, 32, 6, 6}, C = 32;
  ct_generator g = ct_generator_new(13);
  ct_tensor *src[6] = {ct_randn(4, xs, 0.5, 2.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(1, &C, 1.0, 0.3, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &C, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(4, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &C, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_rand(1, &C, 0.5, 2.0, CT_F32, CT_DEVICE_CPU, &g)};
  static const char *const cases[3] = {"training", "training, channels_last", "eval"};
  for (int k = 0; k < 3; k++) {
    ct_tensor *y[2], *gr[2][3], *run[2][2];
    ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_OPENCL(0)};
    for (int d = 0; d < 2; d++) {
      ct_tensor *in[6];
      for (int i = 0; i < 6; i++) {
        /* a copy on the CPU too: the running statistics are updated in place */
        ct_tensor *t = ct_assert_nonnull(ct_to(ct_assert_nonnull(src[i]), devs[d], CT_COPY));
        if (i == 0 && k == 1) {
          ct_tensor *cl = ct_assert_nonnull(ct_contiguous_format(t, CT_CHANNELS_LAST));
          ct_tensor_free(t), t = cl;
        }
        in[i] = ct_assert_nonnull(ct_detach(t)); /* a leaf on the device */
        ct_tensor_free(t);
        if (i < 3) ct_assert_ok(ct_requires_grad_(in[i], 1));
      }
      y[d] = ct_assert_nonnull(ct_batch_norm(in[0], in[4], in[5], in[1], in[2], k != 2, 0.1, 1e-5));
      print_message("batch_norm %s on %s\n", cases[k], d ? "opencl:0" : "cpu");
      assert_string_equal(ct_grad_fn_name(y[d]), "batch_norm");
      assert_int_equal(ct_tensor_is_contiguous_format(y[d], CT_CHANNELS_LAST), k == 1);
      ct_tensor *p = ct_assert_nonnull(ct_mul(y[d], in[3])), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
      ct_assert_ok(ct_backward(l));
      for (int i = 0; i < 3; i++) gr[d][i] = ct_assert_nonnull(ct_to(ct_grad(in[i]), CT_DEVICE_CPU, 0));
      for (int i = 0; i < 2; i++) run[d][i] = ct_assert_nonnull(ct_to(in[4 + i], CT_DEVICE_CPU, 0));
      ct_tensor *yc = ct_assert_nonnull(ct_to(y[d], CT_DEVICE_CPU, 0));
      ct_tensor_free(y[d]), y[d] = yc;
      ct_tensor_free(p), ct_tensor_free(l);
      for (int i = 0; i < 6; i++) ct_tensor_free(in[i]);
    }
    ct_assert_close(y[1], y[0], 1e-5, 1e-4);
    for (int i = 0; i < 2; i++) ct_assert_close(run[1][i], run[0][i], 1e-6, 1e-5);
    for (int i = 0; i < 3; i++) ct_assert_close(gr[1][i], gr[0][i], 1e-4, 1e-4);
    /* the update moved the statistics in training (a kernel that skipped it would match the eval case) */
    for (int i = 0; i < 2; i++) {
      double *a = ct_test_values(run[0][i]), *b = ct_test_values(src[4 + i]);
      if (k != 2) assert_true(fabs(a[0] - b[0]) > 1e-3);
      else assert_true(a[0] == b[0]);
      free(a), free(b);
    }
    for (int d = 0; d < 2; d++) {
      ct_tensor_free(y[d]);
      for (int i = 0; i < 3; i++) ct_tensor_free(gr[d][i]);
      for (int i = 0; i < 2; i++) ct_tensor_free(run[d][i]);
    }
  }
  for (int i = 0; i < 6; i++) ct_tensor_free(src[i]);
}

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  int r = od_run_table(CT_DEVICE_OPENCL(0), "ops_opencl");
  /* float16 / bfloat16 on the device: float32 accumulation and no half overflow inside */
  lp_dev = CT_DEVICE_OPENCL(0);
  const struct CMUnitTest lowp[] = {LP_TESTS};
  r |= cmocka_run_group_tests_name("lowp_opencl", lowp, NULL, NULL);
  /* conversions to the integer dtypes and integer arithmetic: the CPU's rules (float saturates, integer wraps) */
  cast_dev = CT_DEVICE_OPENCL(0);
  const struct CMUnitTest casts[] = {CAST_TESTS};
  r |= cmocka_run_group_tests_name("casts_opencl", casts, NULL, NULL);
  const struct CMUnitTest fused[] = {cmocka_unit_test(test_fused_conv_pool_chunks), cmocka_unit_test(test_layer_norm_kernels),
                                      cmocka_unit_test(test_batch_norm_kernels)};
  return r | cmocka_run_group_tests_name("fused_opencl", fused, NULL, NULL);
}
