/* src/backend/cpu/conv_dense.c: conv2d on the CPU as one dense GEMM, where the input map has fewer
 * pixels than the kernel has live taps.
 *
 * x: (N, C, H, W), w: (O, C, kH, kW) -> y: (N, O, Ho, Wo), L = Ho Wo, P = H W. Output pixel l sees
 * input pixel p through at most one tap, map[l P + p] (i kW + j, or -1: none). So the convolution
 * is a linear layer from x's (N, C P) to y's (N, O L), whose (O L, C P) weight matrix Wd holds
 *   Wd[(o, l), (c, p)] = w[o, c, map[l P + p]]   (0 where map is -1),
 * and y = x Wd^T + b, dx = dy Wd, dWd = dy^T x, dw[o, c, t] = sum over map[l P + p] = t of
 * dWd[(o, l), (c, p)], db = the sums of dy over n and l. Its GEMM does O C L P multiply-adds per
 * image against im2col's O C L T (T live taps): resnet18's layer3 at 28 x 28, 3x3 convs with
 * padding 1 on 2 x 2 maps, does 16 instead of 36 per (o, c), and needs no im2col or col2im: x, y
 * and their gradients are the GEMMs' operands as they lie (docs/perf-history.md). The same holds for
 * channels_last tensors, with Wd's rows and columns in their order ((l, o) and (p, c)): conv_nhwc.c
 * takes this path too, also where P equals the live taps (its im2col keeps the dead ones: resnet18's
 * layer4 on 1 x 1 maps). The GEMMs run on the whole batch with OpenBLAS's own threads. Groups 1,
 * float32 and float64; conv.c and conv_nhwc.c decide. */
#include <omp.h>
#include <string.h>
#include "backend/cpu/conv_blocks.h"

enum { DENSE_MAX_ELEMS = 4 << 20 }; /* Wd's elements at most: 16 MiB in float32 */

/* map (L P) for the geometry; returns the number of live taps (taps that some (l, p) uses) */
static int64_t tap_map(const geom *g, int32_t *map) {
  int64_t L = g->Ho * g->Wo, P = g->H * g->W, KK = g->kh * g->kw, live = 0;
  for (int64_t i = 0; i < L * P; i++) map[i] = -1;
  for (int64_t t = 0; t < KK; t++) {
    int64_t used = 0, h, w;
    for (int64_t ho = 0; ho < g->Ho; ho++)
      for (int64_t wo = 0; wo < g->Wo; wo++)
        if (ct__conv_tap_input(g, t, ho, wo, &h, &w)) map[(ho * g->Wo + wo) * P + h * g->W + w] = (int32_t)t, used = 1;
    live += used;
  }
  return live;
}

int ct__conv_dense_plan(const geom *g, int nhwc, ct_dtype dt, int32_t **map) {
  int64_t L = g->Ho * g->Wo, P = g->H * g->W;
  *map = NULL;
  if (g->G != 1 || (dt != CT_F32 && dt != CT_F64) || L <= 0 || P <= 0 || L * P > 4096 || g->N == 0 ||
      g->O * L * g->C * P > DENSE_MAX_ELEMS)
    return 0;
  int32_t *m = (int32_t *)ct__conv_scratch(CT_CONV_SCRATCH_TAPS, (size_t)(L * P) * sizeof(int32_t));
  if (!m) return 0; /* out of memory for a few KiB: im2col's path reports it */
  /* NCHW: no fewer multiply-adds than im2col with its dead taps dropped; channels_last's im2col
   * keeps every tap, so there as many as the live taps already win */
  int64_t live = tap_map(g, m);
  if (nhwc ? P > live : P >= live) return 0;
  *map = m;
  return 1;
}

/* Where element (c, p) of an image of x sits (x's row of C P), (o, l) of an image of y (y's row of
 * O L) and tap t of w[o, c], in NCHW (x (C, P), y (O, L), w (O, C, KK)) or channels_last (x (P, C),
 * y (L, O), w (O, KK, C)): index = c xc + p xp, o yo + l yl, o wo + c wc + t wt. Wd's rows follow
 * y's order and its columns x's, so the GEMMs take x, y and their gradients as they lie in either. */
typedef struct {
  int64_t xc, xp, yo, yl, wo, wc, wt;
} dense_layout;

static dense_layout layout_of(const geom *g, int nhwc) {
  int64_t L = g->Ho * g->Wo, P = g->H * g->W, KK = g->kh * g->kw;
  if (nhwc) return (dense_layout){1, g->C, 1, g->O, KK * g->C, 1, g->C};
  return (dense_layout){P, 1, L, 1, g->C * KK, KK, 1};
}

#define DEFINE_DENSE(E, SUFFIX)                                                                        \
  /* Wd (O L, C P) from w */                                                                          \
  static void assemble_##SUFFIX(const geom *g, const dense_layout *d, const int32_t *map, const E *w, E *wd) { \
    int64_t L = g->Ho * g->Wo, P = g->H * g->W, CP = g->C * P;                                        \
    _Pragma("omp parallel for schedule(static)") for (int64_t o = 0; o < g->O; o++)                   \
      for (int64_t l = 0; l < L; l++) {                                                               \
        E *row = wd + (o * d->yo + l * d->yl) * CP;                                                   \
        const int32_t *ml = map + l * P;                                                              \
        for (int64_t c = 0; c < g->C; c++) {                                                          \
          const E *wc = w + o * d->wo + c * d->wc;                                                    \
          for (int64_t p = 0; p < P; p++) row[c * d->xc + p * d->xp] = ml[p] >= 0 ? wc[ml[p] * d->wt] : 0; \
        }                                                                                             \
      }                                                                                               \
  }                                                                                                   \
  /* gw from dWd (O L, C P): every element written (0 at taps no pixel uses); w[o]'s C KK elements  \
   * are contiguous in both layouts */                                                                \
  static void gather_grad_##SUFFIX(const geom *g, const dense_layout *d, const int32_t *map, const E *dwd, E *gw) { \
    int64_t L = g->Ho * g->Wo, P = g->H * g->W, CP = g->C * P;                                        \
    _Pragma("omp parallel for schedule(static)") for (int64_t o = 0; o < g->O; o++) {                 \
      E *go = gw + o * d->wo;                                                                         \
      memset(go, 0, (size_t)d->wo * sizeof(E));                                                      \
      for (int64_t l = 0; l < L; l++) {                                                               \
        const E *row = dwd + (o * d->yo + l * d->yl) * CP;                                            \
        const int32_t *ml = map + l * P;                                                              \
        for (int64_t c = 0; c < g->C; c++)                                                            \
          for (int64_t p = 0; p < P; p++)                                                             \
            if (ml[p] >= 0) go[c * d->wc + ml[p] * d->wt] += row[c * d->xc + p * d->xp];              \
      }                                                                                               \
    }                                                                                                 \
  }
DEFINE_DENSE(float, f32)
DEFINE_DENSE(double, f64)

static char *assemble(const geom *g, const dense_layout *d, ct_dtype dt, const int32_t *map, const void *w) {
  int64_t es = (int64_t)ct_dtype_size(dt);
  char *wd = ct__conv_scratch(CT_CONV_SCRATCH_DENSE_W, (size_t)(g->O * g->Ho * g->Wo * g->C * g->H * g->W * es));
  if (!wd) return NULL;
  if (dt == CT_F32) assemble_f32(g, d, map, w, (float *)wd);
  else assemble_f64(g, d, map, w, (double *)wd);
  return wd;
}

ct_status ct__conv_dense_forward(const geom *g, int nhwc, ct_dtype dt, const int32_t *map, const void *x, const void *w,
                                 const void *b, ct_dtype bdt, void *y) {
  int64_t L = g->Ho * g->Wo, CP = g->C * g->H * g->W, OL = g->O * L;
  dense_layout d = layout_of(g, nhwc);
  char *wd = assemble(g, &d, dt, map, w);
  if (!wd) return CT_ENOMEM;
  if (b) /* y starts as the bias and the GEMM adds to it (beta = 1), as conv.c does */
    for (int64_t o = 0; o < g->O; o++) {
      double v = ct__load((const char *)b + o * (int64_t)ct_dtype_size(bdt), bdt);
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t l = 0; l < L; l++) {
          int64_t at = n * OL + o * d.yo + l * d.yl;
          if (dt == CT_F32) ((float *)y)[at] = (float)v;
          else ((double *)y)[at] = v;
        }
    }
  ct__conv_gemm(dt, 0, 1, g->N, OL, CP, x, CP, wd, CP, b ? 1.0 : 0.0, y, OL);
  return CT_OK;
}

ct_status ct__conv_dense_backward(const geom *g, int nhwc, ct_dtype dt, const int32_t *map, const void *x, const void *w,
                                  const void *gy, void *gx, void *gw, void *gb, ct_dtype gbdt) {
  int64_t L = g->Ho * g->Wo, CP = g->C * g->H * g->W, OL = g->O * L, es = (int64_t)ct_dtype_size(dt);
  dense_layout d = layout_of(g, nhwc);
  if (gx) { /* dx (N, C P) = dy (N, O L) Wd (O L, C P) */
    char *wd = assemble(g, &d, dt, map, w);
    if (!wd) return CT_ENOMEM;
    ct__conv_gemm(dt, 0, 0, g->N, CP, OL, gy, OL, wd, CP, 0.0, gx, CP);
  }
  if (gw) { /* dWd (O L, C P) = dy^T (O L, N) x (N, C P), then summed per tap into gw */
    char *dwd = ct__conv_scratch(CT_CONV_SCRATCH_DENSE_GW, (size_t)(OL * CP * es));
    if (!dwd) return CT_ENOMEM;
    ct__conv_gemm(dt, 1, 0, OL, CP, g->N, gy, OL, x, CP, 0.0, dwd, CP);
    if (dt == CT_F32) gather_grad_f32(g, &d, map, (const float *)dwd, gw);
    else gather_grad_f64(g, &d, map, (const double *)dwd, gw);
  }
  if (gb) /* the sums of dy over the images and the pixels, in double */
    for (int64_t o = 0; o < g->O; o++) {
      double s = 0;
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t l = 0; l < L; l++) {
          int64_t at = n * OL + o * d.yo + l * d.yl;
          s += dt == CT_F32 ? ((const float *)gy)[at] : ((const double *)gy)[at];
        }
      ct__store((char *)gb + o * (int64_t)ct_dtype_size(gbdt), gbdt, s);
    }
  return CT_OK;
}
