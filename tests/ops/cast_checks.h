/* tests/ops/cast_checks.h: conversions to the integer dtypes on one device (cast_dev), the rule
 * every backend follows (src/core/dtype.c's ct__store, the CUDA ct_down<int>, the OpenCL st()):
 * truncate toward zero, saturate a value outside the dtype's range at its bound, NaN -> 0. So
 * 300.0f -> uint8 255, -1.0f -> uint8 0, 1e10f -> int32 2147483647, NaN -> int32 0. A wider
 * integer saturates into a narrower one the same way. Used by test_ops_cpu.c and
 * tests/opencl/test_opencl_ops.c (a CUDA test can include it too). Needs testutil.h (cmocka)
 * included before it. */
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

/* int64 to int32 and uint8, int32 to uint8: saturated too. */
static void cast_test_int_to_narrower_int_saturates(void **state) {
  (void)state;
  enum { N = 5 };
  const double v[N] = {3e9, -3e9, 300, -1, 7};
  const int64_t want_i32[N] = {INT32_MAX, INT32_MIN, 300, -1, 7}, want_u8[N] = {255, 0, 255, 0, 7};
  int64_t got[N];
  cast_on_dev(v, N, CT_I64, CT_I32, got);
  for (int i = 0; i < N; i++) assert_int_equal(got[i], want_i32[i]);
  cast_on_dev(v, N, CT_I64, CT_U8, got);
  for (int i = 0; i < N; i++) assert_int_equal(got[i], want_u8[i]);
  const double w[3] = {300, -1, 7};
  cast_on_dev(w, 3, CT_I32, CT_U8, got);
  for (int i = 0; i < 3; i++) assert_int_equal(got[i], want_u8[2 + i]);
}

#define CAST_TESTS                                                                      \
  cmocka_unit_test(cast_test_float_to_int_saturates), cmocka_unit_test(cast_test_half_to_int_saturates), \
      cmocka_unit_test(cast_test_int_to_narrower_int_saturates)

#endif
