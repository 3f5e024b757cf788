/* src/backend/cpu/conv.c: 2-D convolution by im2col + one GEMM over the whole batch.
 *
 * x: (N, C, H, W), w: (O, C/G, kH, kW) -> y: (N, O, Ho, Wo). cols is (C kH kW, N Ho Wo): row
 * (c, i, j) holds x[n, c, ho s - p + i d, wo s - p + j d] (0 outside), so for group g
 *   Y_g (O/G, N L) = W_g (O/G, C/G kH kW) @ cols_g,   L = Ho Wo,
 * and the backward is dW_g = dY_g @ cols_g^T, dcols_g = W_g^T @ dY_g followed by col2im.
 * One large GEMM lets OpenBLAS use every core; the price is the cols buffer (C kH kW N L floats).
 * Inputs are contiguous (the front-end makes them so). f32 and f64. */
#include <cblas.h>
#include <string.h>
#include "backend/cpu/cpu.h"

typedef struct {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, G;
  int sh, sw, ph, pw, dh, dw;
} geom;

static geom geometry(ct_tensor *x, ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], Ho, Wo,
            o->groups, o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0], o->dilation[1]};
  return g;
}

#define DEFINE_COLS(T, SUFFIX)                                                                          \
  static void im2col_##SUFFIX(const geom *g, const T *x, T *cols) {                                    \
    int64_t L = g->Ho * g->Wo, NL = g->N * L;                                                          \
    _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t c = 0; c < g->C; c++)        \
      for (int64_t n = 0; n < g->N; n++) {                                                             \
        const T *xp = x + (n * g->C + c) * g->H * g->W;                                                \
        for (int64_t i = 0; i < g->kh; i++)                                                            \
          for (int64_t j = 0; j < g->kw; j++) {                                                        \
            T *row = cols + ((c * g->kh + i) * g->kw + j) * NL + n * L;                                \
            for (int64_t ho = 0; ho < g->Ho; ho++) {                                                   \
              int64_t h = ho * g->sh - g->ph + i * g->dh;                                              \
              T *out = row + ho * g->Wo;                                                               \
              if (h < 0 || h >= g->H) {                                                                \
                for (int64_t wo = 0; wo < g->Wo; wo++) out[wo] = 0;                                   \
                continue;                                                                              \
              }                                                                                        \
              /* valid outputs: 0 <= wo sw - pw + j dw < W, i.e. wo in [lo, hi) */                \
              int64_t off = j * g->dw - g->pw, lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;        \
              int64_t hi = g->W - off <= 0 ? 0 : (g->W - off + g->sw - 1) / g->sw;                    \
              if (hi > g->Wo) hi = g->Wo;                                                              \
              if (lo > hi) lo = hi;                                                                    \
              const T *src = xp + h * g->W + off;                                                      \
              for (int64_t wo = 0; wo < lo; wo++) out[wo] = 0;                                         \
              if (g->sw == 1)                                                                          \
                for (int64_t wo = lo; wo < hi; wo++) out[wo] = src[wo];                                \
              else                                                                                     \
                for (int64_t wo = lo; wo < hi; wo++) out[wo] = src[wo * g->sw];                        \
              for (int64_t wo = hi; wo < g->Wo; wo++) out[wo] = 0;                                     \
            }                                                                                          \
          }                                                                                            \
      }                                                                                                \
  }                                                                                                    \
  static void col2im_##SUFFIX(const geom *g, const T *cols, T *gx) {                                   \
    int64_t L = g->Ho * g->Wo, NL = g->N * L;                                                          \
    _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t c = 0; c < g->C; c++)        \
      for (int64_t n = 0; n < g->N; n++) {                                                             \
        T *xp = gx + (n * g->C + c) * g->H * g->W;                                                     \
        for (int64_t i = 0; i < g->kh; i++)                                                            \
          for (int64_t j = 0; j < g->kw; j++) {                                                        \
            const T *row = cols + ((c * g->kh + i) * g->kw + j) * NL + n * L;                          \
            for (int64_t ho = 0; ho < g->Ho; ho++) {                                                   \
              int64_t h = ho * g->sh - g->ph + i * g->dh;                                              \
              if (h < 0 || h >= g->H) continue;                                                        \
              for (int64_t wo = 0; wo < g->Wo; wo++) {                                                 \
                int64_t ww = wo * g->sw - g->pw + j * g->dw;                                           \
                if (ww >= 0 && ww < g->W) xp[h * g->W + ww] += row[ho * g->Wo + wo];                   \
              }                                                                                        \
            }                                                                                          \
          }                                                                                            \
      }                                                                                                \
  }
DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)

/* C (M, N) = alpha op(A) op(B) + beta C in row-major, for either precision. */
static void gemm(ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                 int64_t ldb, double beta, void *C, int64_t ldc) {
  if (dt == CT_F32)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                A, (int)lda, B, (int)ldb, (float)beta, C, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0,
                A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* The im2col and output staging buffers are kept per thread and only grow: allocating ~30 MB per
 * call cost a page fault per 4 KiB in every step (measured in docs/perf.md). Two slots: cols and
 * the (O, N L) matrix. The memory stays reachable from thread-local storage until the thread ends. */
static _Thread_local struct {
  void *p;
  size_t n;
} workspace[2];

static void *alloc_or_fail(int slot, size_t n) {
  if (n <= workspace[slot].n) return workspace[slot].p;
  void *p = realloc(workspace[slot].p, n ? n : 1);
  if (!p) {
    ct__error(CT_ENOMEM, "conv2d: out of host memory for a %zu-byte im2col buffer", n);
    return NULL;
  }
  workspace[slot].p = p, workspace[slot].n = n;
  return p;
}

ct_status ct__cpu_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o, ct_tensor *keep) {
  geom g = geometry(x, w, y->shape[2], y->shape[3], o);
  size_t es = ct_dtype_size(x->dtype);
  int64_t L = g.Ho * g.Wo, NL = g.N * L, K = g.C / g.G * g.kh * g.kw, Og = g.O / g.G;
  char *cols = keep ? (char *)ct__ptr(keep) : alloc_or_fail(0, (size_t)(g.C * g.kh * g.kw * NL) * es);
  char *ymat = alloc_or_fail(1, (size_t)(g.O * NL) * es); /* (O, N L) */
  if (!cols || !ymat) return CT_ENOMEM;
  if (x->dtype == CT_F32) im2col_f32(&g, ct__ptr(x), (float *)cols);
  else im2col_f64(&g, ct__ptr(x), (double *)cols);
  for (int64_t gi = 0; gi < g.G; gi++)
    gemm(x->dtype, 0, 0, Og, NL, K, (char *)ct__ptr(w) + gi * Og * K * (int64_t)es, K, cols + gi * K * NL * (int64_t)es, NL, 0.0,
         ymat + gi * Og * NL * (int64_t)es, NL);
  /* (O, N, L) -> (N, O, L), adding the bias */
  char *yp = ct__ptr(y);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t oc = 0; oc < g.O; oc++) {
      double bias = b ? ct__load((char *)ct__ptr(b) + oc * (int64_t)es, b->dtype) : 0.0;
      if (x->dtype == CT_F32) {
        const float *src = (const float *)ymat + oc * NL + n * L;
        float *dst = (float *)yp + (n * g.O + oc) * L;
        for (int64_t l = 0; l < L; l++) dst[l] = src[l] + (float)bias;
      } else {
        const double *src = (const double *)ymat + oc * NL + n * L;
        double *dst = (double *)yp + (n * g.O + oc) * L;
        for (int64_t l = 0; l < L; l++) dst[l] = src[l] + bias;
      }
    }
  return CT_OK;
}

ct_status ct__cpu_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                  const ct_conv2d_opts *o, ct_tensor *kept) {
  geom g = geometry(x, w, gy->shape[2], gy->shape[3], o);
  ct_dtype dt = x->dtype;
  size_t es = ct_dtype_size(dt);
  int64_t L = g.Ho * g.Wo, NL = g.N * L, K = g.C / g.G * g.kh * g.kw, Og = g.O / g.G;
  char *dy = alloc_or_fail(1, (size_t)(g.O * NL) * es); /* gy as (O, N L) */
  char *cols = alloc_or_fail(0, (size_t)(g.C * g.kh * g.kw * NL) * es);
  if (!dy || !cols) return CT_ENOMEM;
  const char *gyp = ct__ptr(gy);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t oc = 0; oc < g.O; oc++)
      memcpy(dy + (oc * NL + n * L) * (int64_t)es, gyp + ((n * g.O + oc) * L) * (int64_t)es, (size_t)L * es);
  if (gb)
#pragma omp parallel for schedule(static)
    for (int64_t oc = 0; oc < g.O; oc++) {
      double s = 0;
      if (dt == CT_F32)
        for (int64_t k = 0; k < NL; k++) s += ((const float *)dy)[oc * NL + k];
      else
        for (int64_t k = 0; k < NL; k++) s += ((const double *)dy)[oc * NL + k];
      ct__store((char *)ct__ptr(gb) + oc * (int64_t)es, gb->dtype, s);
    }
  if (gw) {
    const char *xcols = kept ? (const char *)ct__ptr(kept) : cols; /* the forward's, when it kept them */
    if (!kept && dt == CT_F32) im2col_f32(&g, ct__ptr(x), (float *)cols);
    else if (!kept) im2col_f64(&g, ct__ptr(x), (double *)cols);
    for (int64_t gi = 0; gi < g.G; gi++) /* dW_g (Og, K) = dY_g (Og, NL) @ cols_g^T (NL, K) */
      gemm(dt, 0, 1, Og, K, NL, dy + gi * Og * NL * (int64_t)es, NL, xcols + gi * K * NL * (int64_t)es, NL, 0.0,
           (char *)ct__ptr(gw) + gi * Og * K * (int64_t)es, K);
  }
  if (gx) {
    for (int64_t gi = 0; gi < g.G; gi++) /* dcols_g (K, NL) = W_g^T (K, Og) @ dY_g (Og, NL) */
      gemm(dt, 1, 0, K, NL, Og, (char *)ct__ptr(w) + gi * Og * K * (int64_t)es, K, dy + gi * Og * NL * (int64_t)es, NL, 0.0,
           cols + gi * K * NL * (int64_t)es, NL);
    memset(ct__ptr(gx), 0, (size_t)ct_tensor_numel(gx) * es);
    if (dt == CT_F32) col2im_f32(&g, (float *)cols, ct__ptr(gx));
    else col2im_f64(&g, (double *)cols, ct__ptr(gx));
  }
  return CT_OK;
}
