/* src/backend/cuda/context.cu: the per-device context of the CUDA backend.
 *
 * A context holds everything cuttle keeps for one GPU: a compute stream (every kernel and library
 * call), a copy stream (non-blocking host<->device copies), two events that order them, the cuBLAS
 * and cuDNN handles (created on first use, bound to the compute stream), the cuDNN workspace, and
 * the caching allocator. Contexts are created lazily, one per device, and live until the process
 * ends. The table of contexts is the backend's only state besides the float32 TF32 switch; there is
 * no current device: every entry point names its device and ct__cuda_ctx_get makes it current on
 * the calling thread.
 *
 * Also here: the strided iterator's host half. */

#include "backend/cuda/common.cuh"

static ct__cuda_ctx *ctx_table[CT_CUDA_MAX_DEVICES];
static std::mutex ctx_table_lock;
static int allow_tf32_flag; /* process switch, read with __atomic */

extern "C" void ct__cuda_set_allow_tf32(int allow) { __atomic_store_n(&allow_tf32_flag, allow ? 1 : 0, __ATOMIC_RELAXED); }
extern "C" int ct__cuda_allow_tf32(void) { return __atomic_load_n(&allow_tf32_flag, __ATOMIC_RELAXED); }

static void ctx_destroy(ct__cuda_ctx *c) {
  if (c->compute) cudaStreamDestroy(c->compute);
  if (c->copy) cudaStreamDestroy(c->copy);
  if (c->compute_mark) cudaEventDestroy(c->compute_mark);
  if (c->copy_mark) cudaEventDestroy(c->copy_mark);
  if (c->alloc) ct__cuda_allocator_free_all(c->alloc);
  delete c;
}

static ct__cuda_ctx *ctx_create(int dev) {
  ct__cuda_ctx *c = new (std::nothrow) ct__cuda_ctx();
  if (!c) CT_FAIL_NULL(CT_ENOMEM, "cuda:%d: out of host memory for the device context", dev);
  c->device = dev;
  cudaError_t e;
  const char *what = "cudaDeviceGetAttribute";
  e = cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) what = "cudaStreamCreateWithFlags", e = cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking);
  if (e == cudaSuccess) what = "cudaEventCreateWithFlags", e = cudaEventCreateWithFlags(&c->compute_mark, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->copy_mark, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    ct__error(CT_EBACKEND, "cuda: %s failed while creating the context of cuda:%d: %s", what, dev, cudaGetErrorString(e));
    ctx_destroy(c);
    return NULL;
  }
  c->alloc = ct__cuda_allocator_new(dev);
  if (!c->alloc) {
    ctx_destroy(c);
    CT_FAIL_NULL(CT_ENOMEM, "cuda:%d: out of host memory for the allocator", dev);
  }
  return c;
}

ct__cuda_ctx *ct__cuda_ctx_peek(int dev) {
  if (dev < 0 || dev >= CT_CUDA_MAX_DEVICES) return NULL;
  std::lock_guard<std::mutex> g(ctx_table_lock);
  return ctx_table[dev];
}

ct__cuda_ctx *ct__cuda_ctx_get(int dev) {
  int n = ct__cuda_device_count();
  if (dev < 0 || dev >= n || dev >= CT_CUDA_MAX_DEVICES)
    CT_FAIL_NULL(CT_EDEVICE, "cuda:%d does not exist: this machine has %d CUDA device%s", dev, n, n == 1 ? "" : "s");
  /* the thread's current device is set only when it is another, as PyTorch's c10::cuda::SetDevice
   * (c10/cuda/CUDAFunctions.cpp): every op, allocation and free comes through here */
  int cur = -1;
  cudaError_t got = cudaGetDevice(&cur);
  if (got != cudaSuccess) (void)cudaGetLastError(); /* its own error only: none is left for a kernel's check */
  if (got != cudaSuccess || cur != dev) {
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) CT_FAIL_NULL(CT_EBACKEND, "cuda: cudaSetDevice(%d) failed: %s", dev, cudaGetErrorString(e));
  }
  std::lock_guard<std::mutex> g(ctx_table_lock);
  if (!ctx_table[dev]) ctx_table[dev] = ctx_create(dev);
  return ctx_table[dev];
}

cublasHandle_t ct__cuda_cublas(ct__cuda_ctx *ctx) {
  std::lock_guard<std::mutex> g(ctx->lock);
  if (!ctx->cublas) {
    cublasHandle_t h = NULL;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      ct__error(CT_EBACKEND, "cuda: cublasCreate failed on cuda:%d: %s", ctx->device, cublasGetStatusString(s));
      return NULL;
    }
    s = cublasSetStream(h, ctx->compute);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      ct__error(CT_EBACKEND, "cuda: cublasSetStream failed on cuda:%d: %s", ctx->device, cublasGetStatusString(s));
      return NULL;
    }
    ctx->cublas = h;
  }
  return ctx->cublas;
}

cudnnHandle_t ct__cuda_cudnn(ct__cuda_ctx *ctx) {
  std::lock_guard<std::mutex> g(ctx->lock);
  if (!ctx->cudnn) {
    cudnnHandle_t h = NULL;
    cudnnStatus_t s = cudnnCreate(&h);
    if (s != CUDNN_STATUS_SUCCESS) {
      ct__error(CT_EBACKEND, "cuda: cudnnCreate failed on cuda:%d: %s", ctx->device, cudnnGetErrorString(s));
      return NULL;
    }
    s = cudnnSetStream(h, ctx->compute);
    if (s != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(h);
      ct__error(CT_EBACKEND, "cuda: cudnnSetStream failed on cuda:%d: %s", ctx->device, cudnnGetErrorString(s));
      return NULL;
    }
    ctx->cudnn = h;
  }
  return ctx->cudnn;
}

ct_status ct__cuda_workspace(ct__cuda_ctx *ctx, size_t nbytes, void **out) {
  *out = NULL;
  if (nbytes == 0) return CT_OK;
  if (ct__cuda_capturing(ctx)) return ct__cuda_capture_scratch(ctx, nbytes, out);
  std::lock_guard<std::mutex> g(ctx->lock);
  if (ctx->workspace_size < nbytes) {
    /* The old block goes back to the cache; work already queued on the compute stream still reads
     * it in order, and the cache only hands it out again for later work on the same stream. */
    if (ctx->workspace) ct__cuda_free(ctx->device, ctx->workspace, ctx->workspace_size);
    ctx->workspace = NULL;
    ctx->workspace_size = 0;
    void *p = ct__cuda_alloc(ctx->device, nbytes);
    if (!p) return ct_last_status();
    ctx->workspace = p;
    ctx->workspace_size = nbytes;
  }
  *out = ctx->workspace;
  return CT_OK;
}

ct_status ct__cuda_synchronize(int index) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  CT_CUDA_TRY(cudaStreamSynchronize(ctx->compute));
  CT_CUDA_TRY(cudaStreamSynchronize(ctx->copy));
  return CT_OK;
}

/* ---- the strided iterator (host half) */
int ct__cuda_iter_is_contiguous(const ct__cuda_iter *it, int nops) {
  if (it->ndim == 0) return 1;
  if (it->ndim > 1) return 0;
  for (int k = 0; k < nops; k++)
    if (it->stride[k][0] != 1) return 0;
  return 1;
}
