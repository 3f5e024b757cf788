/* src/dist/dist_internal.h: what the files of src/dist share. Only this folder includes mpi.h. */
#ifndef CT_DIST_INTERNAL_H
#define CT_DIST_INTERNAL_H

#include <stdint.h>
#include "core/internal.h"
#include "cuttle/dist.h"
#ifdef CUTTLE_WITH_MPI
#include <mpi.h>
#endif

/* 1 between ct_dist_init and ct_dist_finalize. */
int ct__dist_initialized(void);
/* CT_OK when the group is joined and usable; else CT_EINVAL naming op (CT_EUNSUPPORTED without
 * MPI), or CT_EBACKEND when an earlier collective timed out or failed (the group is then broken). */
ct_status ct__dist_need_init(const char *op);
/* Break the group after an error that leaves this rank's collectives out of step with the other
 * ranks' (it skipped or half-started a step's all-reduces): every later collective then fails at
 * once instead of being matched against another rank's different one. Returns s. */
ct_status ct__dist_break(ct_status s);
/* The arrival announcements this rank has sent since ct_dist_init (process_group.c: a rank sends
 * them only while a wait runs past the grace period), for the tests. */
int64_t ct__dist_announcements_sent(void);
/* Set the chunk of ct_dist_broadcast's coalesced broadcast (256 MiB; 0 restores it) and return
 * the previous one, so that the tests can split a small list into several chunks and make a tensor
 * larger than a chunk. Every rank must set the same. Without MPI it does nothing and returns 0. */
size_t ct__dist_set_broadcast_chunk(size_t bytes);
/* The collectives this rank has started since ct_dist_init (the number of the last one, as in the
 * timeout messages' "collective #k"), for the tests that count them; 0 without MPI. */
int64_t ct__dist_collectives_started(void);
/* Seconds on a monotonic clock. */
double ct__dist_now(void);

/* A collective in flight, started by ct__dist_iallreduce_sum. Every collective of src/dist is
 * non-blocking underneath and numbered (collective #k, the same k on every rank), and each rank
 * tells the others when it reaches #k, so that a wait that runs past ct_dist_timeout() can name the
 * ranks that never arrived. */
typedef struct ct__dist_op ct__dist_op;

/* Start summing count float32, float64 or int64 values (dt) of buf over the ranks, in place
 * (MPI_Iallreduce). buf must stay put until the op is complete. what names it in errors ("all-reduce
 * of bucket 2"), op the public function. *out gets the handle, NULL on failure. */
ct_status ct__dist_iallreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op, const char *what,
                                  ct__dist_op **out);
/* Progress h without blocking: *done becomes 1 once it is complete. Errors: CT_EBACKEND (MPI
 * failed; the group is then broken). */
ct_status ct__dist_test(ct__dist_op *h, int *done, const char *op);
/* Wait for h, at most ct_dist_timeout() seconds (CT_EBACKEND at once when the group is broken); on
 * a timeout the error names the collective, its number and the ranks that never reached it, and the
 * group is broken from then on (CT_EBACKEND). */
ct_status ct__dist_wait(ct__dist_op *h, const char *op);
/* 1 once h has been seen complete (by ct__dist_test or ct__dist_wait). */
int ct__dist_op_done(const ct__dist_op *h);
/* The seconds from h's start until it was seen complete (0 while it is not). */
double ct__dist_op_seconds(const ct__dist_op *h);
/* Free a completed h and return 1. An op that never completed (the group broke) still owns its
 * buffer inside MPI: it is kept, and 0 says the caller must not free the buffer either. NULL: 1. */
int ct__dist_op_release(ct__dist_op *h);

/* Keep MPI's progress engine running on a thread of its own while all-reduces are in flight during
 * backward (process_group.c explains why); calls nest; nothing without MPI_THREAD_MULTIPLE. */
void ct__dist_progress_begin(void);
void ct__dist_progress_end(void);

/* Blocking forms, bounded by the timeout like ct__dist_wait. */
ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op);
/* Reduce n int64 values in place with MPI_MAX (max nonzero) or MPI_MIN; errors name op. */
ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op);
/* Gather n int64 values from every rank: all (n * world) gets rank r's at [r * n, (r + 1) * n). */
ct_status ct__dist_allgather_i64(const int64_t *mine, int n, int64_t *all, const char *op, const char *what);
/* Without MPI they fail as ct__dist_need_init does. */

/* DDP's buckets on a CUDA device, all-reduced by NCCL (ddp_nccl.c). ct__ddp_nccl_new sets *out
 * NULL, with CT_OK, when NCCL is not built in or the np parameters are not all on one CUDA device
 * (ddp.c then reduces on the host); otherwise it bootstraps the communicator over MPI and makes
 * nb float32 buckets of bucket_numel[k] elements on the device. launch packs the count gradients
 * of bucket k and starts its mean over the ranks; wait blocks until every started bucket is done
 * (bounded by ct_dist_timeout()); unpack copies bucket k's mean back into its gradients. */
typedef struct ct__ddp_nccl ct__ddp_nccl;
ct_status ct__ddp_nccl_new(ct_tensor *const *params, int np, const int64_t *bucket_numel, int nb, ct__ddp_nccl **out);
ct_status ct__ddp_nccl_launch(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count);
ct_status ct__ddp_nccl_wait(ct__ddp_nccl *n);
ct_status ct__ddp_nccl_unpack(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count);
void ct__ddp_nccl_free(ct__ddp_nccl *n);

#endif
