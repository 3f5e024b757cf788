/* src/backend/cpu/half.h: float16 and bfloat16 loads and stores the CPU kernels inline into their
 * loops (ct__load / ct__store are a call and a switch per element: ten to thirty times slower than
 * the float32 path on casts and elementwise ops), on core/half.h's conversions, the ones the
 * public ct_f16_to_f32 and its kin use. */
#ifndef CUTTLE_CPU_HALF_H
#define CUTTLE_CPU_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/half.h"
#include "core/internal.h"

/* The operands' common half dtype as a small tag: CT_LP_F16, CT_LP_BF16, or 0 (none). */
enum { CT_LP_NONE = 0, CT_LP_F16 = 1, CT_LP_BF16 = 2 };
static inline int ct__lp_tag(ct_dtype dt) { return dt == CT_F16 ? CT_LP_F16 : dt == CT_BF16 ? CT_LP_BF16 : CT_LP_NONE; }

/* The element at p of half dtype tag lp, and v stored there (rounded through float32, as
 * ct__store does). */
static inline double ct__lp_load(const char *p, int lp) {
  uint16_t h;
  memcpy(&h, p, 2);
  return lp == CT_LP_F16 ? ct__f16_to_f32(h) : ct__bf16_to_f32(h);
}
static inline void ct__lp_store(char *p, int lp, double v) {
  uint16_t h = lp == CT_LP_F16 ? ct__f32_to_f16((float)v) : ct__f32_to_bf16((float)v);
  memcpy(p, &h, 2);
}

/* The half paths' blocks over contiguous operands: up to CT_LP_BLOCK elements converted to float32
 * in a buffer, computed by a loop over float32 (the float32 path's own, which the compiler
 * vectorizes), and converted back. Each conversion loop has one dtype and restrict pointers, so the
 * compiler vectorizes it too (core/half.h's conversions are selects, and the files that use them
 * are built with -fno-trapping-math, CMakeLists.txt). The values are the element-wise
 * path's exactly: a half widens to float32 exactly, and the result is rounded to float32, then to
 * the half, as ct__lp_store does. */
enum { CT_LP_BLOCK = 512 };
static inline void ct__lp_to_f32_n(float *restrict dst, const char *restrict src, int64_t n, int lp) {
  const uint16_t *restrict h = (const uint16_t *)src;
  if (lp == CT_LP_BF16)
    for (int64_t i = 0; i < n; i++) dst[i] = ct__bf16_to_f32(h[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = ct__f16_to_f32(h[i]);
}
static inline void ct__f32_to_lp_n(char *restrict dst, const float *restrict src, int64_t n, int lp) {
  uint16_t *restrict h = (uint16_t *)dst;
  if (lp == CT_LP_BF16)
    for (int64_t i = 0; i < n; i++) h[i] = ct__f32_to_bf16(src[i]);
  else
    for (int64_t i = 0; i < n; i++) h[i] = ct__f32_to_f16(src[i]);
}

#endif
