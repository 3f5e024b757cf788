/* tests/ops/cast_checks.h: conversions to the integer dtypes on one device (cast_dev), the rule
 * every backend follows (src/core/dtype.c; the CUDA ct_down<int>; the OpenCL st() and st_int()):
 *  - from a floating value: truncate toward zero, saturate a value outside the dtype's range at
 *    its bound, NaN -> 0. So 300.0f -> uint8 255, -1.0f -> uint8 0, 1e10f -> int32 2147483647,
 *    NaN -> int32 0 (PyTorch leaves these undefined; cuttle defines them);
 *  - from an integer, and integer arithmetic: wrap modulo 2^bits, as PyTorch. So int32 300 ->
 *    uint8 44, int32 -1 -> uint8 255, int64 2^40 + 5 -> int32 5, uint8 200 + 100 = 44.
 * Used by test_ops_cpu.c and tests/opencl/test_opencl_ops.c (a CUDA test can include it too).
 * Needs testutil.h (cmocka) included before it. */
#ifndef CUTTLE_TESTS_CAST_CHECKS_H
#define CUTTLE_TESTS_CAST_CHECKS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "testutil.h"

static ct_device cast_dev;

/* src (n values of dtype sdt, given as doubles) cast to ddt on cast_dev, back on the CPU as int64. */
static void cast_on_dev(const double *src, int64_t n, ct_dtype sdt, ct_dtype ddt, int64_t *out) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(src, 1, &n, CT_F64, CT_DEVICE_CPU));
  ct_tensor *s = ct_assert_nonnull(ct_cast(h, sdt)), *d = ct_assert_nonnull(ct_to(s, cast_dev, 0));
  ct_tensor *c = ct_assert_nonnull(ct_cast(d, ddt)), *back = ct_assert_nonnull(ct_to(c, CT_DEVICE_CPU, 0));
  assert_int_equal(ct_tensor_dtype(back), ddt);
  const void *p = ct_tensor_data(back);
  for (int64_t i = 0; i < n; i++)
    out[i] = ddt == CT_U8 ? (int64_t)((const uint8_t *)p)[i]
             : ddt == CT_I32 ? (int64_t)((const int32_t *)p)[i]
                             : ((const int64_t *)p)[i];
  ct_tensor_free(back), ct_tensor_free(c), ct_tensor_free(d), ct_tensor_free(s), ct_tensor_free(h);
}

/* float32 and float64 to uint8, int32 and int64: out of range saturates, NaN gives 0, the rest
 * truncates toward zero. */
static void cast_test_float_to_int_saturates(void **state) {
  (void)state;
  enum { N = 13 };
  const double v[N] = {300.0, -1.0, 255.9, -0.5, 1e10, -1e10, NAN, INFINITY, -INFINITY, 2.7, -2.7, 1e19, -1e19};
  const int64_t want_u8[N] = {255, 0, 255, 0, 255, 0, 0, 255, 0, 2, 0, 255, 0};
  const int64_t want_i32[N] = {300, -1, 255, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2, -2, INT32_MAX, INT32_MIN};
  const int64_t want_i64[N] = {300, -1, 255, 0, 10000000000LL, -10000000000LL, 0, INT64_MAX, INT64_MIN, 2, -2,
                               INT64_MAX, INT64_MIN};
  const ct_dtype src[2] = {CT_F32, CT_F64}, dst[3] = {CT_U8, CT_I32, CT_I64};
  const int64_t *want[3] = {want_u8, want_i32, want_i64};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++) {
      int64_t got[N];
      cast_on_dev(v, N, src[a], dst[b], got);
      for (int i = 0; i < N; i++) {
        if (got[i] != want[b][i])
          fail_msg("%s %g -> %s gave %lld, want %lld", ct_dtype_name(src[a]), v[i], ct_dtype_name(dst[b]),
                   (long long)got[i], (long long)want[b][i]);
      }
    }
}

/* float16 and bfloat16 go through float32: the same rule (1e10 is inf in float16). */
static void cast_test_half_to_int_saturates(void **state) {
  (void)state;
  enum { N = 6 };
  const double v[N] = {300.0, -1.0, 1e10, -1e10, NAN, 2.5};
  const int64_t want_u8[N] = {255, 0, 255, 0, 0, 2};
  const int64_t want_i32[N] = {300, -1, INT32_MAX, INT32_MIN, 0, 2};
  const ct_dtype src[2] = {CT_F16, CT_BF16};
  for (int a = 0; a < 2; a++) {
    int64_t got[N];
    cast_on_dev(v, N, src[a], CT_U8, got);
    for (int i = 0; i < N; i++)
      if (got[i] != want_u8[i])
        fail_msg("%s %g -> uint8 gave %lld, want %lld", ct_dtype_name(src[a]), v[i], (long long)got[i], (long long)want_u8[i]);
    cast_on_dev(v, N, src[a], CT_I32, got);
    for (int i = 0; i < N; i++)
      if (got[i] != want_i32[i])
        fail_msg("%s %g -> int32 gave %lld, want %lld", ct_dtype_name(src[a]), v[i], (long long)got[i], (long long)want_i32[i]);
  }
}

/* n values (doubles, exact in float64) as a tensor of dtype dt on cast_dev */
static ct_tensor *cast_dev_tensor(const double *v, int64_t n, ct_dtype dt) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 1, &n, CT_F64, CT_DEVICE_CPU));
  ct_tensor *c = ct_assert_nonnull(ct_cast(h, dt)), *d = ct_assert_nonnull(ct_to(c, cast_dev, 0));
  ct_tensor_free(c), ct_tensor_free(h);
  return d;
}

/* the n elements of t (uint8, int32, int64 or bool, on any device) as int64, and t freed */
static void cast_read_free(ct_tensor *t, int64_t n, int64_t *out) {
  ct_tensor *back = ct_assert_nonnull(ct_to(t, CT_DEVICE_CPU, 0));
  assert_int_equal(ct_tensor_numel(back), n);
  const void *p = ct_tensor_data(back);
  ct_dtype dt = ct_tensor_dtype(back);
  for (int64_t i = 0; i < n; i++)
    out[i] = dt == CT_U8 || dt == CT_BOOL ? (int64_t)((const uint8_t *)p)[i]
             : dt == CT_I32              ? (int64_t)((const int32_t *)p)[i]
                                         : ((const int64_t *)p)[i];
  ct_tensor_free(back), ct_tensor_free(t);
}

static void cast_expect(const char *what, const int64_t *got, const int64_t *want, int n) {
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("%s [%d]: gave %lld, want %lld", what, i, (long long)got[i], (long long)want[i]);
}

/* integer to a narrower integer wraps modulo 2^bits, as PyTorch (torch.tensor([300],
 * dtype=torch.int32).to(torch.uint8) == 44): int64 -> int32 and uint8, int32 -> uint8, and the
 * widening ones stay exact */
static void cast_test_int_to_narrower_int_wraps(void **state) {
  (void)state;
  enum { N = 9 };
  const double t40 = 1099511627776.0; /* 2^40 */
  const double v[N] = {3000000300.0, -3000000300.0, 300, -1, 7, t40 + 5, -t40 - 3, 2147483648.0, -2147483649.0};
  const int64_t want_i32[N] = {-1294966996, 1294966996, 300, -1, 7, 5, -3, INT32_MIN, INT32_MAX};
  const int64_t want_u8[N] = {44, 212, 44, 255, 7, 5, 253, 0, 255};
  int64_t got[N];
  cast_on_dev(v, N, CT_I64, CT_I32, got);
  cast_expect("int64 -> int32", got, want_i32, N);
  cast_on_dev(v, N, CT_I64, CT_U8, got);
  cast_expect("int64 -> uint8", got, want_u8, N);
  const double w[5] = {300, -1, 7, 256, -256};
  const int64_t want_w[5] = {44, 255, 7, 0, 0};
  cast_on_dev(w, 5, CT_I32, CT_U8, got);
  cast_expect("int32 -> uint8", got, want_w, 5);
  /* widening keeps the value, uint8 reads as unsigned */
  const double u[3] = {255, 0, 128};
  const int64_t want_u[3] = {255, 0, 128};
  cast_on_dev(u, 3, CT_U8, CT_I32, got);
  cast_expect("uint8 -> int32", got, want_u, 3);
  const double x[3] = {-t40 - 3, -1, INT32_MIN};
  const int64_t want_x[3] = {-1099511627779LL, -1, INT32_MIN};
  cast_on_dev(x, 3, CT_I64, CT_I64, got);
  cast_expect("int64 -> int64", got, want_x, 3);
  const double y[2] = {-1, INT32_MIN};
  cast_on_dev(y, 2, CT_I32, CT_I64, got);
  cast_expect("int32 -> int64", got, want_x + 1, 2);
}

/* integer arithmetic wraps in its dtype as PyTorch's: uint8 200 + 100 = 44, 10 - 20 = 246,
 * 16 * 17 = 16; int32 INT32_MAX + 1 = INT32_MIN, -INT32_MIN = INT32_MIN; an integral scalar goes
 * into uint8 modulo 256 (uint8 1 + 300 = 45); int64 stays exact beyond 2^53 */
static void cast_test_int_arithmetic_wraps(void **state) {
  (void)state;
  int64_t got[3];
  ct_tensor *a = cast_dev_tensor((double[]){200, 10, 16}, 3, CT_U8), *b = cast_dev_tensor((double[]){100, 20, 17}, 3, CT_U8);
  ct_tensor *sum = ct_assert_nonnull(ct_add(a, b));
  assert_int_equal(ct_tensor_dtype(sum), CT_U8);
  cast_read_free(sum, 3, got);
  assert_int_equal(got[0], 44);
  cast_read_free(ct_assert_nonnull(ct_sub(a, b)), 3, got);
  cast_expect("uint8 a - b", got, (int64_t[]){100, 246, 255}, 3);
  cast_read_free(ct_assert_nonnull(ct_mul(a, b)), 3, got);
  cast_expect("uint8 a * b", got, (int64_t[]){(200 * 100) % 256, 200, 16}, 3);
  cast_read_free(ct_assert_nonnull(ct_add_scalar(a, 300)), 3, got);
  cast_expect("uint8 a + 300", got, (int64_t[]){244, 54, 60}, 3);
  cast_read_free(ct_assert_nonnull(ct_neg(a)), 3, got);
  cast_expect("uint8 -a", got, (int64_t[]){56, 246, 240}, 3);
  ct_tensor_free(a), ct_tensor_free(b);

  ct_tensor *m = cast_dev_tensor((double[]){INT32_MAX, INT32_MIN, -5}, 3, CT_I32);
  cast_read_free(ct_assert_nonnull(ct_add_scalar(m, 1)), 3, got);
  cast_expect("int32 x + 1", got, (int64_t[]){INT32_MIN, INT32_MIN + 1, -4}, 3);
  cast_read_free(ct_assert_nonnull(ct_neg(m)), 3, got);
  cast_expect("int32 -x", got, (int64_t[]){-INT32_MAX, INT32_MIN, 5}, 3);
  cast_read_free(ct_assert_nonnull(ct_abs(m)), 3, got);
  cast_expect("int32 abs(x)", got, (int64_t[]){INT32_MAX, INT32_MIN, 5}, 3);
  cast_read_free(ct_assert_nonnull(ct_mul(m, m)), 3, got);
  cast_expect("int32 x * x", got, (int64_t[]){1, 0, 25}, 3);
  cast_read_free(ct_assert_nonnull(ct_pow_scalar(m, 2)), 3, got);
  cast_expect("int32 x ** 2", got, (int64_t[]){1, 0, 25}, 3);
  ct_tensor_free(m);

  const double t53 = 9007199254740992.0; /* 2^53: t53 + 1 is no double */
  ct_tensor *l = cast_dev_tensor((double[]){t53, 9223372036854775807.0, -t53}, 3, CT_I64);
  ct_tensor *l1 = ct_assert_nonnull(ct_add_scalar(l, 1));
  ct_tensor *eq = ct_assert_nonnull(ct_eq(l1, l));
  cast_read_free(eq, 3, got);
  cast_expect("int64 x + 1 == x", got, (int64_t[]){0, 0, 0}, 3);
  cast_read_free(l1, 3, got);
  cast_expect("int64 x + 1", got, (int64_t[]){9007199254740993LL, INT64_MIN, -9007199254740991LL}, 3);
  ct_tensor_free(l);
}

#define CAST_TESTS                                                                      \
  cmocka_unit_test(cast_test_float_to_int_saturates), cmocka_unit_test(cast_test_half_to_int_saturates), \
      cmocka_unit_test(cast_test_int_to_narrower_int_wraps), cmocka_unit_test(cast_test_int_arithmetic_wraps)

#endif
