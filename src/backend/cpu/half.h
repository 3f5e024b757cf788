/* src/backend/cpu/half.h: float16 and bfloat16 loads and stores the CPU kernels inline into their
 * loops (ct__load / ct__store are a call and a switch per element: ten to thirty times slower than
 * the float32 path on casts and elementwise ops). Bit for bit the conversions of src/core/dtype.c
 * (ct_f16_to_f32, ct_f32_to_f16, ct_bf16_to_f32, ct_f32_to_bf16): round to nearest even,
 * overflow to inf, NaN kept quiet; test_ops_cpu checks every float16 and a sweep of floats. */
#ifndef CUTTLE_CPU_HALF_H
#define CUTTLE_CPU_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/internal.h"

/* The operands' common half dtype as a small tag: CT_LP_F16, CT_LP_BF16, or 0 (none). */
enum { CT_LP_NONE = 0, CT_LP_F16 = 1, CT_LP_BF16 = 2 };
static inline int ct__lp_tag(ct_dtype dt) { return dt == CT_F16 ? CT_LP_F16 : dt == CT_BF16 ? CT_LP_BF16 : CT_LP_NONE; }

static inline float ct__h_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t ct__h_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float ct__h_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)mant / 16777216.0f; /* mant * 2^-24 */
    return sign ? -v : v;
  }
  if (exp == 31) return ct__h_bits_f32(sign | 0x7f800000u | (mant << 13));
  return ct__h_bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

static inline uint16_t ct__h_f32_to_f16(float f) {
  uint32_t u = ct__h_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0)); /* inf/nan */
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: overflow to inf */
  if (absu < 0x38800000u) { /* subnormal half or zero: scale by 2^24 and round */
    if (absu == 0) return (uint16_t)sign; /* relu's zeros: skip lrintf */
    float a = ct__h_bits_f32(absu) * 16777216.0f;
    return (uint16_t)(sign | (uint32_t)lrintf(a));
  }
  uint32_t mant = absu & 0x7fffffu;
  uint32_t exp = (absu >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

static inline float ct__h_bf16_to_f32(uint16_t h) { return ct__h_bits_f32((uint32_t)h << 16); }

static inline uint16_t ct__h_f32_to_bf16(float f) {
  uint32_t u = ct__h_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The element at p of half dtype tag lp, and v stored there (rounded through float32, as
 * ct__store does). */
static inline double ct__lp_load(const char *p, int lp) {
  uint16_t h;
  memcpy(&h, p, 2);
  return lp == CT_LP_F16 ? ct__h_f16_to_f32(h) : ct__h_bf16_to_f32(h);
}
static inline void ct__lp_store(char *p, int lp, double v) {
  uint16_t h = lp == CT_LP_F16 ? ct__h_f32_to_f16((float)v) : ct__h_f32_to_bf16((float)v);
  memcpy(p, &h, 2);
}

#endif
