/* src/backend/cuda/stream.cu: streams and events of a CUDA device (the vtable's stream_* and
 * event_* entries; cuttle/cuda.h has the public side).
 *
 * A stream handle is a cudaStream_t created with cudaStreamNonBlocking on the device; NULL stands
 * for the context's compute stream, where every op runs. An event handle is a cudaEvent_t with
 * timing, created on the device when it is recorded. Every entry makes its device current on the
 * calling thread first (ct__cuda_ctx_get), since streams and events belong to one device. */
#include "backend/cuda/common.cuh"

static cudaStream_t pick(ct__cuda_ctx *ctx, void *stream) { return stream ? (cudaStream_t)stream : ctx->compute; }

ct_status ct__cuda_stream_new(int index, void **out) {
  *out = NULL;
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  cudaStream_t s;
  CT_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *out = (void *)s;
  return CT_OK;
}

void ct__cuda_stream_free(int index, void *stream) {
  if (!stream || !ct__cuda_ctx_get(index)) return;
  cudaStreamDestroy((cudaStream_t)stream); /* queued work still completes */
}

ct_status ct__cuda_stream_synchronize(int index, void *stream) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  CT_CUDA_TRY(cudaStreamSynchronize(pick(ctx, stream)));
  return CT_OK;
}

ct_status ct__cuda_stream_wait_event(int index, void *stream, void *event) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  CT_CUDA_TRY(cudaStreamWaitEvent(pick(ctx, stream), (cudaEvent_t)event, 0));
  return CT_OK;
}

ct_status ct__cuda_event_record(int index, void *stream, void **out) {
  *out = NULL;
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(index);
  if (!ctx) return ct_last_status();
  cudaEvent_t e;
  CT_CUDA_TRY(cudaEventCreate(&e));
  cudaError_t r = cudaEventRecord(e, pick(ctx, stream));
  if (r != cudaSuccess) {
    cudaEventDestroy(e);
    return ct__error(CT_EBACKEND, "cuda: cudaEventRecord failed on cuda:%d: %s", index, cudaGetErrorString(r));
  }
  *out = (void *)e;
  return CT_OK;
}

ct_status ct__cuda_event_synchronize(int index, void *event) {
  if (!ct__cuda_ctx_get(index)) return ct_last_status();
  CT_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)event));
  return CT_OK;
}

int ct__cuda_event_query(int index, void *event) {
  if (!ct__cuda_ctx_get(index)) return ct_last_status();
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  return ct__error(CT_EBACKEND, "cuda: cudaEventQuery failed on cuda:%d: %s", index, cudaGetErrorString(e));
}

ct_status ct__cuda_event_elapsed_ms(int index, void *start, void *end, double *ms) {
  if (!ct__cuda_ctx_get(index)) return ct_last_status();
  CT_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)end));
  float f = 0;
  CT_CUDA_TRY(cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)end));
  *ms = f;
  return CT_OK;
}

void ct__cuda_event_free(int index, void *event) {
  if (!event || !ct__cuda_ctx_get(index)) return;
  cudaEventDestroy((cudaEvent_t)event);
}
