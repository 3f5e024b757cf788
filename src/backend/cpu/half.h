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

#endif
