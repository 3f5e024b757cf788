/* cuttle/dist.h: data-parallel training over processes with MPI (Open MPI from Debian).
 *
 * A process group is the MPI_COMM_WORLD of the job `mpirun -np N` started: N ranks, each running
 * the same program, each with its rank (0..N-1) and its local rank (its index among the ranks on
 * its machine, which picks its device). The collectives average or broadcast tensors across the
 * ranks, as torch.distributed's all_reduce and broadcast do. ct_ddp wraps a module with the
 * semantics of torch.nn.parallel.DistributedDataParallel: rank 0's parameters and buffers are
 * broadcast at the start, and after each backward the gradients are averaged over the ranks in
 * buckets of 25 MiB (by default) taken in reverse order of registration.
 *
 * What this increment does not do yet (issue 10): the buckets are all-reduced one after the other
 * with a blocking MPI_Allreduce once backward has ended (ct_ddp_sync_grads), not started with
 * MPI_Iallreduce during backward as soon as each bucket's gradients are computed, so communication
 * does not overlap backward; there is no no_sync() accumulation, no timeout on a lost rank, and no
 * NCCL path for CUDA tensors.
 *
 * Tensors on a device other than the CPU are copied to the host, reduced there and copied back;
 * those copies go through ct_to and ct_copy_ and are counted in the copy ledger.
 *
 * Built without MPI (CMake did not find it), every function that needs MPI returns CT_EUNSUPPORTED
 * with a message saying to `apt-get install libopenmpi-dev openmpi-bin` and rebuild. The data side,
 * the distributed sampler, is in the loader (ct_loader_opts.rank and world_size, data.h) and needs
 * no MPI. */
#ifndef CUTTLE_DIST_H
#define CUTTLE_DIST_H

#include "cuttle/export.h"

#include "cuttle/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Join the process group: MPI_Init_thread (MPI_THREAD_FUNNELED: only the calling thread makes MPI
 * calls) unless MPI is already initialized, then read the rank and world size of MPI_COMM_WORLD
 * and the local rank from OMPI_COMM_WORLD_LOCAL_RANK (0 when unset), as torch.distributed's
 * init_process_group with LOCAL_RANK. Calling it again once initialized does nothing and returns
 * CT_OK. Errors: CT_EUNSUPPORTED (built without MPI, or after ct_dist_finalize: MPI cannot start
 * twice), CT_EBACKEND (MPI_Init_thread failed; the message gives MPI's error string). */
CT_API ct_status ct_dist_init(void);

/* This process's rank in [0, world size), its number of ranks and its local rank. Before
 * ct_dist_init (or in a build without MPI) a process is a group of one: rank 0, world size 1,
 * local rank 0. They never fail. */
CT_API int ct_dist_rank(void);
CT_API int ct_dist_world_size(void);
CT_API int ct_dist_local_rank(void);

/* Average n tensors over the ranks, in place: each ts[i] becomes the elementwise mean of the
 * ts[i] of all ranks (torch.distributed.all_reduce with SUM, then a division by the world size, as
 * DDP does to gradients). Every rank must call it with the same n and, tensor by tensor, the same
 * shapes and dtypes (float32 or float64, contiguous). A CPU tensor is reduced in place with
 * MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) then scaled by 1/world; another device's tensor is copied
 * to the host and back (counted in the ledger). The tensors stay the caller's.
 * Errors: CT_EINVAL (ts NULL with n > 0, a NULL tensor, n < 0, ct_dist_init not called),
 * CT_EDTYPE (not float32/float64), CT_ESHAPE (not contiguous), CT_EBACKEND (an MPI error),
 * CT_EUNSUPPORTED (built without MPI). */
CT_API ct_status ct_dist_all_reduce_mean(ct_tensor *const *ts, int n);

/* Overwrite n tensors on every rank with the values of rank root's (torch.distributed.broadcast),
 * bit for bit, any dtype, contiguous. Same requirements on the ranks and the same errors as
 * ct_dist_all_reduce_mean, plus CT_EINVAL for a root outside [0, world size). */
CT_API ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root);

/* Leave the process group (MPI_Finalize after a barrier), as destroy_process_group. Does nothing
 * and returns CT_OK when the group was never joined. Errors: CT_EBACKEND. */
CT_API ct_status ct_dist_finalize(void);

/* DistributedDataParallel over a module. */
typedef struct ct_ddp ct_ddp;

typedef struct {
  double bucket_mb; /* bucket capacity in MiB (DDP's bucket_cap_mb); 0 means 25 */
} ct_ddp_opts;

/* Wrap m (borrowed: m must outlive the ct_ddp) for data-parallel training: checks that every rank
 * has the same parameter count (else every rank fails at once rather than hanging later),
 * broadcasts rank 0's parameters and buffers to every rank (so all ranks start from the same
 * model, as DDP's constructor does), and lays out the gradient buckets: the float32 parameters in
 * reverse registration order, a new bucket starting when the next parameter would exceed
 * bucket_mb (a parameter larger than a bucket gets one of its own). opts NULL means the defaults.
 * The caller frees it with ct_ddp_free. Errors: CT_EINVAL (m NULL, a negative or NaN bucket_mb,
 * ct_dist_init not called, ranks with different parameter counts), CT_EDTYPE (a parameter that is
 * not float32), CT_ENOMEM, those of ct_dist_broadcast, CT_EUNSUPPORTED (built without MPI). */
CT_API ct_ddp *ct_ddp_new(ct_module *m, const ct_ddp_opts *opts);

/* After ct_backward and before the optimizer step: average every parameter's gradient over the
 * ranks, bucket by bucket (packed into one float32 buffer each, one blocking MPI_Allreduce per
 * bucket, scaled by 1/world, unpacked). With each rank's loss a mean over its B/N samples, the
 * result is the gradient of the mean loss over all N*B/N samples, as with DDP.
 * Errors: CT_EINVAL (d NULL), CT_EAUTOGRAD (a parameter has no gradient: every parameter must take
 * part in every step, DDP's find_unused_parameters is not supported), CT_ENOMEM, CT_EBACKEND.
 * A rank that fails here leaves the others waiting in that bucket's all-reduce: the bounded wait on
 * a lost rank (--timeout) is a later increment of issue 10. */
CT_API ct_status ct_ddp_sync_grads(ct_ddp *d);

/* The number of gradient buckets; -1 with CT_EINVAL for NULL. */
CT_API int ct_ddp_num_buckets(const ct_ddp *d);

/* Release d (not the module). NULL is allowed. */
CT_API void ct_ddp_free(ct_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
