/* src/backend/cpu/pool_nhwc.c: 2-D max and average pooling of channels_last (NHWC) tensors and
 * their backward, with pool.c's semantics: torch's windows (pool_window.h: dilation, ceil_mode);
 * average pooling divides by kH kW (count_include_pad) or pool_window.h's divisor;
 * max pooling keeps the first maximum in row-major window order, a NaN wins over numbers and a
 * later NaN over an earlier one; CT_POOL_MAX_RELU pools relu(x) (a NaN passes) and marks a window
 * whose maximum is 0 with argmax -1 (no gradient, as relu's). The argmax is int32 (the front-end
 * sends planes of 2^31 pixels or more to the NCHW kernels), y's shape and format, the flat index
 * h W + w into x's plane; int32 so that the selects of a run of channels vectorize with the floats.
 * x: (N, C, H, W) stored (N, H, W, C) -> y: (N, C, Ho, Wo) stored (N, Ho, Wo, C). Each output pixel
 * works on a run of C channels at once, so the inner loops are contiguous in x, y and argmax. */
#include <math.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/pool_window.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
  int64_t N, C, H, W, Ho, Wo;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  const ct_pool2d_opts *o;
} pgeom;

static pgeom geometry(const ct_tensor *x, const ct_tensor *y, const ct_pool2d_opts *o) {
  pgeom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3],
             o->kernel[0], o->kernel[1], o->stride[0], o->stride[1], o->padding[0], o->padding[1],
             o->dilation[0], o->dilation[1], o};
  return g;
}

/* y[c], a[c] = max(y[c], x[c]) and its index, a NaN x[c] winning; relu pools max(x, 0) (NaN passes) */
#define DEFINE_MAX_RUN(T, SUFFIX)                                                                               \
  __attribute__((noinline)) static void max_run_##SUFFIX(T *restrict y, int32_t *restrict a, const T *restrict x, int64_t C, int32_t idx, \
                               int relu) {                                                                      \
    for (int64_t c = 0; c < C; c++) {                                                                           \
      T v = x[c], b = y[c];                                                                                     \
      if (relu) v = v <= 0 ? 0 : v; /* a NaN passes */                                                          \
      int take = (v > b) | (v != v);                                                                           \
      y[c] = take ? v : b;                                                                                      \
      a[c] = take ? idx : a[c];                                                                                 \
    }                                                                                                           \
  }
#ifdef __SSE2__
/* float32 four channels at a time with selects, as pool.c does for NCHW: the compiler leaves the
 * loop above scalar and branchy, and which element wins is data-dependent (a misprediction each) */
__attribute__((noinline)) static void max_run_f32(float *restrict y, int32_t *restrict a, const float *restrict x, int64_t C,
                                                  int32_t idx, int relu) {
  int64_t c = 0;
  __m128i vi = _mm_set1_epi32(idx);
  for (; c + 4 <= C; c += 4) {
    __m128 v = _mm_loadu_ps(x + c), b = _mm_loadu_ps(y + c);
    if (relu) v = _mm_max_ps(_mm_setzero_ps(), v); /* returns v for a NaN v: relu passes NaN */
    __m128 m = _mm_or_ps(_mm_cmpgt_ps(v, b), _mm_cmpunord_ps(v, v));
    _mm_storeu_ps(y + c, _mm_or_ps(_mm_and_ps(m, v), _mm_andnot_ps(m, b)));
    __m128i mi = _mm_castps_si128(m), ai = _mm_loadu_si128((const __m128i *)(a + c));
    _mm_storeu_si128((__m128i *)(a + c), _mm_or_si128(_mm_and_si128(mi, vi), _mm_andnot_si128(mi, ai)));
  }
  for (; c < C; c++) {
    float v = x[c], b = y[c];
    if (relu) v = v <= 0 ? 0 : v;
    if (v > b || v != v) y[c] = v, a[c] = idx;
  }
}
#else
DEFINE_MAX_RUN(float, f32)
#endif
DEFINE_MAX_RUN(double, f64)

#define DEFINE_POOL(T, SUFFIX)                                                                           \
  static void pool_##SUFFIX(ct_pool_kind kind, const pgeom *g, const T *x, T *y, int32_t *am) {         \
    int64_t C = g->C;                                                                                   \
    int relu = kind == CT_POOL_MAX_RELU;                                                                \
    _Pragma("omp parallel for schedule(static) if (g->N * g->Ho * g->Wo * C >= 16384)")                \
    for (int64_t r = 0; r < g->N * g->Ho; r++) {                                                        \
      int64_t n = r / g->Ho, ho = r % g->Ho;                                                            \
      for (int64_t wo = 0; wo < g->Wo; wo++) {                                                          \
        int64_t q = ((n * g->Ho + ho) * g->Wo + wo) * C;                                                \
        T *yr = y + q;                                                                                  \
        int32_t *ar = am ? am + q : NULL;                                                               \
        int first = 1;                                                                                  \
        ct__pool_span a = ct__pool_span_of(ho, g->H, g->kh, g->sh, g->ph, g->dh);                       \
        ct__pool_span b = ct__pool_span_of(wo, g->W, g->kw, g->sw, g->pw, g->dw);                       \
        for (int64_t c = 0; kind == CT_POOL_AVG && c < C; c++) yr[c] = 0;                               \
        for (int64_t h = a.lo; h < a.hi; h += a.step)                                                   \
          for (int64_t w = b.lo; w < b.hi; w += b.step) {                                               \
            const T *xr = x + ((n * g->H + h) * g->W + w) * C;                                          \
            int32_t idx = (int32_t)(h * g->W + w);                                                      \
            if (kind == CT_POOL_AVG) {                                                                  \
              for (int64_t c = 0; c < C; c++) yr[c] += xr[c];                                           \
              continue;                                                                                 \
            }                                                                                           \
            if (first) /* the window's first element starts the maximum */                              \
              for (int64_t c = 0; c < C; c++) yr[c] = relu && xr[c] <= 0 ? 0 : xr[c], ar[c] = idx;      \
            else /* selects, not branches: which element wins is data-dependent (pool.c) */             \
              max_run_##SUFFIX(yr, ar, xr, C, idx, relu);                                               \
            first = 0;                                                                                  \
          }                                                                                             \
        if (kind == CT_POOL_AVG && a.lo < a.hi && b.lo < b.hi) /* else nothing inside the input: 0 */  \
          for (int64_t c = 0; c < C; c++) yr[c] /= (T)ct__pool_avg_divisor(&a, &b, g->o);              \
        if (kind != CT_POOL_AVG && first) /* nothing inside the input: -inf, no gradient */             \
          for (int64_t c = 0; c < C; c++) yr[c] = -(T)INFINITY, ar[c] = -1;                             \
        for (int64_t c = 0; relu && c < C; c++)                                                         \
          if (yr[c] <= 0) ar[c] = -1;                                                                   \
      }                                                                                                 \
    }                                                                                                   \
  }                                                                                                     \
  static void pool_backward_##SUFFIX(ct_pool_kind kind, const pgeom *g, T *gx, const T *gy, const int32_t *am) { \
    int64_t C = g->C;                                                                                   \
    _Pragma("omp parallel for schedule(static) if (g->N * g->Ho * g->Wo * C >= 16384)")                \
    for (int64_t n = 0; n < g->N; n++) {                                                                \
      T *gxn = gx + n * g->H * g->W * C;                                                                \
      memset(gxn, 0, (size_t)(g->H * g->W * C) * sizeof(T));                                            \
      for (int64_t ho = 0; ho < g->Ho; ho++)                                                            \
        for (int64_t wo = 0; wo < g->Wo; wo++) {                                                        \
          int64_t q = ((n * g->Ho + ho) * g->Wo + wo) * C;                                              \
          const T *gr = gy + q;                                                                         \
          if (kind != CT_POOL_AVG) {                                                                    \
            const int32_t *ar = am + q;                                                                 \
            for (int64_t c = 0; c < C; c++)                                                             \
              if (ar[c] >= 0) gxn[ar[c] * C + c] += gr[c];                                              \
            continue;                                                                                   \
          }                                                                                             \
          ct__pool_span a = ct__pool_span_of(ho, g->H, g->kh, g->sh, g->ph, 1);                         \
          ct__pool_span b = ct__pool_span_of(wo, g->W, g->kw, g->sw, g->pw, 1);                         \
          if (a.lo >= a.hi || b.lo >= b.hi) continue; /* nothing inside the input */                    \
          T inv = (T)1 / (T)ct__pool_avg_divisor(&a, &b, g->o);                                         \
          for (int64_t h = a.lo; h < a.hi; h++)                                                         \
            for (int64_t w = b.lo; w < b.hi; w++) {                                                     \
              T *d = gxn + (h * g->W + w) * C;                                                          \
              for (int64_t c = 0; c < C; c++) d[c] += gr[c] * inv;                                      \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
  }
DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

// x: (N, C, H, W) NHWC -> y: (N, C, Ho, Wo) NHWC; argmax int32 like y for max pooling, NULL for average
ct_status ct__cpu_pool2d_nhwc(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o) {
  if (kind != CT_POOL_AVG && (!argmax || argmax->dtype != CT_I32))
    return ct__error(CT_EINVAL, "cpu: channels_last max_pool2d records its argmax in int32");
  pgeom g = geometry(x, y, o);
  int32_t *am = argmax ? (int32_t *)ct__ptr(argmax) : NULL;
  if (x->dtype == CT_F32) pool_f32(kind, &g, (const float *)ct__ptr(x), (float *)ct__ptr(y), am);
  else pool_f64(kind, &g, (const double *)ct__ptr(x), (double *)ct__ptr(y), am);
  return CT_OK;
}

// gy: (N, C, Ho, Wo) NHWC, argmax as the forward's -> gx: (N, C, H, W) NHWC
ct_status ct__cpu_pool2d_nhwc_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax,
                                       const ct_pool2d_opts *o) {
  if (kind != CT_POOL_AVG && (!argmax || argmax->dtype != CT_I32))
    return ct__error(CT_EINVAL, "cpu: channels_last max_pool2d backward needs the forward's int32 argmax");
  pgeom g = geometry(gx, gy, o);
  const int32_t *am = argmax ? (const int32_t *)ct__ptr(argmax) : NULL;
  if (gx->dtype == CT_F32) pool_backward_f32(kind, &g, (float *)ct__ptr(gx), (const float *)ct__ptr(gy), am);
  else pool_backward_f64(kind, &g, (double *)ct__ptr(gx), (const double *)ct__ptr(gy), am);
  return CT_OK;
}
