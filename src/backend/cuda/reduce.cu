/* src/backend/cuda/reduce.cu: sum, max and min over the dims that have size 1 in out, with the
 * index of the max/min (the flat row-major index within the reduced dims, as argmax over one dim).
 *
 * x: (d0, ..., dn) any strides;  out: x's ndim, size 1 on reduced dims;  indices: int64, out's shape
 * or NULL. The index space splits into an outer iterator over out's elements and an inner one over
 * the R elements each of them reduces. Two strategies:
 *  - one thread per output, a sequential loop over R: when R is small or there are enough outputs
 *    to fill the GPU (reducing over a leading dim, whose reads then coalesce across threads);
 *  - blocks of 256 threads on chunks of R, a tree in shared memory, partial results to a scratch
 *    buffer, then one small block per output combining its chunks: everything else (row sums, a
 *    full sum of a large tensor).
 * Accumulation: float for float32/float16/bfloat16, double for float64 and the integer dtypes.
 * max/min propagate NaN (the first NaN wins, as torch.max); ties go to the lowest index. */
#include <math.h>

#include "backend/cuda/common.cuh"

/* ---- combining rules */

template <typename A, int OPR>
static __device__ __forceinline__ A reduce_identity() {
  return OPR == CT_REDUCE_SUM ? A(0) : OPR == CT_REDUCE_MAX ? A(-INFINITY) : A(INFINITY);
}

/* (v, i) <- (v, i) combined with (v2, i2) */
template <typename A, int OPR>
static __device__ __forceinline__ void reduce_combine(A &v, int64_t &i, A v2, int64_t i2) {
  if (OPR == CT_REDUCE_SUM) {
    v += v2;
    return;
  }
  bool take;
  if (v2 != v2) take = !(v != v) || i2 < i;
  else if (v != v) take = false;
  else if (OPR == CT_REDUCE_MAX) take = v2 > v || (v2 == v && i2 < i);
  else take = v2 < v || (v2 == v && i2 < i);
  if (take) v = v2, i = i2;
}

/* ---- kernels */

/* One thread per output o (operands of outer: x base, out, indices). */
template <typename S, typename A, int OPR>
__global__ void reduce_thread_kernel(const S *__restrict__ x, void *out, int odt, int64_t *indices, ct__cuda_iter outer,
                                     ct__cuda_iter inner, int64_t n_out, int64_t R) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n_out; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    ct_iter_offsets<3>(outer, o, off);
    A v = reduce_identity<A, OPR>();
    int64_t vi = INT64_MAX;
    for (int64_t r = 0; r < R; r++) {
      int64_t ro;
      ct_iter_offsets<1>(inner, r, &ro);
      reduce_combine<A, OPR>(v, vi, ct_cast<A>(x[off[0] + ro]), r);
    }
    ct_st<A>(out, off[1], odt, v);
    if (indices) indices[off[2]] = vi == INT64_MAX ? 0 : vi;
  }
}

/* Block-wide combine of (v, i) held by each thread; thread 0 gets the result. */
template <typename A, int OPR>
static __device__ __forceinline__ void block_combine(A &v, int64_t &vi) {
  __shared__ A sv[CT_CUDA_THREADS];
  __shared__ int64_t si[CT_CUDA_THREADS];
  sv[threadIdx.x] = v;
  si[threadIdx.x] = vi;
  __syncthreads();
  for (int s = CT_CUDA_THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      A a = sv[threadIdx.x];
      int64_t ai = si[threadIdx.x];
      reduce_combine<A, OPR>(a, ai, sv[threadIdx.x + s], si[threadIdx.x + s]);
      sv[threadIdx.x] = a;
      si[threadIdx.x] = ai;
    }
    __syncthreads();
  }
  v = sv[0];
  vi = si[0];
}

/* Block b = o * chunks + c reduces chunk c of output o's R elements into pval[b], pidx[b]. */
template <typename S, typename A, int OPR>
__global__ void reduce_block_kernel(const S *__restrict__ x, ct__cuda_iter outer, ct__cuda_iter inner, int64_t R,
                                    int64_t chunks, A *pval, int64_t *pidx) {
  int64_t b = blockIdx.x;
  int64_t o = b / chunks, c = b - o * chunks;
  int64_t per = (R + chunks - 1) / chunks;
  int64_t r0 = c * per, r1 = r0 + per < R ? r0 + per : R;
  int64_t off[3];
  ct_iter_offsets<3>(outer, o, off);
  A v = reduce_identity<A, OPR>();
  int64_t vi = INT64_MAX;
  for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    int64_t ro;
    ct_iter_offsets<1>(inner, r, &ro);
    reduce_combine<A, OPR>(v, vi, ct_cast<A>(x[off[0] + ro]), r);
  }
  block_combine<A, OPR>(v, vi);
  if (threadIdx.x == 0) pval[b] = v, pidx[b] = vi;
}

/* Block o combines output o's chunks partials and writes the result. */
template <typename A, int OPR>
__global__ void reduce_finish_kernel(const A *pval, const int64_t *pidx, int64_t chunks, void *out, int odt,
                                     int64_t *indices, ct__cuda_iter outer) {
  int64_t o = blockIdx.x;
  A v = reduce_identity<A, OPR>();
  int64_t vi = INT64_MAX;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) reduce_combine<A, OPR>(v, vi, pval[o * chunks + c], pidx[o * chunks + c]);
  block_combine<A, OPR>(v, vi);
  if (threadIdx.x == 0) {
    int64_t off[3];
    ct_iter_offsets<3>(outer, o, off);
    ct_st<A>(out, off[1], odt, v);
    if (indices) indices[off[2]] = vi == INT64_MAX ? 0 : vi;
  }
}

/* ---- launchers */

template <typename S, typename A, int OPR>
static ct_status launch_reduce(ct__cuda_ctx *ctx, ct_tensor *out, ct_tensor *indices, ct_tensor *x,
                               const ct__cuda_iter *outer, const ct__cuda_iter *inner, int64_t n_out, int64_t R) {
  const S *xp = (const S *)ct__ptr(x);
  int64_t *ip = indices ? (int64_t *)ct__ptr(indices) : NULL;
  int64_t fill = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 2048;
  if (R <= 64 || n_out >= fill) {
    reduce_thread_kernel<S, A, OPR><<<ct__cuda_blocks(ctx, n_out), CT_CUDA_THREADS, 0, ctx->compute>>>(
        xp, ct__ptr(out), out->dtype, ip, *outer, *inner, n_out, R);
    CT_CUDA_LAUNCHED("reduce_thread_kernel");
    return CT_OK;
  }
  /* chunks per output: enough blocks for about 4 waves, each chunk at least 2048 elements */
  int64_t want = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 4;
  int64_t chunks = (want + n_out - 1) / n_out;
  if (chunks > R / 2048) chunks = R / 2048;
  if (chunks < 1) chunks = 1;
  if (n_out * chunks > INT32_MAX) chunks = 1;
  if (n_out > INT32_MAX) return ct__error(CT_EINVAL, "cuda: reduce: %lld outputs are too many for one launch", (long long)n_out);
  ct__be_tmp pv, pi;
  int64_t np = n_out * chunks;
  CT_TRY(ct__be_tmp_new(&pv, x->device, 1, &np, sizeof(A) == 8 ? CT_F64 : CT_F32));
  ct_status s = ct__be_tmp_new(&pi, x->device, 1, &np, CT_I64);
  if (s != CT_OK) {
    ct__be_tmp_free(&pv);
    return s;
  }
  A *pval = (A *)ct__ptr(&pv.t);
  int64_t *pidx = (int64_t *)ct__ptr(&pi.t);
  reduce_block_kernel<S, A, OPR><<<(unsigned)np, CT_CUDA_THREADS, 0, ctx->compute>>>(xp, *outer, *inner, R, chunks, pval, pidx);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    reduce_finish_kernel<A, OPR><<<(unsigned)n_out, CT_CUDA_THREADS, 0, ctx->compute>>>(pval, pidx, chunks, ct__ptr(out),
                                                                                        out->dtype, ip, *outer);
    e = cudaGetLastError();
  }
  ct__be_tmp_free(&pv); /* stream-ordered: reused only by later work on the compute stream */
  ct__be_tmp_free(&pi);
  if (e != cudaSuccess) return ct__error(CT_EBACKEND, "cuda: launch of reduce_block_kernel failed: %s", cudaGetErrorString(e));
  return CT_OK;
}

template <typename S, typename A>
static ct_status launch_reduce_op(ct_reduce_op op, ct__cuda_ctx *ctx, ct_tensor *out, ct_tensor *indices, ct_tensor *x,
                                  const ct__cuda_iter *outer, const ct__cuda_iter *inner, int64_t n_out, int64_t R) {
  switch (op) {
    case CT_REDUCE_SUM: return launch_reduce<S, A, CT_REDUCE_SUM>(ctx, out, indices, x, outer, inner, n_out, R);
    case CT_REDUCE_MAX: return launch_reduce<S, A, CT_REDUCE_MAX>(ctx, out, indices, x, outer, inner, n_out, R);
    default: return launch_reduce<S, A, CT_REDUCE_MIN>(ctx, out, indices, x, outer, inner, n_out, R);
  }
}

/* x: (d0..dn); out: same ndim, 1 on reduced dims; indices: int64 of out's shape or NULL */
ct_status ct__cuda_reduce(ct_reduce_op op, ct_tensor *out, ct_tensor *indices, ct_tensor *x) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  if (out->ndim != x->ndim)
    return ct__error(CT_ESHAPE, "cuda: reduce: out has %d dims but x has %d (keep reduced dims as size 1)", out->ndim, x->ndim);
  int64_t n_out = ct__numel(out->ndim, out->shape);
  if (n_out == 0) return CT_OK;
  /* inner: the reduced dims (out size 1, x size > 1), in x's order */
  int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
  int nr = 0;
  for (int d = 0; d < x->ndim; d++)
    if (out->shape[d] == 1 && x->shape[d] != 1) rshape[nr] = x->shape[d], rstride[nr] = x->stride[d], nr++;
  int64_t R = ct__numel(nr, rshape);
  const int64_t *rs[1] = {rstride};
  ct__cuda_iter inner;
  ct__cuda_iter_init(&inner, nr, rshape, 1, rs);
  static const int64_t zeros[CT_MAX_DIMS] = {0};
  const int64_t *os[3] = {x->stride, out->stride, indices ? indices->stride : zeros};
  ct__cuda_iter outer;
  ct__cuda_iter_init(&outer, out->ndim, out->shape, 3, os);
  ct_status s = CT_OK;
  switch (x->dtype) {
    case CT_F32: s = launch_reduce_op<float, float>(op, ctx, out, indices, x, &outer, &inner, n_out, R); break;
    case CT_F16: s = launch_reduce_op<__half, float>(op, ctx, out, indices, x, &outer, &inner, n_out, R); break;
    case CT_BF16: s = launch_reduce_op<__nv_bfloat16, float>(op, ctx, out, indices, x, &outer, &inner, n_out, R); break;
    default:
      CT_CUDA_DISPATCH_ALL(x->dtype, s = (launch_reduce_op<scalar_t, double>(op, ctx, out, indices, x, &outer, &inner, n_out, R)));
  }
  return s;
}
