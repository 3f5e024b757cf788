/* src/backend/cuda/nccl.h: the NCCL collectives the data-parallel layer (src/dist) uses for tensors
 * on CUDA devices. C-compatible: no CUDA or NCCL type appears here, so the .c files of src/dist include it
 * without the CUDA headers; src/backend/cuda/nccl.cu is the only file that includes nccl.h.
 *
 * NCCL needs a bootstrap: rank 0 makes a unique id (ncclGetUniqueId), every rank receives it (here
 * by MPI_Bcast, as llm.c's multi-GPU trainer does), then each rank creates its communicator
 * (ncclCommInitRank). Each collective runs on a stream of its own, ordered after the device's
 * compute stream by an event and ordered before later compute by another event, so the caller's
 * ops see the reduced values without a host synchronization (NCCL's user guide, "CUDA stream
 * semantics").
 *
 * Built without NCCL (CUTTLE_WITH_NCCL undefined) none of this exists; src/dist falls back to the
 * host path (copy to the host, MPI, copy back). None of it has run: no machine here has a GPU. */
#ifndef CUTTLE_CUDA_NCCL_H
#define CUTTLE_CUDA_NCCL_H

#include <stddef.h>
#include <stdint.h>
#include "cuttle/status.h"
#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES, 128). */
#define CT_NCCL_ID_BYTES 128

typedef struct ct__nccl_comm ct__nccl_comm;

/* Rank 0's part of the bootstrap: a fresh unique id into id[CT_NCCL_ID_BYTES].
 * Errors: CT_EBACKEND (NCCL's message). */
ct_status ct__nccl_unique_id(unsigned char *id);

/* A communicator of `world` ranks for this process's rank on CUDA device `device`, from rank 0's
 * id (every rank passes the same bytes). Blocks until every rank has called it (ncclCommInitRank).
 * The caller frees it with ct__nccl_comm_free. Errors: CT_EINVAL (rank outside [0, world)),
 * CT_EDEVICE / CT_EBACKEND (the device or NCCL failed; NCCL's message), CT_ENOMEM. */
ct__nccl_comm *ct__nccl_comm_new(const unsigned char *id, int world, int rank, int device);

/* In place over `count` elements at the device pointer buf (float32, float64, float16 or
 * bfloat16): the mean over the ranks (ncclAvg) when mean is 1, else the sum (ncclSum), on the
 * communicator's stream after the compute stream's work so far; later compute waits for it
 * (events, no host wait). Errors: CT_EDTYPE (another dtype), CT_EBACKEND. */
ct_status ct__nccl_all_reduce(ct__nccl_comm *c, void *buf, int64_t count, ct_dtype dt, int mean);

/* Overwrite nbytes at buf with root's bytes (ncclBroadcast of int8), ordered as above.
 * Errors: CT_EINVAL (root outside the communicator), CT_EBACKEND. */
ct_status ct__nccl_broadcast(ct__nccl_comm *c, void *buf, size_t nbytes, int root);

/* Wait on the host until the communicator's queued collectives end, polling so that a lost peer
 * ends the wait after timeout_s seconds: then the communicator is aborted (ncclCommAbort) and
 * CT_EBACKEND names the wait. Errors: CT_EBACKEND. */
ct_status ct__nccl_wait(ct__nccl_comm *c, double timeout_s);

/* Destroy the communicator and its stream and events. NULL is allowed, and so is a communicator
 * that a failure or timeout aborted (it is not destroyed again; every later collective or wait on it
 * fails with CT_EBACKEND). */
void ct__nccl_comm_free(ct__nccl_comm *c);

#ifdef __cplusplus
}
#endif
#endif
