/* tests/ops/lowp_checks.h: what the op table cannot see about float16 and bfloat16 (mixed
 * precision), on one device (lp_dev): reductions accumulate in float32, softmax, log_softmax and
 * cross_entropy compute in float32 inside (logits of 20 would overflow half's exp), batch norm
 * of a half input keeps float32 running statistics computed in float32, layer norm normalizes a
 * half input in float32, and silu and gelu_tanh stay finite where exp(-x) and x^3 overflow half.
 * Used by test_ops_cpu.c
 * and tests/opencl/test_opencl_ops.c. Needs testutil.h (cmocka) included before it. */
#ifndef CUTTLE_TESTS_LOWP_CHECKS_H
#define CUTTLE_TESTS_LOWP_CHECKS_H

#include <math.h>
#include <stdlib.h>
#include "testutil.h"

static ct_device lp_dev;
static const ct_dtype lp_dtypes[2] = {CT_F16, CT_BF16};

/* v rounded to dt (f16 or bf16), as a tensor of dt holds it */
static double lp_round(ct_dtype dt, double v) {
  return dt == CT_F16 ? ct_f16_to_f32(ct_f32_to_f16((float)v)) : ct_bf16_to_f32(ct_f32_to_bf16((float)v));
}
/* unit roundoff of dt: half an ulp at 1 */
static double lp_u(ct_dtype dt) { return dt == CT_F16 ? 1.0 / 2048 : 1.0 / 256; }

/* A host array of f64 values as a tensor of dt on lp_dev. */
static ct_tensor *lp_tensor(const double *v, int nd, const int64_t *shape, ct_dtype dt) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, nd, shape, CT_F64, CT_DEVICE_CPU));
  ct_tensor *c = ct_assert_nonnull(ct_cast(h, dt)), *d = ct_assert_nonnull(ct_to(c, lp_dev, 0));
  ct_tensor_free(h), ct_tensor_free(c);
  return d;
}

/* Sums of ones: a float32 accumulator gives n rounded once; a half one would stall where the ulp
 * passes 1 (2048 in float16, 256 in bfloat16). A mean of 100000 ones is 1, though the sum is past
 * float16's largest value (65504). */
static void lp_test_sum_accumulates_f32(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = lp_dtypes[k];
    int64_t n = 10000, sh2[2] = {3, 10000}, big = 100000;
    ct_tensor *x = ct_assert_nonnull(ct_ones(1, &n, dt, lp_dev)), *s = ct_assert_nonnull(ct_sum(x, 0, NULL, 0));
    assert_int_equal(ct_tensor_dtype(s), dt);
    assert_true(ct_item(s) == lp_round(dt, 10000.0));
    ct_tensor *x2 = ct_assert_nonnull(ct_ones(2, sh2, dt, lp_dev)), *s2 = ct_assert_nonnull(ct_sum(x2, 1, (int[]){1}, 0));
    double *v2 = ct_test_values(s2);
    for (int i = 0; i < 3; i++) assert_true(v2[i] == lp_round(dt, 10000.0));
    ct_tensor *xb = ct_assert_nonnull(ct_ones(1, &big, dt, lp_dev)), *m = ct_assert_nonnull(ct_mean(xb, 0, NULL, 0));
    assert_int_equal(ct_tensor_dtype(m), dt);
    assert_true(ct_item(m) == 1.0);
    free(v2);
    ct_tensor_free(x), ct_tensor_free(s), ct_tensor_free(x2), ct_tensor_free(s2), ct_tensor_free(xb), ct_tensor_free(m);
  }
}

/* Logits of +-20 in float16: exp(20) = 4.9e8 is inf in float16 (checked, so the premise holds),
 * yet softmax, log_softmax and cross_entropy come out finite and within 4u of float64 (each
 * rounds once), and cross_entropy's gradient comes back in the logits' dtype within 16u. */
static void lp_test_softmax_no_half_overflow(void **state) {
  (void)state;
  const double v[8] = {20, 19.5, 0, -20, -20, 20, 20, 3};
  const int64_t sh[2] = {2, 4}, tsh = 2;
  const int64_t tv[2] = {3, 0}; /* the least likely class of each row: a loss of about 40 */
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = lp_dtypes[k];
    double u = lp_u(dt);
    ct_tensor *xh = lp_tensor(v, 2, sh, dt), *x64 = lp_tensor(v, 2, sh, CT_F64);
    if (dt == CT_F16) {
      ct_tensor *e = ct_assert_nonnull(ct_exp(xh));
      double *ev = ct_test_values(e);
      assert_true(isinf(ev[0]));
      free(ev), ct_tensor_free(e);
    }
    for (int lg = 0; lg < 2; lg++) {
      ct_tensor *yh = ct_assert_nonnull(lg ? ct_log_softmax(xh, 1) : ct_softmax(xh, 1));
      ct_tensor *y64 = ct_assert_nonnull(lg ? ct_log_softmax(x64, 1) : ct_softmax(x64, 1));
      assert_int_equal(ct_tensor_dtype(yh), dt);
      ct_assert_close(yh, y64, 4 * u, 4 * u);
      ct_tensor_free(yh), ct_tensor_free(y64);
    }
    ct_tensor *th = ct_assert_nonnull(ct_from_host(tv, 1, &tsh, CT_I64, CT_DEVICE_CPU));
    ct_tensor *t = ct_assert_nonnull(ct_to(th, lp_dev, 0));
    ct_assert_ok(ct_requires_grad_(xh, 1)), ct_assert_ok(ct_requires_grad_(x64, 1));
    ct_tensor *lh = ct_assert_nonnull(ct_cross_entropy(xh, t, CT_REDUCTION_MEAN, 0));
    ct_tensor *l64 = ct_assert_nonnull(ct_cross_entropy(x64, t, CT_REDUCTION_MEAN, 0));
    assert_int_equal(ct_tensor_dtype(lh), dt);
    assert_true(isfinite(ct_item(lh)) && ct_item(l64) > 39);
    ct_assert_close(lh, l64, 0, 4 * u);
    ct_assert_ok(ct_backward(lh)), ct_assert_ok(ct_backward(l64));
    assert_int_equal(ct_tensor_dtype(ct_grad(xh)), dt);
    ct_assert_close(ct_grad(xh), ct_grad(x64), 16 * u, 16 * u);
    ct_tensor_free(th), ct_tensor_free(t), ct_tensor_free(lh), ct_tensor_free(l64), ct_tensor_free(xh), ct_tensor_free(x64);
  }
}

/* Batch norm of a half input with float32 running statistics (a module's buffers): the output
 * keeps the input's dtype, the statistics stay float32 and equal those of the same values in
 * float32 (computed in float32, not from rounded half ones); the input is offset by 100 so that a
 * mean and variance from half arithmetic (ulp 2^-4 at 100 in float16, 2^-1 in bfloat16) would be
 * visibly off. */
static void lp_test_batch_norm_f32_stats(void **state) {
  (void)state;
  const int64_t sh[4] = {4, 3, 2, 2}, C = 3;
  double v[48];
  /* multiples of 0.5 in [98, 103]: exact in float16 and in bfloat16 (whose ulp there is 0.5) */
  for (int i = 0; i < 48; i++) v[i] = 98 + 0.5 * ((i * 7) % 11);
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = lp_dtypes[k];
    double u = lp_u(dt);
    ct_tensor *xh = lp_tensor(v, 4, sh, dt), *x32 = lp_tensor(v, 4, sh, CT_F32);
    ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, lp_dev)), *rv = ct_assert_nonnull(ct_ones(1, &C, CT_F32, lp_dev));
    ct_tensor *rm32 = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, lp_dev)), *rv32 = ct_assert_nonnull(ct_ones(1, &C, CT_F32, lp_dev));
    ct_tensor *yh = ct_assert_nonnull(ct_batch_norm(xh, rm, rv, NULL, NULL, 1, 0.1, 1e-5));
    ct_tensor *y32 = ct_assert_nonnull(ct_batch_norm(x32, rm32, rv32, NULL, NULL, 1, 0.1, 1e-5));
    assert_int_equal(ct_tensor_dtype(yh), dt);
    assert_int_equal(ct_tensor_dtype(rm), CT_F32), assert_int_equal(ct_tensor_dtype(rv), CT_F32);
    ct_assert_close(rm, rm32, 0, 1e-6);
    ct_assert_close(rv, rv32, 0, 1e-6);
    ct_assert_close(yh, y32, u, u); /* normalized values of order 1, rounded once */
    ct_tensor_free(xh), ct_tensor_free(x32), ct_tensor_free(rm), ct_tensor_free(rv), ct_tensor_free(rm32), ct_tensor_free(rv32);
    ct_tensor_free(yh), ct_tensor_free(y32);
  }
}

/* Layer norm of a half input, as batch norm's: normalized in float32 and rounded once, the output
 * in the input's dtype (with float32 weight and bias, a module's parameters, too); the input is
 * offset by 100 so that statistics from half arithmetic would be visibly off. Against the same
 * values in float32, within u. */
static void lp_test_layer_norm_f32_stats(void **state) {
  (void)state;
  const int64_t sh[3] = {2, 3, 8}, psh[2] = {3, 8};
  double v[48], wv[24], bv[24];
  for (int i = 0; i < 48; i++) v[i] = 98 + 0.5 * ((i * 7) % 11); /* exact in both halves */
  for (int i = 0; i < 24; i++) wv[i] = 0.5 + 0.125 * (i % 9), bv[i] = 0.125 * (i % 7) - 0.5;
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = lp_dtypes[k];
    double u = lp_u(dt);
    ct_tensor *xh = lp_tensor(v, 3, sh, dt), *x32 = lp_tensor(v, 3, sh, CT_F32);
    ct_tensor *w = lp_tensor(wv, 2, psh, CT_F32), *b = lp_tensor(bv, 2, psh, CT_F32);
    ct_tensor *yh = ct_assert_nonnull(ct_layer_norm(xh, 1, NULL, NULL, 1e-5));
    ct_tensor *y32 = ct_assert_nonnull(ct_layer_norm(x32, 1, NULL, NULL, 1e-5));
    assert_int_equal(ct_tensor_dtype(yh), dt);
    ct_assert_close(yh, y32, u, u); /* normalized values of order 1, rounded once */
    ct_tensor *ywh = ct_assert_nonnull(ct_layer_norm(xh, 2, w, b, 1e-5));
    ct_tensor *yw32 = ct_assert_nonnull(ct_layer_norm(x32, 2, w, b, 1e-5));
    assert_int_equal(ct_tensor_dtype(ywh), dt);
    ct_assert_close(ywh, yw32, u, u);
    ct_tensor_free(xh), ct_tensor_free(x32), ct_tensor_free(w), ct_tensor_free(b);
    ct_tensor_free(yh), ct_tensor_free(y32), ct_tensor_free(ywh), ct_tensor_free(yw32);
  }
}

/* silu and gelu_tanh far out in the tails, in a half dtype: exp(-x) at x = -20 and x^3 at 100
 * overflow float16 (and x^3 at 1e4 would overflow it many times over), so a kernel computing in the
 * half dtype would give inf or NaN. Values and gradients (with g = 1) must be finite and within u
 * (relative, and the subnormal spacing absolute) of the float64 op on the same values. */
static void lp_test_activation_tails(void **state) {
  (void)state;
  const double v[8] = {-10000, -100, -20, -3, 3, 20, 100, 10000};
  const int64_t n = 8;
  ct_tensor *(*const fns[2])(ct_tensor *) = {ct_silu, ct_gelu_tanh};
  for (int k = 0; k < 2; k++)
    for (int f = 0; f < 2; f++) {
      ct_dtype dt = lp_dtypes[k];
      double u = lp_u(dt);
      ct_tensor *xh = lp_tensor(v, 1, &n, dt), *x64 = lp_tensor(v, 1, &n, CT_F64);
      ct_assert_ok(ct_requires_grad_(xh, 1)), ct_assert_ok(ct_requires_grad_(x64, 1));
      ct_tensor *yh = ct_assert_nonnull(fns[f](xh)), *y64 = ct_assert_nonnull(fns[f](x64));
      assert_int_equal(ct_tensor_dtype(yh), dt);
      double *yv = ct_test_values(yh);
      for (int i = 0; i < 8; i++) assert_true(isfinite(yv[i]));
      assert_true(yv[7] == lp_round(dt, 10000) && yv[0] == 0); /* x and 0 to any precision */
      ct_assert_close(yh, y64, 1e-7, u);
      ct_tensor *sh = ct_assert_nonnull(ct_sum(yh, 0, NULL, 0)), *s64 = ct_assert_nonnull(ct_sum(y64, 0, NULL, 0));
      ct_assert_ok(ct_backward(sh)), ct_assert_ok(ct_backward(s64));
      assert_int_equal(ct_tensor_dtype(ct_grad(xh)), dt);
      double *gv = ct_test_values(ct_grad(xh));
      for (int i = 0; i < 8; i++) assert_true(isfinite(gv[i]));
      ct_assert_close(ct_grad(xh), ct_grad(x64), 1e-7, u);
      free(yv), free(gv);
      ct_tensor_free(sh), ct_tensor_free(s64), ct_tensor_free(yh), ct_tensor_free(y64), ct_tensor_free(xh), ct_tensor_free(x64);
    }
}

#define LP_TESTS                                                                                  \
  cmocka_unit_test(lp_test_sum_accumulates_f32), cmocka_unit_test(lp_test_softmax_no_half_overflow), \
      cmocka_unit_test(lp_test_batch_norm_f32_stats), cmocka_unit_test(lp_test_layer_norm_f32_stats), \
      cmocka_unit_test(lp_test_activation_tails)

#endif
