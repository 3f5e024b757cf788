/* src/backend/cuda/graph.cu: CUDA graphs of a device's compute stream (the vtable's graph_*
 * entries; cuttle/cuda.h has the public side, after torch.cuda.CUDAGraph).
 *
 * Capture is stream capture of the context's compute stream, where every op of the device runs,
 * in cudaStreamCaptureModeRelaxed: the allocator may then call cudaMalloc for a block the capture
 * needs (PyTorch's allocator switches to relaxed mode around its cudaMalloc for the same reason).
 * The kernels and library calls queued while capturing are recorded, not run; capture_end
 * instantiates them as one executable graph that replay launches with one call. While capturing:
 *  - every block the allocator hands out or takes back joins the capture's pool (allocator.cu), so
 *    the addresses the graph writes stay the graph's until graph_free;
 *  - the cuDNN workspace is a block of the capture's pool (ct__cuda_capture_scratch), never the
 *    shared one, which later eager calls may grow and free while the graph still uses it;
 *  - a copy to or from the host is refused (copy.cu), and the core refuses every synchronization
 *    of the device (ct__sync_point), with messages that name the op.
 * A capture that fails (an op refused, a library call that cannot be captured) leaves nothing:
 * capture_end returns the error and the pool goes back to the cache. */
#include "backend/cuda/common.cuh"

struct ct__cuda_capture {
  struct ct__cuda_pool *pool;
  void *scratch; /* the workspace block of the last call, or NULL */
};

struct ct__cuda_graph {
  cudaGraphExec_t exec;
  struct ct__cuda_pool *pool;
};

int ct__cuda_capturing(const ct__cuda_ctx *ctx) { return __atomic_load_n(&ctx->capture, __ATOMIC_ACQUIRE) != NULL; }

/* The previous call's block goes back to the capture's pool first: the work that used it is queued
 * before whatever gets it next, in the graph as on the stream, and it never leaves the pool. So the
 * capture holds about the largest workspace, not the sum of them. */
ct_status ct__cuda_capture_scratch(ct__cuda_ctx *ctx, size_t nbytes, void **out) {
  ct__cuda_capture *c = ctx->capture;
  if (c->scratch) ct__cuda_free(ctx->device, c->scratch, 0);
  c->scratch = ct__cuda_alloc(ctx->device, nbytes);
  if (!c->scratch) return ct_last_status();
  *out = c->scratch;
  return CT_OK;
}

/* Stop capturing on ctx: the workspace block goes to the pool, the allocator stops adding to it. */
static struct ct__cuda_pool *stop(ct__cuda_ctx *ctx) {
  ct__cuda_capture *c = ctx->capture;
  if (c->scratch) ct__cuda_free(ctx->device, c->scratch, 0);
  ct__cuda_pool_end_capture(ctx);
  struct ct__cuda_pool *pool = c->pool;
  __atomic_store_n(&ctx->capture, (ct__cuda_capture *)NULL, __ATOMIC_RELEASE);
  delete c;
  return pool;
}

ct_status ct__cuda_graph_capture_begin(int index) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  if (ct__cuda_capturing(ctx))
    return ct__error(CT_EINVAL, "cuda:%d: a graph capture is already running on this device; end it first", index);
  ct__cuda_capture *c = new (std::nothrow) ct__cuda_capture();
  if (c) c->pool = ct__cuda_pool_begin_capture(ctx);
  if (!c || !c->pool) {
    delete c;
    return ct__error(CT_ENOMEM, "cuda:%d: out of host memory for a graph capture", index);
  }
  __atomic_store_n(&ctx->capture, c, __ATOMIC_RELEASE);
  cudaError_t e = cudaStreamBeginCapture(ctx->compute, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    ct__cuda_pool_release(ctx, stop(ctx));
    return ct__error(CT_EBACKEND, "cuda: cudaStreamBeginCapture failed on cuda:%d: %s", index, cudaGetErrorString(e));
  }
  return CT_OK;
}

ct_status ct__cuda_graph_capture_end(int index, void **out) {
  *out = NULL;
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  if (!ct__cuda_capturing(ctx)) return ct__error(CT_EINVAL, "cuda:%d: no graph capture is running on this device", index);
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(ctx->compute, &graph);
  struct ct__cuda_pool *pool = stop(ctx);
  cudaGraphExec_t exec = NULL;
  const char *what = "cudaStreamEndCapture";
  if (e == cudaSuccess && !graph) e = cudaErrorStreamCaptureInvalidated;
  if (e == cudaSuccess) what = "cudaGraphInstantiate", e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph); /* the executable graph keeps what it needs */
  ct__cuda_graph *g = e == cudaSuccess ? new (std::nothrow) ct__cuda_graph() : NULL;
  if (!g) {
    if (exec) cudaGraphExecDestroy(exec);
    ct__cuda_pool_release(ctx, pool);
    if (e == cudaSuccess) return ct__error(CT_ENOMEM, "cuda:%d: out of host memory for a graph", index);
    (void)cudaGetLastError();
    return ct__error(CT_EBACKEND,
                     "cuda: %s failed on cuda:%d: %s (an op inside the capture could not be captured: a "
                     "synchronization, a host copy, or a library call that does not support capture)",
                     what, index, cudaGetErrorString(e));
  }
  g->exec = exec, g->pool = pool;
  *out = g;
  return CT_OK;
}

ct_status ct__cuda_graph_replay(int index, void *graph) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  if (ct__cuda_capturing(ctx))
    return ct__error(CT_EINVAL, "cuda:%d: cannot replay a graph while a capture runs on the device", index);
  CT_CUDA_TRY(cudaGraphLaunch(((ct__cuda_graph *)graph)->exec, ctx->compute));
  return CT_OK;
}

void ct__cuda_graph_free(int index, void *graph) {
  ct__cuda_graph *g = (ct__cuda_graph *)graph;
  ct__cuda_ctx *ctx = g ? ct__cuda_ctx_get(index) : NULL;
  if (!ctx) return;
  /* A replay still running completes: the driver frees the executable graph after it. */
  cudaGraphExecDestroy(g->exec);
  ct__cuda_pool_release(ctx, g->pool);
  delete g;
}
