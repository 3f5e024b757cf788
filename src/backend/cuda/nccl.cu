/* src/backend/cuda/nccl.cu: NCCL all-reduce and broadcast for the data-parallel layer
 * (src/backend/cuda/nccl.h has the contract). Compiled only where NCCL is found (CUTTLE_WITH_NCCL).
 *
 * Ordering without host waits: before a collective, an event recorded on the device's compute
 * stream is waited on by the communicator's stream (the gradients are written); after it, an event
 * recorded on the communicator's stream is waited on by the compute stream (the optimizer reads the
 * mean). The communicator is created non-blocking (config.blocking = 0), so a lost peer shows up as
 * ncclInProgress/an async error that ct__nccl_wait can bound with a timeout and then abort, instead
 * of a kernel spinning forever (pytorch#46874's hang). Never run: no GPU here. */
#include <nccl.h>
#include <time.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/nccl.h"

struct ct__nccl_comm {
  ncclComm_t comm;
  int device, world, rank;
  cudaStream_t stream;      /* the collectives */
  cudaEvent_t before, after; /* compute -> collectives, collectives -> compute */
};

#define CT_NCCL_TRY(call)                                                                             \
  do {                                                                                                \
    ncclResult_t ct__r = (call);                                                                      \
    if (ct__r != ncclSuccess && ct__r != ncclInProgress)                                              \
      return ct__error(CT_EBACKEND, "nccl: %s failed: %s", #call, ncclGetErrorString(ct__r));       \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ct_status ct__nccl_unique_id(unsigned char *id) {
  static_assert(sizeof(ncclUniqueId) == CT_NCCL_ID_BYTES, "CT_NCCL_ID_BYTES must match NCCL's id");
  ncclUniqueId u;
  CT_NCCL_TRY(ncclGetUniqueId(&u));
  memcpy(id, &u, sizeof u);
  return CT_OK;
}

/* Abort c's communicator (after an asynchronous error or a timeout) and forget it, so that
 * ct__nccl_comm_free does not destroy it a second time and later calls fail cleanly. */
static void abort_comm(ct__nccl_comm *c) {
  if (c->comm) ncclCommAbort(c->comm);
  c->comm = NULL;
}

/* The error of a call on a communicator that an earlier failure aborted. */
static ct_status aborted(const char *what) {
  return ct__error(CT_EBACKEND, "nccl: %s: the communicator was aborted after an earlier failure or timeout; "
                                "create a new one", what);
}

/* Wait for a non-blocking communicator's pending call (init, or a collective's enqueue) to settle.
 * On an asynchronous error or a timeout the communicator is aborted (c->comm becomes NULL). */
static ct_status settle(ct__nccl_comm *c, const char *what, double timeout_s) {
  double t0 = now_s();
  for (;;) {
    ncclResult_t st = ncclSuccess;
    CT_NCCL_TRY(ncclCommGetAsyncError(c->comm, &st));
    if (st == ncclSuccess) return CT_OK;
    if (st != ncclInProgress) {
      abort_comm(c);
      return ct__error(CT_EBACKEND, "nccl: %s failed: %s; the communicator was aborted", what, ncclGetErrorString(st));
    }
    if (now_s() - t0 > timeout_s) {
      abort_comm(c);
      return ct__error(CT_EBACKEND, "nccl: %s did not finish within %.0f s (a rank is lost or stuck); the communicator "
                                    "was aborted", what, timeout_s);
    }
  }
}

ct__nccl_comm *ct__nccl_comm_new(const unsigned char *id, int world, int rank, int device) {
  if (world < 1 || rank < 0 || rank >= world)
    CT_FAIL_NULL(CT_EINVAL, "nccl: rank %d is outside a world of %d", rank, world);
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(device);
  if (!ctx) return NULL;
  ct__nccl_comm *c = (ct__nccl_comm *)ct__calloc(1, sizeof *c, "the NCCL communicator");
  if (!c) return NULL;
  c->device = device, c->world = world, c->rank = rank;
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c->comm, world, u, rank, &config);
  ct_status s = r == ncclSuccess || r == ncclInProgress
                    ? settle(c, "ncclCommInitRankConfig", 600.0)
                    : ct__error(CT_EBACKEND, "nccl: ncclCommInitRankConfig failed: %s", ncclGetErrorString(r));
  if (s == CT_OK && cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess)
    s = ct__error(CT_EBACKEND, "nccl: cudaStreamCreateWithFlags failed for the collectives' stream");
  if (s == CT_OK && (cudaEventCreateWithFlags(&c->before, cudaEventDisableTiming) != cudaSuccess ||
                     cudaEventCreateWithFlags(&c->after, cudaEventDisableTiming) != cudaSuccess))
    s = ct__error(CT_EBACKEND, "nccl: cudaEventCreateWithFlags failed");
  if (s != CT_OK) {
    ct__nccl_comm_free(c);
    return NULL;
  }
  return c;
}

/* Order the collectives' stream after the compute stream's work so far. */
static ct_status enter(ct__nccl_comm *c) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(c->device);
  if (!ctx) return ct_last_status();
  CT_CUDA_TRY(cudaEventRecord(c->before, ctx->compute));
  CT_CUDA_TRY(cudaStreamWaitEvent(c->stream, c->before, 0));
  return CT_OK;
}

/* Order the compute stream's later work after the collective just queued. */
static ct_status leave(ct__nccl_comm *c) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(c->device);
  if (!ctx) return ct_last_status();
  CT_CUDA_TRY(cudaEventRecord(c->after, c->stream));
  CT_CUDA_TRY(cudaStreamWaitEvent(ctx->compute, c->after, 0));
  return CT_OK;
}

ct_status ct__nccl_all_reduce(ct__nccl_comm *c, void *buf, int64_t count, ct_dtype dt, int mean) {
  ncclDataType_t t;
  switch (dt) {
    case CT_F32: t = ncclFloat32; break;
    case CT_F64: t = ncclFloat64; break;
    case CT_F16: t = ncclFloat16; break;
    case CT_BF16: t = ncclBfloat16; break;
    default: return ct__error(CT_EDTYPE, "nccl all-reduce: %s is not reduced (float32, float64, float16, bfloat16)", ct_dtype_name(dt));
  }
  if (!c->comm) return aborted("all-reduce");
  CT_TRY(enter(c));
  CT_NCCL_TRY(ncclAllReduce(buf, buf, (size_t)count, t, mean ? ncclAvg : ncclSum, c->comm, c->stream));
  CT_TRY(settle(c, "ncclAllReduce (enqueue)", 600.0));
  return leave(c);
}

ct_status ct__nccl_broadcast(ct__nccl_comm *c, void *buf, size_t nbytes, int root) {
  if (root < 0 || root >= c->world) return ct__error(CT_EINVAL, "nccl broadcast: root %d is outside a world of %d", root, c->world);
  if (!c->comm) return aborted("broadcast");
  CT_TRY(enter(c));
  CT_NCCL_TRY(ncclBroadcast(buf, buf, nbytes, ncclInt8, root, c->comm, c->stream));
  CT_TRY(settle(c, "ncclBroadcast (enqueue)", 600.0));
  return leave(c);
}

ct_status ct__nccl_wait(ct__nccl_comm *c, double timeout_s) {
  if (!c->comm) return aborted("wait");
  double t0 = now_s();
  for (;;) {
    cudaError_t q = cudaEventQuery(c->after);
    if (q == cudaSuccess) return CT_OK;
    if (q != cudaErrorNotReady) return ct__error(CT_EBACKEND, "nccl: waiting for the collectives failed: %s", cudaGetErrorString(q));
    ncclResult_t st = ncclSuccess;
    CT_NCCL_TRY(ncclCommGetAsyncError(c->comm, &st));
    if (st != ncclSuccess && st != ncclInProgress) {
      abort_comm(c);
      return ct__error(CT_EBACKEND, "nccl: a collective failed on rank %d of %d: %s (a peer was lost?); the communicator "
                                    "was aborted", c->rank, c->world, ncclGetErrorString(st));
    }
    if (now_s() - t0 > timeout_s) {
      abort_comm(c);
      return ct__error(CT_EBACKEND, "nccl: the collectives of rank %d of %d did not finish within %.0f s (a rank is lost "
                                    "or stuck); the communicator was aborted", c->rank, c->world, timeout_s);
    }
  }
}

/* Safe after an abort: abort_comm left c->comm NULL, so an aborted communicator is not destroyed
 * again. */
void ct__nccl_comm_free(ct__nccl_comm *c) {
  if (!c) return;
  if (c->comm) ncclCommDestroy(c->comm);
  c->comm = NULL;
  if (c->before) cudaEventDestroy(c->before);
  if (c->after) cudaEventDestroy(c->after);
  if (c->stream) cudaStreamDestroy(c->stream);
  free(c);
}
