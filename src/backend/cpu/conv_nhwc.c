/* src/backend/cpu/conv_nhwc.c: 2-D convolution of channels_last (NHWC) tensors by im2col + GEMM,
 * blocks of images spread over the threads, as conv.c does for NCHW (a block is one image unless
 * the output is small).
 *
 * x: (N, C, H, W) stored (N, H, W, C); w: (O, C/G, kH, kW) stored (O, kH, kW, C/G); y: (N, O, Ho,
 * Wo) stored (N, Ho, Wo, O). L = Ho Wo, Cg = C/G, K = kH kW Cg, Kall = G K. For image n, cols_n is
 * (L, Kall): row l = (ho, wo) holds, for group g and tap (i, j), the Cg channels
 * x[n, g Cg .. g Cg + Cg - 1, ho s - p + i d, wo s - p + j d] at columns g K + (i kW + j) Cg ..: a
 * run of channels contiguous in x (zeros outside the image). With one group and no dilation the kW
 * taps of a kernel row are even one run of kW C elements. The weight's channels_last layout is
 * exactly a (O, K) matrix whose columns are ordered as cols' columns, so for group g
 *   y_n[:, g Og ..] (L, Og) = cols_n,g (L, K) @ W_g^T (K, Og)        (y_n is (L, O): NHWC)
 *   dW_g (Og, K) += dy_n,g^T (Og, L) @ cols_n,g (L, K)                 (dW in w's channels_last layout)
 *   dcols_n,g (L, K) = dy_n,g (L, Og) @ W_g (Og, K), then col2im adds the runs back into gx_n.
 * No transposes: every operand is read in the layout it has. With one input channel (the first
 * layer) cols is built transposed instead (im2col_t below). f32 and f64. */
#include <cblas.h>
#include <omp.h>
#include <string.h>
#include "backend/cpu/conv_blocks.h"
#include "backend/cpu/cpu.h"

typedef struct {
  geom g;
  ct_dtype dt;
  int64_t es, L, Cg, K, Og, Kall;
} nhwc_geom;

static nhwc_geom geometry(const ct_tensor *x, const ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  nhwc_geom q = {{x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], Ho, Wo, o->groups,
                  o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0], o->dilation[1]},
                 x->dtype, (int64_t)ct_dtype_size(x->dtype), Ho * Wo, 0, 0, 0, 0};
  q.Cg = q.g.C / q.g.G, q.K = q.g.kh * q.g.kw * q.Cg, q.Og = q.g.O / q.g.G, q.Kall = q.g.G * q.K;
  return q;
}

/* The taps j of a kernel row that fall inside the image for an output column starting at w0:
 * [*lo, *hi) within [0, kW) (one group, no dilation). */
static void row_taps(const geom *g, int64_t w0, int64_t *lo, int64_t *hi) {
  int64_t a = w0 < 0 ? -w0 : 0, b = g->W - w0;
  if (a > g->kw) a = g->kw;
  if (b > g->kw) b = g->kw;
  if (b < a) b = a;
  *lo = a, *hi = b;
}

/* im2col of one image x (H, W, C) into cols (L, Kall); col2im adds cols back into gx (H, W, C),
 * which the caller zeroed. */
#define DEFINE_NHWC_COLS(T, SUFFIX)                                                                   \
  static void im2col_##SUFFIX(const nhwc_geom *q, const T *x, T *cols) {                             \
    const geom *g = &q->g;                                                                           \
    int64_t C = g->C, Cg = q->Cg, K = q->K;                                                          \
    for (int64_t ho = 0; ho < g->Ho; ho++)                                                           \
      for (int64_t wo = 0; wo < g->Wo; wo++) {                                                       \
        T *row = cols + (ho * g->Wo + wo) * q->Kall;                                                 \
        int64_t h0 = ho * g->sh - g->ph, w0 = wo * g->sw - g->pw;                                    \
        if (g->G == 1 && g->dw == 1) { /* a kernel row is one run of kW C elements */               \
          int64_t lo, hi;                                                                            \
          row_taps(g, w0, &lo, &hi);                                                                 \
          for (int64_t i = 0; i < g->kh; i++) {                                                      \
            int64_t h = h0 + i * g->dh;                                                              \
            T *dst = row + i * g->kw * C;                                                            \
            if (h < 0 || h >= g->H || hi == lo) {                                                    \
              memset(dst, 0, (size_t)(g->kw * C) * sizeof(T));                                      \
              continue;                                                                              \
            }                                                                                        \
            const T *src = x + (h * g->W + w0) * C; /* tap j's channels at src + j C */             \
            int64_t e0 = lo * C, e1 = hi * C, e2 = g->kw * C;                                        \
            if (e2 < 64) { /* a few channels (the first layer's one): no calls per pixel */         \
              for (int64_t e = 0; e < e0; e++) dst[e] = 0;                                           \
              for (int64_t e = e0; e < e1; e++) dst[e] = src[e];                                     \
              for (int64_t e = e1; e < e2; e++) dst[e] = 0;                                          \
              continue;                                                                              \
            }                                                                                        \
            memset(dst, 0, (size_t)e0 * sizeof(T));                                                  \
            memcpy(dst + e0, src + e0, (size_t)(e1 - e0) * sizeof(T));                               \
            memset(dst + e1, 0, (size_t)(e2 - e1) * sizeof(T));                                      \
          }                                                                                          \
          continue;                                                                                  \
        }                                                                                            \
        for (int64_t gi = 0; gi < g->G; gi++)                                                        \
          for (int64_t i = 0; i < g->kh; i++) {                                                      \
            int64_t h = h0 + i * g->dh;                                                              \
            for (int64_t j = 0; j < g->kw; j++) {                                                    \
              int64_t w = w0 + j * g->dw;                                                            \
              T *dst = row + gi * K + (i * g->kw + j) * Cg;                                          \
              if (h < 0 || h >= g->H || w < 0 || w >= g->W) {                                        \
                for (int64_t c = 0; c < Cg; c++) dst[c] = 0;                                         \
                continue;                                                                            \
              }                                                                                      \
              const T *src = x + (h * g->W + w) * C + gi * Cg;                                       \
              for (int64_t c = 0; c < Cg; c++) dst[c] = src[c];                                      \
            }                                                                                        \
          }                                                                                          \
      }                                                                                              \
  }                                                                                                  \
  static void col2im_##SUFFIX(const nhwc_geom *q, const T *cols, T *gx) {                            \
    const geom *g = &q->g;                                                                           \
    int64_t C = g->C, Cg = q->Cg, K = q->K;                                                          \
    for (int64_t ho = 0; ho < g->Ho; ho++)                                                           \
      for (int64_t wo = 0; wo < g->Wo; wo++) {                                                       \
        const T *row = cols + (ho * g->Wo + wo) * q->Kall;                                           \
        int64_t h0 = ho * g->sh - g->ph, w0 = wo * g->sw - g->pw;                                    \
        if (g->G == 1 && g->dw == 1) {                                                               \
          int64_t lo, hi;                                                                            \
          row_taps(g, w0, &lo, &hi);                                                                 \
          for (int64_t i = 0; i < g->kh; i++) {                                                      \
            int64_t h = h0 + i * g->dh;                                                              \
            if (h < 0 || h >= g->H) continue;                                                        \
            const T *src = row + (i * g->kw + lo) * C;                                               \
            T *dst = gx + (h * g->W + w0 + lo) * C;                                                  \
            for (int64_t e = 0; e < (hi - lo) * C; e++) dst[e] += src[e];                            \
          }                                                                                          \
          continue;                                                                                  \
        }                                                                                            \
        for (int64_t gi = 0; gi < g->G; gi++)                                                        \
          for (int64_t i = 0; i < g->kh; i++) {                                                      \
            int64_t h = h0 + i * g->dh;                                                              \
            if (h < 0 || h >= g->H) continue;                                                        \
            for (int64_t j = 0; j < g->kw; j++) {                                                    \
              int64_t w = w0 + j * g->dw;                                                            \
              if (w < 0 || w >= g->W) continue;                                                      \
              const T *src = row + gi * K + (i * g->kw + j) * Cg;                                    \
              T *dst = gx + (h * g->W + w) * C + gi * Cg;                                            \
              for (int64_t c = 0; c < Cg; c++) dst[c] += src[c];                                     \
            }                                                                                        \
          }                                                                                          \
      }                                                                                              \
  }
DEFINE_NHWC_COLS(float, f32)
DEFINE_NHWC_COLS(double, f64)

static void im2col(const nhwc_geom *q, const char *x, char *cols) {
  if (q->dt == CT_F32) im2col_f32(q, (const float *)x, (float *)cols);
  else im2col_f64(q, (const double *)x, (double *)cols);
}

static void col2im(const nhwc_geom *q, const char *cols, char *gx) {
  if (q->dt == CT_F32) col2im_f32(q, (const float *)cols, (float *)gx);
  else col2im_f64(q, (const double *)cols, (double *)gx);
}

/* One input channel and one group (the first layer's images): x is the plane (H, W) in either
 * format, so im2col builds colsT (K, L) instead, a row per tap holding that tap's pixel for every
 * output, contiguous along wo as conv.c's NCHW im2col; the GEMMs take it transposed. This avoids
 * copying a run of one element per tap and pixel. col2im_t adds colsT back into gx (H, W), zeroed. */
#define DEFINE_ONE_CHANNEL(T, SUFFIX)                                                               \
  static void im2col_t_##SUFFIX(const nhwc_geom *q, const T *x, T *colsT) {                        \
    const geom *g = &q->g;                                                                         \
    for (int64_t i = 0; i < g->kh; i++)                                                            \
      for (int64_t j = 0; j < g->kw; j++) {                                                        \
        T *row = colsT + (i * g->kw + j) * q->L;                                                   \
        for (int64_t ho = 0; ho < g->Ho; ho++) {                                                   \
          int64_t h = ho * g->sh - g->ph + i * g->dh, off = j * g->dw - g->pw;                     \
          T *o = row + ho * g->Wo;                                                                 \
          if (h < 0 || h >= g->H) {                                                                \
            for (int64_t wo = 0; wo < g->Wo; wo++) o[wo] = 0;                                     \
            continue;                                                                              \
          }                                                                                        \
          const T *xr = x + h * g->W;                                                              \
          for (int64_t wo = 0; wo < g->Wo; wo++) {                                                 \
            int64_t w = wo * g->sw + off;                                                          \
            o[wo] = w >= 0 && w < g->W ? xr[w] : 0;                                                \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
  }                                                                                                \
  static void col2im_t_##SUFFIX(const nhwc_geom *q, const T *colsT, T *gx) {                       \
    const geom *g = &q->g;                                                                         \
    for (int64_t i = 0; i < g->kh; i++)                                                            \
      for (int64_t j = 0; j < g->kw; j++) {                                                        \
        const T *row = colsT + (i * g->kw + j) * q->L;                                             \
        for (int64_t ho = 0; ho < g->Ho; ho++) {                                                   \
          int64_t h = ho * g->sh - g->ph + i * g->dh, off = j * g->dw - g->pw;                     \
          if (h < 0 || h >= g->H) continue;                                                        \
          for (int64_t wo = 0; wo < g->Wo; wo++) {                                                 \
            int64_t w = wo * g->sw + off;                                                          \
            if (w >= 0 && w < g->W) gx[h * g->W + w] += row[ho * g->Wo + wo];                      \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
  }
DEFINE_ONE_CHANNEL(float, f32)
DEFINE_ONE_CHANNEL(double, f64)

/* 1 when the one-channel layout (colsT) applies */
static int one_channel(const nhwc_geom *q) { return q->g.C == 1 && q->g.G == 1; }

/* cols (L, Kall), or colsT (K, L) for one channel, of image x */
static void lower(const nhwc_geom *q, const char *x, char *cols) {
  if (!one_channel(q)) im2col(q, x, cols);
  else if (q->dt == CT_F32) im2col_t_f32(q, (const float *)x, (float *)cols);
  else im2col_t_f64(q, (const double *)x, (double *)cols);
}

/* Blocks of images, as conv.c's: for a small output (L < 100 pixels) B images share each GEMM, their
 * cols stacked as (B L, Kall) and their y, dy as (B L, O), which NHWC lays out contiguously, so a
 * block is the one-image case with B L rows. One image per GEMM packed the whole weight for a GEMM
 * of 1 to 49 rows and made channels_last resnet18 7x slower than NCHW (docs/perf-history.md). The
 * one-channel layout (colsT) keeps blocks of one. */
static int64_t nhwc_block_images(const nhwc_geom *q) { return one_channel(q) ? 1 : ct__conv_block_images(&q->g, q->L); }

// x: (N, C, H, W) NHWC, w: (O, C/G, kH, kW) channels_last, b: (O) or NULL -> y: (N, O, Ho, Wo) NHWC
ct_status ct__cpu_conv2d_nhwc(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  nhwc_geom q = geometry(x, w, y->shape[2], y->shape[3], o);
  const geom *g = &q.g;
  int32_t *map;
  if (ct__conv_dense_plan(g, 1, q.dt, &map)) /* maps no bigger than the kernel's live taps: conv_dense.c */
    return ct__conv_dense_forward(g, 1, q.dt, map, ct__ptr(x), ct__ptr(w), b ? ct__ptr(b) : NULL, b ? b->dtype : q.dt,
                                  ct__ptr(y));
  int64_t es = q.es, L = q.L, O = g->O, Og = q.Og, K = q.K, Kall = q.Kall, CHW = g->H * g->W * g->C;
  int64_t B = nhwc_block_images(&q), nblk = ct__conv_block_count(g->N, B);
  char *bufs = ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)(omp_get_max_threads() * Kall * B * L * es));
  if (!bufs) return CT_ENOMEM;
  const char *xp = ct__ptr(x), *wp = ct__ptr(w), *bp = b ? ct__ptr(b) : NULL;
  char *yp = ct__ptr(y);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nblk; i++) {
    int64_t n0, nb;
    ct__conv_block(i, nblk, g->N, &n0, &nb);
    char *cols = bufs + omp_get_thread_num() * Kall * B * L * es, *yn = yp + n0 * L * O * es;
    for (int64_t k = 0; k < nb; k++) lower(&q, xp + (n0 + k) * CHW * es, cols + k * L * Kall * es);
    /* y starts as the bias in every row and the GEMMs add to it (beta = 1) */
    for (int64_t l = 0; bp && l < nb * L; l++) memcpy(yn + l * O * es, bp, (size_t)(O * es));
    if (one_channel(&q)) /* y_n (L, O) = colsT^T (L, K) @ W^T (K, O) (nb = 1) */
      ct__conv_gemm(q.dt, 1, 1, L, O, K, cols, L, wp, K, bp ? 1.0 : 0.0, yn, O);
    else
      for (int64_t gi = 0; gi < g->G; gi++)
        ct__conv_gemm(q.dt, 0, 1, nb * L, Og, K, cols + gi * K * es, Kall, wp + gi * Og * K * es, K, bp ? 1.0 : 0.0,
                      yn + gi * Og * es, O);
  }
  return CT_OK;
}

// gy: (N, O, Ho, Wo) NHWC -> gx like x (NHWC), gw like w (channels_last), gb (O); each may be NULL
ct_status ct__cpu_conv2d_nhwc_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                       const ct_conv2d_opts *o) {
  nhwc_geom q = geometry(x, w, gy->shape[2], gy->shape[3], o);
  const geom *g = &q.g;
  ct_dtype dt = q.dt;
  int32_t *map;
  if (ct__conv_dense_plan(g, 1, dt, &map))
    return ct__conv_dense_backward(g, 1, dt, map, ct__ptr(x), ct__ptr(w), ct__ptr(gy), gx ? ct__ptr(gx) : NULL,
                                   gw ? ct__ptr(gw) : NULL, gb ? ct__ptr(gb) : NULL, gb ? gb->dtype : dt);
  int64_t es = q.es, L = q.L, O = g->O, Og = q.Og, K = q.K, Kall = q.Kall, wsz = O * K, nt = omp_get_max_threads();
  int64_t CHW = g->H * g->W * g->C, B = nhwc_block_images(&q), nblk = ct__conv_block_count(g->N, B), BL = B * L;
  char *cols = gw ? ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)(nt * Kall * BL * es)) : NULL;
  char *dcols = gx ? ct__conv_scratch(CT_CONV_SCRATCH_DCOLS, (size_t)(nt * Kall * BL * es)) : NULL;
  char *acc = gw ? ct__conv_scratch(CT_CONV_SCRATCH_WGRAD, (size_t)(nt * wsz * es)) : NULL;
  double *bacc = gb ? (double *)ct__conv_scratch(CT_CONV_SCRATCH_BGRAD, (size_t)(nt * O) * sizeof(double)) : NULL;
  if ((gw && (!cols || !acc)) || (gx && !dcols) || (gb && !bacc)) return CT_ENOMEM;
  const char *xp = ct__ptr(x), *wp = ct__ptr(w), *gyp = ct__ptr(gy);
  char *gxp = gx ? ct__ptr(gx) : NULL;
#pragma omp parallel
  {
    /* the accumulators zeroed on the threads, every slice whatever the team's size (conv.c) */
    for (int64_t t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) {
      if (acc) memset(acc + t * wsz * es, 0, (size_t)(wsz * es));
      if (bacc) memset(bacc + t * O, 0, (size_t)O * sizeof(double));
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nblk; i++) {
      int tid = omp_get_thread_num();
      int64_t n0, nb;
      ct__conv_block(i, nblk, g->N, &n0, &nb);
      const char *gyn = gyp + n0 * L * O * es; /* the block's dy: (nb L, O) */
      if (bacc) { /* the bias gradient: dy's column sums, a row of O at a time (vectorizes) */
        double *restrict ba = bacc + tid * O;
        for (int64_t l = 0; l < nb * L; l++) {
          if (dt == CT_F32) {
            const float *restrict r = (const float *)gyn + l * O;
            for (int64_t oc = 0; oc < O; oc++) ba[oc] += r[oc];
          } else {
            const double *restrict r = (const double *)gyn + l * O;
            for (int64_t oc = 0; oc < O; oc++) ba[oc] += r[oc];
          }
        }
      }
      if (acc) { /* dW_g (Og, K) += dy_g^T (Og, nb L) @ cols_g (nb L, K), into this thread's accumulator */
        char *cn = cols + tid * Kall * BL * es;
        for (int64_t k = 0; k < nb; k++) lower(&q, xp + (n0 + k) * CHW * es, cn + k * L * Kall * es);
        if (one_channel(&q)) /* dW (O, K) += dy_n^T (O, L) @ colsT^T (L, K) (nb = 1) */
          ct__conv_gemm(dt, 1, 1, O, K, L, gyn, O, cn, L, 1.0, acc + tid * wsz * es, K);
        else
          for (int64_t gi = 0; gi < g->G; gi++)
            ct__conv_gemm(dt, 1, 0, Og, K, nb * L, gyn + gi * Og * es, O, cn + gi * K * es, Kall, 1.0,
                          acc + (tid * wsz + gi * Og * K) * es, K);
      }
      if (gxp) { /* dcols_g (nb L, K) = dy_g (nb L, Og) @ W_g (Og, K), then col2im into each gx_n */
        char *dc = dcols + tid * Kall * BL * es;
        for (int64_t k = 0; k < nb; k++) memset(gxp + (n0 + k) * CHW * es, 0, (size_t)(CHW * es));
        if (one_channel(&q)) { /* dcolsT (K, L) = W^T (K, O) @ dy_n^T (O, L) (nb = 1) */
          ct__conv_gemm(dt, 1, 1, K, L, O, wp, K, gyn, O, 0.0, dc, L);
          if (dt == CT_F32) col2im_t_f32(&q, (const float *)dc, (float *)(gxp + n0 * CHW * es));
          else col2im_t_f64(&q, (const double *)dc, (double *)(gxp + n0 * CHW * es));
        } else {
          for (int64_t gi = 0; gi < g->G; gi++)
            ct__conv_gemm(dt, 0, 0, nb * L, K, Og, gyn + gi * Og * es, O, wp + gi * Og * K * es, K, 0.0, dc + gi * K * es, Kall);
          for (int64_t k = 0; k < nb; k++) col2im(&q, dc + k * L * Kall * es, gxp + (n0 + k) * CHW * es);
        }
      }
    }
  }
  for (int64_t oc = 0; gb && oc < O; oc++) {
    double sum = 0;
    for (int64_t t = 0; t < nt; t++) sum += bacc[t * O + oc];
    ct__store((char *)ct__ptr(gb) + oc * (int64_t)ct_dtype_size(gb->dtype), gb->dtype, sum);
  }
  if (gw) { /* the per-thread accumulators summed: acc's layout is gw's (O, kH, kW, C/G); typed stores */
    char *gwp = ct__ptr(gw);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < wsz; k++) {
      double s = 0;
      if (dt == CT_F32) {
        for (int64_t t = 0; t < nt; t++) s += ((const float *)acc)[t * wsz + k];
        ((float *)gwp)[k] = (float)s;
      } else {
        for (int64_t t = 0; t < nt; t++) s += ((const double *)acc)[t * wsz + k];
        ((double *)gwp)[k] = s;
      }
    }
  }
  return CT_OK;
}
