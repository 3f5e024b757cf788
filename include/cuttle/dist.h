/* cuttle/dist.h: data-parallel training over processes with MPI (Open MPI from Debian).
 *
 * A process group is the MPI_COMM_WORLD of the job `mpirun -np N` started: N ranks, each running
 * the same program, each with its rank (0..N-1) and its local rank (its index among the ranks on
 * its machine, which picks its device). The collectives average or broadcast tensors across the
 * ranks, as torch.distributed's all_reduce and broadcast do. ct_ddp wraps a module with the
 * semantics of torch.nn.parallel.DistributedDataParallel: rank 0's parameters and buffers are
 * broadcast at the start, rank 0's buffers again before each forward through ct_ddp_forward, and
 * after each backward the gradients are averaged over the ranks in buckets of 25 MiB (by default)
 * taken in reverse order of registration.
 *
 * The buckets' all-reduces start during backward (MPI_Iallreduce from a post-accumulate-grad hook
 * on each parameter, autograd.h) as soon as each bucket's gradients are computed, so communication
 * overlaps the rest of backward; ct_ddp_sync_grads waits for them. ct_ddp_set_grad_sync is DDP's
 * no_sync() for gradient accumulation.
 *
 * Faults end the job, they never hang it. Every collective waits at most ct_dist_timeout() seconds
 * (60 by default) for the other ranks; collectives are numbered in the order they start, and each
 * rank tells the others when it reaches one, so a rank whose wait runs out fails with CT_EBACKEND
 * and a message naming the collective and the ranks that never arrived, e.g. "ct_ddp_sync_grads:
 * all-reduce of bucket 2 (collective #17) timed out after 60 s on rank 0: rank 1 of 3 never arrived
 * (dead or stuck); ending the job". From then on the group is unusable: every collective and
 * ct_dist_finalize fail at once, and the program ends the job with ct_dist_abort (MPI_Abort), which
 * makes mpirun end the ranks that remain. A rank killed outright (SIGKILL, the out-of-memory
 * killer) is usually noticed by mpirun first, which then ends the others itself. Ranks that build
 * different models fail in ct_ddp_new, each with a message naming the first parameter that differs
 * and its dtype and shape on each rank. There is no NCCL path for CUDA tensors yet.
 *
 * Tensors on a device other than the CPU are copied to the host, reduced or broadcast there and
 * copied back; those copies go through ct_to, ct_to_host and ct_copy_ and are counted in the copy
 * ledger.
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

/* Join the process group: MPI_Init_thread asking for MPI_THREAD_MULTIPLE (for cuttle's own helper
 * threads: the watchdog of ct_dist_all_reduce_sum, DDP's optional progress thread; the collectives,
 * ct_ddp_sync_grads and the backward passes of a model wrapped in ct_ddp, whose gradient hooks
 * start all-reduces, must still all run on one thread) unless MPI is already
 * initialized, then read the rank and world size of MPI_COMM_WORLD and the local rank from
 * OMPI_COMM_WORLD_LOCAL_RANK (0 when unset), as torch.distributed's init_process_group with
 * LOCAL_RANK, and duplicate MPI_COMM_WORLD for the arrival announcements of the bounded waits.
 * Calling it again once initialized does nothing and returns CT_OK. Errors: CT_EUNSUPPORTED
 * (built without MPI, or after ct_dist_finalize: MPI cannot start twice), CT_EBACKEND
 * (MPI_Init_thread or MPI_Comm_dup failed; the message gives MPI's error string), CT_ENOMEM. */
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
 * shapes and dtypes (float32 or float64, contiguous). A CPU tensor is reduced in place with the
 * blocking MPI_Allreduce(MPI_IN_PLACE, MPI_SUM), then scaled by 1/world; another device's tensor
 * is copied to the host and back (counted in the ledger). The tensors stay the caller's.
 * Bounded: if the all-reduce has not completed after ct_dist_timeout() seconds, a watchdog thread
 * prints "cuttle: OP: all-reduce (collective #k) timed out after T s on rank R: rank P of N never
 * arrived (dead or stuck); ending the job" to stderr (or, when every rank had announced its
 * arrival, "... did not complete within T s on rank R although every rank arrived (a rank stopped
 * during it)") and ends the job with MPI_Abort, since a blocking MPI call cannot be made to return
 * (PyTorch's NCCL watchdog ends the process the same way). Without MPI_THREAD_MULTIPLE, or when
 * the watchdog's thread cannot start, the all-reduce is non-blocking instead and a timeout returns
 * CT_EBACKEND, as ct_dist_broadcast's does.
 * Errors: CT_EINVAL (ts NULL with n > 0, a NULL tensor, n < 0, ct_dist_init not called),
 * CT_EDTYPE (not float32/float64), CT_ESHAPE (not contiguous), CT_EBACKEND (an MPI error, a group
 * broken by an earlier failed collective, or on the non-blocking path a rank that did not arrive
 * within the timeout, named in the message), CT_EUNSUPPORTED (built without MPI). */
CT_API ct_status ct_dist_all_reduce_mean(ct_tensor *const *ts, int n);

/* Sum n tensors over the ranks, in place: each ts[i] becomes the elementwise sum of the ts[i] of
 * all ranks (torch.distributed.all_reduce with ReduceOp.SUM, without DDP's division), for float32,
 * float64 and int64 tensors, contiguous; int64 sums are exact, which is what evaluation counts
 * (correct predictions, samples seen) need. Every rank must call it with the same n and, tensor by
 * tensor, the same shapes and dtypes. Another device's tensor goes through the host as in
 * ct_dist_all_reduce_mean. The tensors stay the caller's. Bounded by ct_dist_timeout() as
 * ct_dist_all_reduce_mean is (its watchdog ends the job). Errors: CT_EINVAL (ts NULL with n > 0, a
 * NULL tensor, n < 0, ct_dist_init not called), CT_EDTYPE (another dtype), CT_ESHAPE (not
 * contiguous), CT_EBACKEND (as ct_dist_all_reduce_mean's), CT_EUNSUPPORTED (built without MPI). */
CT_API ct_status ct_dist_all_reduce_sum(ct_tensor *const *ts, int n);

/* Overwrite n tensors on every rank with the values of rank root's (torch.distributed.broadcast of
 * each), bit for bit: any shapes, any dtypes (mixed in one list), any strides, on any devices.
 * Coalesced like torch's _broadcast_coalesced (torch/csrc/distributed/c10d/comm.cpp, which DDP uses
 * for its buffers): the tensors' bytes, in list order and each tensor row-major, are packed into
 * one host staging buffer and sent with one broadcast per chunk of at most 256 MiB (torch: 250 MB),
 * so a list of n small tensors costs one collective, not n; a tensor over 256 MiB goes alone (in
 * place when it is a contiguous CPU tensor). Every rank must call it with the same n, root and,
 * tensor by tensor, the same shapes and dtypes (the strides and devices may differ). Only the other
 * ranks write: the root's tensors keep their values and their version counters; every other
 * rank's tensors are written in place (the tensors stay the caller's) and their version counters
 * move (autograd then refuses a graph that saved one), and tensors on another device are copied
 * back with ct_copy_ (counted in the ledger). n == 0 (ts may then be NULL) sends nothing.
 * Non-blocking underneath (MPI_Ibcast), so a rank that does not arrive within ct_dist_timeout()
 * seconds makes it return CT_EBACKEND naming that rank, and breaks the group.
 * Errors: CT_EINVAL (ts NULL with n > 0, a NULL tensor, n < 0, a root outside [0, world size),
 * ct_dist_init not called; all before any collective), CT_EBACKEND (an MPI error, a group broken by
 * an earlier failed collective, a rank that did not arrive within the timeout, named in the
 * message), CT_ENOMEM (the staging buffer, a host copy), and the errors of ct_to_host and ct_copy_
 * for a tensor that cannot be copied to or from the host. A failure after which this rank would
 * skip a collective the other ranks start (the staging buffer's allocation, the root's packing, a
 * write-back with chunks still to send) also breaks the group, as a timeout does: the program
 * should then end the job with ct_dist_abort. CT_EUNSUPPORTED (built without MPI). */
CT_API ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root);

/* The process-wide bound, in seconds, on how long any collective (the all-reduces and broadcasts
 * above, ct_ddp_new's start-up checks, ct_ddp_sync_grads) waits for the other ranks; 60 by default,
 * like torch.distributed's timeout argument of init_process_group (whose default is 10 or 30
 * minutes) and the CLI's --timeout. seconds must be > 0 and finite, else CT_EINVAL and the bound
 * stays as it was. It can be set before or after ct_dist_init, and every rank should set the same. */
CT_API ct_status ct_dist_set_timeout(double seconds);

/* The bound set by ct_dist_set_timeout (60 until then). Never fails. */
CT_API double ct_dist_timeout(void);

/* Leave the process group (MPI_Finalize after a barrier bounded by the timeout), as
 * destroy_process_group. Does nothing and returns CT_OK when the group was never joined.
 * Errors: CT_EBACKEND (MPI failed, a rank did not reach the barrier within the timeout, or the
 * group is broken by an earlier failed collective, or the arrival announcements the other ranks
 * sent did not all come within the timeout: MPI cannot be finalized cleanly then, and the program
 * should end the job with ct_dist_abort instead). */
CT_API ct_status ct_dist_finalize(void);

/* End the whole job: MPI_Abort(MPI_COMM_WORLD, code), which makes mpirun end every rank still
 * running (a stuck one included) and exit with a failure. This is what a program does after a
 * collective failed or timed out (the group is then unusable, and ct_dist_finalize refuses): the
 * CLI (tools/cuttle) calls it after printing the error. It does not return once the group is
 * joined; before ct_dist_init, after ct_dist_finalize, or in a build without MPI it does nothing and
 * returns, and the caller exits as it would anyway. No library function calls it; the watchdog of a
 * blocking all-reduce that timed out calls MPI_Abort itself. */
CT_API void ct_dist_abort(int code);

/* DistributedDataParallel over a module. */
typedef struct ct_ddp ct_ddp;

typedef struct {
  double bucket_mb; /* bucket capacity in MiB (DDP's bucket_cap_mb); 0 means 25 */
  /* 1: while buckets are in flight during backward, a thread keeps MPI's progress engine running
   * (MPI_Iprobe every 100 us; needs MPI_THREAD_MULTIPLE, else ignored), so that communication
   * moves on during a long backward op. It pays where a core is free for it; with every core
   * computing it costs more than it hides (docs/perf.md, ddp-overlap). 0: progress only in the
   * gradient hooks' tests and in ct_ddp_sync_grads. */
  int progress_thread;
  /* 0 (the default, torch's broadcast_buffers=True): rank 0's buffers (BatchNorm's running
   * statistics and batch count) are broadcast in ct_ddp_new and again by ct_ddp_forward. 1
   * (broadcast_buffers=False): never, not even in ct_ddp_new; each rank keeps its own. */
  int local_buffers;
} ct_ddp_opts;

/* Wrap m (borrowed: m must outlive the ct_ddp) for data-parallel training, as the constructor of
 * DistributedDataParallel does:
 * - checks that every rank holds the same model: the parameter count, and parameter by parameter
 *   (registration order) the dtype and shape, and the same bucket_mb. Ranks that differ all fail
 *   at once with CT_EINVAL and the same message, naming the first parameter that differs and its
 *   dtype and shape on each rank, rather than hanging at the first all-reduce;
 * - broadcasts rank 0's parameters and buffers to every rank, so all ranks start from one model
 *   (later forwards through ct_ddp_forward broadcast the buffers again, as torch's DDP does);
 * - lays out the gradient buckets: the parameters in reverse registration order, a new bucket
 *   starting when the next parameter would take it over bucket_mb MiB (a parameter larger than a
 *   bucket gets one of its own), each bucket with its own float32 buffer;
 * - registers a post-accumulate-grad hook on each parameter that requires grad, which starts a
 *   bucket's all-reduce during backward once all its gradients are computed (buckets start in
 *   order, bucket 0, holding the last layers, first).
 * opts NULL means the defaults. The caller frees it with ct_ddp_free. Every wait is bounded by
 * ct_dist_timeout(). Errors: CT_EINVAL (m NULL, a negative or NaN bucket_mb, ct_dist_init not called,
 * ranks with different models or bucket_mb), CT_EDTYPE (a parameter that is not float32, on every
 * rank), CT_ENOMEM, CT_EBACKEND (a rank that did not arrive within the timeout, an MPI error), those
 * of ct_dist_broadcast, CT_EUNSUPPORTED (built without MPI). */
CT_API ct_ddp *ct_ddp_new(ct_module *m, const ct_ddp_opts *opts);

/* After ct_backward and before anything reads the gradients (clipping, the optimizer step): average
 * every parameter's gradient over the ranks. It starts the buckets no hook started during backward
 * (all of them when grad sync was off during backward or no backward ran), waits for every bucket's
 * all-reduce (each wait bounded by ct_dist_timeout()), scales by 1/world and unpacks into the
 * gradients. With each rank's loss a mean over its B/N samples, the result is the gradient of the
 * mean loss over all N*B/N samples, as with DDP. While grad sync is off (ct_ddp_set_grad_sync) it
 * returns CT_OK and leaves the gradients alone.
 * Errors: CT_EINVAL (d NULL), CT_EAUTOGRAD (a parameter has no gradient: every parameter must take
 * part in every step, DDP's find_unused_parameters is not supported; or two backward passes with
 * grad sync on ran without a sync in between: the gradients are then not averaged, and after zeroing
 * them the next step works), CT_ENOMEM, CT_EBACKEND (a rank that did not arrive
 * within the timeout, named in the message, or an MPI error; the group is then unusable and the
 * program should end the job with ct_dist_abort). A rank that fails here leaves the others waiting
 * until their timeout, which then names it. */
CT_API ct_status ct_ddp_sync_grads(ct_ddp *d);

/* DDP's forward (DistributedDataParallel.forward, torch/nn/parallel/distributed.py): rank 0's
 * buffers are first broadcast to every rank, all of them in one coalesced ct_dist_broadcast
 * (torch's _sync_buffers in _pre_forward, through _broadcast_coalesced, unless
 * ct_ddp_opts.local_buffers) when the previous forward through d ran with grad mode on and grad sync
 * on (torch's require_forward_param_sync, which _post_forward sets; true for the first forward);
 * then ct_module_forward(m, x). So in plain training every rank normalizes with rank 0's running
 * statistics of the step before, and its own forward updates them from its shard; with gradient
 * accumulation (ct_ddp_set_grad_sync(d, 0) for all but the last micro-batch) the broadcast comes
 * before a group's first micro-batch, and after a forward under ct_no_grad_begin the next forward
 * skips it, all as in torch. Calling ct_module_forward directly skips the broadcast. x and the
 * result as ct_module_forward's (the caller frees the result). Every rank must call it the same
 * number of times in the same modes. Errors (NULL): CT_EINVAL (d or x NULL), those of
 * ct_dist_broadcast (CT_EBACKEND for a rank that did not arrive within ct_dist_timeout(): the group
 * is then broken, as for a failed all-reduce), and those of the module's forward. */
CT_API ct_tensor *ct_ddp_forward(ct_ddp *d, ct_tensor *x);

/* Turn the all-reduce of gradients off (enabled 0) or back on (nonzero), as torch's
 * DistributedDataParallel.no_sync() context. While off, backward launches no all-reduce and
 * ct_ddp_sync_grads returns CT_OK leaving every rank's locally accumulated gradients alone; the
 * first ct_ddp_sync_grads after it is turned back on averages what has accumulated since the last
 * sync. Gradient accumulation over K micro-batches: turn it off for the first K-1 backward passes,
 * on for the K-th, then ct_ddp_sync_grads and the optimizer step. Every rank must do the same.
 * Errors: CT_EINVAL (d NULL). */
CT_API ct_status ct_ddp_set_grad_sync(ct_ddp *d, int enabled);

/* The number of gradient buckets; -1 with CT_EINVAL for NULL. */
CT_API int ct_ddp_num_buckets(const ct_ddp *d);

/* What the overlap of communication with backward achieved, summed since ct_ddp_new (a benchmark
 * reads it before and after the steps it times, and subtracts). PyTorch shows the same through its
 * profiler (DDP's Reducer events) rather than an API. */
typedef struct {
  int64_t steps;                       /* ct_ddp_sync_grads calls that averaged the gradients */
  int64_t buckets_started_in_backward; /* all-reduces started by a gradient hook during backward */
  int64_t buckets_started_in_sync;     /* all-reduces ct_ddp_sync_grads had to start itself */
  int64_t buckets_done_in_backward;    /* all-reduces already complete before ct_ddp_sync_grads
                                          (seen by a later hook's progress test during backward) */
  double allreduce_s; /* seconds the all-reduces were in flight: each bucket from its start until it
                         was seen complete (by a hook's progress test or in ct_ddp_sync_grads) */
  double wait_s;      /* seconds ct_ddp_sync_grads spent blocked waiting for all-reduces: the
                         communication that backward did not hide */
  double sync_s;      /* seconds inside ct_ddp_sync_grads in all (waiting, starting, unpacking) */
} ct_ddp_stats;

/* Copy d's statistics into *out. Errors: CT_EINVAL (d or out NULL). */
CT_API ct_status ct_ddp_get_stats(const ct_ddp *d, ct_ddp_stats *out);

/* Release d (not the module): removes its gradient hooks; an all-reduce still in flight (backward
 * ran without ct_ddp_sync_grads after it) is waited for first, bounded by the timeout. NULL is
 * allowed. */
CT_API void ct_ddp_free(ct_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
