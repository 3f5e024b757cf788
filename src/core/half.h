/* src/core/half.h: IEEE binary16 (float16) and bfloat16 conversions to and from float32, inline:
 * the public ct_f16_to_f32, ct_f32_to_f16, ct_bf16_to_f32 and ct_f32_to_bf16 (dtype.c) and the
 * CPU kernels' loops (backend/cpu/half.h, where a call per element was ten to thirty times slower
 * than the float32 path) share this one definition. Round to nearest even, overflow to inf, NaN
 * made quiet (float16 -> float32 too: a Debug build's float -> double round trip in the cast loop
 * quieted a signaling one the public conversion kept), subnormals exact (IEEE 754-2008; bfloat16
 * as in PyTorch's c10::BFloat16); test_ops_cpu checks every float16 and a sweep of floats against
 * the rounding rule. */
#ifndef CUTTLE_CORE_HALF_H
#define CUTTLE_CORE_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ct__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t ct__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float ct__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)mant / 16777216.0f; /* mant * 2^-24 */
    return sign ? -v : v;
  }
  /* inf, or a NaN made quiet (its payload kept), as IEEE 754's conversion and PyTorch's
   * c10::detail::fp16_ieee_to_fp32_value give it: a signaling NaN kept signaling would turn quiet
   * at the first float arithmetic, in one code path and not another */
  if (exp == 31) return ct__bits_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  return ct__bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

static inline uint16_t ct__f32_to_f16(float f) {
  uint32_t u = ct__f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0)); /* inf/nan */
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: overflow to inf */
  if (absu < 0x38800000u) { /* subnormal half or zero: scale by 2^24 and round */
    if (absu == 0) return (uint16_t)sign; /* relu's zeros: skip lrintf */
    float a = ct__bits_f32(absu) * 16777216.0f;
    return (uint16_t)(sign | (uint32_t)lrintf(a));
  }
  uint32_t mant = absu & 0x7fffffu;
  uint32_t exp = (absu >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

static inline float ct__bf16_to_f32(uint16_t h) { return ct__bits_f32((uint32_t)h << 16); }

/* A select rather than an early return for NaN, so that the CPU kernels' loops vectorize. */
static inline uint16_t ct__f32_to_bf16(float f) {
  uint32_t u = ct__f32_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

#endif
