/* tools/cuttle/train_loop.h: the training epoch and the test-set evaluation that `cuttle train`,
 * `cuttle eval` and `cuttle bench train` share, so the benchmark times exactly the loop users run. */
#ifndef CUTTLE_TRAIN_LOOP_H
#define CUTTLE_TRAIN_LOOP_H

#include <signal.h>
#include <stdint.h>
#include "cuttle.h"

/* Test accuracy in [0, 1] of m on ds (batches of 1000 on dev, `workers` loader threads), or a
 * negative status. Leaves m in training mode. */
double ct_cli_evaluate(ct_module *m, ct_dataset *ds, ct_device dev, int workers);

typedef struct {
  volatile sig_atomic_t *interrupted; /* stop after the current step when *interrupted; may be NULL */
  int progress;                       /* draw the progress line on stderr */
  int epoch, epochs;                  /* 1-based epoch and the total, for the progress line */
  int64_t per_epoch;                  /* images in an epoch, for the progress line */
  int publish;                        /* ct_monitor_publish every 2 s (for `cuttle smi --pid`) */
  /* Called after every successful step when not NULL (with ctx): 0 goes on, 1 ends the epoch after
   * this step as *interrupted does, a negative ct_status ends it with that status. `cuttle train`
   * uses it for --save-every and --max-steps. */
  int (*after_step)(void *ctx);
  void *ctx;
} ct_cli_epoch_opts;

typedef struct {
  double loss_sum;   /* sum over images of the loss */
  int64_t seen;      /* images trained on */
  int64_t steps;     /* optimizer steps */
  double seconds;    /* wall time of the loop, from before the first batch to after the last step */
} ct_cli_epoch_stats;

/* One epoch of loader's batches: forward, cross-entropy, backward, optimizer step, each step in a
 * scope. Returns CT_OK (also when interrupted or ended by after_step), the status of the failed step
 * after printing "cuttle: training step failed: ..." to stderr, or after_step's negative status. */
ct_status ct_cli_train_epoch(ct_module *m, ct_optimizer *opt, ct_loader *loader, const ct_cli_epoch_opts *o,
                             ct_cli_epoch_stats *out);

#endif
