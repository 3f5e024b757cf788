/* tools/cuttle/tensorboard_log.h: `cuttle train --tensorboard DIR` (issue 20): the run's curves in
 * a TensorBoard event file (cuttle/tensorboard.h, SummaryWriter's semantics), under the tags
 * PyTorch users give them, so that `tensorboard --logdir DIR` shows them as it shows a PyTorch
 * run's.
 *
 * The x axis of every tag is the global step: the optimizer steps since the run began, a resumed
 * run's included (a checkpoint keeps the count), and with --amp f16 the steps the GradScaler
 * skipped. One axis for all tags, because TensorBoard's purge (below) goes by step.
 *
 *   every --tensorboard-every N global steps (10):
 *     train/loss          mean training loss over the images since the last of these points (or
 *                         since the epoch began), this rank's (rank 0's in a job)
 *     images_per_s        images per second over the same stretch, all ranks (the progress line's)
 *     lr                  the optimizer's learning rate
 *     amp/scale           --amp f16: the GradScaler's scale
 *     amp/skipped_steps   --amp f16: the steps it skipped so far (the whole training's)
 *   at the end of every epoch (the values of that epoch's --metrics JSON line):
 *     train/loss_epoch    the epoch's mean training loss over all ranks ("train_loss")
 *     images_per_s_epoch  the epoch's images per second ("images_per_s")
 *     test/accuracy       the test accuracy in [0, 1] ("test_acc")
 *     test/loss           the test set's mean cross-entropy ("test_loss")
 *     epoch               the epoch's number, from 1 ("epoch")
 *   once, at the step the run starts at:
 *     options             the run's options, a Markdown table (TensorBoard's Text tab)
 *
 * The _epoch suffix is PyTorch Lightning's for a metric logged both per step and per epoch. A run
 * resumed from a checkpoint saved at global step S starts at step S + 1 and opens its writer with
 * that purge_step (SummaryWriter(purge_step=S + 1)): TensorBoard then drops what the interrupted run
 * wrote after its last checkpoint (steps > S), and the curves continue from the checkpoint. What
 * was logged at step S itself (the checkpoint's epoch end, or the step it was saved after) describes
 * the state the checkpoint holds, and stays. The writer is flushed
 * after every epoch, and closed when the run ends, by a signal too. A write that fails during the
 * run is reported once on stderr, and the run goes on without logging. */
#ifndef CUTTLE_TENSORBOARD_LOG_H
#define CUTTLE_TENSORBOARD_LOG_H

#include <stdint.h>
#include "cuttle.h"
#include "train_loop.h"

typedef struct ct_cli_tb ct_cli_tb;

typedef struct {
  const char *dir;            /* --tensorboard DIR */
  int64_t every;              /* per-step scalars at the global steps that are multiples of this (>= 1) */
  int64_t start_step;         /* the global step the run starts at: a resumed checkpoint's, else 0 */
  int64_t purge_step;         /* > 0: the writer's purge_step (a resumed run's first step), else none */
  int world;                  /* ranks training together, for images_per_s */
  const char *const (*options)[2]; /* n_options rows {option, value} of the "options" text */
  int n_options;
} ct_cli_tb_opts;

/* A writer of a new event file in o->dir (made with its parents) with o->purge_step, the options
 * text logged at o->start_step and flushed. NULL after printing why, prefixed with prog, when the
 * directory cannot be made or the file written; nothing is left behind then but the directories
 * made. */
ct_cli_tb *ct_cli_tb_open(const char *prog, const ct_cli_tb_opts *o);

/* An epoch begins: the per-step stretch starts again (ct_cli_running counts from the epoch's start). */
void ct_cli_tb_epoch_start(ct_cli_tb *tb);

/* After the optimizer step that made the global step `step`: the per-step scalars when step is a
 * multiple of every. run is the training loop's running account (its loss sum is read only then, a
 * wait for the device); scaler is --amp f16's or NULL. NULL tb: nothing. */
void ct_cli_tb_step(ct_cli_tb *tb, int64_t step, const ct_cli_running *run, double lr, const ct_grad_scaler *scaler);

/* What an epoch's end logs: the values of its --metrics line. */
typedef struct {
  int64_t epoch; /* from 1 */
  double train_loss, images_per_s, test_acc, test_loss;
} ct_cli_tb_epoch;

/* The per-epoch scalars at global step `step`, then a flush. NULL tb: nothing. */
void ct_cli_tb_epoch_end(ct_cli_tb *tb, int64_t step, const ct_cli_tb_epoch *e);

/* Write what waits and close the file (again: nothing); its path stays readable. A failure is
 * reported on stderr. NULL tb: nothing. */
void ct_cli_tb_close(ct_cli_tb *tb);

/* Close and free. NULL tb: nothing. */
void ct_cli_tb_free(ct_cli_tb *tb);

#endif
