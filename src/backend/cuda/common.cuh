/* src/backend/cuda/common.cuh: what every CUDA kernel file of the backend shares (C++ only).
 *
 *  - the per-device context (streams, library handles, workspace, allocator), reached through
 *    ct__cuda_ctx_get(dev), which also makes dev the calling thread's CUDA device;
 *  - CT_CUDA_TRY / CT_CUBLAS_TRY / CT_CUDNN_TRY: turn a failed library call into
 *    ct__error(CT_EBACKEND, "cuda: <call> failed: <reason>") and return that status;
 *  - element conversions between the eight dtypes on the device (half and bfloat16 through float,
 *    as the CPU's ct__store does), typed and by a runtime dtype tag;
 *  - the strided iterator: an output shape plus one stride vector per operand, with adjacent dims
 *    merged on the host so most calls run with one or two dims;
 *  - Philox4x32-10 (random.cu's specification), for ct_rand and attention's dropout;
 *  - the entry points of every kernel file, which backend.cu puts into the vtable.
 * What every backend shares (CT_TRY, temporary tensors, chunking) is backend/common.h's, and the
 * contiguity check is the core's ct_tensor_is_contiguous. Only src/backend/cuda/ includes this file. */
#ifndef CUTTLE_CUDA_COMMON_CUH
#define CUTTLE_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdint.h>
#include <mutex>

#include "core/backend.h"
#include "backend/common.h" /* CT_TRY, temporaries (ct__be_tmp) */
#include "backend/cuda/cuda_backend.h"

/* ---- error reporting: name the call that failed */
#define CT_CUDA_TRY(call)                                                                             \
  do {                                                                                                \
    cudaError_t ct__e = (call);                                                                       \
    if (ct__e != cudaSuccess) return ct__error(CT_EBACKEND, "cuda: %s failed: %s", #call, cudaGetErrorString(ct__e)); \
  } while (0)
#define CT_CUBLAS_TRY(call)                                                                           \
  do {                                                                                                \
    cublasStatus_t ct__e = (call);                                                                    \
    if (ct__e != CUBLAS_STATUS_SUCCESS)                                                               \
      return ct__error(CT_EBACKEND, "cuda: %s failed: %s", #call, cublasGetStatusString(ct__e));    \
  } while (0)
#define CT_CUDNN_TRY(call)                                                                            \
  do {                                                                                                \
    cudnnStatus_t ct__e = (call);                                                                     \
    if (ct__e != CUDNN_STATUS_SUCCESS)                                                                \
      return ct__error(CT_EBACKEND, "cuda: %s failed: %s", #call, cudnnGetErrorString(ct__e));      \
  } while (0)
/* After a kernel launch: a bad configuration shows up here (execution errors show up at the next
 * synchronizing call). */
#define CT_CUDA_LAUNCHED(name)                                                                        \
  do {                                                                                                \
    cudaError_t ct__e = cudaGetLastError();                                                           \
    if (ct__e != cudaSuccess) return ct__error(CT_EBACKEND, "cuda: launch of %s failed: %s", name, cudaGetErrorString(ct__e)); \
  } while (0)

/* ---- the per-device context */
#define CT_CUDA_MAX_DEVICES 64
struct ct__cuda_allocator; /* allocator.cu */

typedef struct ct__cuda_ctx {
  int device;
  int sm_count;
  cudaStream_t compute; /* every kernel and library call of this device */
  cudaStream_t copy;    /* non-blocking host<->device copies */
  cudaEvent_t compute_mark, copy_mark; /* order the two streams around a copy */
  std::mutex lock;      /* guards the lazy handles and the workspace */
  cublasHandle_t cublas; /* NULL until the first matmul */
  cudnnHandle_t cudnn;   /* NULL until the first convolution */
  void *workspace;       /* cuDNN workspace from the allocator, grown on demand, used on `compute` */
  size_t workspace_size;
  struct ct__cuda_allocator *alloc;
  struct ct__cuda_conv_algos *conv_algos; /* conv.cu's algorithm cache, created on first use */
  struct ct__cuda_conv_plans *conv_plans; /* conv_plan.cu's graph-API plans, created on first use */
  struct ct__cuda_capture *capture;       /* graph.cu's capture in progress on `compute`, or NULL */
} ct__cuda_ctx;

/* The context of device dev, created on first use, after making dev the calling thread's current
 * CUDA device. NULL with CT_EDEVICE / CT_EBACKEND set on failure. */
ct__cuda_ctx *ct__cuda_ctx_get(int dev);
/* The context if it exists, without creating it or touching the current device. */
ct__cuda_ctx *ct__cuda_ctx_peek(int dev);
/* The context of the device t lives on (see ct__cuda_ctx_get). */
static inline ct__cuda_ctx *ct__cuda_ctx_of(const ct_tensor *t) { return ct__cuda_ctx_get(t->device.index); }
/* Lazily created library handles bound to ctx->compute; NULL with the error set on failure. */
cublasHandle_t ct__cuda_cublas(ct__cuda_ctx *ctx);
cudnnHandle_t ct__cuda_cudnn(ct__cuda_ctx *ctx);
/* At least nbytes of scratch on ctx's device, valid until the next call (stream-ordered on
 * ctx->compute). *out receives NULL when nbytes is 0. */
ct_status ct__cuda_workspace(ct__cuda_ctx *ctx, size_t nbytes, void **out);

/* ---- allocator.cu */
struct ct__cuda_allocator *ct__cuda_allocator_new(int dev);
void ct__cuda_allocator_free_all(struct ct__cuda_allocator *a);
void *ct__cuda_alloc(int dev, size_t nbytes);
void ct__cuda_free(int dev, void *p, size_t nbytes);
/* A capture's private memory pool (see allocator.cu): begin makes a new pool that every alloc and
 * free of ctx's device joins until end_capture (NULL when a capture already runs or the host is out
 * of memory); release gives the pool's blocks back to the general cache once its graph is freed. */
struct ct__cuda_pool;
struct ct__cuda_pool *ct__cuda_pool_begin_capture(ct__cuda_ctx *ctx);
void ct__cuda_pool_end_capture(ct__cuda_ctx *ctx);
void ct__cuda_pool_release(ct__cuda_ctx *ctx, struct ct__cuda_pool *pool);

/* ---- graph.cu: 1 when a graph capture runs on ctx's compute stream (ops may not copy to or from
 * the host then); the scratch of ct__cuda_workspace during a capture (a block of the capture's
 * pool, valid until the next call: the graph reuses the address at every replay, which the shared
 * workspace, grown and freed by later eager calls, cannot promise). */
int ct__cuda_capturing(const ct__cuda_ctx *ctx);
ct_status ct__cuda_capture_scratch(ct__cuda_ctx *ctx, size_t nbytes, void **out);

/* ---- launch geometry: a grid-stride loop over n items with 256 threads a block */
#define CT_CUDA_THREADS 256
static inline unsigned ct__cuda_blocks(const ct__cuda_ctx *ctx, int64_t n) {
  int64_t b = (n + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
  int64_t cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 32;
  if (b > cap) b = cap;
  return (unsigned)(b < 1 ? 1 : b);
}

/* ---- element types and conversions. bool is stored as one byte 0/1, read as C++ bool. */
static __device__ __forceinline__ float ct_up(__half v) { return __half2float(v); }
static __device__ __forceinline__ float ct_up(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
static __device__ __forceinline__ T ct_up(T v) { return v; }
template <typename D>
struct ct_down {
  template <typename X>
  static __device__ __forceinline__ D f(X x) { return static_cast<D>(x); }
};
template <>
struct ct_down<__half> {
  template <typename X>
  static __device__ __forceinline__ __half f(X x) { return __float2half_rn((float)x); }
};
template <>
struct ct_down<__nv_bfloat16> {
  template <typename X>
  static __device__ __forceinline__ __nv_bfloat16 f(X x) { return __float2bfloat16_rn((float)x); }
};
/* Conversions to the integer dtypes, as the CPU converts (src/core/dtype.c, where the rule and
 * its difference from PyTorch are written down):
 *  - from float or double (half and bfloat16 arrive as float): truncate toward zero, saturate a
 *    value outside the dtype's range at its bound, NaN -> 0 (300.0f -> uint8 255, -1.0f -> uint8
 *    0, 1e10f -> int32 2147483647), as the CPU's ct__store. Written out rather than left to a C++
 *    cast, which is undefined out of range.
 *  - from an integer (int32, int64, uint8, bool): wrap modulo 2^bits, as the CPU's ct__store_int
 *    and PyTorch (int32 300 -> uint8 44, -1 -> uint8 255, int64 2^40 + 5 -> int32 5), through
 *    unsigned arithmetic (ct_wrap_from_int), so integer results (uint8 200 + 100 = 44) wrap too. */
template <typename D>
struct ct_int_bounds;
template <>
struct ct_int_bounds<uint8_t> {
  static constexpr long long lo = 0, hi = 255;
};
template <>
struct ct_int_bounds<int32_t> {
  static constexpr long long lo = INT32_MIN, hi = INT32_MAX;
};
template <>
struct ct_int_bounds<int64_t> {
  static constexpr long long lo = INT64_MIN, hi = INT64_MAX;
};
template <typename D>
static __device__ __forceinline__ D ct_sat_from_double(double v) {
  /* (double)hi is 2^63 for int64 and exact for the others, so v >= it is out of range or the bound */
  if (v != v) return (D)0;
  if (v >= (double)ct_int_bounds<D>::hi) return (D)ct_int_bounds<D>::hi;
  if (v <= (double)ct_int_bounds<D>::lo) return (D)ct_int_bounds<D>::lo;
  return (D)v;
}
/* u as a two's complement int64 (as the core's ct__wrap_i64): no implementation-defined cast */
static __device__ __forceinline__ int64_t ct_wrap_i64(unsigned long long u) {
  return u <= (unsigned long long)INT64_MAX ? (int64_t)u : (int64_t)(u - ((unsigned long long)INT64_MAX + 1ull)) + INT64_MIN;
}
/* v modulo 2^bits of D, two's complement */
template <typename D>
static __device__ __forceinline__ D ct_wrap_from_int(long long v);
template <>
__device__ __forceinline__ uint8_t ct_wrap_from_int<uint8_t>(long long v) {
  return (uint8_t)(unsigned long long)v;
}
template <>
__device__ __forceinline__ int32_t ct_wrap_from_int<int32_t>(long long v) {
  unsigned int w = (unsigned int)(unsigned long long)v;
  return w <= (unsigned int)INT32_MAX ? (int32_t)w : (int32_t)(w - 0x80000000u) + INT32_MIN;
}
template <>
__device__ __forceinline__ int64_t ct_wrap_from_int<int64_t>(long long v) {
  return (int64_t)v;
}
template <typename D>
struct ct_down_int {
  static __device__ __forceinline__ D f(float x) { return ct_sat_from_double<D>((double)x); }
  static __device__ __forceinline__ D f(double x) { return ct_sat_from_double<D>(x); }
  /* int32, int64, uint8, bool */
  template <typename X>
  static __device__ __forceinline__ D f(X x) { return ct_wrap_from_int<D>((long long)x); }
};
template <>
struct ct_down<uint8_t> : ct_down_int<uint8_t> {};
template <>
struct ct_down<int32_t> : ct_down_int<int32_t> {};
template <>
struct ct_down<int64_t> : ct_down_int<int64_t> {};
template <>
struct ct_down<bool> {
  template <typename X>
  static __device__ __forceinline__ bool f(X x) { return x != X(0); }
};
/* (D) s with the CPU's conventions for half, bfloat16 and bool. */
template <typename D, typename S>
static __device__ __forceinline__ D ct_cast(S s) { return ct_down<D>::f(ct_up(s)); }

/* Element i of the array at p of runtime dtype dt, converted to C (float or double). */
template <typename C>
static __device__ __forceinline__ C ct_ld(const void *p, int64_t i, int dt) {
  switch (dt) {
    case CT_F32: return ct_cast<C>(((const float *)p)[i]);
    case CT_F64: return ct_cast<C>(((const double *)p)[i]);
    case CT_F16: return ct_cast<C>(((const __half *)p)[i]);
    case CT_BF16: return ct_cast<C>(((const __nv_bfloat16 *)p)[i]);
    case CT_I32: return ct_cast<C>(((const int32_t *)p)[i]);
    case CT_I64: return ct_cast<C>(((const int64_t *)p)[i]);
    case CT_U8: return ct_cast<C>(((const uint8_t *)p)[i]);
    default: return ct_cast<C>(((const bool *)p)[i]);
  }
}
template <typename C>
static __device__ __forceinline__ void ct_st(void *p, int64_t i, int dt, C v) {
  switch (dt) {
    case CT_F32: ((float *)p)[i] = ct_cast<float>(v); break;
    case CT_F64: ((double *)p)[i] = ct_cast<double>(v); break;
    case CT_F16: ((__half *)p)[i] = ct_cast<__half>(v); break;
    case CT_BF16: ((__nv_bfloat16 *)p)[i] = ct_cast<__nv_bfloat16>(v); break;
    case CT_I32: ((int32_t *)p)[i] = ct_cast<int32_t>(v); break;
    case CT_I64: ((int64_t *)p)[i] = ct_cast<int64_t>(v); break;
    case CT_U8: ((uint8_t *)p)[i] = ct_cast<uint8_t>(v); break;
    default: ((bool *)p)[i] = ct_cast<bool>(v); break;
  }
}

/* Host-side dispatch on a floating dtype: runs the statement with S (the storage type) and C (the
 * compute type: float for float32, float16 and bfloat16, double for float64) typedef'd under the
 * names the caller gives; any other dtype returns CT_EDTYPE naming `what`. */
#define CT_CUDA_DISPATCH_FLOAT(dt, S, C, what, ...)                                                    \
  switch (dt) {                                                                                       \
    case CT_F32: { typedef float S; typedef float C; __VA_ARGS__; break; }                            \
    case CT_F64: { typedef double S; typedef double C; __VA_ARGS__; break; }                          \
    case CT_F16: { typedef __half S; typedef float C; __VA_ARGS__; break; }                           \
    case CT_BF16: { typedef __nv_bfloat16 S; typedef float C; __VA_ARGS__; break; }                   \
    default: return ct__error(CT_EDTYPE, "cuda: %s wants a floating dtype, not %s", what, ct_dtype_name(dt)); \
  }

/* Host-side dispatch on a dtype: runs the statement with `scalar_t` typedef'd. */
#define CT_CUDA_DISPATCH_ALL(dt, ...)                                   \
  switch (dt) {                                                         \
    case CT_F32: { typedef float scalar_t; __VA_ARGS__; break; }        \
    case CT_F64: { typedef double scalar_t; __VA_ARGS__; break; }       \
    case CT_F16: { typedef __half scalar_t; __VA_ARGS__; break; }       \
    case CT_BF16: { typedef __nv_bfloat16 scalar_t; __VA_ARGS__; break; } \
    case CT_I32: { typedef int32_t scalar_t; __VA_ARGS__; break; }      \
    case CT_I64: { typedef int64_t scalar_t; __VA_ARGS__; break; }      \
    case CT_U8: { typedef uint8_t scalar_t; __VA_ARGS__; break; }       \
    default: { typedef bool scalar_t; __VA_ARGS__; break; }             \
  }

/* The arithmetic type for a storage dtype: double for float64 and the integers (exact for int32,
 * and for int64 up to 2^53), float for float32, float16, bfloat16, uint8 and bool. */
static inline int ct__cuda_wants_double(ct_dtype dt) { return dt == CT_F64 || dt == CT_I32 || dt == CT_I64; }

/* ---- Philox4x32-10, as random.cu's specification writes it (and core/rng.c computes it on the
 * host): the draws of ct_rand (random.cu) and of attention.cu's dropout. */
static __host__ __device__ __forceinline__ void ct_philox4x32_10(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi,
                                                                 uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32), c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u; /* the bump after the last round is unused */
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* ---- the strided iterator over an N-d index space shared by NOPS operands */
/* core's ct__strided (internal.h), in elements, passed to the kernels by value */
typedef ct__strided ct__cuda_iter;
/* Build it from a shape and each operand's strides (nops <= 4, each with ndim entries), dropping
 * size-1 dims and merging dims that are contiguous for every operand at once. */
static inline void ct__cuda_iter_init(ct__cuda_iter *it, int ndim, const int64_t *shape, int nops,
                                      const int64_t *const *strides) {
  ct__strided_init(it, ndim, shape, nops, strides);
}
/* 1 when every operand walks memory with stride 1 (the contiguous fast path applies). */
int ct__cuda_iter_is_contiguous(const ct__cuda_iter *it, int nops);

/* Element offsets of the linear (row-major) index i for the first NOPS operands. */
template <int NOPS>
static __device__ __forceinline__ void ct_iter_offsets(const ct__cuda_iter &it, int64_t i, int64_t *off) {
#pragma unroll
  for (int k = 0; k < NOPS; k++) off[k] = 0;
  for (int d = it.ndim - 1; d >= 0; d--) {
    int64_t s = it.size[d];
    int64_t q = i / s;
    int64_t r = i - q * s;
    i = q;
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] += r * it.stride[k][d];
  }
}

/* ---- the kernels of core/kernels.def, ct__cuda_<name>, each in the file of its family (copy.cu,
 * elementwise.cu, reduce.cu, matmul.cu, conv.cu, pool.cu, softmax.cu, norm.cu, random.cu, index.cu,
 * optim.cu, attention.cu), with C linkage; the table is in backend.cu */
#define CT_KERNEL(name, params) extern "C" ct_status ct__cuda_##name params;
#include "core/kernels.def"

/* ---- the device interface's entry points, one family per file */
/* device.cu */
int ct__cuda_device_count(void);
ct_status ct__cuda_device_props(int index, ct_device_props *out);
/* context.cu */
ct_status ct__cuda_synchronize(int index);
/* copy.cu */
ct_status ct__cuda_memcpy(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking);
/* allocator.cu: the vtable's memory entries */
ct_status ct__cuda_vt_memory_stats(int index, ct_memory_stats *out);
ct_status ct__cuda_vt_empty_cache(int index);
ct_status ct__cuda_vt_reset_peak(int index);
/* pinned.cu: the cached pinned host allocator */
void *ct__cuda_pinned_alloc(size_t nbytes);
void ct__cuda_pinned_free(void *p, size_t nbytes);
void ct__cuda_pinned_stats(ct_memory_stats *out);
void ct__cuda_pinned_empty_cache(void);
/* stream.cu */
ct_status ct__cuda_stream_new(int index, void **out);
void ct__cuda_stream_free(int index, void *stream);
ct_status ct__cuda_stream_synchronize(int index, void *stream);
ct_status ct__cuda_stream_wait_event(int index, void *stream, void *event);
ct_status ct__cuda_event_record(int index, void *stream, void **out);
ct_status ct__cuda_event_synchronize(int index, void *event);
int ct__cuda_event_query(int index, void *event);
ct_status ct__cuda_event_elapsed_ms(int index, void *start, void *end, double *ms);
void ct__cuda_event_free(int index, void *event);
/* graph.cu */
ct_status ct__cuda_graph_capture_begin(int index);
ct_status ct__cuda_graph_capture_end(int index, void **out);
ct_status ct__cuda_graph_replay(int index, void *graph);
void ct__cuda_graph_free(int index, void *graph);

#endif
