/* src/backend/cpu/conv_blocks.h: what the CPU's convolution files share: the geometry (geom), the
 * per-thread scratch slots and the GEMM (conv_scratch.c), the tap plan of a small output, the
 * blocks of images and the per-block forward and backward steps (conv.c), and the dense path
 * (conv_dense.c); used by conv2d (conv.c), the channels_last conv (conv_nhwc.c) and the fused
 * conv2d + relu + max pooling (conv_relu_pool.c). Internal to the CPU backend.
 * A forward or backward is: setup (geometry, scratch, and B, the most images per block: 1, or
 * more when the output is small, conv.c; and nblk, the blocks), then one call per block
 * (ct__conv_block) from inside an OpenMP loop (tid = omp_get_thread_num(); the backward's region
 * first zeroes its accumulators, ct__conv_backward_zero), then, for the backward, finish
 * (sums the per-thread gradient accumulators into gw and gb). A block's outputs and output
 * gradients are an (O, nb L) matrix with rows ld = B L apart, image b in columns [b L, b L + L):
 * for B = 1, image n's (O, L) of y or dy itself. */
#ifndef CUTTLE_CPU_CONV_BLOCKS_H
#define CUTTLE_CPU_CONV_BLOCKS_H

#include "backend/cpu/cpu.h"

/* Scratch slots of ct__conv_scratch, each sized for all threads: im2col matrices, input-gradient
 * dcols, weight- and bias-gradient accumulators, and the fused kernels' conv output and gradient. */
enum {
  CT_CONV_SCRATCH_COLS,
  CT_CONV_SCRATCH_DCOLS,
  CT_CONV_SCRATCH_WGRAD,
  CT_CONV_SCRATCH_BGRAD,
  CT_CONV_SCRATCH_FUSED,
  CT_CONV_SCRATCH_FUSED_GRAD,
  CT_CONV_SCRATCH_BLOCK, /* conv2d's (O, B L) per thread for blocks of more than one image */
  CT_CONV_SCRATCH_TAPS,  /* a small output's tap list and gather table (conv.c) */
  CT_CONV_SCRATCH_WPACK, /* the weights of the live taps only, when some taps are dead (conv.c) */
  CT_CONV_SCRATCH_PAD,   /* a zero-bordered input plane per thread for the gather table (conv.c) */
  CT_CONV_SCRATCH_COL2IM, /* the input-gradient gather lists of a small output (conv.c) */
  CT_CONV_SCRATCH_DENSE_W,  /* the dense path's (O L, C H W) weight matrix (conv_dense.c) */
  CT_CONV_SCRATCH_DENSE_GW, /* and its gradient */
  CT_CONV_SCRATCH_SLOTS
};
/* Per calling thread, grown only, kept for the thread's life; NULL (CT_ENOMEM set) when out of memory. */
char *ct__conv_scratch(int slot, size_t n);
/* C (M, N) = op(A) op(B) + beta C, row-major, all float32 or all float64 (dt): cblas_sgemm or
 * cblas_dgemm with alpha 1; ta, tb transpose A, B; lda, ldb, ldc in elements. The GEMM of the
 * NCHW (conv.c) and NHWC (conv_nhwc.c) convolutions. */
void ct__conv_gemm(ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                   int64_t ldb, double beta, void *C, int64_t ldc);

/* x: (N, C, H, W), w: (O, C/G, kH, kW) -> y: (N, O, Ho, Wo), L = Ho Wo, K = C/G kH kW */
typedef struct {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, G;
  int sh, sw, ph, pw, dh, dw;
} geom;

/* The input pixel (*h, *w) that output pixel (ho, wo) reads under tap t = i kW + j, as PyTorch's
 * conv2d indexes it (h = ho sH - pH + i dH, w likewise), and 1 when it lies inside the H x W map,
 * 0 when it falls in the padding. */
static inline int ct__conv_tap_input(const geom *g, int64_t t, int64_t ho, int64_t wo, int64_t *h, int64_t *w) {
  *h = ho * g->sh - g->ph + t / g->kw * g->dh, *w = wo * g->sw - g->pw + t % g->kw * g->dw;
  return *h >= 0 && *h < g->H && *w >= 0 && *w < g->W;
}

/* How a setup lays out the rows of im2col (conv.c). A small output (L < 100 pixels, on an input
 * plane that is small once padded) is gathered through a table: table[r L + l] is the offset of
 * output pixel l's input under tap taps[r] (i kW + j) in the plane padded with zeros to
 * (H + 2 pH, W + 2 pW), copied into pad (pad_n elements per thread). A tap that reads only padding
 * for every output pixel (a 3x3 conv on a 1x1 map has 8 such) is dead: for float32 and float64,
 * only the T live taps get rows, K = C/G T, and the weights are packed to (O, C/G, T) (wp); the
 * weight gradient is scattered back with zeros at the dead taps. Other outputs have table NULL and
 * all T = kH kW taps. */
typedef struct {
  int64_t T, pad_n;
  const int32_t *taps, *table;
  char *pad;
} ct_conv_taps;

typedef struct {
  geom g;
  ct_conv_taps tp;
  ct_dtype dt, bdt;
  int64_t es, L, K, Og, Kall, B, ld, nblk; /* at most B images per block, ld = B L; K = C/G T, Kall = C T */
  const char *xp, *wp, *bp;
  char *bufs;
} ct_conv_fw;

/* Block i of the nblk a setup chose for N images: [*n0, *n0 + *nb). The sizes differ by at most one
 * (none exceeds B) and nblk is a multiple of the thread count where there are enough images, so
 * OpenMP's static schedule gives each thread the same number of images: with blocks of B and a
 * short last one, resnet18's layer1 (blocks of 6) left one of 2 threads 4 images of 64 idle. */
static inline void ct__conv_block(int64_t i, int64_t nblk, int64_t N, int64_t *n0, int64_t *nb) {
  *n0 = i * N / nblk, *nb = (i + 1) * N / nblk - *n0;
}

/* B, the most images per block for an output of L pixels (1 unless the output is small, conv.c;
 * the same for conv2d, the fused conv and the channels_last conv), and the number of blocks for N
 * images (a multiple of the threads where N allows, for ct__conv_block). */
int64_t ct__conv_block_images(const geom *g, int64_t L);
int64_t ct__conv_block_count(int64_t N, int64_t B);

/* x, w contiguous of one dtype (f32/f64, or a half whose caller widens: then no tap is dropped
 * and wp is w's), b NULL or (O). CT_ENOMEM when the scratch cannot be had. */
ct_status ct__conv_forward_setup(ct_conv_fw *c, ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t Ho, int64_t Wo,
                                 const ct_conv2d_opts *o);
/* The block of images [n0, n0 + nb), nb <= B: its outputs (O, nb L) = b + conv, written at ys (rows ld apart) */
void ct__conv_forward_block(const ct_conv_fw *c, int64_t n0, int64_t nb, int tid, char *ys);

typedef struct {
  geom g;
  ct_conv_taps tp;
  ct_dtype dt;
  int64_t es, L, K, Og, Kall, wsz, nt, B, ld, nblk; /* at most B images per block, ld = B L; wsz = O K */
  const char *xp, *wp;
  char *gxp, *cols, *dcols, *acc;
  double *bacc;
  /* with a gather table and gx wanted: input pixel p's gradient is the sum of the dcols elements
   * glist[gstart[p]] ... glist[gstart[p + 1] - 1], in tap order (offsets r ld + l from a channel's
   * first row and an image's first column); NULL otherwise */
  const int32_t *gstart, *glist;
} ct_conv_bw;

/* gx, gw, gb: the wanted gradients (NULL: not wanted), x, w as in conv2d_backward; Ho, Wo the conv
 * output's size. CT_ENOMEM when the scratch cannot be had. */
ct_status ct__conv_backward_setup(ct_conv_bw *c, ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *x, ct_tensor *w,
                                  int64_t Ho, int64_t Wo, const ct_conv2d_opts *o);
/* Zeroes the per-thread accumulators (bacc, acc, dcols: the block function adds into them). Called
 * by every thread of the parallel region that runs the blocks, before its first block: each zeroes
 * its share of the nt slices. */
void ct__conv_backward_zero(const ct_conv_bw *c);
/* the block [n0, n0 + nb)'s share, with its output gradients (O, nb L) at dys (rows ld apart): each
 * gx_n written, gw and gb accumulated per thread */
void ct__conv_backward_block(const ct_conv_bw *c, int64_t n0, int64_t nb, int tid, const char *dys);
void ct__conv_backward_finish(const ct_conv_bw *c, ct_tensor *gw, ct_tensor *gb);

/* The dense path (conv_dense.c): conv2d as one GEMM against an (O L, C H W) matrix assembled from
 * w, for input maps with fewer pixels than the kernel has live taps (nhwc: no more pixels).
 * ct__conv_dense_plan returns 1 and the pixel-to-tap map (in the calling thread's scratch, valid
 * until its next conv) when g and dt take it: groups 1, float32 or float64, that matrix at most
 * 4 Mi elements; else 0. forward: y (N, O, Ho, Wo) = conv(x, w) + b (b NULL or (O) of dtype bdt).
 * backward: each of gx, gw, gb that is not NULL written whole (gb in dtype gbdt) from gy. Both:
 * x, w, y, gy, gx, gw of dtype dt, dense, contiguous (nhwc 0) or all channels_last (nhwc 1: x, y
 * stored (N, H, W, C), w (O, kH, kW, C)); CT_ENOMEM when the scratch cannot be had. */
int ct__conv_dense_plan(const geom *g, int nhwc, ct_dtype dt, int32_t **map);
ct_status ct__conv_dense_forward(const geom *g, int nhwc, ct_dtype dt, const int32_t *map, const void *x, const void *w,
                                 const void *b, ct_dtype bdt, void *y);
ct_status ct__conv_dense_backward(const geom *g, int nhwc, ct_dtype dt, const int32_t *map, const void *x, const void *w,
                                  const void *gy, void *gx, void *gw, void *gb, ct_dtype gbdt);

#endif
