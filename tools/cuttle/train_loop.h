/* tools/cuttle/train_loop.h: the training epoch and the test-set evaluation that `cuttle train`,
 * `cuttle eval` and `cuttle bench train` share, so the benchmark times exactly the loop users run. */
#ifndef CUTTLE_TRAIN_LOOP_H
#define CUTTLE_TRAIN_LOOP_H

#include <signal.h>
#include <stdint.h>
#include "cuttle.h"

/* CLOCK_MONOTONIC in seconds: the clock of the loop's and --profile's wall times */
double ct_cli_now(void);

/* Test accuracy in [0, 1] of m on ds (batches of 1000 on dev, `workers` loader threads), or a
 * negative status. Leaves m in training mode.
 *
 * In a process group of several ranks (after ct_dist_init), each rank evaluates its shard, the
 * distributed sampler's (rank, rank + W, rank + 2W, ...) without the padding it adds when W does
 * not divide N, and the counts of correct predictions and of samples are summed over the ranks
 * with ct_dist_all_reduce_sum (int64, exact): every rank returns the exact accuracy of the whole
 * set, the one a single process computes, not an average of the ranks' accuracies. Every rank must
 * call it; a rank that fails still takes part in the sum, so all of them fail together. counts
 * (may be NULL) receives {correct, samples}. */
double ct_cli_evaluate_counts(ct_module *m, ct_dataset *ds, ct_device dev, int workers, int64_t counts[2]);
double ct_cli_evaluate(ct_module *m, ct_dataset *ds, ct_device dev, int workers);
/* ct_cli_evaluate_counts, and the mean cross-entropy over the set into *loss (summed over the
 * ranks as the counts are; NaN for an empty set) when loss is not NULL. */
double ct_cli_evaluate_loss(ct_module *m, ct_dataset *ds, ct_device dev, int workers, int64_t counts[2], double *loss);

/* The epoch so far, for the step hook (`cuttle train --tensorboard`'s per-step scalars): updated
 * before each after_step call. */
typedef struct {
  int64_t seen;        /* this rank's images trained on in this epoch (a resumed position's not counted) */
  double seconds;      /* since the epoch's first trained batch was asked for (after the skipped ones) */
  ct_tensor *loss_sum; /* borrowed, valid during the call: the sum over those images of the loss, a 0-dim
                          float64 tensor on the device (ct_item on it waits for the device) */
} ct_cli_running;

typedef struct {
  volatile sig_atomic_t *interrupted; /* stop after the current step when *interrupted; may be NULL */
  int progress;                       /* draw the progress line on stderr */
  int plain;                          /* stderr is no terminal: a plain line every plain_every s */
  double plain_every;                 /* seconds (0: 10) */
  int epoch, epochs;                  /* 1-based epoch and the total, for the progress line */
  int64_t per_epoch;                  /* images in an epoch, for the progress line */
  int publish;                        /* ct_monitor_publish every 2 s (for `cuttle smi --pid`) */
  /* Called after every successful step when not NULL (with ctx): 0 goes on, 1 ends the epoch after
   * this step as *interrupted does, a negative ct_status ends it with that status. `cuttle train`
   * uses it for --save-every and --max-steps. */
  int (*after_step)(void *ctx);
  void *ctx;
  /* Data-parallel training (tools/cuttle/ranks.c): when not NULL, the forward runs through
   * ct_ddp_forward (rank 0's buffers first) and gradients are averaged over the ranks through ddp
   * (ct_ddp_sync_grads) before each optimizer step. */
  ct_ddp *ddp;
  /* Gradient accumulation: micro-batches per optimizer step (0 means 1). Each micro-batch's mean
   * loss is divided by the number of micro-batches in its group before backward, so the summed
   * gradient is that of the mean loss over the group's samples (the last group of an epoch may be
   * shorter and is divided by its own size). With ddp, the first backward passes of a group run
   * with ct_ddp_set_grad_sync(ddp, 0) (torch's no_sync) and only the last all-reduces. */
  int accumulate;
  int64_t skip;         /* batches to pass over, untrained, at the start (a resumed position) */
  int64_t *position;    /* when not NULL: batches of this epoch consumed so far (skipped ones
                           included), updated before each after_step call */
  int world;            /* ranks training together (0 means 1): the progress line counts images
                           as world times this rank's */
  int64_t global_batch; /* samples per optimizer step over all ranks, shown on the progress line
                           when > 0 */
  /* Mixed precision (--amp): the forward and the loss run in an autocast region of this dtype
   * (CT_F16 or CT_BF16) for the device's kind, backward outside it; 0 (CT_F32) turns it off.
   * scaler (may be NULL; --amp f16 has one) scales each loss before backward and replaces
   * ct_optimizer_step by ct_grad_scaler_step (skipped on an inf/NaN gradient) and update; the
   * progress line then shows the scale and the skipped steps. */
  ct_dtype amp;
  ct_grad_scaler *scaler;
  int channels_last;     /* --channels-last: batches converted to channels_last before the forward */
  /* --devices: when not NULL, forward, loss and backward of each batch are split over dp's
   * replicas (one thread per device), and the parameters broadcast back after each step. */
  ct_data_parallel *dp;
  struct ct_cli_replica_ctx *dp_ctx; /* what dp's loss_ctx points to, set before each batch */
  ct_cli_running *running; /* when not NULL: the epoch so far, updated before each after_step call */
  /* --cuda-graph (graph_step.h): when not NULL, each batch's whole step runs through it (eager
   * warm-up, then captured once and replayed), and the epoch's loss is summed in its static tensor.
   * Needs accumulate <= 1 and no ddp, dp or scaler, and an optimizer made capturable. */
  struct ct_cli_graph_step *graph;
} ct_cli_epoch_opts;

/* The loss --devices gives ct_data_parallel_new (ct_data_parallel_opts.loss), with loss_ctx a
 * ct_cli_replica_ctx: the shard's mean cross-entropy divided by the accumulation group's size and
 * multiplied by the GradScaler's scale (1 without one). The replicas read it at the same time, and
 * nobody writes it during a step. */
typedef struct ct_cli_replica_ctx {
  int group;
  double scale;
} ct_cli_replica_ctx;
ct_tensor *ct_cli_replica_loss(ct_tensor *output, ct_tensor *target, int replica, void *ctx);

typedef struct {
  double loss_sum;   /* sum over images of the loss */
  int64_t seen;      /* images trained on */
  int64_t steps;     /* optimizer steps */
  int64_t batches;   /* micro-batches trained on (steps x accumulate, but for a short last group) */
  double seconds;    /* wall time of the loop, from before the first batch to after the last step */
  double loader_wait; /* of seconds, the time spent in ct_loader_next waiting for the next batch */
} ct_cli_epoch_stats;

/* One epoch of loader's batches: forward, cross-entropy, backward, (with accumulate, again for each
 * micro-batch of the group,) gradient all-reduce with ddp, optimizer step; each micro-batch in a
 * scope. *interrupted is read, and after_step called, only between optimizer steps, so a stop
 * never leaves a group half accumulated. seen, loss_sum count this rank's images only.
 * Returns CT_OK (also when interrupted or ended by after_step), the status of the failed step
 * after printing "cuttle: training step failed: ..." to stderr, or after_step's negative status. */
ct_status ct_cli_train_epoch(ct_module *m, ct_optimizer *opt, ct_loader *loader, const ct_cli_epoch_opts *o,
                             ct_cli_epoch_stats *out);

#endif
