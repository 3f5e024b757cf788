/* src/backend/cuda/pool.cu: 2-D max and average pooling, NCHW, and their backward; adaptive average
 * pooling (at the end) and its backward.
 *
 * Own kernels rather than cuDNN: the vtable's backward gets (gy, argmax) and not x and y, which is
 * what cudnnPoolingBackward needs, and the argmax layout must match the CPU's.
 *   x: (N, C, H, W) -> y: (N, C, Ho, Wo), sized by the front-end (torch's rule, floor or ceil_mode).
 *   argmax: int64 of y's shape (may be NULL in the forward): the flat index h * W + w of the
 *   maximum within its (H, W) input plane, as torch's max_pool2d_with_indices. Windows as the CPU's
 *   (src/backend/cpu/pool_window.h): output o's holds start + i d, i < k, start = o s - p. Max
 *   pooling pads with -inf, visits the elements inside the input (dilation d), propagates NaN (as
 *   torch), and gives -inf and argmax -1 (no gradient) for a window with none; average pooling
 *   (d = 1) divides as torch's cpu_avg_pool (aten/src/ATen/native/cpu/AvgPoolKernel.cpp):
 *   divisor_override, else with count_include_pad the window clipped to the padded input
 *   [-p, n + p) (kH kW but for a ceil_mode window past it), else its elements inside the input;
 *   0 for a window with none.
 * Backward: max scatters gy into gx at argmax with atomicAdd (windows may overlap); average gathers,
 * for each input element, the gy of every window covering it (deterministic, no atomics).
 * Compute in float for float32/float16/bfloat16, double for float64. */
#include <math.h>

#include "backend/cuda/common.cuh"

typedef struct {
  int64_t N, C, H, W, Ho, Wo;
  int kh, kw, sh, sw, ph, pw, dh, dw, exclude_pad, divisor;
} pool_geom;

/* One side of output o's window: [*lo, *hi) stepping by d holds its elements inside the input (none
 * when lo >= hi); returns the window's length clipped to the padded input (count_include_pad's
 * factor, for d = 1). */
static __device__ __forceinline__ int64_t pool_side(int64_t o, int64_t n, int k, int s, int p, int d, int64_t *lo, int64_t *hi) {
  int64_t start = o * s - p, end = start + (int64_t)d * (k - 1) + 1;
  *lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  *hi = end < n ? end : n;
  return (end < n + p ? end : n + p) - start;
}

/* average pooling's divisor for output (oh, ow); 0 where its window holds no input element */
static __device__ __forceinline__ int64_t pool_divisor(int64_t oh, int64_t ow, const pool_geom &g) {
  int64_t h0, h1, w0, w1;
  int64_t ph = pool_side(oh, g.H, g.kh, g.sh, g.ph, 1, &h0, &h1), pw = pool_side(ow, g.W, g.kw, g.sw, g.pw, 1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) return 0;
  return g.divisor ? g.divisor : g.exclude_pad ? (h1 - h0) * (w1 - w0) : ph * pw;
}

/* ---- kernels */

/* one thread per y element (n, c, oh, ow) */
template <typename S, typename C, int KIND>
__global__ void pool_fwd_kernel(S *__restrict__ y, int64_t *__restrict__ argmax, const S *__restrict__ x, pool_geom g) {
  int64_t n = g.N * g.C * g.Ho * g.Wo;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ow = i % g.Wo, oh = (i / g.Wo) % g.Ho, nc = i / (g.Wo * g.Ho);
    const S *xp = x + nc * g.H * g.W;
    int64_t hs, he, ws, we;
    if (KIND == CT_POOL_MAX) {
      pool_side(oh, g.H, g.kh, g.sh, g.ph, g.dh, &hs, &he);
      pool_side(ow, g.W, g.kw, g.sw, g.pw, g.dw, &ws, &we);
      C best = -INFINITY;
      int64_t bi = hs < he && ws < we ? hs * g.W + ws : -1; /* -1: nothing inside the input, no gradient */
      for (int64_t h = hs; h < he; h += g.dh)
        for (int64_t w = ws; w < we; w += g.dw) {
          C v = ct_cast<C>(xp[h * g.W + w]);
          if (v > best || v != v) { /* a NaN wins, and a later NaN after it: the CPU's and torch's rule */
            best = v;
            bi = h * g.W + w;
          }
        }
      y[i] = ct_cast<S>(best);
      if (argmax) argmax[i] = bi;
    } else {
      pool_side(oh, g.H, g.kh, g.sh, g.ph, 1, &hs, &he);
      pool_side(ow, g.W, g.kw, g.sw, g.pw, 1, &ws, &we);
      C s = 0;
      for (int64_t h = hs; h < he; h++)
        for (int64_t w = ws; w < we; w++) s += ct_cast<C>(xp[h * g.W + w]);
      int64_t dv = pool_divisor(oh, ow, g);
      y[i] = ct_cast<S>(dv > 0 ? s / (C)dv : s);
    }
  }
}

static __device__ __forceinline__ void atomic_add_s(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add_s(double *p, double v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add_s(__half *p, __half v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add_s(__nv_bfloat16 *p, __nv_bfloat16 v) { atomicAdd(p, v); }

/* one thread per gy element: gx (zeroed) [argmax] += gy */
template <typename S>
__global__ void maxpool_bwd_kernel(S *__restrict__ gx, const S *__restrict__ gy, const int64_t *__restrict__ argmax,
                                   pool_geom g) {
  int64_t n = g.N * g.C * g.Ho * g.Wo;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t nc = i / (g.Wo * g.Ho), k = argmax[i];
    if (k >= 0 && k < g.H * g.W) atomic_add_s(&gx[nc * g.H * g.W + k], gy[i]);
  }
}

/* one thread per gx element (n, c, h, w): the sum of gy / divisor over the windows covering it */
template <typename S, typename C>
__global__ void avgpool_bwd_kernel(S *__restrict__ gx, const S *__restrict__ gy, pool_geom g) {
  int64_t n = g.N * g.C * g.H * g.W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t w = i % g.W, h = (i / g.W) % g.H, nc = i / (g.W * g.H);
    int64_t hp = h + g.ph, wp = w + g.pw;
    /* windows oh with oh*sh <= hp < oh*sh + kh */
    int64_t oh0 = hp < g.kh ? 0 : (hp - g.kh) / g.sh + 1, oh1 = hp / g.sh;
    int64_t ow0 = wp < g.kw ? 0 : (wp - g.kw) / g.sw + 1, ow1 = wp / g.sw;
    if (oh1 >= g.Ho) oh1 = g.Ho - 1;
    if (ow1 >= g.Wo) ow1 = g.Wo - 1;
    const S *gp = gy + nc * g.Ho * g.Wo;
    C s = 0;
    for (int64_t oh = oh0; oh <= oh1; oh++)
      for (int64_t ow = ow0; ow <= ow1; ow++) s += ct_cast<C>(gp[oh * g.Wo + ow]) / (C)pool_divisor(oh, ow, g);
    gx[i] = ct_cast<S>(s);
  }
}

/* ---- launchers */

static ct_status make_geom(pool_geom *g, const ct_tensor *big, const ct_tensor *small, const ct_pool2d_opts *o) {
  if (big->ndim != 4 || small->ndim != 4)
    return ct__error(CT_ESHAPE, "cuda: pool2d wants (N, C, H, W) tensors, got %d and %d dims", big->ndim, small->ndim);
  g->N = big->shape[0], g->C = big->shape[1], g->H = big->shape[2], g->W = big->shape[3];
  g->Ho = small->shape[2], g->Wo = small->shape[3];
  g->kh = o->kernel[0], g->kw = o->kernel[1];
  g->sh = o->stride[0] ? o->stride[0] : o->kernel[0];
  g->sw = o->stride[1] ? o->stride[1] : o->kernel[1];
  g->ph = o->padding[0], g->pw = o->padding[1];
  g->dh = o->dilation[0] > 0 ? o->dilation[0] : 1, g->dw = o->dilation[1] > 0 ? o->dilation[1] : 1;
  g->exclude_pad = o->exclude_pad != 0, g->divisor = o->divisor_override > 0 ? o->divisor_override : 0;
  if (g->kh <= 0 || g->kw <= 0 || g->sh <= 0 || g->sw <= 0)
    return ct__error(CT_EINVAL, "cuda: pool2d: kernel (%d, %d) and stride (%d, %d) must be positive", g->kh, g->kw, g->sh, g->sw);
  return CT_OK;
}

/* x: (N, C, H, W) any strides; y: (N, C, Ho, Wo) contiguous; argmax: int64 (N, C, Ho, Wo) or NULL */
ct_status ct__cuda_pool2d(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(y);
  if (!ctx) return ct_last_status();
  pool_geom g;
  CT_TRY(make_geom(&g, x, y, o));
  int64_t n = g.N * g.C * g.Ho * g.Wo;
  if (n == 0) return CT_OK;
  ct__be_tmp xc;
  CT_TRY(ct__be_tmp_contiguous(&xc, x));
  unsigned grid = ct__cuda_blocks(ctx, n);
  int64_t *ap = argmax ? (int64_t *)ct__ptr(argmax) : NULL;
  ct_status s = CT_OK;
  if (kind == CT_POOL_MAX) {
    CT_CUDA_DISPATCH_FLOAT(x->dtype, S, C, "pool2d", pool_fwd_kernel<S, C, CT_POOL_MAX><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                (S *)ct__ptr(y), ap, (const S *)ct__ptr(&xc.t), g));
  } else {
    CT_CUDA_DISPATCH_FLOAT(x->dtype, S, C, "pool2d", pool_fwd_kernel<S, C, CT_POOL_AVG><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                (S *)ct__ptr(y), NULL, (const S *)ct__ptr(&xc.t), g));
  }
  cudaError_t e = cudaGetLastError();
  ct__be_tmp_free(&xc);
  if (e != cudaSuccess) s = ct__error(CT_EBACKEND, "cuda: launch of pool_fwd_kernel failed: %s", cudaGetErrorString(e));
  return s;
}

/* gx: (N, C, H, W) contiguous (overwritten); gy: (N, C, Ho, Wo) contiguous; argmax: int64 (N, C, Ho, Wo), max only */
ct_status ct__cuda_pool2d_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax,
                                   const ct_pool2d_opts *o) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(gx);
  if (!ctx) return ct_last_status();
  pool_geom g;
  CT_TRY(make_geom(&g, gx, gy, o));
  if (!ct_tensor_is_contiguous(gx) || !ct_tensor_is_contiguous(gy))
    return ct__error(CT_EINVAL, "cuda: pool2d_backward wants contiguous gx and gy");
  if (gx->dtype != gy->dtype) return ct__error(CT_EDTYPE, "cuda: pool2d_backward wants gx and gy of one dtype");
  if (kind == CT_POOL_MAX) {
    if (!argmax) return ct__error(CT_EINVAL, "cuda: max_pool2d backward needs the argmax of the forward");
    CT_TRY(ct__cuda_fill(gx, 0.0));
    int64_t n = g.N * g.C * g.Ho * g.Wo;
    if (n == 0) return CT_OK;
    unsigned grid = ct__cuda_blocks(ctx, n);
    CT_CUDA_DISPATCH_FLOAT(gx->dtype, S, C, "pool2d", maxpool_bwd_kernel<S><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                 (S *)ct__ptr(gx), (const S *)ct__ptr(gy), (const int64_t *)ct__ptr(argmax), g));
  } else {
    int64_t n = g.N * g.C * g.H * g.W;
    if (n == 0) return CT_OK;
    unsigned grid = ct__cuda_blocks(ctx, n);
    CT_CUDA_DISPATCH_FLOAT(gx->dtype, S, C, "pool2d", avgpool_bwd_kernel<S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                 (S *)ct__ptr(gx), (const S *)ct__ptr(gy), g));
  }
  CT_CUDA_LAUNCHED("pool_backward_kernel");
  return CT_OK;
}

/* ---- adaptive average pooling, as the CPU's (src/backend/cpu/pool.c) and ATen's
 * (aten/src/ATen/native/AdaptiveAveragePooling.cpp): output cell o of O along an input side of I
 * averages [adaptive_lo(o, O, I), adaptive_hi(o, O, I)) = [floor(o I / O), ceil((o + 1) I / O));
 * neighbouring windows may overlap. Read the other way (adaptive_lo(i, I, O), adaptive_hi(i, I, O)),
 * the rule gives the output cells whose windows hold input i, so the backward gathers (no atomics,
 * the same sums every run). Summed in C: float for float32/float16/bfloat16, double for float64. */
static __device__ __forceinline__ int64_t adaptive_lo(int64_t o, int64_t O, int64_t I) { return o * I / O; }
static __device__ __forceinline__ int64_t adaptive_hi(int64_t o, int64_t O, int64_t I) { return ((o + 1) * I + O - 1) / O; }

/* one thread per y element (nc, oh, ow) of y (NC, OH, OW) from x (NC, H, W) */
template <typename S, typename C>
__global__ void adaptive_avg_fwd_kernel(S *__restrict__ y, const S *__restrict__ x, int64_t NC, int64_t H, int64_t W, int64_t OH,
                                        int64_t OW) {
  int64_t n = NC * OH * OW;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH);
    int64_t h0 = adaptive_lo(oh, OH, H), h1 = adaptive_hi(oh, OH, H), w0 = adaptive_lo(ow, OW, W), w1 = adaptive_hi(ow, OW, W);
    const S *xp = x + nc * H * W;
    C s = 0;
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++) s += ct_cast<C>(xp[h * W + w]);
    y[i] = ct_cast<S>(s / (C)((h1 - h0) * (w1 - w0)));
  }
}

/* one thread per gx element (nc, h, w): the sum of gy / the window's size over the cells whose window holds it */
template <typename S, typename C>
__global__ void adaptive_avg_bwd_kernel(S *__restrict__ gx, const S *__restrict__ gy, int64_t NC, int64_t H, int64_t W, int64_t OH,
                                        int64_t OW) {
  int64_t n = NC * H * W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t w = i % W, h = (i / W) % H, nc = i / (W * H);
    int64_t oh0 = adaptive_lo(h, H, OH), oh1 = adaptive_hi(h, H, OH), ow0 = adaptive_lo(w, W, OW), ow1 = adaptive_hi(w, W, OW);
    const S *gp = gy + nc * OH * OW;
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
      int64_t rows = adaptive_hi(oh, OH, H) - adaptive_lo(oh, OH, H);
      for (int64_t ow = ow0; ow < ow1; ow++) {
        int64_t cols = adaptive_hi(ow, OW, W) - adaptive_lo(ow, OW, W);
        s += ct_cast<C>(gp[oh * OW + ow]) / (C)(rows * cols);
      }
    }
    gx[i] = ct_cast<S>(s);
  }
}

/* The launch of either direction: `out` (contiguous, written whole) from `in` (made contiguous
 * first where it is not); big is (N, C, H, W), small (N, C, OH, OW). */
static ct_status adaptive_launch(int backward, ct_tensor *out, ct_tensor *in, const ct_tensor *big, const ct_tensor *small) {
  const char *what = backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d";
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  if (big->ndim != 4 || small->ndim != 4)
    return ct__error(CT_ESHAPE, "cuda: %s wants (N, C, H, W) tensors, got %d and %d dims", what, big->ndim, small->ndim);
  if (!ct_tensor_is_contiguous(out)) return ct__error(CT_EINVAL, "cuda: %s wants a contiguous output", what);
  if (out->dtype != in->dtype)
    return ct__error(CT_EDTYPE, "cuda: %s wants tensors of one dtype, got %s and %s", what, ct_dtype_name(out->dtype),
                     ct_dtype_name(in->dtype));
  if (!ct_dtype_is_floating(out->dtype)) /* before the temporary: the dispatch's error returns at once */
    return ct__error(CT_EDTYPE, "cuda: %s wants a floating dtype, not %s", what, ct_dtype_name(out->dtype));
  int64_t NC = big->shape[0] * big->shape[1], H = big->shape[2], W = big->shape[3], OH = small->shape[2], OW = small->shape[3];
  int64_t n = ct_tensor_numel(out);
  if (n == 0) return CT_OK;
  ct__be_tmp ic;
  CT_TRY(ct__be_tmp_contiguous(&ic, in));
  unsigned grid = ct__cuda_blocks(ctx, n);
  ct_status s = CT_OK;
  if (backward) {
    CT_CUDA_DISPATCH_FLOAT(out->dtype, S, C, what, adaptive_avg_bwd_kernel<S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                 (S *)ct__ptr(out), (const S *)ct__ptr(&ic.t), NC, H, W, OH, OW));
  } else {
    CT_CUDA_DISPATCH_FLOAT(out->dtype, S, C, what, adaptive_avg_fwd_kernel<S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                 (S *)ct__ptr(out), (const S *)ct__ptr(&ic.t), NC, H, W, OH, OW));
  }
  cudaError_t e = cudaGetLastError();
  ct__be_tmp_free(&ic);
  if (e != cudaSuccess) s = ct__error(CT_EBACKEND, "cuda: launch of %s failed: %s", what, cudaGetErrorString(e));
  return s;
}

/* x: (N, C, H, W) any strides -> y: (N, C, OH, OW) contiguous */
ct_status ct__cuda_adaptive_avg_pool2d(ct_tensor *y, ct_tensor *x) { return adaptive_launch(0, y, x, x, y); }

/* gy: (N, C, OH, OW) any strides -> gx: (N, C, H, W) contiguous, overwritten */
ct_status ct__cuda_adaptive_avg_pool2d_backward(ct_tensor *gx, ct_tensor *gy) { return adaptive_launch(1, gx, gy, gx, gy); }
