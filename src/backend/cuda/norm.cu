/* src/backend/cuda/norm.cu: batch norm per channel of a contiguous (N, C, S) x and layer norm over
 * the last D elements of a contiguous x, each with its backward (core/kernels.def: batch_norm,
 * batch_norm_backward, layer_norm, layer_norm_backward), in float32 or float64, with the CPU's
 * formulas (src/backend/cpu/norm.c, layer_norm.c; PyTorch's batch_norm_backward_cpu and
 * LayerNormBackwardKernelImpl): two-pass statistics (the mean, then the squared deviations from it),
 * and every sum (statistics, gradient sums), accumulated in double as the CPU's are (kernels.def's
 * contract; PyTorch's CUDA kernels accumulate float32 in float, which at a channel of 10^5 values
 * drifts from the CPU's by more than the device tests allow). These kernels are memory-bound.
 *
 * Blocks are 32 x 8 threads. Batch norm, S > 1: one block per channel, its 256 threads striding
 * over the channel's N S values (element i of channel c is x[(n C + c) S + s], n = i / S). S == 1
 * (an (N, C) input, or a channels_last input as its (N H W, C) rows): one block per 32 channels,
 * threadIdx.x the channel, so that a warp reads 32 adjacent values, and the 8 rows of threads
 * stride over the N rows. Layer norm: one warp per row for the statistics, y and gx; the column sums
 * gw and gb take the S == 1 pattern (32 columns a block). One block per channel leaves SMs idle
 * when C is small; this is the first version, and the GPU kit measures it.
 * An absent w, b, gw, gb or running statistic is a NULL pointer the kernels test. */
#include <math.h>

#include "backend/cuda/common.cuh"

#define NORM_TX 32
#define NORM_TY 8

/* The sum of v over the block's threads, each thread getting it: over all 256 (COLS false) or over
 * the 8 threads of its column threadIdx.x (COLS true). sh is the block's [NORM_TY][NORM_TX + 1]
 * scratch; the first barrier lets a previous call's readers finish before it is rewritten. Every
 * thread of the block must call it. */
template <bool COLS, typename A>
static __device__ A block_sum(A v, A (*sh)[NORM_TX + 1]) {
  __syncthreads();
  if (COLS) {
    sh[threadIdx.y][threadIdx.x] = v;
  } else {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sh[threadIdx.y][0] = v;
  }
  __syncthreads();
  const int col = COLS ? threadIdx.x : 0;
  A s = 0;
#pragma unroll
  for (int k = 0; k < NORM_TY; k++) s += sh[k][col];
  return s;
}

template <typename A>
static __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* A thread's walk over the values of its channel c of x (N, C, S): indices start, start + step, ...
 * below count, at(i) the element's offset. live is 0 for the threads of a COLS block past C (they
 * still take part in block_sum); lead marks the one thread per channel that writes its statistics. */
template <bool COLS>
struct bn_walk {
  int64_t c, start, step, count, C, S;
  bool live, lead;
  __device__ bn_walk(int64_t N, int64_t C_, int64_t S_) : C(C_), S(S_) {
    if (COLS) {
      c = (int64_t)blockIdx.x * NORM_TX + threadIdx.x, start = threadIdx.y, step = NORM_TY, count = N;
      lead = threadIdx.y == 0;
    } else {
      c = blockIdx.x, start = threadIdx.y * NORM_TX + threadIdx.x, step = NORM_TX * NORM_TY, count = N * S;
      lead = start == 0;
    }
    live = c < C;
    if (!live) count = 0;
  }
  /* (n C + c) S + s for i = n S + s; S == 1 in the COLS case */
  __device__ __forceinline__ int64_t at(int64_t i) const {
    if (COLS) return i * C + c;
    int64_t n = i / S;
    return i + (n * (C - 1) + c) * S;
  }
};

template <typename T, bool COLS>
__global__ void bn_forward_kernel(T *__restrict__ y, T *__restrict__ save_mean, T *__restrict__ save_invstd,
                                  const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, T *rm,
                                  int64_t rms, T *rv, int64_t rvs, int training, T momentum, T eps, int64_t N, int64_t C,
                                  int64_t S) {
  __shared__ double sh[NORM_TY][NORM_TX + 1];
  const bn_walk<COLS> it(N, C, S);
  const int64_t c = it.c;
  T m = 0, is = 0;
  if (training) {
    const double n = (double)N * (double)S;
    double s = 0, q = 0;
    for (int64_t i = it.start; i < it.count; i += it.step) s += (double)x[it.at(i)];
    const double md = block_sum<COLS>(s, sh) / n;
    for (int64_t i = it.start; i < it.count; i += it.step) {
      const double d = (double)x[it.at(i)] - md;
      q += d * d;
    }
    q = block_sum<COLS>(q, sh);
    m = (T)md, is = (T)(1.0 / sqrt(q / n + (double)eps));
    if (it.live && it.lead && rm && rv) {
      rm[c * rms] = ((T)1 - momentum) * rm[c * rms] + momentum * m;
      rv[c * rvs] = ((T)1 - momentum) * rv[c * rvs] + momentum * (T)(q / (n - 1.0));
    }
  } else if (it.live) {
    m = rm[c * rms], is = (T)1 / sqrt(rv[c * rvs] + eps);
  }
  if (!it.live) return; /* after the last block_sum */
  if (it.lead) save_mean[c] = m, save_invstd[c] = is;
  const T sc = is * (w ? w[c] : (T)1), sb = b ? b[c] : (T)0;
  for (int64_t i = it.start; i < it.count; i += it.step) {
    const int64_t o = it.at(i);
    y[o] = (x[o] - m) * sc + sb;
  }
}

/* gb = sum(gy), gw = sum(gy (x - mean)) invstd, and gx = A gy - B (x - mean) - D with A = invstd w,
 * B = A sum(gy (x - mean)) invstd^2 / n and D = A sum(gy) / n in training (B = D = 0 in eval);
 * sums (the same for the whole grid) says whether anyone needs the two sums. */
template <typename T, bool COLS>
__global__ void bn_backward_kernel(T *__restrict__ gx, T *__restrict__ gw, T *__restrict__ gb, const T *__restrict__ gy,
                                   const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ mean,
                                   const T *__restrict__ invstd, int training, int sums, int64_t N, int64_t C,
                                   int64_t S) {
  __shared__ double sh[NORM_TY][NORM_TX + 1];
  const bn_walk<COLS> it(N, C, S);
  const int64_t c = it.c;
  const T m = it.live ? mean[c] : (T)0, is = it.live ? invstd[c] : (T)0, n = (T)N * (T)S;
  double s = 0, d = 0;
  if (sums) {
    for (int64_t i = it.start; i < it.count; i += it.step) {
      const int64_t o = it.at(i);
      const double g = (double)gy[o];
      s += g, d += g * ((double)x[o] - (double)m);
    }
    s = block_sum<COLS>(s, sh);
    d = block_sum<COLS>(d, sh);
  }
  if (!it.live) return; /* after the last block_sum */
  if (it.lead && gb) gb[c] = (T)s;
  if (it.lead && gw) gw[c] = (T)(d * (double)is);
  if (!gx) return;
  const T A = is * (w ? w[c] : (T)1);
  const T B = training ? (T)((double)A * d * (double)is * (double)is / (double)n) : (T)0,
          D = training ? (T)((double)A * s / (double)n) : (T)0;
  for (int64_t i = it.start; i < it.count; i += it.step) {
    const int64_t o = it.at(i);
    gx[o] = A * gy[o] - B * (x[o] - m) - D;
  }
}

/* one warp per row r of x (R, D): mean, rstd and y */
template <typename T>
__global__ void ln_forward_kernel(T *__restrict__ y, T *__restrict__ mean, T *__restrict__ rstd, const T *__restrict__ x,
                                  const T *__restrict__ w, const T *__restrict__ b, int64_t R, int64_t D, T eps) {
  for (int64_t r = (int64_t)blockIdx.x * NORM_TY + threadIdx.y; r < R; r += (int64_t)gridDim.x * NORM_TY) {
    const T *xr = x + r * D;
    double s = 0, q = 0;
    for (int64_t i = threadIdx.x; i < D; i += NORM_TX) s += (double)xr[i];
    const double md = warp_sum(s) / (double)D;
    for (int64_t i = threadIdx.x; i < D; i += NORM_TX) {
      const double d = (double)xr[i] - md;
      q += d * d;
    }
    const T m = (T)md, rs = (T)(1.0 / sqrt(warp_sum(q) / (double)D + (double)eps));
    if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
    T *yr = y + r * D;
    for (int64_t i = threadIdx.x; i < D; i += NORM_TX) {
      T v = (xr[i] - m) * rs;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

/* one warp per row: gx = rstd (gy w - a - xhat c), a = sum(gy w) / D, c = sum(gy w xhat) / D */
template <typename T>
__global__ void ln_backward_kernel(T *__restrict__ gx, const T *__restrict__ gy, const T *__restrict__ x,
                                   const T *__restrict__ w, const T *__restrict__ mean, const T *__restrict__ rstd,
                                   int64_t R, int64_t D) {
  for (int64_t r = (int64_t)blockIdx.x * NORM_TY + threadIdx.y; r < R; r += (int64_t)gridDim.x * NORM_TY) {
    const T *gr = gy + r * D, *xr = x + r * D;
    const T m = mean[r], rs = rstd[r];
    double as = 0, cs = 0;
    for (int64_t i = threadIdx.x; i < D; i += NORM_TX) {
      const T g = gr[i] * (w ? w[i] : (T)1);
      as += (double)g, cs += (double)g * (double)((xr[i] - m) * rs);
    }
    const T a = (T)(warp_sum(as) / (double)D), c = (T)(warp_sum(cs) / (double)D);
    T *gxr = gx + r * D;
    for (int64_t i = threadIdx.x; i < D; i += NORM_TX) {
      const T g = gr[i] * (w ? w[i] : (T)1);
      gxr[i] = rs * (g - a - ((xr[i] - m) * rs) * c);
    }
  }
}

/* column i of (R, D), one block per 32 columns: gw = sum over the rows of gy xhat, gb = sum of gy */
template <typename T>
__global__ void ln_backward_params_kernel(T *__restrict__ gw, T *__restrict__ gb, const T *__restrict__ gy,
                                          const T *__restrict__ x, const T *__restrict__ mean,
                                          const T *__restrict__ rstd, int64_t R, int64_t D) {
  __shared__ double sh[NORM_TY][NORM_TX + 1];
  const int64_t i = (int64_t)blockIdx.x * NORM_TX + threadIdx.x;
  double sw = 0, sb = 0;
  if (i < D)
    for (int64_t r = threadIdx.y; r < R; r += NORM_TY) {
      const double g = (double)gy[r * D + i];
      sb += g, sw += g * (double)((x[r * D + i] - mean[r]) * rstd[r]);
    }
  sw = block_sum<true>(sw, sh);
  sb = block_sum<true>(sb, sh);
  if (i >= D || threadIdx.y != 0) return;
  if (gw) gw[i] = (T)sw;
  if (gb) gb[i] = (T)sb;
}

/* ---- launchers */

/* float32 and float64 only: the front-end (src/ops/norm.c) computes half inputs in float32 */
#define NORM_DISPATCH(dt, what, ...)                                                                     \
  switch (dt) {                                                                                          \
    case CT_F32: { typedef float T; __VA_ARGS__; break; }                                                \
    case CT_F64: { typedef double T; __VA_ARGS__; break; }                                               \
    default: return ct__error(CT_EDTYPE, "cuda: %s wants float32 or float64, not %s", what, ct_dtype_name(dt)); \
  }

template <typename T>
static T *ptr_or_null(ct_tensor *t) { return t ? (T *)ct__ptr(t) : (T *)NULL; }

/* The batch norm kernels' grid: a block per channel, or per 32 channels when S == 1 (cols) */
static unsigned bn_grid(int64_t C, bool cols) { return (unsigned)(cols ? (C + NORM_TX - 1) / NORM_TX : C); }

/* Blocks of 8 rows for R rows: enough to fill the device, capped; the kernels' row loop takes the rest. */
static unsigned norm_row_blocks(const ct__cuda_ctx *ctx, int64_t R) {
  int64_t b = (R + NORM_TY - 1) / NORM_TY, cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 32;
  if (b > cap) b = cap;
  return (unsigned)(b < 1 ? 1 : b);
}

extern "C" ct_status ct__cuda_batch_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_invstd, ct_tensor *x,
                                         ct_tensor *w, ct_tensor *b, ct_tensor *running_mean, ct_tensor *running_var,
                                         int training, double momentum, double eps) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(x);
  if (!ctx) return ct_last_status();
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  /* only without channels: an empty batch in eval still writes save_mean and save_invstd from the
   * running statistics (the kernel's loops are empty), which the backward reads, as the CPU does */
  if (C == 0) return CT_OK;
  const bool cols = S == 1;
  const dim3 block(NORM_TX, NORM_TY);
  const unsigned grid = bn_grid(C, cols);
  const int64_t rms = running_mean ? running_mean->stride[0] : 0, rvs = running_var ? running_var->stride[0] : 0;
  NORM_DISPATCH(x->dtype, "batch_norm", {
    T *yp = (T *)ct__ptr(y), *mp = (T *)ct__ptr(save_mean), *ip = (T *)ct__ptr(save_invstd);
    const T *xp = (const T *)ct__ptr(x), *wp = ptr_or_null<const T>(w), *bp = ptr_or_null<const T>(b);
    T *rmp = ptr_or_null<T>(running_mean), *rvp = ptr_or_null<T>(running_var);
    if (cols)
      bn_forward_kernel<T, true><<<grid, block, 0, ctx->compute>>>(yp, mp, ip, xp, wp, bp, rmp, rms, rvp, rvs, training,
                                                                   (T)momentum, (T)eps, N, C, S);
    else
      bn_forward_kernel<T, false><<<grid, block, 0, ctx->compute>>>(yp, mp, ip, xp, wp, bp, rmp, rms, rvp, rvs, training,
                                                                    (T)momentum, (T)eps, N, C, S);
  });
  CT_CUDA_LAUNCHED("bn_forward_kernel");
  return CT_OK;
}

extern "C" ct_status ct__cuda_batch_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                                  ct_tensor *w, ct_tensor *save_mean, ct_tensor *save_invstd, int training) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(x);
  if (!ctx) return ct_last_status();
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  if (C == 0) return CT_OK;
  const bool cols = S == 1;
  const dim3 block(NORM_TX, NORM_TY);
  const unsigned grid = bn_grid(C, cols);
  const int sums = gw || gb || (gx && training);
  NORM_DISPATCH(x->dtype, "batch_norm_backward", {
    T *gxp = ptr_or_null<T>(gx), *gwp = ptr_or_null<T>(gw), *gbp = ptr_or_null<T>(gb);
    const T *gyp = (const T *)ct__ptr(gy), *xp = (const T *)ct__ptr(x), *wp = ptr_or_null<const T>(w);
    const T *mp = (const T *)ct__ptr(save_mean), *ip = (const T *)ct__ptr(save_invstd);
    if (cols)
      bn_backward_kernel<T, true><<<grid, block, 0, ctx->compute>>>(gxp, gwp, gbp, gyp, xp, wp, mp, ip, training, sums, N, C, S);
    else
      bn_backward_kernel<T, false><<<grid, block, 0, ctx->compute>>>(gxp, gwp, gbp, gyp, xp, wp, mp, ip, training, sums, N, C, S);
  });
  CT_CUDA_LAUNCHED("bn_backward_kernel");
  return CT_OK;
}

extern "C" ct_status ct__cuda_layer_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_rstd, ct_tensor *x, ct_tensor *w,
                                         ct_tensor *b, int64_t D, double eps) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(x);
  if (!ctx) return ct_last_status();
  const int64_t R = D ? ct_tensor_numel(x) / D : 0;
  if (R == 0) return CT_OK;
  const dim3 block(NORM_TX, NORM_TY);
  const unsigned grid = norm_row_blocks(ctx, R);
  NORM_DISPATCH(x->dtype, "layer_norm", {
    ln_forward_kernel<T><<<grid, block, 0, ctx->compute>>>((T *)ct__ptr(y), (T *)ct__ptr(save_mean), (T *)ct__ptr(save_rstd),
                                                           (const T *)ct__ptr(x), ptr_or_null<const T>(w),
                                                           ptr_or_null<const T>(b), R, D, (T)eps);
  });
  CT_CUDA_LAUNCHED("ln_forward_kernel");
  return CT_OK;
}

extern "C" ct_status ct__cuda_layer_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                                  ct_tensor *w, ct_tensor *save_mean, ct_tensor *save_rstd, int64_t D) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(x);
  if (!ctx) return ct_last_status();
  const int64_t R = D ? ct_tensor_numel(x) / D : 0;
  if (D == 0) return CT_OK;
  /* with no rows gw and gb are still written: zeros (the params kernel's row loop is empty), as the CPU's */
  const dim3 block(NORM_TX, NORM_TY);
  NORM_DISPATCH(x->dtype, "layer_norm_backward", {
    const T *gyp = (const T *)ct__ptr(gy), *xp = (const T *)ct__ptr(x);
    const T *mp = (const T *)ct__ptr(save_mean), *rp = (const T *)ct__ptr(save_rstd);
    if (gx && R > 0) {
      ln_backward_kernel<T><<<norm_row_blocks(ctx, R), block, 0, ctx->compute>>>((T *)ct__ptr(gx), gyp, xp,
                                                                                 ptr_or_null<const T>(w), mp, rp, R, D);
      CT_CUDA_LAUNCHED("ln_backward_kernel");
    }
    if (gw || gb) {
      ln_backward_params_kernel<T><<<(unsigned)((D + NORM_TX - 1) / NORM_TX), block, 0, ctx->compute>>>(
          ptr_or_null<T>(gw), ptr_or_null<T>(gb), gyp, xp, mp, rp, R, D);
      CT_CUDA_LAUNCHED("ln_backward_params_kernel");
    }
  });
  return CT_OK;
}
