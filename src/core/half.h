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

/* Both float16 conversions pick among their cases with selects, not branches, so that the CPU
 * kernels' loops over them vectorize (a branch per case kept them scalar). */
static inline float ct__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t normal = ((exp + 112u) << 23) | (mant << 13); /* exponent rebiased: - 15 + 127 */
  /* inf, or a NaN made quiet (its payload kept), as IEEE 754's conversion and PyTorch's
   * c10::detail::fp16_ieee_to_fp32_value give it: a signaling NaN kept signaling would turn quiet
   * at the first float arithmetic, in one code path and not another */
  uint32_t special = 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
  uint32_t subnormal = ct__f32_bits((float)mant * 5.9604644775390625e-8f); /* mant * 2^-24, exact */
  return ct__bits_f32(sign | (exp == 0 ? subnormal : exp == 31 ? special : normal));
}

static inline uint16_t ct__f32_to_f16(float f) {
  uint32_t u = ct__f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  /* a normal half: the exponent rebiased, the mantissa's 13 low bits rounded to nearest even (a
   * carry into the exponent is right, up to 65504) */
  uint32_t mant = absu & 0x7fffffu;
  uint32_t normal = (((absu >> 23) - 112u) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  normal += (rest > 0x1000u) | ((rest == 0x1000u) & normal);
  /* a subnormal half or zero: |f| * 2^24 rounded to an integer by adding 2^23, whose ulp is 1 (the
   * product is exact, so a fused multiply-add rounds the same); 1024 is the smallest normal */
  uint32_t subnormal = ct__f32_bits(ct__bits_f32(absu) * 16777216.0f + 8388608.0f) - 0x4b000000u;
  uint32_t r = absu < 0x38800000u ? subnormal : normal;
  r = absu >= 0x477ff000u ? 0x7c00u : r; /* rounds to >= 65520: overflow to inf (and inf itself) */
  r = absu > 0x7f800000u ? 0x7e00u : r;  /* NaN: quiet */
  return (uint16_t)(sign | r);
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
