/* src/core/dtype.c: dtype names, sizes, promotion, half-precision conversions, and the generic
 * element load/store the reference kernels use. */
#include <math.h>
#include <string.h>
#include "core/half.h"
#include "core/internal.h"

const char *ct_dtype_name(ct_dtype dt) {
  switch (dt) {
#define CT__DT_NAME(e, name, size, fl) \
  case e:                              \
    return name;
    CT_DTYPE_TABLE(CT__DT_NAME)
#undef CT__DT_NAME
    default:
      return "?";
  }
}

size_t ct_dtype_size(ct_dtype dt) {
  switch (dt) {
#define CT__DT_SIZE(e, name, size, fl) \
  case e:                              \
    return size;
    CT_DTYPE_TABLE(CT__DT_SIZE)
#undef CT__DT_SIZE
    default:
      return 0;
  }
}

int ct_dtype_is_floating(ct_dtype dt) { return dt == CT_F32 || dt == CT_F64 || dt == CT_F16 || dt == CT_BF16; }

ct_status ct_dtype_parse(const char *s, ct_dtype *out) {
  static const struct {
    const char *name;
    ct_dtype dt;
  } aliases[] = {{"f32", CT_F32}, {"f64", CT_F64}, {"f16", CT_F16},   {"bf16", CT_BF16}, {"i32", CT_I32},
                 {"i64", CT_I64}, {"u8", CT_U8},   {"half", CT_F16}, {"float", CT_F32}, {"double", CT_F64}};
  if (!s || !out) return ct__error(CT_EINVAL, "ct_dtype_parse: NULL argument");
  for (int d = 0; d < CT_DTYPE_COUNT; d++)
    if (strcmp(s, ct_dtype_name((ct_dtype)d)) == 0) return *out = (ct_dtype)d, CT_OK;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(s, aliases[i].name) == 0) return *out = aliases[i].dt, CT_OK;
  return ct__error(CT_EINVAL, "ct_dtype_parse: unknown dtype \"%s\": use float32, float64, float16, bfloat16, int32, int64, uint8 or bool",
                   s);
}

/* Rank in PyTorch's lattice for tensors of one category: bool < u8 < i32 < i64 < f16,bf16 < f32 < f64. */
static int rank(ct_dtype dt) {
  switch (dt) {
    case CT_BOOL: return 0;
    case CT_U8: return 1;
    case CT_I32: return 2;
    case CT_I64: return 3;
    case CT_F16: case CT_BF16: return 4;
    case CT_F32: return 5;
    case CT_F64: return 6;
    default: return -1;
  }
}

ct_dtype ct_promote_types(ct_dtype a, ct_dtype b) {
  if ((unsigned)a >= CT_DTYPE_COUNT || (unsigned)b >= CT_DTYPE_COUNT)
    return ct__error(CT_EDTYPE, "ct_promote_types: invalid dtype %d (use a ct_dtype value such as CT_F32)",
                     (unsigned)a >= CT_DTYPE_COUNT ? (int)a : (int)b),
           CT_DTYPE_COUNT;
  if (a == b) return a;
  if ((a == CT_F16 && b == CT_BF16) || (a == CT_BF16 && b == CT_F16)) return CT_F32;
  return rank(a) >= rank(b) ? a : b;
}

/* ---- IEEE binary16 and bfloat16 (core/half.h) */
uint16_t ct_f32_to_bf16(float f) { return ct__f32_to_bf16(f); }
float ct_bf16_to_f32(uint16_t h) { return ct__bf16_to_f32(h); }
uint16_t ct_f32_to_f16(float f) { return ct__f32_to_f16(f); }
float ct_f16_to_f32(uint16_t h) { return ct__f16_to_f32(h); }

double ct__load(const void *p, ct_dtype dt) {
  switch (dt) {
    case CT_F32: return *(const float *)p;
    case CT_F64: return *(const double *)p;
    case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
    case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
    case CT_I32: return *(const int32_t *)p;
    case CT_I64: return (double)*(const int64_t *)p;
    case CT_U8: return *(const uint8_t *)p;
    case CT_BOOL: return *(const uint8_t *)p != 0;
    default: return NAN;
  }
}

/* Conversions to the integer dtypes (uint8, int32, int64), one rule on every backend (the CUDA
 * ct_down<int> in src/backend/cuda/common.cuh and the OpenCL st() / st_int() in
 * kernels/a_common.cl do the same):
 *
 *  - from an integer (int32, int64, uint8, bool), including the result of integer arithmetic
 *    (uint8 200 + 100, int32 overflow): wrap modulo 2^bits, two's complement, as C's unsigned
 *    conversions and PyTorch do. int32 300 -> uint8 44, int32 -1 -> uint8 255, int64 2^40 + 5 ->
 *    int32 5, uint8 200 + 100 = 44. Done in unsigned arithmetic (ct__wrap_i64, wrap_i32), so no
 *    signed overflow or implementation-defined conversion is involved. ct__store_int.
 *  - from a floating value (float16, bfloat16, float32, float64; ct__store's double): truncate
 *    toward zero, saturate a value outside the dtype's range at its bound, NaN -> 0. 300.0f ->
 *    uint8 255, -1.0f -> uint8 0, 1e10f -> int32 2147483647. C leaves an out-of-range conversion
 *    undefined and so does PyTorch (it casts as C does, so its answer depends on the compiler, the
 *    vector path and the device; -1.0 -> uint8 often gives 255 there). cuttle gives a defined
 *    answer, the one CUDA's cvt.rzi.sat gives: it differs from PyTorch only where PyTorch's answer
 *    is undefined. In range (|v| below the bound) both truncate toward zero and agree. */
static int64_t to_i64_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX; /* 2^63 */
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
static int32_t to_i32_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}
static uint8_t to_u8_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 255.0) return 255;
  if (v <= 0.0) return 0;
  return (uint8_t)v;
}
/* the low 32 bits of u as a two's complement int32 */
static int32_t wrap_i32(uint64_t u) {
  uint32_t w = (uint32_t)u;
  return w <= (uint32_t)INT32_MAX ? (int32_t)w : (int32_t)(w - 0x80000000u) + INT32_MIN;
}

int64_t ct__load_int(const void *p, ct_dtype dt) {
  switch (dt) {
    case CT_I32: return *(const int32_t *)p;
    case CT_I64: return *(const int64_t *)p;
    case CT_U8: return *(const uint8_t *)p;
    case CT_BOOL: return *(const uint8_t *)p != 0;
    default: return to_i64_sat(ct__load(p, dt)); /* a floating dtype: callers check ct__dtype_is_int */
  }
}

void ct__store_int(void *p, ct_dtype dt, int64_t v) {
  switch (dt) {
    case CT_I32: *(int32_t *)p = wrap_i32((uint64_t)v); break;
    case CT_I64: *(int64_t *)p = v; break;
    case CT_U8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    case CT_BOOL: *(uint8_t *)p = v != 0; break;
    default: ct__store(p, dt, (double)v); break;
  }
}

void ct__store(void *p, ct_dtype dt, double v) {
  switch (dt) {
    case CT_F32: *(float *)p = (float)v; break;
    case CT_F64: *(double *)p = v; break;
    case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
    case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
    case CT_I32: *(int32_t *)p = to_i32_sat(v); break;
    case CT_I64: *(int64_t *)p = to_i64_sat(v); break;
    case CT_U8: *(uint8_t *)p = to_u8_sat(v); break;
    case CT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
  }
}
