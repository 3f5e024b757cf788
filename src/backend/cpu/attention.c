/* src/backend/cpu/attention.c: the CPU's fused scaled dot-product attention (kernels.def's
 * attention and attention_backward) in float32 and float64, from the tiles of attention_tile.h.
 * The forward runs one task per (batch, head, tile of 64 query rows); the backward one task per
 * (batch, head), so each gradient element is written by one thread in one order. Memory beyond the
 * inputs and outputs: the tiles of each thread, 64 x 64 scores and 64 x Dv sums (forward), three
 * 64 x 64 tiles and Tq row sums (backward): O(T), never the (Tq, Tk) scores. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include <omp.h>
#include "backend/cpu/cpu.h"

enum { BR = 64, BC = 64 }; /* query rows and key rows per tile */

typedef struct {
  int64_t B, H, Tq, Tk, D, Dv;
  double scale, p, keep_below; /* dropout keeps an element whose uniform u < keep_below */
  int causal;
  uint64_t seed, offset;
  const void *mask; /* NULL, or additive scores of the compute type with strides ms (elements) */
  int64_t ms[4];
} attn_geom;

/* Dropout's draw for element e of the (B, H, Tq, Tk) scores: ct_rand's uniform (word >> 8) 2^-24
 * of Philox block offset + e / 4, word e % 4 (kernels.def's attention). */
static inline int attn_keep(const attn_geom *g, uint64_t e) {
  uint32_t w[4];
  ct__philox(g->seed, g->offset + e / 4, 0, w);
  return (double)(w[e % 4] >> 8) * (1.0 / 16777216.0) < g->keep_below;
}

/* y[i] = exp(y[i] - m) over a row of floats, 4 lanes at a time (SSE2, x86-64's baseline) in GCC's
 * vector extensions (libm's
 * expf is a call per element, and the tiles take one exp per score; a scalar form with a bit cast
 * does not vectorize): Cephes' expf (Moshier), 2^n e^r with n = round(x / ln 2), |r| <= ln2 / 2
 * and a degree-5 polynomial for e^r - 1 - r, about 1 ulp over the normal range; 0 below -87.3 (so a
 * masked score, -inf, weighs exactly nothing). The tiles only take x = y - m <= 0; NaN stays NaN. */
typedef float attn_v4f __attribute__((vector_size(16)));
typedef int32_t attn_v4i __attribute__((vector_size(16)));

static inline attn_v4f attn_exp4(attn_v4f x) {
  const attn_v4f lo = {-87.3f, -87.3f, -87.3f, -87.3f};
  attn_v4i under = x < lo;                                       /* lanes -1 where x < -87.3 */
  attn_v4f xc = (attn_v4f)(((attn_v4i)x & ~under) | ((attn_v4i)lo & under));
  attn_v4f t = xc * 1.44269504088896341f;
  attn_v4f n = (t + 12582912.0f) - 12582912.0f;                  /* round to nearest: 1.5 * 2^23 */
  attn_v4f r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  attn_v4f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  attn_v4i e = (__builtin_convertvector(n, attn_v4i) + 127) << 23; /* 2^n's bits */
  attn_v4f y = p * (attn_v4f)e;
  return (attn_v4f)((attn_v4i)y & ~under);
}

static void attn_exp_row_f32(float *y, int64_t n, float m) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    attn_v4f v;
    memcpy(&v, y + i, sizeof v);
    v = attn_exp4(v - m);
    memcpy(y + i, &v, sizeof v);
  }
  if (i < n) { /* the tail through one padded vector */
    attn_v4f v = {0, 0, 0, 0};
    memcpy(&v, y + i, sizeof(float) * (size_t)(n - i));
    v = attn_exp4(v - m);
    memcpy(y + i, &v, sizeof(float) * (size_t)(n - i));
  }
}

static void attn_exp_row_f64(double *y, int64_t n, double m) {
  for (int64_t i = 0; i < n; i++) y[i] = exp(y[i] - m);
}

static inline float attn_expf(float x) {
  attn_v4f v = {x, x, x, x};
  return attn_exp4(v)[0];
}

#define CT_CONCAT_(a, b) a##b
#define CT_CONCAT(a, b) CT_CONCAT_(a, b)
#define REAL float
#define GEMM cblas_sgemm
#define EXP attn_expf
#define EXP_ROW attn_exp_row_f32
#define SUF f32
#include "backend/cpu/attention_tile.h"
#undef REAL
#undef GEMM
#undef EXP
#undef EXP_ROW
#undef SUF
#define REAL double
#define GEMM cblas_dgemm
#define EXP exp
#define EXP_ROW attn_exp_row_f64
#define SUF f64
#include "backend/cpu/attention_tile.h"
#undef REAL
#undef GEMM
#undef EXP
#undef EXP_ROW
#undef SUF

static ct_status geom_of(attn_geom *g, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, const ct_attention_args *a) {
  *g = (attn_geom){q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], v->shape[3], a->scale, a->dropout_p, 1.0,
                   a->causal, a->seed, a->offset, NULL, {0}};
  if (q->dtype != CT_F32 && q->dtype != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "attention: the CPU's fused kernel takes float32 and float64, got %s", ct_dtype_name(q->dtype));
  /* the composed op compares ct_rand's uniform in the inputs' dtype with 1 - p in that dtype */
  g->keep_below = q->dtype == CT_F64 ? 1.0 - a->dropout_p : (double)(float)(1.0 - a->dropout_p);
  if (mask) {
    g->mask = ct__ptr(mask);
    memcpy(g->ms, mask->stride, sizeof g->ms);
  }
  return CT_OK;
}

/* The threads' tiles, from the CPU's allocator (so that its statistics, and a benchmark's peak,
 * count them); *n receives the size for ct__cpu_free. */
static void *scratch(size_t per_thread, size_t es, size_t *n) {
  *n = (size_t)omp_get_max_threads() * per_thread * es;
  void *p = ct__cpu_alloc(*n ? *n : 1);
  if (!p) ct__error(CT_ENOMEM, "attention: cannot allocate %zu bytes of tiles", *n);
  return p;
}

ct_status ct__cpu_attention(ct_tensor *out, ct_tensor *lse, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                            const ct_attention_args *a) {
  attn_geom g;
  ct_status s = geom_of(&g, q, k, v, mask, a);
  if (s != CT_OK || ct_tensor_numel(out) == 0) return s;
  size_t es = ct_dtype_size(q->dtype);
  size_t wn;
  void *w = scratch((size_t)(BR * BC + BR * g.Dv), es, &wn);
  if (!w) return CT_ENOMEM;
  if (q->dtype == CT_F32) forward_f32(&g, ct__ptr(q), ct__ptr(k), ct__ptr(v), ct__ptr(out), ct__ptr(lse), w);
  else forward_f64(&g, ct__ptr(q), ct__ptr(k), ct__ptr(v), ct__ptr(out), ct__ptr(lse), w);
  ct__cpu_free(w, wn ? wn : 1);
  return CT_OK;
}

ct_status ct__cpu_attention_backward(ct_tensor *gq, ct_tensor *gk, ct_tensor *gv, ct_tensor *gout, ct_tensor *q, ct_tensor *k,
                                     ct_tensor *v, ct_tensor *out, ct_tensor *lse, ct_tensor *mask, const ct_attention_args *a) {
  attn_geom g;
  ct_status s = geom_of(&g, q, k, v, mask, a);
  if (s != CT_OK) return s;
  size_t es = ct_dtype_size(q->dtype);
  size_t wn;
  void *w = scratch((size_t)(3 * BR * BC + g.Tq), es, &wn);
  if (!w) return CT_ENOMEM;
  if (q->dtype == CT_F32)
    backward_f32(&g, ct__ptr(q), ct__ptr(k), ct__ptr(v), ct__ptr(out), ct__ptr(lse), ct__ptr(gout), ct__ptr(gq), ct__ptr(gk),
                 ct__ptr(gv), w);
  else
    backward_f64(&g, ct__ptr(q), ct__ptr(k), ct__ptr(v), ct__ptr(out), ct__ptr(lse), ct__ptr(gout), ct__ptr(gq), ct__ptr(gk),
                 ct__ptr(gv), w);
  ct__cpu_free(w, wn ? wn : 1);
  return CT_OK;
}
