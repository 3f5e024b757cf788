/* src/backend/cpu/conv.c: 2-D convolution by im2col + GEMM, one image (or one block of images,
 * when the output is small) per thread.
 *
 * x: (N, C, H, W), w: (O, C/G, kH, kW) -> y: (N, O, Ho, Wo), L = Ho Wo, K = C/G kH kW. For image n,
 * cols_n is (C kH kW, L): row (c, i, j) holds x[n, c, ho s - p + i d, wo s - p + j d] (0 outside),
 * and for group g
 *   y_n,g (O/G, L) = W_g (O/G, K) @ cols_n,g,
 *   dW_g += dy_n,g @ cols_n,g^T,   dcols_n,g = W_g^T @ dy_n,g, then col2im.
 * Small outputs (L < BLOCK_MAX_L) run B images at a time: their cols_n side by side in one (C kH kW,
 * B L) matrix, so each GEMM above has B L columns (or, for dW, a sum of B L products) instead of L;
 * see ct__conv_block_images. The per-image steps are the blocks of B = 1. Small outputs also gather their
 * im2col rows through a table and, in float32 and float64, leave out the taps that only ever read
 * padding (plan_taps; conv_blocks.h).
 * Blocks are spread over OpenMP threads and each GEMM runs single-threaded inside its thread
 * (OpenBLAS's OpenMP build does that inside a parallel region), so each thread's cols_n stays in
 * its cache and no (O, N L) staging matrix or transpose is needed (measured in docs/perf-history.md); a
 * block of B > 1 images has its outputs in a per-thread (O, B L) and copies them to y.
 * The backward recomputes cols_n into the same cache-resident scratch rather than reading back a
 * copy the forward kept: keeping them cost a (C kH kW, N L) matrix written to and read from memory
 * every step and measured 5% slower on the cnn once im2col copied whole rows (docs/perf-history.md).
 * Inputs are contiguous (the front-end makes them so). f32 and f64. Input maps with fewer pixels
 * than the kernel has live taps (2 x 2 under a 3x3 kernel) skip all this: conv_dense.c. */
#include <omp.h>
#include <string.h>
#include "backend/cpu/conv_blocks.h"

static geom geometry(ct_tensor *x, ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], Ho, Wo,
            o->groups, o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0], o->dilation[1]};
  return g;
}

/* im2col for stride 1 and an output as wide as the input (a "same" convolution, as 3x3 with
 * padding 1): row (c, i, j) is x's plane c moved by rows and by off = j dw - pw columns, so it is one
 * copy of whole rows, then the off columns that fell off an edge are zeroed. Rows outside the
 * image are zeros. Much faster than a short copy per output row (docs/perf-history.md). */
#define DEFINE_COLS_SAME(T, SUFFIX)                                                                     \
  static void im2col_same_##SUFFIX(const geom *g, const T *x, T *out, int64_t ld) {                    \
    int64_t W = g->W, HW = g->H * W, Ho = g->Ho;                                                       \
    for (int64_t c = 0; c < g->C; c++) {                                                               \
      const T *xp = x + c * HW;                                                                        \
      for (int64_t i = 0; i < g->kh; i++) {                                                            \
        int64_t dh = i * g->dh - g->ph; /* h = ho + dh */                                              \
        int64_t lo = dh < 0 ? -dh : 0, hi = g->H - dh < Ho ? g->H - dh : Ho;                           \
        if (hi < lo) hi = lo;                                                                          \
        for (int64_t j = 0; j < g->kw; j++) {                                                          \
          T *row = out + ((c * g->kh + i) * g->kw + j) * ld;                                           \
          int64_t off = j * g->dw - g->pw;                                                             \
          memset(row, 0, (size_t)(lo * W) * sizeof(T));                                                \
          memset(row + hi * W, 0, (size_t)((Ho - hi) * W) * sizeof(T));                                \
          /* row[ho W + wo] = xp[(ho + dh) W + wo + off] for ho in [lo, hi): one flat copy, clipped */ \
          int64_t d0 = lo * W, d1 = hi * W, s0 = (lo + dh) * W + off;                                  \
          if (s0 < 0) d0 -= s0, s0 = 0;                                                                \
          if (s0 + (d1 - d0) > HW) d1 = d0 + (HW - s0);                                                \
          if (d1 > d0) memcpy(row + d0, xp + s0, (size_t)(d1 - d0) * sizeof(T));                       \
          /* the columns whose source wo + off is outside [0, W): zeros (this also covers the        \
           * elements the clipping skipped) */                                                         \
          int64_t z0 = off < 0 ? 0 : W - off, z1 = off < 0 ? -off : W;                                \
          if (z0 < 0) z0 = 0;                                                                          \
          if (z1 > W) z1 = W;                                                                          \
          for (int64_t ho = lo; ho < hi && z1 > z0; ho++)                                              \
            for (int64_t wo = z0; wo < z1; wo++) row[ho * W + wo] = 0;                                 \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  }
DEFINE_COLS_SAME(float, f32)
DEFINE_COLS_SAME(double, f64)

/* For kernel column j: the input column offset off = j dw - pw of output column 0, and the range
 * [lo, hi) of output columns wo whose input column wo sw + off lies inside [0, W). */
static inline void valid_wo(const geom *g, int64_t j, int64_t *off, int64_t *lo, int64_t *hi) {
  *off = j * g->dw - g->pw;
  *lo = *off >= 0 ? 0 : (-*off + g->sw - 1) / g->sw;
  *hi = g->W - *off <= 0 ? 0 : (g->W - *off + g->sw - 1) / g->sw;
  if (*hi > g->Wo) *hi = g->Wo;
  if (*lo > *hi) *lo = *hi;
}

/* im2col of one image x (C, H, W) into out, whose row r starts at out + r ld; col2im adds
 * cols (same layout) back into gx (C, H, W). */
#define DEFINE_COLS(T, SUFFIX)                                                                          \
  static void im2col_##SUFFIX(const geom *g, const T *x, T *out, int64_t ld) {                         \
    if (g->sh == 1 && g->sw == 1 && g->Wo == g->W) {                                                   \
      im2col_same_##SUFFIX(g, x, out, ld);                                                             \
      return;                                                                                          \
    }                                                                                                  \
    for (int64_t c = 0; c < g->C; c++) {                                                               \
      const T *xp = x + c * g->H * g->W;                                                               \
      for (int64_t i = 0; i < g->kh; i++)                                                              \
        for (int64_t j = 0; j < g->kw; j++) {                                                          \
          T *row = out + ((c * g->kh + i) * g->kw + j) * ld;                                           \
          int64_t off, lo, hi;                                                                         \
          valid_wo(g, j, &off, &lo, &hi);                                                              \
          for (int64_t ho = 0; ho < g->Ho; ho++) {                                                     \
            int64_t h = ho * g->sh - g->ph + i * g->dh;                                                \
            T *o = row + ho * g->Wo;                                                                   \
            if (h < 0 || h >= g->H) {                                                                  \
              for (int64_t wo = 0; wo < g->Wo; wo++) o[wo] = 0;                                       \
              continue;                                                                                \
            }                                                                                          \
            const T *src = xp + h * g->W + off;                                                        \
            for (int64_t wo = 0; wo < lo; wo++) o[wo] = 0;                                             \
            if (g->sw == 1)                                                                            \
              for (int64_t wo = lo; wo < hi; wo++) o[wo] = src[wo];                                    \
            else                                                                                       \
              for (int64_t wo = lo; wo < hi; wo++) o[wo] = src[wo * g->sw];                            \
            for (int64_t wo = hi; wo < g->Wo; wo++) o[wo] = 0;                                         \
          }                                                                                            \
        }                                                                                              \
    }                                                                                                  \
  }                                                                                                    \
  static void col2im_##SUFFIX(const geom *g, T *cols, int64_t ld, T *gx) {                             \
    for (int64_t c = 0; c < g->C; c++) {                                                               \
      T *xp = gx + c * g->H * g->W;                                                                    \
      for (int64_t i = 0; i < g->kh; i++)                                                              \
        for (int64_t j = 0; j < g->kw; j++) {                                                          \
          T *row = cols + ((c * g->kh + i) * g->kw + j) * ld;                                          \
          int64_t off, lo, hi; /* as im2col: no bounds check per element */                           \
          valid_wo(g, j, &off, &lo, &hi);                                                              \
          for (int64_t ho = 0; ho < g->Ho; ho++) {                                                     \
            int64_t h = ho * g->sh - g->ph + i * g->dh;                                                \
            if (h < 0 || h >= g->H) continue;                                                          \
            T *dst = xp + h * g->W + off, *src = row + ho * g->Wo;                                     \
            /* each element read is zeroed for the next image's GEMM (beta = 1, see the backward) */  \
            if (g->sw == 1)                                                                            \
              for (int64_t wo = lo; wo < hi; wo++) dst[wo] += src[wo], src[wo] = 0;                   \
            else                                                                                       \
              for (int64_t wo = lo; wo < hi; wo++) dst[wo * g->sw] += src[wo], src[wo] = 0;           \
          }                                                                                            \
        }                                                                                              \
    }                                                                                                  \
  }
DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)

/* im2col and col2im of a small output through its gather table (conv_blocks.h). Plane c is first copied
 * into the middle of a zero-bordered (H + 2 pH, W + 2 pW) plane (pad, this thread's), so that row
 * (c, r) of the (C T, L) matrix is a gather without a bounds test: row[l] = pad[table[r L + l]],
 * computed rather than read: output row ho of tap (i, j) is the padded row ho sH + i dH from
 * column j dW on, every sW-th element (runs of Wo contiguous ones at stride 1).
 * For outputs of a few pixels that is much cheaper than the row copies above, which spend two
 * memsets and a memcpy on a row of 1 to 49 elements (docs/perf-history.md). col2im goes the other way,
 * through the gather lists built from the same table (col2im_gather below). */
#define DEFINE_COLS_TABLE(E, SUFFIX)                                                                    \
  static void im2col_table_##SUFFIX(const geom *g, const ct_conv_taps *tp, E *pad, const E *x, E *out,   \
                                    int64_t ld) {                                                      \
    int64_t Wp = g->W + 2 * g->pw, HWp = (g->H + 2 * g->ph) * Wp;                                      \
    memset(pad, 0, (size_t)HWp * sizeof(E));                                                           \
    for (int64_t c = 0; c < g->C; c++) {                                                               \
      const E *xp = x + c * g->H * g->W;                                                               \
      for (int64_t h = 0; h < g->H; h++) /* rows of a few elements: a loop, not a memcpy call each */   \
        for (int64_t w = 0; w < g->W; w++) pad[(h + g->ph) * Wp + g->pw + w] = xp[h * g->W + w];        \
      for (int64_t r = 0; r < tp->T; r++) { /* the table's offsets, computed: no index loads */          \
        int64_t t = tp->taps[r];                                                                       \
        const E *src = pad + t / g->kw * g->dh * Wp + t % g->kw * g->dw;                               \
        E *row = out + (c * tp->T + r) * ld;                                                           \
        for (int64_t ho = 0; ho < g->Ho; ho++, src += g->sh * Wp, row += g->Wo)                        \
          if (g->sw == 1)                                                                              \
            for (int64_t wo = 0; wo < g->Wo; wo++) row[wo] = src[wo];                                  \
          else                                                                                         \
            for (int64_t wo = 0; wo < g->Wo; wo++) row[wo] = src[wo * g->sw];                          \
      }                                                                                                \
    }                                                                                                  \
  }
DEFINE_COLS_TABLE(float, f32)
DEFINE_COLS_TABLE(double, f64)

/* col2im of a block of nb images through the gather lists (ct_conv_bw): each input pixel sums its
 * dcols elements, the even and the odd ones of its list (tap order) in two sums, and is written
 * once. A scatter through a padded plane read, added and stored an element per tap and was 6% of a
 * resnet18 step; one sum was a chain of dependent adds (docs/perf-history.md). Each channel's rows of dc are zeroed once its images are done (the next
 * block's GEMM adds into them). gx: the block's first image. */
#define DEFINE_COL2IM_GATHER(E, SUFFIX)                                                                 \
  static void col2im_gather_##SUFFIX(const ct_conv_bw *c, E *dc, int64_t nb, E *gx) {                  \
    const geom *g = &c->g;                                                                             \
    int64_t T = c->tp.T, ld = c->ld, L = c->L, HW = g->H * g->W, CHW = g->C * HW;                      \
    const int32_t *st = c->gstart, *ls = c->glist;                                                     \
    for (int64_t ch = 0; ch < g->C; ch++) {                                                            \
      E *rows = dc + ch * T * ld;                                                                      \
      for (int64_t b = 0; b < nb; b++) {                                                               \
        const E *rb = rows + b * L;                                                                    \
        E *o = gx + b * CHW + ch * HW;                                                                 \
        for (int64_t p = 0; p < HW; p++) {                                                             \
          E s0 = 0, s1 = 0;                                                                            \
          int32_t k = st[p], e = st[p + 1];                                                            \
          for (; k + 1 < e; k += 2) s0 += rb[ls[k]], s1 += rb[ls[k + 1]];                              \
          if (k < e) s0 += rb[ls[k]];                                                                  \
          o[p] = s0 + s1;                                                                              \
        }                                                                                              \
      }                                                                                                \
      memset(rows, 0, (size_t)(T * ld) * sizeof(E));                                                   \
    }                                                                                                  \
  }
DEFINE_COL2IM_GATHER(float, f32)
DEFINE_COL2IM_GATHER(double, f64)

/* pad: this thread's padded plane (table path only) */
static void im2col(ct_dtype dt, const geom *g, const ct_conv_taps *tp, void *pad, const void *x, void *out, int64_t ld) {
  if (tp->table) {
    if (dt == CT_F32) im2col_table_f32(g, tp, pad, x, out, ld);
    else im2col_table_f64(g, tp, pad, x, out, ld);
  } else if (dt == CT_F32) im2col_f32(g, x, out, ld);
  else im2col_f64(g, x, out, ld);
}

/* gx (C, H, W) of one image = col2im(cols): written whole (outputs without a gather table) */
static void col2im(ct_dtype dt, const geom *g, void *cols, int64_t ld, void *gx) {
  memset(gx, 0, (size_t)(g->C * g->H * g->W) * ct_dtype_size(dt));
  if (dt == CT_F32) col2im_f32(g, cols, ld, gx);
  else col2im_f64(g, cols, ld, gx);
}

/* Small outputs: blocks of images. Below BLOCK_MAX_L output pixels an image's GEMMs are narrow (N
 * = L: 4 in resnet18's layer3 and 1 in its layer4 at 28x28, with K up to 4608) and OpenBLAS spends
 * its time packing the weights, the whole (O, K) streamed again for every image; the weight
 * gradient's GEMM, a sum of only L products, reads and writes all of dW per image. There B images
 * go together, B L >= BLOCK_COLS columns: one packing of the weights and one pass over dW serve
 * them all. B is capped so that every thread gets a block (the blocks are spread over the threads
 * as the images are, each GEMM single-threaded: one block at a time with OpenBLAS's threads
 * measured slower on 2 cores, docs/perf-history.md) and so that a block's im2col matrix stays within
 * BLOCK_ELEMS elements. B depends on the shapes and the thread count only, not on the dtype, so
 * that the fused conv + relu + pool (conv_relu_pool.c), halves included, blocks its images as
 * conv2d does and gets the same sums. */
enum { BLOCK_MAX_L = 100, BLOCK_COLS = 256, BLOCK_ELEMS = 4 << 20 };

int64_t ct__conv_block_images(const geom *g, int64_t L) {
  int64_t Kall = g->C * g->kh * g->kw; /* all taps: B must not depend on the dtype, which decides the dead taps */
  if (L <= 0 || L >= BLOCK_MAX_L) return 1;
  int64_t nt = omp_get_max_threads(), B = (BLOCK_COLS + L - 1) / L, per = (g->N + nt - 1) / nt;
  if (B > per) B = per;
  if (Kall > 0 && B * Kall * L > BLOCK_ELEMS) B = BLOCK_ELEMS / (Kall * L);
  return B > 1 ? B : 1;
}

/* the number of blocks of at most B images for N: a multiple of the threads where N allows (ct__conv_block) */
int64_t ct__conv_block_count(int64_t N, int64_t B) {
  int64_t nblk = (N + B - 1) / B, nt = omp_get_max_threads();
  if (nblk >= nt) nblk = (nblk + nt - 1) / nt * nt;
  return nblk < N ? nblk : N;
}

/* The tap plan (conv_blocks.h) of an output of L pixels: below BLOCK_MAX_L pixels, and for input planes
 * of at most PAD_MAX elements padded, a gather table and a padded plane per thread (pad, of
 * sizeof(double) elements so that a half caller widening to float32 fits), both in the calling
 * thread's scratch; with drop set the dead taps are left out (unless every tap is dead: then all
 * stay, and the GEMMs sum zeros). Dropping a dead tap removes its C/G rows of zeros from every
 * GEMM: resnet18's layer4 on 28 x 28 images has 1 x 1 maps, where a 3x3 conv has one live tap of
 * nine (docs/perf-history.md). CT_ENOMEM when the scratch cannot be had. */
enum { PAD_MAX = 4096 };

static ct_status plan_taps(const geom *g, int64_t L, int drop, ct_conv_taps *tp) {
  int64_t KK = g->kh * g->kw, Wp = g->W + 2 * g->pw, HWp = (g->H + 2 * g->ph) * Wp, nt = omp_get_max_threads();
  tp->T = KK, tp->taps = NULL, tp->table = NULL, tp->pad = NULL, tp->pad_n = HWp;
  if (L <= 0 || L >= BLOCK_MAX_L || HWp > PAD_MAX) return CT_OK;
  int32_t *taps = (int32_t *)ct__conv_scratch(CT_CONV_SCRATCH_TAPS, (size_t)(KK * (L + 1)) * sizeof(int32_t));
  char *pad = ct__conv_scratch(CT_CONV_SCRATCH_PAD, (size_t)(nt * HWp) * sizeof(double));
  if (!taps || !pad) return CT_ENOMEM;
  int32_t *table = taps + KK;
  int64_t T = 0;
  for (int64_t t = 0; t < KK; t++) {
    int64_t live = 0, h, w;
    int32_t *row = table + T * L; /* over a dead tap's row when that one is dropped */
    for (int64_t ho = 0; ho < g->Ho; ho++)
      for (int64_t wo = 0; wo < g->Wo; wo++) {
        live |= ct__conv_tap_input(g, t, ho, wo, &h, &w);
        /* the output size's formula keeps h in [-pH, H + pH) and w in [-pW, W + pW): inside pad */
        row[ho * g->Wo + wo] = (int32_t)((h + g->ph) * Wp + w + g->pw);
      }
    if (live || !drop) taps[T++] = (int32_t)t;
  }
  if (T == 0) return plan_taps(g, L, 0, tp);
  tp->T = T, tp->taps = taps, tp->table = table, tp->pad = pad;
  return CT_OK;
}

/* this thread's padded plane of the tap plan; NULL without a gather table */
static char *thread_pad(const ct_conv_taps *tp, int tid) {
  return tp->pad ? tp->pad + tid * tp->pad_n * (int64_t)sizeof(double) : NULL;
}

/* The gather lists of ct_conv_bw from the tap plan's table, for rows ld apart: every (r, l) whose
 * input lies inside the map is listed under its pixel, r ascending. CT_ENOMEM when the scratch
 * cannot be had. */
static ct_status plan_col2im(ct_conv_bw *c) {
  const geom *g = &c->g;
  int64_t T = c->tp.T, L = c->L, HW = g->H * g->W, Wp = g->W + 2 * g->pw;
  int32_t *st = (int32_t *)ct__conv_scratch(CT_CONV_SCRATCH_COL2IM, (size_t)(HW + 1 + T * L) * sizeof(int32_t));
  if (!st) return CT_ENOMEM;
  int32_t *ls = st + HW + 1;
  memset(st, 0, (size_t)(HW + 1) * sizeof(int32_t));
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t r = 0; r < T; r++)
      for (int64_t l = 0; l < L; l++) {
        int64_t e = c->tp.table[r * L + l], h = e / Wp - g->ph, w = e % Wp - g->pw;
        if (h < 0 || h >= g->H || w < 0 || w >= g->W) continue; /* reads padding */
        if (pass == 0) st[h * g->W + w + 1]++;                   /* count */
        else ls[st[h * g->W + w]++] = (int32_t)(r * c->ld + l); /* fill, st[p] the cursor */
      }
    if (pass == 0) /* counts to starts */
      for (int64_t p = 0; p < HW; p++) st[p + 1] += st[p];
  }
  for (int64_t p = HW; p > 0; p--) st[p] = st[p - 1]; /* each cursor ended at the next start */
  st[0] = 0;
  c->gstart = st, c->glist = ls;
  return CT_OK;
}

/* w (O, C/G, kH, kW) packed to its live taps, (O, C/G, T), in the scratch; w itself when no tap is
 * dead. NULL when out of memory. */
static const char *pack_weights(const geom *g, const ct_conv_taps *tp, const char *w, int64_t es) {
  int64_t KK = g->kh * g->kw, rows = g->O * (g->C / g->G);
  if (tp->T == KK) return w;
  char *p = ct__conv_scratch(CT_CONV_SCRATCH_WPACK, (size_t)(rows * tp->T * es));
  if (!p) return NULL;
  /* element by element, typed: a memcpy call each cost 2% of a resnet18 step; the threads share
   * it (a 512 x 512 x 3 x 3 weight is read whole for one live tap) */
#pragma omp parallel for schedule(static) if (rows * KK >= 65536)
  for (int64_t q = 0; q < rows; q++)
    for (int64_t r = 0; r < tp->T; r++)
      if (es == 4) ((uint32_t *)p)[q * tp->T + r] = ((const uint32_t *)w)[q * KK + tp->taps[r]];
      else ((uint64_t *)p)[q * tp->T + r] = ((const uint64_t *)w)[q * KK + tp->taps[r]];
  return p;
}

ct_status ct__conv_forward_setup(ct_conv_fw *c, ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t Ho, int64_t Wo,
                                 const ct_conv2d_opts *o) {
  c->g = geometry(x, w, Ho, Wo, o);
  c->dt = x->dtype, c->es = (int64_t)ct_dtype_size(c->dt);
  c->L = Ho * Wo;
  ct_status s = plan_taps(&c->g, c->L, c->dt == CT_F32 || c->dt == CT_F64, &c->tp);
  if (s != CT_OK) return s;
  c->K = c->g.C / c->g.G * c->tp.T, c->Og = c->g.O / c->g.G, c->Kall = c->g.C * c->tp.T;
  c->B = ct__conv_block_images(&c->g, c->L), c->ld = c->B * c->L, c->nblk = ct__conv_block_count(c->g.N, c->B);
  c->xp = ct__ptr(x), c->wp = pack_weights(&c->g, &c->tp, ct__ptr(w), c->es), c->bp = b ? ct__ptr(b) : NULL;
  c->bdt = b ? b->dtype : c->dt;
  c->bufs = ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)(omp_get_max_threads() * c->Kall * c->ld * c->es));
  return c->bufs && c->wp ? CT_OK : CT_ENOMEM;
}

void ct__conv_forward_block(const ct_conv_fw *c, int64_t n0, int64_t nb, int tid, char *ys) {
  const geom *g = &c->g;
  int64_t es = c->es, L = c->L, K = c->K, Og = c->Og, ld = c->ld, NL = nb * L, CHW = g->C * g->H * g->W;
  char *cols = c->bufs + tid * c->Kall * ld * es;
  char *pad = thread_pad(&c->tp, tid);
  for (int64_t b = 0; b < nb; b++) im2col(c->dt, g, &c->tp, pad, c->xp + (n0 + b) * CHW * es, cols + b * L * es, ld);
  /* y starts as the bias and the GEMM adds to it (beta = 1): OpenBLAS would otherwise spend a
   * pass zeroing C for beta = 0 and a second pass would add the bias */
  for (int64_t oc = 0; c->bp && oc < g->O; oc++) {
    double bias = ct__load(c->bp + oc * ct_dtype_size(c->bdt), c->bdt);
    if (c->dt == CT_F32)
      for (int64_t l = 0; l < NL; l++) ((float *)ys)[oc * ld + l] = (float)bias;
    else
      for (int64_t l = 0; l < NL; l++) ((double *)ys)[oc * ld + l] = bias;
  }
  for (int64_t gi = 0; gi < g->G; gi++)
    ct__conv_gemm(c->dt, 0, 0, Og, NL, K, c->wp + gi * Og * K * es, K, cols + gi * K * ld * es, ld, c->bp ? 1.0 : 0.0,
         ys + gi * Og * ld * es, ld);
}

/* Between a block's (O, nb L), rows ld apart, and y's (nb, O, L) layout: image b's row oc is the L
 * elements at oc ld + b L in the one and at (b O + oc) L in the other. to_y: from the block's (src)
 * into y's layout (dst); else from y's layout into the block's. */
static void block_copy(int64_t es, int to_y, int64_t nb, int64_t O, int64_t L, int64_t ld, const char *src, char *dst) {
  for (int64_t b = 0; b < nb; b++)
    for (int64_t oc = 0; oc < O; oc++) {
      int64_t blk = (oc * ld + b * L) * es, img = (b * O + oc) * L * es;
      const char *s = src + (to_y ? blk : img);
      char *d = dst + (to_y ? img : blk);
      if (es == 4)
        for (int64_t l = 0; l < L; l++) ((uint32_t *)d)[l] = ((const uint32_t *)s)[l];
      else
        for (int64_t l = 0; l < L; l++) ((uint64_t *)d)[l] = ((const uint64_t *)s)[l];
    }
}

ct_status ct__cpu_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  geom dg = geometry(x, w, y->shape[2], y->shape[3], o);
  int32_t *map;
  if (ct__conv_dense_plan(&dg, 0, x->dtype, &map)) /* inputs smaller than the kernel: conv_dense.c */
    return ct__conv_dense_forward(&dg, 0, x->dtype, map, ct__ptr(x), ct__ptr(w), b ? ct__ptr(b) : NULL,
                                  b ? b->dtype : x->dtype, ct__ptr(y));
  ct_conv_fw c;
  ct_status s = ct__conv_forward_setup(&c, x, w, b, y->shape[2], y->shape[3], o);
  if (s != CT_OK) return s;
  char *yp = ct__ptr(y);
  int64_t B = c.B, N = c.g.N, O = c.g.O, L = c.L, es = c.es;
  /* a block of one image is computed in place; a larger one in a per-thread (O, B L) and scattered */
  char *stage = B > 1 ? ct__conv_scratch(CT_CONV_SCRATCH_BLOCK, (size_t)(omp_get_max_threads() * O * c.ld * es)) : NULL;
  if (B > 1 && !stage) return CT_ENOMEM;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < c.nblk; i++) {
    int tid = omp_get_thread_num();
    int64_t n0, nb;
    ct__conv_block(i, c.nblk, N, &n0, &nb);
    char *yn = yp + n0 * O * L * es, *ys = B > 1 ? stage + tid * O * c.ld * es : yn;
    ct__conv_forward_block(&c, n0, nb, tid, ys);
    if (B > 1) block_copy(es, 1, nb, O, L, c.ld, ys, yn);
  }
  return CT_OK;
}

/* The sum of a row of n elements: float32 in 8 float lanes (vectorizable), added up in double. */
static double row_sum(ct_dtype dt, const char *row, int64_t n) {
  double s = 0;
  int64_t l = 0;
  if (dt == CT_F32) {
    const float *r = (const float *)row;
    float lane[8] = {0};
    for (; l + 8 <= n; l += 8)
      for (int k = 0; k < 8; k++) lane[k] += r[l + k];
    for (int k = 0; k < 8; k++) s += lane[k];
    for (; l < n; l++) s += r[l];
    return s;
  }
  for (; l < n; l++) s += ((const double *)row)[l];
  return s;
}

ct_status ct__conv_backward_setup(ct_conv_bw *c, ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *x, ct_tensor *w,
                                  int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  const geom g = c->g = geometry(x, w, Ho, Wo, o);
  ct_dtype dt = c->dt = x->dtype;
  int64_t es = c->es = (int64_t)ct_dtype_size(dt), L = c->L = Ho * Wo, nt = c->nt = omp_get_max_threads();
  ct_status s = plan_taps(&g, L, dt == CT_F32 || dt == CT_F64, &c->tp);
  if (s != CT_OK) return s;
  c->K = g.C / g.G * c->tp.T, c->Og = g.O / g.G, c->Kall = g.C * c->tp.T, c->wsz = g.O * c->K;
  c->B = ct__conv_block_images(&g, L), c->ld = c->B * L, c->nblk = ct__conv_block_count(g.N, c->B);
  c->xp = ct__ptr(x), c->wp = gx ? pack_weights(&g, &c->tp, ct__ptr(w), es) : ct__ptr(w);
  if (!c->wp) return CT_ENOMEM;
  c->gxp = gx ? ct__ptr(gx) : NULL;
  c->gstart = c->glist = NULL;
  if (gx && c->tp.table && (s = plan_col2im(c)) != CT_OK) return s;
  c->cols = gw ? ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)(nt * c->Kall * c->ld * es)) : NULL;
  c->dcols = gx ? ct__conv_scratch(CT_CONV_SCRATCH_DCOLS, (size_t)(nt * c->Kall * c->ld * es)) : NULL;
  c->acc = gw ? ct__conv_scratch(CT_CONV_SCRATCH_WGRAD, (size_t)(nt * c->wsz * es)) : NULL;
  c->bacc = gb ? (double *)ct__conv_scratch(CT_CONV_SCRATCH_BGRAD, (size_t)(nt * g.O) * sizeof(double)) : NULL;
  if ((gw && !c->cols) || (gx && !c->dcols) || (gw && !c->acc) || (gb && !c->bacc)) return CT_ENOMEM;
  return CT_OK;
}

void ct__conv_backward_zero(const ct_conv_bw *c) {
  /* every slice of the nt, whatever the team's size, and on the threads: zeroed on the calling
   * thread alone they were 4% of a 2-thread resnet18 step with the other thread waiting */
  int64_t es = c->es, O = c->g.O, rows = c->Kall * c->ld;
  for (int64_t t = omp_get_thread_num(); t < c->nt; t += omp_get_num_threads()) {
    if (c->bacc) memset(c->bacc + t * O, 0, (size_t)O * sizeof(double));
    if (c->acc) memset(c->acc + t * c->wsz * es, 0, (size_t)(c->wsz * es));
    /* dcols starts at zero and col2im zeroes every element it reads (the gather path: all of a
     * channel's rows once read), so each block's input-gradient GEMM can add into it (beta = 1)
     * and OpenBLAS skips its pass zeroing C (5% of a cnn step); the elements col2im never reads
     * (taps outside the image) collect sums nobody reads. Image b of a block always has columns
     * [b L, b L + L) (rows ld apart, a short last block too), so those elements are the same ones
     * in every block. */
    if (c->dcols) memset(c->dcols + t * rows * es, 0, (size_t)(rows * es));
  }
}

void ct__conv_backward_block(const ct_conv_bw *c, int64_t n0, int64_t nb, int tid, const char *dys) {
  const geom *g = &c->g;
  ct_dtype dt = c->dt;
  int64_t es = c->es, L = c->L, K = c->K, Og = c->Og, ld = c->ld, NL = nb * L, CHW = g->C * g->H * g->W;
  char *pad = thread_pad(&c->tp, tid);
  if (c->bacc) /* the bias gradient: each image's row sums of dy, while dy is in this thread's cache */
    for (int64_t b = 0; b < nb; b++)
      for (int64_t oc = 0; oc < g->O; oc++) c->bacc[tid * g->O + oc] += row_sum(dt, dys + (oc * ld + b * L) * es, L);
  if (c->acc) { /* dW_g += dy_g (Og, nb L) @ cols_g^T (nb L, K), into this thread's accumulator */
    char *cn = c->cols + tid * c->Kall * ld * es;
    for (int64_t b = 0; b < nb; b++) im2col(dt, g, &c->tp, pad, c->xp + (n0 + b) * CHW * es, cn + b * L * es, ld);
    for (int64_t gi = 0; gi < g->G; gi++)
      ct__conv_gemm(dt, 0, 1, Og, K, NL, dys + gi * Og * ld * es, ld, cn + gi * K * ld * es, ld, 1.0,
           c->acc + (tid * c->wsz + gi * Og * K) * es, K);
  }
  if (c->gxp) { /* dcols_g (K, nb L) = W_g^T (K, Og) @ dy_g (Og, nb L), then col2im into each gx_n */
    char *dc = c->dcols + tid * c->Kall * ld * es;
    for (int64_t gi = 0; gi < g->G; gi++)
      ct__conv_gemm(dt, 1, 0, K, NL, Og, c->wp + gi * Og * K * es, K, dys + gi * Og * ld * es, ld, 1.0,
           dc + gi * K * ld * es, ld);
    if (c->gstart && dt == CT_F32) col2im_gather_f32(c, (float *)dc, nb, (float *)(c->gxp + n0 * CHW * es));
    else if (c->gstart) col2im_gather_f64(c, (double *)dc, nb, (double *)(c->gxp + n0 * CHW * es));
    else
      for (int64_t b = 0; b < nb; b++) col2im(dt, g, dc + b * L * es, ld, c->gxp + (n0 + b) * CHW * es);
  }
}

void ct__conv_backward_finish(const ct_conv_bw *c, ct_tensor *gw, ct_tensor *gb) {
  int64_t nt = c->nt, wsz = c->wsz, O = c->g.O;
  for (int64_t oc = 0; gb && oc < O; oc++) {
    double sum = 0;
    for (int64_t t = 0; t < nt; t++) sum += c->bacc[t * O + oc];
    ct__store((char *)ct__ptr(gb) + oc * (int64_t)ct_dtype_size(gb->dtype), gb->dtype, sum);
  }
  if (gw) { /* sum the per-thread accumulators; with dead taps, k = (q, r) goes to (q, taps[r]) of gw and the dead taps' gradients are 0 */
    char *gwp = ct__ptr(gw);
    ct_dtype dt = c->dt;
    const char *acc = c->acc;
    int64_t T = c->tp.T, KK = c->g.kh * c->g.kw, nq = wsz / T;
    /* one row q = (o, c) of gw a time: its dead taps zeroed and its live ones summed on the same
     * thread (a serial memset of gw first left the other thread waiting); typed stores (ct__store
     * per element cost 4% of a resnet18 step); float32's sum in double as before */
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < nq; q++) {
      if (T < KK) memset(gwp + q * KK * c->es, 0, (size_t)(KK * c->es));
      for (int64_t r = 0; r < T; r++) {
        int64_t k = q * T + r, at = T < KK ? q * KK + c->tp.taps[r] : k;
        double s = 0;
        if (dt == CT_F32) {
          for (int64_t t = 0; t < nt; t++) s += ((const float *)acc)[t * wsz + k];
          ((float *)gwp)[at] = (float)s;
        } else {
          for (int64_t t = 0; t < nt; t++) s += ((const double *)acc)[t * wsz + k];
          ((double *)gwp)[at] = s;
        }
      }
    }
  }
}

ct_status ct__cpu_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                  const ct_conv2d_opts *o) {
  geom dg = geometry(x, w, gy->shape[2], gy->shape[3], o);
  int32_t *map;
  if (ct__conv_dense_plan(&dg, 0, x->dtype, &map))
    return ct__conv_dense_backward(&dg, 0, x->dtype, map, ct__ptr(x), ct__ptr(w), ct__ptr(gy), gx ? ct__ptr(gx) : NULL,
                                   gw ? ct__ptr(gw) : NULL, gb ? ct__ptr(gb) : NULL, gb ? gb->dtype : x->dtype);
  ct_conv_bw c;
  ct_status s = ct__conv_backward_setup(&c, gx, gw, gb, x, w, gy->shape[2], gy->shape[3], o);
  if (s != CT_OK) return s;
  const char *gyp = ct__ptr(gy);
  int64_t B = c.B, N = c.g.N, O = c.g.O, L = c.L, es = c.es;
  /* a block of one image reads dy in place; a larger one gathers its images' into (O, B L) */
  char *stage = B > 1 ? ct__conv_scratch(CT_CONV_SCRATCH_BLOCK, (size_t)(c.nt * O * c.ld * es)) : NULL;
  if (B > 1 && !stage) return CT_ENOMEM;
#pragma omp parallel
  {
    ct__conv_backward_zero(&c);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < c.nblk; i++) {
      int tid = omp_get_thread_num();
      int64_t n0, nb;
      ct__conv_block(i, c.nblk, N, &n0, &nb);
      const char *gyn = gyp + n0 * O * L * es;
      char *dys = B > 1 ? stage + tid * O * c.ld * es : NULL;
      if (dys) block_copy(es, 0, nb, O, L, c.ld, gyn, dys);
      ct__conv_backward_block(&c, n0, nb, tid, dys ? dys : gyn);
    }
  }
  ct__conv_backward_finish(&c, gw, gb);
  return CT_OK;
}
