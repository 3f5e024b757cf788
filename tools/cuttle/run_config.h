/* tools/cuttle/run_config.h: a run's recipe as data. `cuttle train` and `cuttle eval` parse their
 * command lines into one struct, ct_cli_run_config, through one option table (run_options.c); the
 * run folder's config.json and every checkpoint's metadata serialize the recipe part of it
 * (recipe.c), and `cuttle eval` reads it back, so a checkpoint alone says how to rebuild its model
 * and its held-out data. */
#ifndef CUTTLE_CLI_RUN_CONFIG_H
#define CUTTLE_CLI_RUN_CONFIG_H

#include <stdint.h>
#include "commands.h"
#include "options.h"

typedef struct {
  /* ---- as given (the option table's fields) */
  const char *model, *device, *optimizer, *schedule, *save, *resume, *metrics, *out;
  double weight_decay; /* --weight-decay: torch.optim's weight_decay (0: AdamW's default, 1e-2) */
  const char *amp, *devices, *tensorboard, *profile, *profile_trace;
  int epochs, workers, no_progress, nproc, accumulate, channels_last;
  int cuda_graph; /* --cuda-graph (graph_step.h) */
  int64_t batch, max_steps, save_every, tb_every, log_every;
  double lr, bucket_mb, timeout, progress_every;
  uint64_t seed;
  const char *checkpoint; /* eval: --checkpoint */
  int allow_overlap;      /* eval: --allow-overlap */
  ct_cli_data_opts data;  /* --data, --data-dir, --augment, --val-split, --image-size, --gray, ... */
  /* ---- read from them by the command */
  int progress;                       /* draw progress (not --no-progress) */
  ct_dtype amp_dtype;                 /* --amp: CT_BF16, CT_F16, or CT_F32 without it */
  ct_profile_mode profile_mode;       /* --profile: CT_PROFILE_HOST or _SYNC, or CT_PROFILE_OFF */
  ct_optim_opts optim;                /* --optimizer and --lr */
  ct_sched_opts sched;                /* --schedule over --epochs */
  ct_device devs[CT_CLI_MAX_DEVICES]; /* --devices: ndevs of them, 0 without it */
  int ndevs;
  int launched; /* this process is one rank of a job a launcher (mpirun) started */
} ct_cli_run_config;

/* The options of both commands, in --help's order (run_options.c). */
extern const ct_cli_opt ct_cli_run_options[];
extern const int ct_cli_run_options_n;

/* The defaults of `cuttle train` (eval's are the same for the options it shares). */
ct_cli_run_config ct_cli_run_defaults(void);

/* The whole --help of `cuttle train` or `cuttle eval` (command: CT_OPT_TRAIN or CT_OPT_EVAL):
 * usage, the options from the table, and the command's closing notes. */
void ct_cli_run_help(FILE *f, unsigned command);

#endif
