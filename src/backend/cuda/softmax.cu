/* src/backend/cuda/softmax.cu: softmax and log_softmax over the last dim, fused in one row kernel,
 * and their backward.
 *
 * x, y, gx, gy: (R, C) contiguous (any leading dims flattened into R). A row is handled by one
 * warp when C <= 1024 (eight rows per block, so small class counts do not waste threads) and by one
 * block of 256 threads otherwise. The grid is capped (row_blocks) and strides over the rows, so any
 * R fits gridDim.x. Per row, three passes over global memory (max, sum, write) with
 * the row's max subtracted before exp, in float for float32/float16/bfloat16 and double for float64.
 *   softmax:      y = exp(x - m) / s,        s = sum exp(x - m)
 *   log_softmax:  y = x - m - log(s)
 *   backward of softmax:      gx = y (gy - sum(gy y))
 *   backward of log_softmax:  gx = gy - exp(y) sum(gy) */
#include <math.h>

#include "backend/cuda/common.cuh"

/* ---- group reductions: TPR threads per row, either one warp (32) or one block (256) */

template <typename C>
static __device__ __forceinline__ C op_max(C a, C b) { return a > b || a != a ? a : b; }

template <int TPR, bool MAX, typename C>
static __device__ __forceinline__ C group_reduce(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    C w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? op_max(v, w) : v + w;
  }
  if (TPR == 32) return v;
  __shared__ C part[TPR / 32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* part[] may still be read from the previous reduction */
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = part[0];
#pragma unroll
  for (int k = 1; k < TPR / 32; k++) v = MAX ? op_max(v, part[k]) : v + part[k];
  return v;
}

/* ---- kernels. Grid: blockDim (TPR, ROWS) threads; rows blockIdx.x * ROWS + threadIdx.y, then
 * onwards in steps of gridDim.x * ROWS. A row's TPR threads (one warp, or the whole block when TPR
 * is 256 and ROWS 1) take the same rows, so they loop, reduce and leave together. */

template <typename S, typename C, int TPR>
__global__ void softmax_kernel(S *__restrict__ y, const S *__restrict__ x, int64_t R, int64_t Ccols, int log) {
  for (int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; row < R; row += (int64_t)gridDim.x * blockDim.y) {
    const S *xr = x + row * Ccols;
    S *yr = y + row * Ccols;
    C m = -INFINITY;
    for (int64_t c = threadIdx.x; c < Ccols; c += TPR) m = op_max(m, ct_cast<C>(xr[c]));
    m = group_reduce<TPR, true>(m);
    if (m == -INFINITY) m = 0; /* an all -inf row: avoid inf - inf */
    C s = 0;
    for (int64_t c = threadIdx.x; c < Ccols; c += TPR) s += exp(ct_cast<C>(xr[c]) - m);
    s = group_reduce<TPR, false>(s);
    if (log) {
      C ls = ::log(s);
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) yr[c] = ct_cast<S>(ct_cast<C>(xr[c]) - m - ls);
    } else {
      C inv = C(1) / s;
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) yr[c] = ct_cast<S>(exp(ct_cast<C>(xr[c]) - m) * inv);
    }
  }
}

template <typename S, typename C, int TPR>
__global__ void softmax_backward_kernel(S *__restrict__ gx, const S *__restrict__ gy, const S *__restrict__ y,
                                        int64_t R, int64_t Ccols, int log) {
  for (int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; row < R; row += (int64_t)gridDim.x * blockDim.y) {
    const S *gyr = gy + row * Ccols, *yr = y + row * Ccols;
    S *gxr = gx + row * Ccols;
    C acc = 0;
    if (log)
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) acc += ct_cast<C>(gyr[c]);
    else
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) acc += ct_cast<C>(gyr[c]) * ct_cast<C>(yr[c]);
    acc = group_reduce<TPR, false>(acc);
    if (log)
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) gxr[c] = ct_cast<S>(ct_cast<C>(gyr[c]) - exp(ct_cast<C>(yr[c])) * acc);
    else
      for (int64_t c = threadIdx.x; c < Ccols; c += TPR) {
        C yv = ct_cast<C>(yr[c]);
        gxr[c] = ct_cast<S>(yv * (ct_cast<C>(gyr[c]) - acc));
      }
  }
}

/* ---- launchers */

/* Blocks for R rows at rows_per_block a block: enough to fill the device, capped far below
 * gridDim.x's limit (2^31 - 1); the kernels' row loop takes the rest. */
static unsigned row_blocks(const ct__cuda_ctx *ctx, int64_t R, int rows_per_block) {
  int64_t b = (R + rows_per_block - 1) / rows_per_block;
  int64_t cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 64;
  if (b > cap) b = cap;
  return (unsigned)(b < 1 ? 1 : b);
}

static ct_status rows_of(ct_tensor *t, int64_t *R, int64_t *C) {
  if (t->ndim == 0) *R = 1, *C = 1;
  else {
    *C = t->shape[t->ndim - 1];
    *R = *C ? ct__numel(t->ndim, t->shape) / *C : 0;
  }
  return CT_OK;
}

/* y, x: (R, C), softmax over C */
ct_status ct__cuda_softmax(ct_tensor *y, ct_tensor *x, int log) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(y);
  if (!ctx) return ct_last_status();
  int64_t R, ncol;
  rows_of(x, &R, &ncol);
  if (R == 0 || ncol == 0) return CT_OK;
  if (!ct_tensor_is_contiguous(x) || !ct_tensor_is_contiguous(y) || x->dtype != y->dtype)
    return ct__error(CT_EINVAL, "cuda: softmax wants contiguous x and y of one dtype");
  if (ncol <= 1024) {
    dim3 block(32, 8);
    unsigned grid = row_blocks(ctx, R, 8);
    CT_CUDA_DISPATCH_FLOAT(x->dtype, S, C, "softmax", softmax_kernel<S, C, 32><<<grid, block, 0, ctx->compute>>>(
                                         (S *)ct__ptr(y), (const S *)ct__ptr(x), R, ncol, log));
  } else {
    dim3 block(256, 1);
    CT_CUDA_DISPATCH_FLOAT(x->dtype, S, C, "softmax", softmax_kernel<S, C, 256><<<row_blocks(ctx, R, 1), block, 0, ctx->compute>>>(
                                         (S *)ct__ptr(y), (const S *)ct__ptr(x), R, ncol, log));
  }
  CT_CUDA_LAUNCHED("softmax_kernel");
  return CT_OK;
}

/* gx, gy, y: (R, C) */
ct_status ct__cuda_softmax_backward(ct_tensor *gx, ct_tensor *gy, ct_tensor *y, int log) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(gx);
  if (!ctx) return ct_last_status();
  int64_t R, ncol;
  rows_of(y, &R, &ncol);
  if (R == 0 || ncol == 0) return CT_OK;
  if (!ct_tensor_is_contiguous(gx) || !ct_tensor_is_contiguous(gy) || !ct_tensor_is_contiguous(y) ||
      gx->dtype != y->dtype || gy->dtype != y->dtype)
    return ct__error(CT_EINVAL, "cuda: softmax_backward wants contiguous gx, gy and y of one dtype");
  if (ncol <= 1024) {
    dim3 block(32, 8);
    unsigned grid = row_blocks(ctx, R, 8);
    CT_CUDA_DISPATCH_FLOAT(y->dtype, S, C, "softmax", softmax_backward_kernel<S, C, 32><<<grid, block, 0, ctx->compute>>>(
                                         (S *)ct__ptr(gx), (const S *)ct__ptr(gy), (const S *)ct__ptr(y), R, ncol, log));
  } else {
    dim3 block(256, 1);
    CT_CUDA_DISPATCH_FLOAT(y->dtype, S, C, "softmax", softmax_backward_kernel<S, C, 256><<<row_blocks(ctx, R, 1), block, 0, ctx->compute>>>(
                                         (S *)ct__ptr(gx), (const S *)ct__ptr(gy), (const S *)ct__ptr(y), R, ncol, log));
  }
  CT_CUDA_LAUNCHED("softmax_backward_kernel");
  return CT_OK;
}
