/* src/backend/cpu/conv.h: the CPU convolution's per-image steps, shared by conv2d (conv.c) and the
 * fused conv2d + relu + max pooling (conv_relu_pool.c). Internal to the CPU backend.
 * A forward or backward is: setup (geometry, scratch), then one call per image from inside an
 * OpenMP loop (tid = omp_get_thread_num()), then, for the backward, finish (sums the per-thread
 * gradient accumulators into gw and gb). */
#ifndef CUTTLE_CPU_CONV_H
#define CUTTLE_CPU_CONV_H

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

typedef struct {
  geom g;
  ct_dtype dt, bdt;
  int64_t es, L, K, Og, Kall;
  const char *xp, *wp, *bp;
  char *bufs;
} ct_conv_fw;

/* x, w contiguous of one dtype (f32/f64), b NULL or (O). CT_ENOMEM when the scratch cannot be had. */
ct_status ct__conv_forward_setup(ct_conv_fw *c, ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t Ho, int64_t Wo,
                                 const ct_conv2d_opts *o);
/* y_n (O, Ho Wo) = b + conv of image n, written at yn */
void ct__conv_forward_image(const ct_conv_fw *c, int64_t n, int tid, char *yn);

typedef struct {
  geom g;
  ct_dtype dt;
  int64_t es, L, K, Og, Kall, wsz, nt;
  const char *xp, *wp;
  char *gxp, *cols, *dcols, *acc;
  double *bacc;
} ct_conv_bw;

/* gx, gw, gb: the wanted gradients (NULL: not wanted), x, w as in conv2d_backward; Ho, Wo the conv
 * output's size. Zeroes the accumulators. CT_ENOMEM when the scratch cannot be had. */
ct_status ct__conv_backward_setup(ct_conv_bw *c, ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *x, ct_tensor *w,
                                  int64_t Ho, int64_t Wo, const ct_conv2d_opts *o);
/* image n's share, with its output gradient dy_n (O, Ho Wo) at gyn: gx_n written, gw and gb
 * accumulated per thread */
void ct__conv_backward_image(const ct_conv_bw *c, int64_t n, int tid, const char *gyn);
void ct__conv_backward_finish(const ct_conv_bw *c, ct_tensor *gw, ct_tensor *gb);

#endif
