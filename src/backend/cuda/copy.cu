/* src/backend/cuda/copy.cu: moving bytes. memcpy between host and device, the strided and
 * dtype-converting copy between two device tensors, and fill.
 *
 * memcpy: a copy from or to pageable host memory is synchronous (queued on the compute stream after
 * the work that produces or consumes the data, then waited for). A non-blocking copy whose host
 * side is pinned (page-locked, cudaHostAlloc/cudaHostRegister) runs on the copy stream: it first
 * waits for the work queued so far on the compute stream, and the compute stream then waits for the
 * copy, so kernels and copies stay in program order while the host thread moves on. A non-blocking
 * request with pageable memory falls back to the synchronous path (the only honest thing to do).
 *
 * copy: same shape, any strides, any dtypes. Same dtype: an element-size copy (bit exact, also for
 * int64 beyond 2^53), or cudaMemcpyAsync when both sides are contiguous. Different dtypes: one
 * kernel per (dst, src) pair, converting as the CPU does (half and bfloat16 through float).
 *
 * fill: the value is converted to dst's dtype on the host by ct__store (so the bits are exactly the
 * CPU's), and the element is replicated by an element-size kernel. */
#include <string.h>

#include "backend/cuda/common.cuh"

/* ---- kernels */

/* dst[i] = (D) src[i] over the iterator (operand 0 dst, 1 src) */
template <typename D, typename S>
__global__ void copy_kernel(D *__restrict__ dst, const S *__restrict__ src, ct__cuda_iter it, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    ct_iter_offsets<2>(it, i, off);
    dst[off[0]] = ct_cast<D>(src[off[1]]);
  }
}

/* contiguous fast path of the converting copy: dst (n), src (n) */
template <typename D, typename S>
__global__ void copy_contig_kernel(D *__restrict__ dst, const S *__restrict__ src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = ct_cast<D>(src[i]);
}

/* dst[i] = v over the iterator (operand 0); T an unsigned type of the element's size */
template <typename T>
__global__ void fill_kernel(T *__restrict__ dst, T v, ct__cuda_iter it, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[1];
    ct_iter_offsets<1>(it, i, off);
    dst[off[0]] = v;
  }
}

/* ---- launchers */

static int host_is_pinned(const void *p) {
  cudaPointerAttributes attr;
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return attr.type == cudaMemoryTypeHost;
}

ct_status ct__cuda_memcpy(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  if (nbytes == 0) return CT_OK;
  if (dir == 2) {
    CT_CUDA_TRY(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx->compute));
    return CT_OK;
  }
  if (ct__cuda_capturing(ctx)) { /* a captured copy would read or write the host buffer at every replay */
    ct__capture_refuse(dir == 0 ? "a copy from the host" : "a copy to the host");
    return ct__error(CT_EINVAL, "cuda: a copy %s the host on cuda:%d cannot be part of a graph capture; copy before "
                     "ct_device_graph_capture_begin or after ct_device_graph_capture_end",
                     dir == 0 ? "from" : "to", index);
  }
  cudaMemcpyKind kind = dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  const void *host = dir == 0 ? src : dst;
  if (non_blocking && host_is_pinned(host)) {
    CT_CUDA_TRY(cudaEventRecord(ctx->compute_mark, ctx->compute));
    CT_CUDA_TRY(cudaStreamWaitEvent(ctx->copy, ctx->compute_mark, 0));
    CT_CUDA_TRY(cudaMemcpyAsync(dst, src, nbytes, kind, ctx->copy));
    CT_CUDA_TRY(cudaEventRecord(ctx->copy_mark, ctx->copy));
    CT_CUDA_TRY(cudaStreamWaitEvent(ctx->compute, ctx->copy_mark, 0));
    return CT_OK;
  }
  CT_CUDA_TRY(cudaMemcpyAsync(dst, src, nbytes, kind, ctx->compute));
  CT_CUDA_TRY(cudaStreamSynchronize(ctx->compute));
  return CT_OK;
}

template <typename D, typename S>
static ct_status launch_copy(ct__cuda_ctx *ctx, ct_tensor *dst, ct_tensor *src, const ct__cuda_iter *it, int64_t n) {
  D *d = (D *)ct__ptr(dst);
  const S *s = (const S *)ct__ptr(src);
  if (ct__cuda_iter_is_contiguous(it, 2))
    copy_contig_kernel<D, S><<<ct__cuda_blocks(ctx, n), CT_CUDA_THREADS, 0, ctx->compute>>>(d, s, n);
  else
    copy_kernel<D, S><<<ct__cuda_blocks(ctx, n), CT_CUDA_THREADS, 0, ctx->compute>>>(d, s, *it, n);
  CT_CUDA_LAUNCHED("copy_kernel");
  return CT_OK;
}

/* dst: any shape, src: dst's shape; any strides, any dtypes */
ct_status ct__cuda_copy(ct_tensor *dst, ct_tensor *src) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(dst);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(dst->ndim, dst->shape);
  if (n == 0) return CT_OK;
  const int64_t *strides[2] = {dst->stride, src->stride};
  ct__cuda_iter it;
  ct__cuda_iter_init(&it, dst->ndim, dst->shape, 2, strides);
  if (dst->dtype == src->dtype) {
    size_t es = ct_dtype_size(dst->dtype);
    if (ct__cuda_iter_is_contiguous(&it, 2)) {
      CT_CUDA_TRY(cudaMemcpyAsync(ct__ptr(dst), ct__ptr(src), (size_t)n * es, cudaMemcpyDeviceToDevice, ctx->compute));
      return CT_OK;
    }
    switch (es) {
      case 1: return launch_copy<uint8_t, uint8_t>(ctx, dst, src, &it, n);
      case 2: return launch_copy<uint16_t, uint16_t>(ctx, dst, src, &it, n);
      case 4: return launch_copy<uint32_t, uint32_t>(ctx, dst, src, &it, n);
      default: return launch_copy<uint64_t, uint64_t>(ctx, dst, src, &it, n);
    }
  }
  ct_status s = CT_OK;
  CT_CUDA_DISPATCH_ALL(dst->dtype, {
    typedef scalar_t dst_t;
    CT_CUDA_DISPATCH_ALL(src->dtype, s = (launch_copy<dst_t, scalar_t>(ctx, dst, src, &it, n)));
  });
  return s;
}

template <typename T>
static ct_status launch_fill(ct__cuda_ctx *ctx, ct_tensor *dst, const void *bits, const ct__cuda_iter *it, int64_t n) {
  T v;
  memcpy(&v, bits, sizeof v);
  fill_kernel<T><<<ct__cuda_blocks(ctx, n), CT_CUDA_THREADS, 0, ctx->compute>>>((T *)ct__ptr(dst), v, *it, n);
  CT_CUDA_LAUNCHED("fill_kernel");
  return CT_OK;
}

/* dst: any shape and strides */
ct_status ct__cuda_fill(ct_tensor *dst, double value) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(dst);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(dst->ndim, dst->shape);
  if (n == 0) return CT_OK;
  unsigned char bits[8] = {0};
  ct__store(bits, dst->dtype, value);
  const int64_t *strides[1] = {dst->stride};
  ct__cuda_iter it;
  ct__cuda_iter_init(&it, dst->ndim, dst->shape, 1, strides);
  switch (ct_dtype_size(dst->dtype)) {
    case 1: return launch_fill<uint8_t>(ctx, dst, bits, &it, n);
    case 2: return launch_fill<uint16_t>(ctx, dst, bits, &it, n);
    case 4: return launch_fill<uint32_t>(ctx, dst, bits, &it, n);
    default: return launch_fill<uint64_t>(ctx, dst, bits, &it, n);
  }
}
