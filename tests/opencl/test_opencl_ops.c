/* tests/opencl/test_opencl_ops.c: every row of the op table on opencl:0 (PoCL in CI), against the
 * CPU backend, with gradchecks on the device: the harness and its tolerances are tests/ops/
 * op_device.h, shared with the CUDA test; then the float16 / bfloat16 checks of lowp_checks.h.
 * Never skips: deps.sh installs PoCL, so the device exists wherever the tests run. */
#include "../ops/op_device.h"
#include "../ops/lowp_checks.h"
#include "../ops/cast_checks.h"
#include "../ops/norm_kernels.h"
#include "../ops/pool_kernels.h"
#include "../ops/seq_kernels.h"
#include "../ops/conv_kernels.h"
#include "../ops/attention_kernels.h"

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
  /* batch norm and layer norm on the device's own kernels against the CPU's */
  nk_dev = CT_DEVICE_OPENCL(0);
  pk_dev = CT_DEVICE_OPENCL(0); /* max pooling's ties and NaNs as the CPU's (pool_kernels.h) */
  ck_dev = CT_DEVICE_OPENCL(0); /* conv2d beyond the op table's sizes (conv_kernels.h) */
  sk_dev = CT_DEVICE_OPENCL(0); /* embedding's index checks and backward, multinomial (seq_kernels.h) */
  ak_dev = CT_DEVICE_OPENCL(0); /* the fused attention against the CPU's, and its memory (attention_kernels.h) */
  const struct CMUnitTest fused[] = {cmocka_unit_test(test_fused_conv_pool_chunks), NK_TESTS, PK_TESTS, CK_TESTS, SK_TESTS,
                                     AK_TESTS};
  return r | cmocka_run_group_tests_name("fused_opencl", fused, NULL, NULL);
}
