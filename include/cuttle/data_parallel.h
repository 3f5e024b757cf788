/* cuttle/data_parallel.h: one process, several devices (torch.nn.DataParallel; d2l's "Training on
 * Multiple GPUs"). Needs no MPI.
 *
 * ct_data_parallel wraps a module m that lives on devices[0] and keeps one replica of it on each
 * other device: the same architecture, with its own copies of m's parameters and buffers. A
 * training step splits the batch along dim 0 into one shard per device, and each replica runs its
 * forward, its loss and its backward on its shard in its own host thread (one long-lived worker
 * thread per device, started by ct_data_parallel_new), so the devices compute at the same time.
 * The replicas' gradients are then summed onto m's gradients on devices[0], the caller's optimizer
 * steps m as on one device, and ct_data_parallel_broadcast copies m's updated parameters and
 * buffers back to the replicas. What moves between devices moves by explicit copies (ct_to),
 * counted in the copy ledger, and packed: the tensors of one dtype are first copied into one flat
 * buffer on their own device, so that a replica's gradients travel as one copy per dtype, and so
 * do m's parameters and buffers in a broadcast (a copy between two OpenCL or CUDA devices is staged
 * through host memory and counts as a device-to-host and a host-to-device copy). A step therefore
 * reads:
 *
 *   ct_data_parallel_forward_backward(dp, x, y, &loss);   // x (B, ...), y (B) anywhere
 *   ct_optimizer_step(opt);                                // opt made over m, as for one device
 *   ct_optimizer_zero_grad(opt);
 *   ct_data_parallel_broadcast(dp);
 *
 * Equivalence with one device: each shard's loss is its mean over its b_k samples, weighted by
 * b_k / B before its backward, so the summed gradient is the gradient of the mean loss over the
 * whole batch, as one device with batch B computes it (up to float sums in another order: the
 * replicas' gradients are added in replica order, so a run is reproducible).
 *
 * Differences from torch.nn.DataParallel: the replicas are kept from step to step (torch
 * replicates the module at every forward) and refreshed by ct_data_parallel_broadcast, which the
 * caller calls after the optimizer step; the outputs are not gathered, the loss is computed on
 * each device (the output never travels); the batch is split into sizes as even as possible (the
 * first B mod n shards get one more sample; torch.chunk makes the last one smaller). As in torch,
 * BatchNorm's running statistics are those of replica 0 (m itself, updated on shard 0 only); the
 * broadcast copies them to the other replicas.
 *
 * Threads and their state: errors, scopes and grad mode are per thread in cuttle. A replica's
 * error is reported in the caller's thread, as the failing call's status with a message naming
 * the replica and its device followed by the replica thread's own message. Each worker opens its
 * own scope around its part of the step and releases everything the step made there (the tape
 * included), so the caller's scope holds nothing of the replicas'; grad mode is on in the workers
 * whatever the caller's is, and the caller's other per-thread modes (an autocast region) do not
 * reach them. A module that draws random numbers in its forward (Dropout) draws from
 * the default generator on every replica: the draws are distinct (the generator's offset is
 * advanced atomically) but their order across replicas is not reproducible. */
#ifndef CUTTLE_DATA_PARALLEL_H
#define CUTTLE_DATA_PARALLEL_H

#include "cuttle/export.h"

#include "cuttle/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_data_parallel ct_data_parallel;

/* The loss of one replica on its shard: output is the replica's forward of its shard (b_k, ...),
 * target the shard of y (b_k, ...), both on the replica's device; replica is its index (0 is m).
 * It must return a one-element floating tensor on that device that is the MEAN over the shard's
 * samples (ct_data_parallel weights it by b_k / B), or NULL with the error set. It runs on the
 * replica's thread, at the same time as the other replicas' calls, so it must be thread-safe. The
 * result is owned as any op's (the worker's scope releases it). */
typedef ct_tensor *(*ct_data_parallel_loss_fn)(ct_tensor *output, ct_tensor *target, int replica, void *ctx);

typedef struct {
  ct_data_parallel_loss_fn loss; /* NULL: ct_cross_entropy(output, target, CT_REDUCTION_MEAN, 0) */
  void *loss_ctx;                /* passed to loss */
  /* Mixed precision: nonzero runs each replica's forward and loss in an autocast region of
   * autocast_dtype (CT_F16 or CT_BF16) for its device's kind, on the replica's own thread, with
   * backward outside it, as torch recommends. Autocast regions are per thread (autocast.h), so a
   * region the caller opened does not reach the replicas: this is how they get one, as
   * torch.nn.DataParallel users put autocast inside forward. A GradScaler's loss scaling goes in
   * the loss function (multiply by the scale), its step on the caller's thread after the sum. */
  int autocast;
  ct_dtype autocast_dtype;
} ct_data_parallel_opts;

/* Wrap m (borrowed: it must outlive the ct_data_parallel) for training on the n devices
 * devices[0..n-1] (the list is copied). Every parameter and buffer of m must already live on
 * devices[0] (ct_module_to). Replica 0 is m itself; replica k >= 1 is a copy of m on devices[k]
 * (same layers and settings, its parameters and buffers copied with ct_to, so counted in the
 * ledger). A device may appear more than once (its replicas then share its queue: useful to test,
 * no faster). Starts one worker thread per device. opts NULL means the defaults.
 * Errors: CT_EINVAL (m or devices NULL, n < 1 or n > 64, autocast with a dtype other than
 * float16 or bfloat16), CT_EDEVICE (a device that does not
 * exist, a tensor of m not on devices[0]), CT_ENOMEM, CT_EBACKEND (a thread could not start), those
 * of ct_to. The caller frees it with ct_data_parallel_free. */
CT_API ct_data_parallel *ct_data_parallel_new(ct_module *m, int n, const ct_device *devices,
                                              const ct_data_parallel_opts *opts);

/* The forward, loss and backward of one training step over the batch x (B, ...) with targets
 * y (B, ...), on any device (each shard is copied to its replica's device with ct_to; x and y are
 * read through detached views, so no gradient flows back into a batch that requires grad). The batch
 * is split along dim 0 into min(n, B) shards of sizes as even as possible (the first B mod n get
 * one more sample); replica k runs on rows [start_k, start_k + b_k) in its own thread, with its
 * loss (the mean over its shard) weighted by b_k / B. When every replica has finished, each
 * gradient of replica k >= 1 has been copied to devices[0] and summed into m's gradient of the same
 * parameter (which accumulates, as ct_backward does: zero it between steps), and the replicas'
 * own gradients are dropped. Copies per step: each shard of x and y to its device (none where it
 * already lives there), and each replica k >= 1's gradients to devices[0], packed, one per dtype. The replicas take m's training flag (ct_module_train) at the start.
 * loss_out (may be NULL) receives the batch's mean loss, the sum of the weighted shard losses;
 * reading it waits for each device (a synchronization), so pass NULL where a step must not wait.
 * Errors: CT_EINVAL (dp, x or y NULL, x or y without a dim 0, their sizes along dim 0 differ, an
 * empty batch), CT_EAUTOGRAD (a replica's parameter has a gradient where m's has none), and those
 * of the replicas' ops, the loss and ct_backward, reported as "ct_data_parallel_forward_backward:
 * replica k on <device>: <the replica thread's message>" (the first failing replica's). After an
 * error m's gradients may hold part of the step: zero them before the next step. */
CT_API ct_status ct_data_parallel_forward_backward(ct_data_parallel *dp, ct_tensor *x, ct_tensor *y, double *loss_out);

/* After the optimizer stepped m: copy m's parameters and buffers to every replica (packed on
 * devices[0] and read to the host once per dtype, then written to each replica's device by its
 * worker thread, all at the same time, and unpacked there), so every replica holds m's values bit
 * for bit. Errors: CT_EINVAL (dp NULL), those of
 * the copies, reported as by ct_data_parallel_forward_backward. */
CT_API ct_status ct_data_parallel_broadcast(ct_data_parallel *dp);

/* The number of replicas n; -1 with CT_EINVAL for NULL. */
CT_API int ct_data_parallel_num_replicas(const ct_data_parallel *dp);

/* Replica k (borrowed, owned by dp; replica 0 is m), for reading its parameters or device; NULL
 * with CT_EINVAL for a NULL dp or k outside [0, n). Changing a replica other than through dp is not
 * supported. */
CT_API ct_module *ct_data_parallel_replica(ct_data_parallel *dp, int k);

/* Stop the worker threads and free the replicas (not m). NULL is allowed. */
CT_API void ct_data_parallel_free(ct_data_parallel *dp);

#ifdef __cplusplus
}
#endif
#endif
