/* src/backend/cuda/conv.cu: 2-D convolution, NCHW, and its backward, through cuDNN: each direction
 * first through the graph API with a kept execution plan (conv_plan.cu: far less host time a call),
 * and where that has no plan for the problem, through cuDNN's legacy API as below.
 *
 *   x: (N, Cin, H, W), w: (Cout, Cin / groups, kH, kW), b: (Cout) or NULL -> y: (N, Cout, Ho, Wo)
 *   Ho = (H + 2 pH - dH (kH - 1) - 1) / sH + 1, likewise Wo.
 * Backward: gx (x's shape), gw (w's shape), gb (Cout), each may be NULL; all are overwritten.
 *
 * The algorithm is cuDNN's own heuristic choice (cudnnGet*Algorithm_v7), asked once per problem and
 * remembered (the algorithm cache below), tried in its order (run_candidates): a candidate whose workspace the allocator cannot provide, or whose call fails,
 * gives way to the next; the error comes only when every one failed. The workspace is the device
 * context's (grown on demand, reused across calls). float32 runs with CUDNN_FMA_MATH on the
 * descriptor for every candidate (no TF32, whatever math type the candidate names) unless
 * ct__cuda_set_allow_tf32(1); float16 and bfloat16 may use tensor cores; float64 is supported by
 * cuDNN's legacy kernels in NCHW, and a channels_last float64 convolution runs through NCHW copies
 * (cuDNN may refuse float64 with NHWC descriptors). Strided inputs are copied to contiguous scratch
 * first (cuDNN's filter descriptor has no strides); outputs must be contiguous (channels_last: dense).
 * The bias and its gradient are cuttle's own kernels (bias_add_kernel, bias_grad_partial_kernel and
 * bias_grad_finish_kernel), since
 * cudnnAddTensor / cudnnConvolutionBackwardBias may refuse bfloat16 in cuDNN 9. */
#include <unordered_map>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/conv_plan.h"

/* Descriptors that destroy themselves. */
struct tensor_desc {
  cudnnTensorDescriptor_t d = NULL;
  ~tensor_desc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
};
struct filter_desc {
  cudnnFilterDescriptor_t d = NULL;
  ~filter_desc() {
    if (d) cudnnDestroyFilterDescriptor(d);
  }
};
struct conv_desc {
  cudnnConvolutionDescriptor_t d = NULL;
  ~conv_desc() {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
};
/* Scratch copies freed on every path. */
struct scoped_tmp {
  ct__be_tmp t;
  scoped_tmp() { memset(&t, 0, sizeof t); }
  ~scoped_tmp() { ct__be_tmp_free(&t); }
};

/* fmt: CUDNN_TENSOR_NCHW for row-major tensors, CUDNN_TENSOR_NHWC for channels_last ones; the
 * dims are the logical (n, c, h, w) either way, as cuDNN's 4-D descriptors take them. */
static ct_status set_tensor(tensor_desc &td, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w,
                            cudnnTensorFormat_t fmt = CUDNN_TENSOR_NCHW) {
  CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&td.d));
  CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(td.d, fmt, dt, (int)n, (int)c, (int)h, (int)w));
  return CT_OK;
}

/* Everything the three directions share. */
struct conv_setup {
  cudnnHandle_t h = NULL;
  cudnnDataType_t data, compute;
  tensor_desc xd, yd;
  filter_desc wd;
  conv_desc cd;
  bool fma_only = false; /* float32 without TF32 */
  double one_d = 1.0, zero_d = 0.0;
  float one_f = 1.0f, zero_f = 0.0f;
  const void *one() const { return data == CUDNN_DATA_DOUBLE ? (const void *)&one_d : (const void *)&one_f; }
  const void *zero() const { return data == CUDNN_DATA_DOUBLE ? (const void *)&zero_d : (const void *)&zero_f; }
};

/* x: (N, Cin, H, W), w: (Cout, Cin/g, kH, kW), y: (N, Cout, Ho, Wo) (shapes only): what both
 * cuDNN paths accept */
static ct_status check(const ct_tensor *x, const ct_tensor *w, const ct_tensor *y) {
  cudnnDataType_t data, compute;
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
    return ct__error(CT_ESHAPE, "cuda: conv2d wants 4-D x, w and y, got %d, %d and %d dims", x->ndim, w->ndim, y->ndim);
  if (!ct__cudnn_types(x->dtype, &data, &compute))
    return ct__error(CT_EDTYPE, "cuda: conv2d supports float32, float64, float16 and bfloat16, not %s", ct_dtype_name(x->dtype));
  for (int d = 0; d < 4; d++)
    if (x->shape[d] > INT32_MAX || w->shape[d] > INT32_MAX || y->shape[d] > INT32_MAX)
      return ct__error(CT_EINVAL, "cuda: conv2d: a dimension exceeds cuDNN's int range");
  return CT_OK;
}

/* The problem as conv_plan.cu's graph path takes it. */
static ct__cuda_conv_problem problem(int dir, const ct_tensor *x, const ct_tensor *w, const ct_tensor *y,
                                     const ct_conv2d_opts *o, bool nhwc) {
  ct__cuda_conv_problem p;
  p.dir = dir, p.dtype = x->dtype, p.nhwc = nhwc, p.fma_only = x->dtype == CT_F32 && !ct__cuda_allow_tf32();
  for (int d = 0; d < 4; d++) p.x[d] = x->shape[d], p.w[d] = w->shape[d], p.y[d] = y->shape[d];
  for (int d = 0; d < 2; d++) {
    p.pad[d] = o->padding[d];
    p.stride[d] = o->stride[d] ? o->stride[d] : 1;
    p.dilation[d] = o->dilation[d] ? o->dilation[d] : 1;
  }
  return p;
}

/* x: (N, Cin, H, W), w: (Cout, Cin/g, kH, kW), y: (N, Cout, Ho, Wo) (shapes only; check() passed) */
static ct_status setup(conv_setup &s, ct__cuda_ctx *ctx, const ct_tensor *x, const ct_tensor *w, const ct_tensor *y,
                       const ct_conv2d_opts *o, cudnnTensorFormat_t fmt) {
  CT_TRY(check(x, w, y));
  ct__cudnn_types(x->dtype, &s.data, &s.compute);
  s.h = ct__cuda_cudnn(ctx);
  if (!s.h) return ct_last_status();
  CT_TRY(set_tensor(s.xd, s.data, x->shape[0], x->shape[1], x->shape[2], x->shape[3], fmt));
  CT_TRY(set_tensor(s.yd, s.data, y->shape[0], y->shape[1], y->shape[2], y->shape[3], fmt));
  CT_CUDNN_TRY(cudnnCreateFilterDescriptor(&s.wd.d));
  CT_CUDNN_TRY(cudnnSetFilter4dDescriptor(s.wd.d, s.data, fmt, (int)w->shape[0], (int)w->shape[1],
                                          (int)w->shape[2], (int)w->shape[3]));
  int sh = o->stride[0] ? o->stride[0] : 1, sw = o->stride[1] ? o->stride[1] : 1;
  int dh = o->dilation[0] ? o->dilation[0] : 1, dw = o->dilation[1] ? o->dilation[1] : 1;
  int groups = o->groups ? o->groups : 1;
  CT_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s.cd.d));
  CT_CUDNN_TRY(cudnnSetConvolution2dDescriptor(s.cd.d, o->padding[0], o->padding[1], sh, sw, dh, dw,
                                               CUDNN_CROSS_CORRELATION, s.compute));
  CT_CUDNN_TRY(cudnnSetConvolutionGroupCount(s.cd.d, groups));
  cudnnMathType_t mt = CUDNN_DEFAULT_MATH;
  if (x->dtype == CT_F32 && !ct__cuda_allow_tf32()) mt = CUDNN_FMA_MATH, s.fma_only = true;
  else if (x->dtype == CT_F16 || x->dtype == CT_BF16) mt = CUDNN_TENSOR_OP_MATH;
  CT_CUDNN_TRY(cudnnSetConvolutionMathType(s.cd.d, mt));
  return CT_OK;
}

static bool is_tensor_op(cudnnMathType_t mt) {
  return mt == CUDNN_TENSOR_OP_MATH || mt == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* ---- the algorithm cache. cuDNN's heuristic query (cudnnGet*Algorithm_v7) is made once per
 * problem, not once per call: the candidate that ran, with its math type and workspace size, is
 * remembered in the device context, keyed by
 * the direction, dtype, layout, shapes, options and math rule, as PyTorch remembers its choice per
 * ConvolutionParams (aten/src/ATen/native/cudnn/Conv_v7.cpp, BenchmarkCache). A remembered
 * candidate that then fails (its workspace cannot be had, say) is forgotten and the heuristics run
 * again. CUTTLE_CUDNN_ALGO_CACHE=0 turns the cache off, so that both can be timed in one run. */
struct ct__cuda_conv_algos {
  std::mutex lock;
  struct pick {
    int algo;
    cudnnMathType_t math;
    size_t bytes; /* its workspace, asked of cuDNN once: the query costs host time on every call */
  };
  std::unordered_map<ct__cuda_conv_key, pick, ct__cuda_conv_key_hash> choice;
};

static bool algo_cache_on() {
  static const bool on = [] {
    const char *e = getenv("CUTTLE_CUDNN_ALGO_CACHE");
    return !(e && strcmp(e, "0") == 0);
  }();
  return on;
}

/* dir (0 forward, 1 backward data, 2 backward filter), dtype, layout, math rule, x's and w's shapes,
 * padding, stride, dilation, groups */
static ct__cuda_conv_key algo_key(int dir, const ct_tensor *x, const ct_tensor *w, const ct_conv2d_opts *o, bool nhwc, bool fma_only) {
  return ct__cuda_conv_key{{dir, x->dtype, nhwc, fma_only, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0],
                     w->shape[1], w->shape[2], w->shape[3], o->padding[0], o->padding[1], o->stride[0], o->stride[1],
                     o->dilation[0], o->dilation[1], o->groups}};
}

static ct__cuda_conv_algos *algos_of(ct__cuda_ctx *ctx) {
  std::lock_guard<std::mutex> g(ctx->lock);
  if (!ctx->conv_algos) ctx->conv_algos = new (std::nothrow) ct__cuda_conv_algos(); /* kept until exit, as the handles */
  return ctx->conv_algos;
}

/* Run one direction of the convolution with cuDNN's heuristic candidates perf[0..n), in cuDNN's
 * order, until one succeeds. wsize(algo, &bytes) asks cuDNN for the workspace of algo under the
 * math type just set; run(algo, ws, bytes) is the convolution call. A candidate is passed over when
 * the heuristic marks it failed, when cuDNN gives no workspace size for it, when the allocator
 * cannot provide that workspace, and when the call itself fails (CUDNN_STATUS_NOT_SUPPORTED, ...).
 * float32 without TF32 (s.fma_only): the descriptor gets CUDNN_FMA_MATH for every candidate, so no
 * candidate can run in TF32; the ones cuDNN ranked as tensor-op variants come last. */
template <typename Perf, int Count, typename QueryFn, typename WsFn, typename RunFn>
static ct_status run_candidates(ct__cuda_ctx *ctx, conv_setup &s, const ct__cuda_conv_key &key, const char *what,
                                QueryFn query, WsFn wsize, RunFn run) {
  ct__cuda_conv_algos *cache = algo_cache_on() ? algos_of(ctx) : NULL;
  if (cache) { /* the remembered candidate first */
    ct__cuda_conv_algos::pick c;
    bool hit;
    {
      std::lock_guard<std::mutex> g(cache->lock);
      auto it = cache->choice.find(key);
      hit = it != cache->choice.end();
      if (hit) c = it->second;
    }
    void *ws = NULL;
    if (hit && cudnnSetConvolutionMathType(s.cd.d, c.math) == CUDNN_STATUS_SUCCESS &&
        ct__cuda_workspace(ctx, c.bytes, &ws) == CT_OK && run((decltype(Perf::algo))c.algo, ws, c.bytes) == CUDNN_STATUS_SUCCESS)
      return CT_OK;
    if (hit) {
      ct_clear_error();
      std::lock_guard<std::mutex> g(cache->lock);
      cache->choice.erase(key);
    }
  }
  Perf perf[Count];
  int n = 0;
  cudnnStatus_t q = query(perf, &n);
  if (q != CUDNN_STATUS_SUCCESS)
    return ct__error(CT_EBACKEND, "cuda: conv2d %s: cuDNN's algorithm heuristics failed: %s", what, cudnnGetErrorString(q));
  int tried = 0, no_ws = 0;
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  for (int pass = 0; pass < (s.fma_only ? 2 : 1); pass++) {
    for (int i = 0; i < n; i++) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      cudnnMathType_t mt = perf[i].mathType;
      if (s.fma_only) {
        if (is_tensor_op(mt) != (pass == 1)) continue; /* pass 0: FMA and default ones; pass 1: the rest */
        mt = CUDNN_FMA_MATH;
      }
      cudnnStatus_t e = cudnnSetConvolutionMathType(s.cd.d, mt);
      size_t bytes = 0;
      if (e == CUDNN_STATUS_SUCCESS) e = wsize(perf[i].algo, &bytes);
      if (e != CUDNN_STATUS_SUCCESS) {
        last = e;
        continue;
      }
      if (bytes < perf[i].memory) bytes = perf[i].memory;
      void *ws = NULL;
      if (ct__cuda_workspace(ctx, bytes, &ws) != CT_OK) {
        ct_clear_error();
        no_ws++;
        continue;
      }
      tried++;
      e = run(perf[i].algo, ws, bytes);
      if (e == CUDNN_STATUS_SUCCESS) {
        if (cache) {
          std::lock_guard<std::mutex> g(cache->lock);
          cache->choice[key] = ct__cuda_conv_algos::pick{(int)perf[i].algo, mt, bytes};
        }
        return CT_OK;
      }
      last = e;
    }
  }
  return ct__error(CT_EBACKEND,
                   "cuda: conv2d %s: none of cuDNN's %d candidate algorithms ran (%d calls failed, %d wanted more "
                   "workspace than the allocator could give; last cuDNN error: %s)%s",
                   what, n, tried, no_ws, last == CUDNN_STATUS_SUCCESS ? "none" : cudnnGetErrorString(last),
                   s.fma_only ? "; float32 without TF32 allows CUDNN_FMA_MATH only" : "");
}

/* ---- the bias, by cuttle's own kernels. y (N, C, H, W) contiguous NCHW, or dense channels_last
 * (nhwc); hw = H * W. In A (float; double for float64), rounded once into y's dtype, as cuDNN's
 * y = 1 * b + 1 * y computes it. */
template <typename T, typename A>
__global__ void bias_add_kernel(T *__restrict__ y, const T *__restrict__ b, int64_t n, int64_t C, int64_t hw, int nhwc) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = nhwc ? i % C : (i / hw) % C;
    y[i] = ct_cast<T>(ct_cast<A>(y[i]) + ct_cast<A>(b[c]));
  }
}

/* gb[c] = the sum of gy over n, h and w, accumulated in A, in two passes so that the whole GPU
 * works on it: one block a channel left most SMs idle (Nsight Compute on an H100, 2026-11-27: 192 us
 * for the cnn's 32 channels of 100352 values, on 32 of 132 SMs). Pass 1: block (s, c) sums the s-th
 * run of `per_chunk` values of channel c (j = n * hw + k in order) into part[c * chunks + s], a tree
 * reduction in shared memory; the grid's y strides over the channels (at most 65535 a launch). */
template <typename T, typename A>
__global__ void bias_grad_partial_kernel(A *__restrict__ part, const T *__restrict__ gy, int64_t N, int64_t C,
                                         int64_t hw, int nhwc, int64_t per_chunk) {
  __shared__ A red[CT_CUDA_THREADS];
  int64_t m = N * hw, chunks = gridDim.x, lo = blockIdx.x * per_chunk, hi = lo + per_chunk < m ? lo + per_chunk : m;
  for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
    A acc = 0;
    for (int64_t j = lo + threadIdx.x; j < hi; j += CT_CUDA_THREADS) {
      int64_t img = j / hw, k = j - img * hw;
      acc += ct_cast<A>(gy[nhwc ? j * C + c : (img * C + c) * hw + k]);
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int half = CT_CUDA_THREADS / 2; half > 0; half >>= 1) {
      if ((int)threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) part[c * chunks + blockIdx.x] = red[0];
    __syncthreads(); /* red[0] is read before the next channel writes red[] */
  }
}

/* Pass 2: gb[c] = part[c * chunks + 0] + ... + part[c * chunks + chunks - 1], in that order (the
 * same bits on every run), rounded once into T. */
template <typename T, typename A>
__global__ void bias_grad_finish_kernel(T *__restrict__ gb, const A *__restrict__ part, int64_t C, int64_t chunks) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
    A acc = 0;
    for (int64_t s = 0; s < chunks; s++) acc += part[c * chunks + s];
    gb[c] = ct_cast<T>(acc);
  }
}

/* y += b over channel dim 1 (y as above; b: (C) of y's dtype, any strides) */
static ct_status bias_add(ct__cuda_ctx *ctx, ct_tensor *y, ct_tensor *b, bool nhwc) {
  int64_t C = y->shape[1], hw = y->shape[2] * y->shape[3], n = ct__numel(y->ndim, y->shape);
  if (b->dtype != y->dtype || ct__numel(b->ndim, b->shape) != C)
    return ct__error(CT_EINVAL, "cuda: conv2d wants a bias of %lld elements of %s, got %lld of %s", (long long)C,
                     ct_dtype_name(y->dtype), (long long)ct__numel(b->ndim, b->shape), ct_dtype_name(b->dtype));
  if (n == 0) return CT_OK;
  scoped_tmp bc;
  CT_TRY(ct__be_tmp_contiguous(&bc.t, b));
  CT_CUDA_DISPATCH_FLOAT(y->dtype, T, A, "conv2d's bias",
                      bias_add_kernel<T, A><<<ct__cuda_blocks(ctx, n), CT_CUDA_THREADS, 0, ctx->compute>>>(
                          (T *)ct__ptr(y), (const T *)ct__ptr(&bc.t.t), n, C, hw, nhwc ? 1 : 0));
  CT_CUDA_LAUNCHED("bias_add_kernel");
  return CT_OK;
}

/* gb (C) contiguous = the sum of gy (N, C, H, W) over n, h, w; gyp: gy's dense data (NCHW, or
 * channels_last when nhwc) */
static ct_status bias_grad(ct__cuda_ctx *ctx, ct_tensor *gb, const ct_tensor *gy, const void *gyp, bool nhwc) {
  int64_t N = gy->shape[0], C = gy->shape[1], hw = gy->shape[2] * gy->shape[3], m = N * hw;
  if (gb->dtype != gy->dtype || ct__numel(gb->ndim, gb->shape) != C)
    return ct__error(CT_EINVAL, "cuda: conv2d_backward wants a bias gradient of %lld elements of %s", (long long)C,
                     ct_dtype_name(gy->dtype));
  if (C == 0) return CT_OK;
  /* about four blocks an SM in all, each thread adding at least 4 values of a run */
  int64_t target = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 4, min_run = (int64_t)CT_CUDA_THREADS * 4;
  int64_t chunks = C >= target ? 1 : (target + C - 1) / C, most = (m + min_run - 1) / min_run;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  int64_t per_chunk = (m + chunks - 1) / chunks;
  dim3 grid((unsigned)chunks, (unsigned)(C < 65535 ? C : 65535));
  /* the partial sums, from the stream-ordered cache: freed once both passes are queued, a later
   * allocation on the compute stream runs after them */
  size_t bytes = (size_t)(C * chunks) * (gy->dtype == CT_F64 ? sizeof(double) : sizeof(float));
  void *part = ct__cuda_alloc(ctx->device, bytes);
  if (!part) return ct_last_status();
  unsigned fin = (unsigned)((C + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS < 4096 ? (C + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS : 4096);
  ct_status st = [&]() -> ct_status { /* the dispatch's error return must not skip the free below */
    CT_CUDA_DISPATCH_FLOAT(gy->dtype, T, A, "conv2d_backward's bias gradient", {
      bias_grad_partial_kernel<T, A><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>((A *)part, (const T *)gyp, N, C, hw,
                                                                                nhwc ? 1 : 0, per_chunk);
      bias_grad_finish_kernel<T, A><<<fin, CT_CUDA_THREADS, 0, ctx->compute>>>((T *)ct__ptr(gb), (const A *)part, C, chunks);
    });
    return CT_OK;
  }();
  ct__cuda_free(ctx->device, part, bytes);
  if (st != CT_OK) return st;
  CT_CUDA_LAUNCHED("bias_grad_partial_kernel, bias_grad_finish_kernel");
  return CT_OK;
}

/* The device pointer of t as cuDNN reads it: a channels_last tensor (nhwc; the vtable's *_nhwc
 * entries pass dense ones) as it is, else a row-major copy when t is strided (tmp keeps it). */
static ct_status dense(scoped_tmp &tmp, ct_tensor *t, bool nhwc, const void **p) {
  if (nhwc) {
    *p = ct__ptr(t);
    return CT_OK;
  }
  CT_TRY(ct__be_tmp_contiguous(&tmp.t, t));
  *p = ct__ptr(&tmp.t.t);
  return CT_OK;
}

/* y: (N, Cout, Ho, Wo) contiguous (nhwc: dense channels_last, as x and w); x, w any strides;
 * b: (Cout) or NULL */
static ct_status conv_forward(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o, bool nhwc) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(y);
  if (!ctx) return ct_last_status();
  if (ct__numel(y->ndim, y->shape) == 0) return CT_OK;
  if (!nhwc && !ct_tensor_is_contiguous(y)) return ct__error(CT_EINVAL, "cuda: conv2d wants a contiguous y");
  CT_TRY(check(x, w, y));
  scoped_tmp xc, wc;
  const void *xp, *wp;
  CT_TRY(dense(xc, x, nhwc, &xp));
  CT_TRY(dense(wc, w, nhwc, &wp));
  void *yp = ct__ptr(y);
  ct__cuda_conv_problem p = problem(0, x, w, y, o, nhwc);
  if (ct__cuda_conv_graph(ctx, &p, xp, wp, yp)) return b ? bias_add(ctx, y, b, nhwc) : CT_OK;
  conv_setup s;
  CT_TRY(setup(s, ctx, x, w, y, o, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW));
  CT_TRY((run_candidates<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
      ctx, s, algo_key(0, x, w, o, nhwc, s.fma_only), "forward",
      [&](cudnnConvolutionFwdAlgoPerf_t *perf, int *n) {
        return cudnnGetConvolutionForwardAlgorithm_v7(s.h, s.xd.d, s.wd.d, s.cd.d, s.yd.d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n,
                                                      perf);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(s.h, s.xd.d, s.wd.d, s.cd.d, s.yd.d, algo, bytes);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, void *ws, size_t bytes) {
        return cudnnConvolutionForward(s.h, s.one(), s.xd.d, xp, s.wd.d, wp, s.cd.d, algo, ws, bytes, s.zero(), s.yd.d, yp);
      })));
  if (b) CT_TRY(bias_add(ctx, y, b, nhwc));
  return CT_OK;
}

ct_status ct__cuda_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  return conv_forward(y, x, w, b, o, false);
}

/* *out = t when t is contiguous (row-major, NCHW), else a contiguous scratch of t's shape and
 * dtype in tmp (uninitialized): where an NCHW result goes before it is copied into t. */
static ct_status nchw_scratch(scoped_tmp &tmp, ct_tensor *t, ct_tensor **out) {
  if (ct_tensor_is_contiguous(t)) {
    *out = t;
    return CT_OK;
  }
  CT_TRY(ct__be_tmp_new(&tmp.t, t->device, t->ndim, t->shape, t->dtype));
  *out = &tmp.t.t;
  return CT_OK;
}

/* The channels_last forward (backend.h's conv2d_nhwc): cuDNN's NHWC descriptors, no copies.
 * float64, which cuDNN may refuse in NHWC, runs the NCHW path instead: x and w are copied to NCHW
 * (dense() in conv_forward), y is computed into NCHW scratch and copied back into channels_last. */
ct_status ct__cuda_conv2d_nhwc(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  if (x->dtype != CT_F64) return conv_forward(y, x, w, b, o, true);
  scoped_tmp yc;
  ct_tensor *yn;
  CT_TRY(nchw_scratch(yc, y, &yn));
  CT_TRY(conv_forward(yn, x, w, b, o, false));
  if (yn != y) CT_TRY(ct__cuda_copy(y, yn));
  return CT_OK;
}

/* gx: x's shape, gw: w's shape, gb: (Cout); each NULL when not wanted; gy: y's shape (nhwc: the 4-D
 * ones dense channels_last) */
static ct_status conv_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                               const ct_conv2d_opts *o, bool nhwc) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(gy);
  if (!ctx) return ct_last_status();
  if ((!nhwc && gx && !ct_tensor_is_contiguous(gx)) || (!nhwc && gw && !ct_tensor_is_contiguous(gw)) ||
      (gb && !ct_tensor_is_contiguous(gb)))
    return ct__error(CT_EINVAL, "cuda: conv2d_backward wants contiguous gx, gw and gb");
  if (ct__numel(gy->ndim, gy->shape) == 0) {
    if (gx) CT_TRY(ct__cuda_fill(gx, 0.0));
    if (gw) CT_TRY(ct__cuda_fill(gw, 0.0));
    if (gb) CT_TRY(ct__cuda_fill(gb, 0.0));
    return CT_OK;
  }
  CT_TRY(check(x, w, gy));
  conv_setup s; /* the legacy path's descriptors, made when a direction needs them */
  auto legacy = [&]() -> ct_status { return s.h ? CT_OK : setup(s, ctx, x, w, gy, o, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW); };
  scoped_tmp gyc;
  const void *gyp;
  CT_TRY(dense(gyc, gy, nhwc, &gyp));
  if (gx) {
    scoped_tmp wc;
    const void *wp;
    CT_TRY(dense(wc, w, nhwc, &wp));
    void *gxp = ct__ptr(gx);
    ct__cuda_conv_problem p = problem(1, x, w, gy, o, nhwc);
    bool ran = ct__cuda_conv_graph(ctx, &p, gxp, wp, gyp);
    if (!ran) CT_TRY(legacy());
    if (!ran) CT_TRY((run_candidates<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        ctx, s, algo_key(1, x, w, o, nhwc, s.fma_only), "backward-data",
        [&](cudnnConvolutionBwdDataAlgoPerf_t *perf, int *n) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(s.h, s.wd.d, s.yd.d, s.cd.d, s.xd.d,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perf);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(s.h, s.wd.d, s.yd.d, s.cd.d, s.xd.d, algo, bytes);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t bytes) {
          return cudnnConvolutionBackwardData(s.h, s.one(), s.wd.d, wp, s.yd.d, gyp, s.cd.d, algo, ws, bytes, s.zero(),
                                              s.xd.d, gxp);
        })));
  }
  if (gw) {
    scoped_tmp xc;
    const void *xp;
    CT_TRY(dense(xc, x, nhwc, &xp));
    void *gwp = ct__ptr(gw);
    ct__cuda_conv_problem p = problem(2, x, w, gy, o, nhwc);
    bool ran = ct__cuda_conv_graph(ctx, &p, xp, gwp, gyp);
    if (!ran) CT_TRY(legacy());
    if (!ran) CT_TRY((run_candidates<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        ctx, s, algo_key(2, x, w, o, nhwc, s.fma_only), "backward-filter",
        [&](cudnnConvolutionBwdFilterAlgoPerf_t *perf, int *n) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.h, s.xd.d, s.yd.d, s.cd.d, s.wd.d,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(s.h, s.xd.d, s.yd.d, s.cd.d, s.wd.d, algo, bytes);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t bytes) {
          return cudnnConvolutionBackwardFilter(s.h, s.one(), s.xd.d, xp, s.yd.d, gyp, s.cd.d, algo, ws, bytes, s.zero(),
                                                s.wd.d, gwp);
        })));
  }
  if (gb) CT_TRY(bias_grad(ctx, gb, gy, gyp, nhwc));
  return CT_OK;
}

ct_status ct__cuda_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                   ct_tensor *w, const ct_conv2d_opts *o) {
  return conv_backward(gx, gw, gb, gy, x, w, o, false);
}

/* float64 as in the forward: the NCHW path on copies, gx and gw through NCHW scratch (gb is (C)). */
ct_status ct__cuda_conv2d_nhwc_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                        ct_tensor *w, const ct_conv2d_opts *o) {
  if (x->dtype != CT_F64) return conv_backward(gx, gw, gb, gy, x, w, o, true);
  scoped_tmp gxc, gwc;
  ct_tensor *gxn = NULL, *gwn = NULL;
  if (gx) CT_TRY(nchw_scratch(gxc, gx, &gxn));
  if (gw) CT_TRY(nchw_scratch(gwc, gw, &gwn));
  CT_TRY(conv_backward(gxn, gwn, gb, gy, x, w, o, false));
  if (gx && gxn != gx) CT_TRY(ct__cuda_copy(gx, gxn));
  if (gw && gwn != gw) CT_TRY(ct__cuda_copy(gw, gwn));
  return CT_OK;
}
