/* tools/cuttle/cmd_train.c: `cuttle train` and `cuttle eval` on Fashion-MNIST, CIFAR-10, CIFAR-100
 * or an image folder (--data, data_arg.c).
 *
 * train: builds the mlp or cnn on the chosen device, trains it with the data loader's worker
 * threads, shows a progress line (images/s, loss, ETA), evaluates on the test set after each
 * epoch, appends one JSON line per epoch to --metrics, and saves a checkpoint with --save (after
 * each epoch, and every --save-every steps). --resume continues from a checkpoint (model, optimizer,
 * epoch and RNG state).
 *
 * Signals. Batch schedulers (SLURM, PBS, Kubernetes) send SIGTERM some time before they kill a
 * job, as a shell's Ctrl-C sends SIGINT. The first of either finishes the current step, saves a
 * checkpoint and exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), the status
 * a shell reports for a process a signal ended, so job scripts see that the run was cut short and
 * can requeue it with --resume. A second signal ends the process at once by that signal (its
 * default action), leaving the last complete checkpoint as it was: checkpoints are written
 * atomically (ct_checkpoint_save), and the handler removes the temporary file of a save in
 * progress.
 *
 * Several processes (issue 10). Under mpirun (or with --nproc N, which runs mpirun itself; see
 * ranks.h) every rank runs this same command: it joins the process group, takes the device of its
 * local rank, wraps the model in ct_ddp (rank 0's parameters are broadcast; the gradients are
 * averaged in --bucket-mb buckets after each backward), and reads its shard of every epoch through
 * the loader's distributed sampler; --batch-size is per rank, as in PyTorch, and the progress line
 * and the metrics give the global batch (per rank x ranks x --accumulate). Each rank evaluates its
 * shard of the test set and the correct counts are summed, so the accuracy is exact. Only rank 0
 * prints progress and writes metrics and checkpoints; every rank reads a checkpoint to --resume,
 * which records where in its epoch it was saved (batches per rank, with the ranks and the batch
 * size), so a run resumed with the same ranks and --batch-size continues the epoch where it
 * stopped. The ranks must stop at the same step: after every optimizer step they sum their
 * signal flags (one small all-reduce), so a SIGINT or SIGTERM that reached any rank stops all of
 * them after that step; rank 0 saves, and every rank exits 128 + the signal's number. mpirun
 * forwards SIGUSR2 to the ranks at once but ends a job itself on SIGINT or SIGTERM (ranks.c), so
 * in a job SIGUSR2 means SIGTERM (and SIGUSR1, which other launchers forward, SIGINT; Open MPI
 * 4.1.4 did not forward it here). A collective that fails
 * (a lost rank, or one that did not arrive within --timeout seconds) ends the rank at once with
 * status 1, without a save that would wait on the lost rank.
 *
 * --tensorboard DIR (issue 20): rank 0 logs the run's curves in a TensorBoard event file under
 * PyTorch users' tags, with the global step (optimizer steps, a resumed run's included) as the x
 * axis; a resumed run opens its file with SummaryWriter's purge_step, so that TensorBoard drops what
 * the interrupted run logged after its checkpoint (tensorboard_log.h).
 *
 * The command reads as its job: the options become a train_config (parse_options, check_options);
 * launch runs mpirun for --nproc, or lets this process train (joining the job under mpirun); setup
 * makes the device, the data, the model, the optimizer, the resumed state, DDP or the replicas of
 * --devices and the loader (open_device_and_data, setup); run_epochs is the loop, one run_epoch
 * after another; finish frees it all and leaves the job. */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include "commands.h"
#include "cuttle.h"
#include "cuttle/data.h"
#include "cuttle/io.h"
#include "ranks.h"
#include "tensorboard_log.h"
#include "graph_step.h"
#include "recipe.h"
#include "run_config.h"
#include "run_dir.h"
#include "train_loop.h"

/* The number of the first SIGINT or SIGTERM (SIGUSR1, SIGUSR2 in a job), 0 until one arrives. */
static volatile sig_atomic_t interrupted;
/* In a job of several ranks: the stop signal the ranks agreed on (agree()), 0 until then. */
static volatile sig_atomic_t agreed;
/* What a second signal removes before the process ends, filled in before the handler is installed:
 * the temporary name ct_safetensors_save gives a finished file just before renaming it (or writes
 * to, without O_TMPFILE), and this process's monitor stats file. Empty strings are skipped. */
static char doomed_tmp[3][4200], doomed_stats[256]; /* --save's, last.safetensors's and best's */

static void on_signal(int sig) {
  if (!interrupted) {
    interrupted = sig == SIGUSR1 ? SIGINT : sig == SIGUSR2 ? SIGTERM : sig;
    return;
  }
  /* Only async-signal-safe calls from here on (POSIX signal-safety(7)): unlink, sigaction,
   * sigprocmask, raise. */
  for (int i = 0; i < 3; i++)
    if (doomed_tmp[i][0]) unlink(doomed_tmp[i]);
  if (doomed_stats[0]) unlink(doomed_stats);
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigaction(sig, &dfl, NULL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
}

/* ---- options -> the run's configuration */

/* What parse_options and check_options return when the command goes on. */
enum { GO_ON = -1 };

/* Everything `cuttle train` was told (run_config.h). */
typedef ct_cli_run_config train_config;

/* Read argv into *c, over the defaults, strictly (options.h). Returns GO_ON, or the exit status
 * after --help (0) or a usage error (2, said). given (ct_cli_run_options_n entries) marks the
 * options on the command line. */
static int parse_options(int argc, char **argv, train_config *c, unsigned char *given) {
  *c = ct_cli_run_defaults();
  int rc = ct_cli_parse("cuttle train", ct_cli_run_options, ct_cli_run_options_n, CT_OPT_TRAIN, argc, argv, c, given);
  if (rc == 0) ct_cli_run_help(stdout, CT_OPT_TRAIN);
  if (rc >= 0) return rc;
  c->progress = !c->no_progress;
  return GO_ON;
}

/* --amp, --devices, --optimizer and --schedule, read from their names. GO_ON, or 2 after saying
 * why. */
static int read_choices(train_config *c) {
  c->amp_dtype = CT_F32;
  if (c->amp && strcmp(c->amp, "bf16") == 0) c->amp_dtype = CT_BF16;
  else if (c->amp && strcmp(c->amp, "f16") == 0) c->amp_dtype = CT_F16;
  if (c->devices) {
    if ((c->ndevs = ct_cli_device_list("cuttle", c->devices, c->devs, CT_CLI_MAX_DEVICES)) < 1) return 2;
    if (c->nproc > 0 || c->launched) {
      fprintf(stderr, "cuttle: --devices is one process over several devices; with --nproc or mpirun each rank has "
                      "its own device: use one or the other\n");
      return 2;
    }
  }
  c->profile_mode = CT_PROFILE_OFF;
  if (c->profile && strcmp(c->profile, "host") == 0) c->profile_mode = CT_PROFILE_HOST;
  else if (c->profile && strcmp(c->profile, "sync") == 0) c->profile_mode = CT_PROFILE_SYNC;
  if (c->profile_trace && !c->profile) {
    fprintf(stderr, "cuttle: --profile-trace needs --profile host|sync (the trace holds the profiled calls)\n");
    return 2;
  }
  c->optim = (ct_optim_opts){.lr = c->lr, .weight_decay = c->weight_decay};
  if (strcmp(c->optimizer, "adam") == 0) c->optim.kind = CT_OPTIM_ADAM;
  else if (strcmp(c->optimizer, "adamw") == 0) c->optim.kind = CT_OPTIM_ADAMW;
  else c->optim.kind = CT_OPTIM_SGD, c->optim.momentum = 0.9; /* the table's choices: sgd */
  /* the learning rate of each epoch, in closed form, so a resumed run continues the same curve */
  c->sched = (ct_sched_opts){.kind = CT_SCHED_CONSTANT, .step_size = 2, .gamma = 0.5, .t_max = c->epochs};
  if (strcmp(c->schedule, "step") == 0) c->sched.kind = CT_SCHED_STEP;
  else if (strcmp(c->schedule, "cosine") == 0) c->sched.kind = CT_SCHED_COSINE;
  return GO_ON;
}

/* The options that depend on each other (the table checked each one's range), then the choices.
 * GO_ON, or 2 after saying why. */
static int check_options(train_config *c, const unsigned char *given) {
  const ct_cli_opt *tbe = ct_cli_opt_find(ct_cli_run_options, ct_cli_run_options_n, "tensorboard-every");
  if ((given[tbe - ct_cli_run_options] && !c->tensorboard) || (c->tensorboard && !*c->tensorboard)) {
    fprintf(stderr, "cuttle: --tensorboard-every N needs --tensorboard DIR; DIR must not be empty\n");
    return 2;
  }
  int sync_profile = c->profile && strcmp(c->profile, "sync") == 0;
  if (c->cuda_graph && (c->accumulate > 1 || c->nproc > 0 || c->devices || (c->amp && strcmp(c->amp, "f16") == 0) ||
                        sync_profile)) {
    fprintf(stderr, "cuttle: --cuda-graph captures one whole step on one GPU; it cannot hold %s, whose steps %s\n",
            c->accumulate > 1 ? "--accumulate" : c->nproc > 0 ? "--nproc" : c->devices ? "--devices"
            : sync_profile ? "--profile sync" : "--amp f16",
            c->accumulate > 1 ? "differ from batch to batch" : c->nproc > 0 || c->devices ? "span several devices"
            : sync_profile ? "wait for the device after every kernel" : "read the GradScaler's verdict on the host");
    return 2;
  }
  c->data.seed = c->seed;
  if (ct_cli_data_check("cuttle", &c->data)) return 2;
  c->launched = ct_cli_under_launcher();
  return read_choices(c);
}

/* ---- launch: mpirun, or this process */

/* With --nproc N: run mpirun, which starts N ranks of this same command line (orig, argv as the
 * user wrote it), and return its exit status. Otherwise this process trains: as one rank of a job
 * it joins the process group first (1 when it cannot), and GO_ON. */
static int launch(const train_config *c, int argc, char **orig) {
  if (c->nproc > 0) {
    if (c->launched) {
      fprintf(stderr, "cuttle: --nproc starts mpirun itself; under mpirun (this process is a rank) leave it out\n");
      return 2;
    }
    return ct_cli_launch("train", c->nproc, argc, orig);
  }
  if (c->launched && ct_cli_rank_init("cuttle", c->timeout) != 0) return 1;
  return GO_ON;
}

/* ---- checkpoints */

/* Where in an epoch a checkpoint was saved, as metadata strings beside "epoch": the batches each
 * rank had consumed, the ranks, and the per-rank batch size, which together make the position
 * meaningful (the distributed sampler's shards depend on both). */
#define POS_KEY "cuttle.position"
#define WORLD_KEY "cuttle.world_size"
#define BATCH_KEY "cuttle.batch_size"

/* The test accuracy of the last epoch's end before the save ("%.17g"; "" before the first): what
 * best.safetensors is chosen by, and what a resumed run compares its epochs with. */
#define ACC_KEY "cuttle.test_acc"

static ct_status save(const char *path, ct_module *m, ct_optimizer *o, int64_t epoch, int64_t position,
                      int64_t batch, ct_generator *gen, ct_grad_scaler *scaler, const ct_cli_data_opts *data,
                      const char *recipe, double acc) {
  char pos[32], world[32], bs[32], transform[512], accs[40] = "";
  ct_cli_data_transform(data, transform, sizeof transform);
  snprintf(pos, sizeof pos, "%lld", (long long)position);
  snprintf(world, sizeof world, "%d", ct_dist_world_size());
  snprintf(bs, sizeof bs, "%lld", (long long)batch);
  if (acc >= 0) snprintf(accs, sizeof accs, "%.17g", acc);
  ct_metadata_kv extra[] = {{POS_KEY, pos},           {WORLD_KEY, world}, {BATCH_KEY, bs},
                            {CT_CLI_TRANSFORM_KEY, transform}, {ACC_KEY, accs}, {CT_CLI_RECIPE_KEY, recipe}};
  ct_checkpoint_meta meta = {.epoch = epoch, .rng = *gen, .n_extra = recipe ? 6 : 5, .extra = extra};
  ct_status s = scaler ? ct_grad_scaler_state_get(scaler, &meta.grad_scaler) : CT_OK;
  meta.has_grad_scaler = scaler != NULL;
  if (s == CT_OK) s = ct_checkpoint_save(path, m, o, &meta);
  if (s != CT_OK) fprintf(stderr, "%s: could not save the checkpoint: %s\n", ct_cli_rank_prog(), ct_last_error());
  return s;
}

/* The position the checkpoint f records (0 when none or f is NULL, or when it was saved by other
 * ranks or with another batch size, which rank 0 then says). */
static int64_t saved_position(const ct_safetensors *f, int64_t epoch, int64_t batch) {
  if (!f) return 0; /* ct_checkpoint_load read it a moment ago; without it the epoch starts over */
  const char *p = ct_safetensors_metadata(f, POS_KEY), *w = ct_safetensors_metadata(f, WORLD_KEY),
             *b = ct_safetensors_metadata(f, BATCH_KEY);
  int64_t pos = p ? atoll(p) : 0, world = w ? atoll(w) : 1, bs = b ? atoll(b) : batch;
  ct_clear_error();
  if (pos > 0 && (world != ct_dist_world_size() || bs != batch)) {
    if (ct_dist_rank() == 0)
      fprintf(stderr, "cuttle: the checkpoint was saved after batch %lld of epoch %lld by %lld rank(s) with batch %lld "
                      "per rank; with %d rank(s) and batch %lld the shards differ, so epoch %lld starts over\n",
              (long long)pos, (long long)epoch + 1, (long long)world, (long long)bs, ct_dist_world_size(),
              (long long)batch, (long long)epoch + 1);
    return 0;
  }
  return pos > 0 ? pos : 0;
}

/* ---- setup: device, data, model, optimizer, resume */

/* One process's run: what setup made, and where the loop stands. */
typedef struct {
  const train_config *c;
  const char *prog; /* "cuttle", or "cuttle (rank R/N)" in a job */
  int world, rank0;
  ct_device dev; /* the model's device (with --devices, the first) */
  char devname[32];
  ct_dataset *train, *test;
  ct_generator gen; /* the model's initialization, then a checkpoint's RNG state */
  ct_module *m;
  ct_optimizer *opt;
  ct_grad_scaler *scaler;   /* --amp f16's, saved with the checkpoints; NULL otherwise */
  ct_ddp *ddp;              /* in a job of several ranks */
  ct_data_parallel *dp;     /* --devices with two or more */
  ct_cli_replica_ctx dp_ctx;
  ct_cli_graph_step *graph; /* --cuda-graph's captured step */
  ct_loader *loader;
  FILE *mf;                 /* --metrics, open on rank 0 */
  ct_cli_tb *tb;            /* --tensorboard, rank 0's */
  ct_cli_running running;   /* the epoch so far, for tb's per-step scalars */
  int64_t start_epoch, skip; /* where --resume continues: the epoch, and the batches of it done */
  int64_t global_batch;     /* per rank x ranks x --accumulate */
  struct sigaction old_int, old_term, old_usr1, old_usr2;
  /* What the per-step hook (--save-every, --max-steps, the ranks' agreement) needs: */
  int64_t epoch;        /* epochs completed: what a save in the middle of an epoch records */
  int64_t position;     /* batches of the current epoch consumed (per rank) */
  int64_t steps;        /* optimizer steps of this run */
  int64_t saved_steps;  /* the optimizer's step count at the last save to --save, -1 before one */
  int64_t step_base;    /* global_step's count before this run's first step, -1 until asked */
  int hit_max_steps;
  double prof_since, prof_wall; /* --profile: when it last started, the seconds it has been on */
  int64_t prof_from, prof_steps; /* the step count then, and the steps it has been on for */
  ct_tensor *flags;     /* int64 (2): this rank's SIGINT and SIGTERM flags, summed over the ranks */
  /* The run folder (run_dir.h), rank 0's: */
  char dir[CT_CLI_RUN_PATH_MAX], last[CT_CLI_RUN_PATH_MAX], best[CT_CLI_RUN_PATH_MAX];
  char *recipe;         /* the recipe's JSON, compact, for every checkpoint's metadata */
  double acc;           /* the last epoch's test accuracy, -1 before one */
  double best_acc;      /* best.safetensors's, -1 before one */
  int dir_made;         /* this run made the folder */
  FILE *run_mf;         /* dir/metrics.jsonl */
  int64_t log_epoch;    /* metrics.jsonl's step lines: the epoch of the last line (-1 before one), */
  int64_t log_seen;     /* the epoch's images then, */
  double log_loss, log_secs; /* and its loss sum and seconds then */
} train_run;

/* In a job: sum the ranks' signal flags, so that all of them see a signal any of them got at the
 * same step. A collective every rank reaches at the same point; a failure ends the rank. */
static void agree(train_run *r) {
  if (r->world <= 1) return;
  int64_t *v = ct_tensor_data(r->flags);
  v[0] = interrupted == SIGINT, v[1] = interrupted == SIGTERM;
  if (ct_dist_all_reduce_sum(&r->flags, 1) != CT_OK) ct_cli_rank_abort("the ranks could not agree on whether to stop");
  if (!agreed) agreed = v[1] ? SIGTERM : v[0] ? SIGINT : 0;
}

/* The stop signal that counts: this process's alone, or the ranks' agreed one. */
static int stop_signal(const train_run *r) { return r->world > 1 ? agreed : interrupted; }

/* --tensorboard's x axis: the optimizer steps of the whole training (a checkpoint keeps them), and
 * those the GradScaler skipped, so that every step of --amp f16 has its own. Asked of the optimizer
 * once, at the run's start (after --resume), then counted here: a capturable optimizer's count
 * lives on the device, and reading it every step would wait for the device every step. */
static int64_t global_step(train_run *r) {
  if (r->step_base < 0)
    r->step_base = ct_optimizer_steps(r->opt) + (r->scaler ? ct_grad_scaler_steps_skipped(r->scaler) : 0) - r->steps;
  return r->step_base + r->steps;
}

/* Give the complete file `from` the name path too, atomically: a hard link under a temporary name,
 * renamed over path (no second write; a later save renames a new file over `from` and leaves this
 * one). 0, or -1 when the file system cannot (another one, no hard links): the caller saves. */
static int second_name(const char *from, const char *path) {
  struct stat a, b;
  if (stat(from, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    return 0; /* already one file under both names (--save names last.safetensors itself) */
  char tmp[CT_CLI_RUN_PATH_MAX + 32];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return -1;
  unlink(tmp);
  if (link(from, tmp) == 0 && rename(tmp, path) == 0) return 0;
  unlink(tmp);
  return -1;
}

/* Save the run's state to --save when given and to the run folder's last.safetensors (the first
 * written, the second a second name of it where the file system allows), and say so in one line. */
static ct_status save_run(train_run *r, int64_t position) {
  if (!r->rank0) return CT_OK; /* only rank 0 writes */
  const char *first = r->c->save ? r->c->save : r->last;
  ct_status s = save(first, r->m, r->opt, r->epoch, position, r->c->batch, &r->gen, r->scaler, &r->c->data, r->recipe,
                     r->acc);
  if (s == CT_OK && r->c->save && second_name(r->c->save, r->last) != 0)
    s = save(r->last, r->m, r->opt, r->epoch, position, r->c->batch, &r->gen, r->scaler, &r->c->data, r->recipe, r->acc);
  if (s == CT_OK) {
    r->saved_steps = ct_optimizer_steps(r->opt);
    fprintf(stderr, "saved %s%s%s (epoch %lld", first, r->c->save ? " and " : "", r->c->save ? r->last : "",
            (long long)r->epoch);
    if (position) fprintf(stderr, ", batch %lld of epoch %lld", (long long)position, (long long)r->epoch + 1);
    fprintf(stderr, ")\n");
  }
  if (s != CT_OK && r->world > 1) ct_cli_rank_abort(NULL); /* save() said why; the others would wait */
  return s;
}

/* After last.safetensors was saved at an epoch's end with a better accuracy than best's: make it
 * best.safetensors too, as a second name of the same file (a hard link, renamed into place: no
 * second write; the next save of last renames a new file over that name and leaves this one). A
 * file system without hard links gets a copy through a save. 0, or 1 after saying why. */
static int keep_best(train_run *r) {
  if (!r->rank0 || !(r->acc > r->best_acc)) return 0;
  if (second_name(r->last, r->best) != 0) {
    if (save(r->best, r->m, r->opt, r->epoch, 0, r->c->batch, &r->gen, r->scaler, &r->c->data, r->recipe, r->acc) !=
        CT_OK)
      return 1;
  }
  r->best_acc = r->acc;
  return 0;
}

/* --profile: on from the end of the first step of the run (that step is the warm-up: cuDNN's
 * algorithm search, OpenCL's program builds, the allocators' growth), off during evaluations and
 * saves at an epoch's end; the steps and wall seconds it was on are counted for the report. */
static void profile_on(train_run *r) {
  if (r->c->profile_mode == CT_PROFILE_OFF || r->steps < 1 || ct_profiler_mode() != CT_PROFILE_OFF) return;
  if (r->c->profile_trace && ct_profiler_set_trace(1, 0) != CT_OK) /* out of memory: the table still comes */
    fprintf(stderr, "%s: --profile-trace: %s\n", r->prog, ct_last_error());
  ct_profiler_set_mode(r->c->profile_mode);
  r->prof_since = ct_cli_now(), r->prof_from = r->steps;
}
static void profile_off(train_run *r) {
  if (ct_profiler_mode() == CT_PROFILE_OFF) return;
  ct_profiler_set_mode(CT_PROFILE_OFF);
  r->prof_wall += ct_cli_now() - r->prof_since, r->prof_steps += r->steps - r->prof_from;
}

/* --profile's report, on rank 0: the wall time per profiled step beside the kernels' share of it,
 * then the kernels' table (cuttle/profiler.h) */
static void profile_report(train_run *r) {
  if (r->c->profile_mode == CT_PROFILE_OFF || !r->rank0) return;
  profile_off(r);
  if (r->prof_steps < 1) {
    fprintf(stderr, "%s: --profile: no step after the first ran, nothing profiled\n", r->prog);
    return;
  }
  /* the kernels and copies of the run's device: the step's own (with --devices, the first device's;
   * the loader's CPU work is in the table's other rows) */
  double per = 1e3 * r->prof_wall / (double)r->prof_steps, k = 0;
  int n = ct_profiler_rows(NULL, 0);
  ct_profile_row *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
  if (rows) {
    n = ct_profiler_rows(rows, n);
    for (int i = 0; i < n; i++) k += strcmp(rows[i].device, r->devname) == 0 ? rows[i].seconds : 0;
    free(rows);
  }
  printf("profile (--profile %s, %s): %lld steps after the first, %.3f ms per step of wall time, %.3f ms of kernel "
         "calls and copies on %s (%.1f%%)\n",
         r->c->profile, r->devname, (long long)r->prof_steps, per, 1e3 * k / (double)r->prof_steps, r->devname,
         r->prof_wall > 0 ? 100.0 * k / r->prof_wall : 0.0);
  ct_profiler_print(stdout, 40);
  if (r->c->profile_trace) {
    if (ct_profiler_export_chrome_trace(r->c->profile_trace) == CT_OK)
      printf("trace: %s (chrome://tracing or ui.perfetto.dev)\n", r->c->profile_trace);
    else
      fprintf(stderr, "%s: --profile-trace: %s\n", r->prog, ct_last_error());
  }
  fflush(stdout);
}

/* One JSON line to the run folder's metrics.jsonl and, for an epoch's line, to --metrics (which
 * holds one line per epoch, as it always did), flushed. */
static void metrics_line(const train_run *r, const char *line, int epoch_line) {
  FILE *files[2] = {r->run_mf, epoch_line ? r->mf : NULL};
  for (int i = 0; i < 2; i++)
    if (files[i]) fputs(line, files[i]), fflush(files[i]);
}

/* Every --log-every global steps, on rank 0: a line of the steps since the last one (or since the
 * epoch began): their mean training loss (this rank's), images per second (all ranks) and the lr.
 * Reading the loss waits for the device, so it happens only then. */
static void log_step(train_run *r) {
  int64_t step = global_step(r);
  if (!r->rank0 || !r->run_mf || step % r->c->log_every != 0 || !r->running.loss_sum) return;
  double sum = ct_item(r->running.loss_sum), secs = r->running.seconds;
  int64_t seen = r->running.seen;
  if (r->log_epoch != r->epoch) r->log_seen = 0, r->log_loss = 0, r->log_secs = 0; /* the epoch's first line */
  int64_t n = seen - r->log_seen;
  char line[512], loss[40] = "null"; /* JSON has no NaN: no image since the last line */
  if (n > 0) snprintf(loss, sizeof loss, "%.6f", (sum - r->log_loss) / (double)n);
  snprintf(line, sizeof line, "{\"step\": %lld, \"epoch\": %lld, \"train_loss\": %s, \"images_per_s\": %.1f, \"lr\": %.9g}\n",
           (long long)step, (long long)r->epoch + 1, loss,
           secs > r->log_secs ? (double)(n * r->world) / (secs - r->log_secs) : 0.0, ct_optimizer_lr(r->opt));
  metrics_line(r, line, 0);
  r->log_epoch = r->epoch, r->log_seen = seen, r->log_loss = sum, r->log_secs = secs;
}

static int after_step(void *ctx) {
  train_run *r = ctx;
  r->steps++;
  profile_on(r);
  log_step(r);
  ct_cli_tb_step(r->tb, global_step(r), &r->running, ct_optimizer_lr(r->opt), r->scaler);
  agree(r);
  if (r->c->max_steps && r->steps >= r->c->max_steps) {
    r->hit_max_steps = 1;
    return 1; /* the stop path saves */
  }
  /* After a signal the loop stops at once and the stop path saves; saving here too would only
   * delay the exit the scheduler is waiting for. */
  if (r->c->save_every && r->steps % r->c->save_every == 0 && !stop_signal(r)) {
    ct_status s = save_run(r, r->position);
    if (s != CT_OK) return s;
  }
  return 0;
}

/* This rank's device, and the training and test sets. GO_ON, or the exit status after saying why
 * (2: the device, 1: the data); in a job of several ranks a failure ends the job instead. */
static int open_device_and_data(train_run *r) {
  const train_config *c = r->c;
  r->prog = ct_cli_rank_prog();
  r->world = ct_dist_world_size(), r->rank0 = ct_dist_rank() == 0;
  r->dev = c->devs[0];
  if (!c->ndevs && ct_cli_rank_device(r->prog, c->device, &r->dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "%s: %s\n", r->prog, ct_last_error());
    if (r->world > 1) ct_cli_rank_abort(NULL); /* not MPI_Finalize's barrier: some ranks may have gone on */
    return 2;
  }
  ct_device_str(r->dev, r->devname, sizeof r->devname);
  r->train = ct_cli_data_open(r->prog, &c->data, CT_SPLIT_TRAIN);
  r->test = r->train ? ct_cli_data_open(r->prog, &c->data, CT_SPLIT_TEST) : NULL;
  if (!r->train || !r->test) {
    if (r->world > 1) ct_cli_rank_abort(NULL);
    ct_dataset_free(r->train);
    return 1;
  }
  return GO_ON;
}

/* The model (in channels_last with --channels-last), its optimizer, and --amp f16's GradScaler.
 * 0, or 1 after saying why. */
static int build_model(train_run *r) {
  const train_config *c = r->c;
  r->gen = ct_generator_new(c->seed);
  r->m = ct_cli_model_for(r->prog, c->model, r->test, r->dev, &r->gen);
  if (r->m && c->channels_last && ct_module_to_memory_format(r->m, CT_CHANNELS_LAST) != CT_OK)
    ct_module_free(r->m), r->m = NULL;
  ct_optim_opts oo = c->optim;
  oo.capturable = c->cuda_graph; /* a replayed step advances the count on the device */
  r->opt = r->m ? ct_optimizer_new(r->m, &oo) : NULL;
  r->scaler = r->opt && c->amp_dtype == CT_F16 ? ct_grad_scaler_new(&(ct_grad_scaler_opts){0}) : NULL;
  if (!r->m) return 1; /* said why */
  if (!r->opt || (c->amp_dtype == CT_F16 && !r->scaler)) {
    fprintf(stderr, "%s: %s\n", r->prog, ct_last_error());
    return 1;
  }
  if (c->cuda_graph) {
    if (r->world > 1) {
      fprintf(stderr, "%s: --cuda-graph captures the step of one process; a job of %d ranks cannot use it\n", r->prog,
              r->world);
      return 1;
    }
    if (!(r->graph = ct_cli_graph_step_new(r->dev, 0))) {
      fprintf(stderr, "%s: --cuda-graph: %s\n", r->prog, ct_last_error());
      return 1;
    }
  }
  return 0;
}

/* --resume: the model, the optimizer, the RNG and GradScaler states, and where the checkpoint
 * stopped. 0 (also without --resume), or 1 after saying why. */
static int resume(train_run *r) {
  const train_config *c = r->c;
  if (!c->resume) return 0;
  ct_checkpoint_meta meta = {0};
  if (ct_checkpoint_load(c->resume, r->m, r->opt, &meta) != CT_OK) {
    fprintf(stderr, "%s: cannot resume: %s\n", r->prog, ct_last_error());
    if (ct_last_status() == CT_EINVAL) fprintf(stderr, "%s: pass the --optimizer the checkpoint was saved with\n", r->prog);
    return 1;
  }
  r->start_epoch = meta.epoch;
  if (meta.has_training_state) r->gen = meta.rng;
  if (r->scaler && meta.has_grad_scaler && ct_grad_scaler_state_set(r->scaler, &meta.grad_scaler) != CT_OK) {
    fprintf(stderr, "%s: cannot resume the GradScaler: %s\n", r->prog, ct_last_error());
    return 1;
  }
  /* the strings beside the tensors (ct_checkpoint_load gives the epoch and the states only) */
  ct_safetensors *f = ct_safetensors_open(c->resume);
  if (!f) ct_clear_error();
  r->skip = saved_position(f, r->start_epoch, c->batch);
  ct_cli_data_compare_saved(r->prog, &c->data, f, c->resume);
  ct_safetensors_close(f);
  if (r->rank0) {
    if (r->skip)
      fprintf(stderr, "resumed from %s at epoch %lld, batch %lld\n", c->resume, (long long)r->start_epoch + 1,
              (long long)r->skip);
    else fprintf(stderr, "resumed from %s at epoch %lld\n", c->resume, (long long)r->start_epoch);
  }
  return 0;
}

/* --tensorboard, on rank 0: the writer, from the global step the run starts at (a resumed run's
 * first step is its purge_step: what the interrupted run logged from there on is dropped; the
 * steps up to the checkpoint's, its own included, stay), with the options as text. 0, or 1 after
 * saying why, before anything else was written (a job ends). */
static int open_tensorboard(train_run *r) {
  const train_config *c = r->c;
  if (!r->rank0) return 0;
  char lr[32], epochs[32], batch[32], global[32], ranks[32], acc[32], workers[32], seed[32], max_steps[32];
  snprintf(lr, sizeof lr, "%g", c->lr), snprintf(epochs, sizeof epochs, "%d", c->epochs);
  snprintf(batch, sizeof batch, "%lld", (long long)c->batch), snprintf(global, sizeof global, "%lld", (long long)r->global_batch);
  snprintf(ranks, sizeof ranks, "%d", r->world), snprintf(acc, sizeof acc, "%d", c->accumulate);
  snprintf(workers, sizeof workers, "%d", c->workers), snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
  snprintf(max_steps, sizeof max_steps, "%lld", (long long)c->max_steps);
  const char *const rows[][2] = {
      {"model", c->model}, {"device", r->devname}, {"devices", c->devices ? c->devices : "-"},
      {"optimizer", c->optimizer}, {"lr", lr}, {"schedule", c->schedule}, {"epochs", epochs},
      {"batch-size (per rank)", batch}, {"global batch", global}, {"ranks", ranks}, {"accumulate", acc},
      {"workers", workers}, {"seed", seed}, {"amp", c->amp ? c->amp : "none"},
      {"channels-last", c->channels_last ? "yes" : "no"}, {"cuda-graph", c->cuda_graph ? "yes" : "no"}, {"max-steps", c->max_steps ? max_steps : "-"},
      {"resume", c->resume ? c->resume : "-"}, {"save", c->save ? c->save : "-"}, {"run folder", r->dir},
      {"data", c->data.data ? c->data.data : "fashion-mnist"}, {"augment", c->data.augment ? "yes" : "no"},
      {"data-dir", c->data.data_dir ? c->data.data_dir : "(default)"}};
  int64_t start = global_step(r);
  ct_cli_tb_opts o = {.dir = c->tensorboard ? c->tensorboard : r->dir, .every = c->tb_every, .start_step = start, .purge_step = start ? start + 1 : 0,
                      .world = r->world, .options = rows, .n_options = (int)(sizeof rows / sizeof rows[0])};
  if ((r->tb = ct_cli_tb_open(r->prog, &o))) return 0;
  if (r->world > 1) ct_cli_rank_abort(NULL); /* said why; the others would wait for rank 0 */
  return 1;
}

/* After the resume: DDP in a job of several ranks (rank 0's parameters are broadcast, which then
 * changes nothing), and the replicas of --devices (they copy the loaded parameters). 0, or 1 after
 * saying why; a rank that cannot join DDP ends the job. */
static int parallelize(train_run *r) {
  const train_config *c = r->c;
  if (r->world > 1) {
    r->ddp = ct_ddp_new(r->m, &(ct_ddp_opts){.bucket_mb = c->bucket_mb});
    if (!r->ddp) ct_cli_rank_abort("cannot set up data-parallel training (ct_ddp_new)");
    r->flags = ct_from_host((int64_t[]){0, 0}, 1, (int64_t[]){2}, CT_I64, CT_DEVICE_CPU);
    if (!r->flags) ct_cli_rank_abort("cannot allocate the stop flags");
  }
  if (c->ndevs > 1) {
    r->dp = ct_data_parallel_new(r->m, c->ndevs, c->devs,
                                 &(ct_data_parallel_opts){.loss = ct_cli_replica_loss, .loss_ctx = &r->dp_ctx,
                                                          .autocast = c->amp_dtype != CT_F32,
                                                          .autocast_dtype = c->amp_dtype});
    if (!r->dp) {
      fprintf(stderr, "%s: cannot replicate the model over --devices: %s\n", r->prog, ct_last_error());
      return 1;
    }
  }
  return 0;
}

/* The loader of the training set (this rank's shard, from the resumed epoch on) and the --metrics
 * file (rank 0's). 0, or 1 after saying why. */
static int open_loader_and_metrics(train_run *r) {
  const train_config *c = r->c;
  /* pin_memory on a device, as PyTorch's GPU recipe (DataLoader(pin_memory=True), non-blocking
   * copies): the next batch's copy overlaps this step and the host never waits for a copy, so it can
   * queue the step's kernels while the device runs the previous ones. The batches' bits are the same. */
  ct_loader_opts lo = {.batch_size = c->batch, .shuffle = 1, .seed = c->seed, .num_workers = c->workers,
                       .pin_memory = r->dev.kind != CT_CPU, .device = r->dev, .rank = ct_dist_rank(), .world_size = r->world};
  r->loader = ct_loader_new(r->train, &lo);
  if (!r->loader || ct_loader_set_epoch(r->loader, r->start_epoch) != CT_OK) {
    fprintf(stderr, "%s: %s\n", r->prog, ct_last_error());
    return 1;
  }
  if (r->rank0 && c->metrics && !(r->mf = fopen(c->metrics, "a"))) {
    fprintf(stderr, "cuttle: cannot open --metrics file %s\n", c->metrics);
    if (r->world > 1) ct_cli_rank_abort(NULL);
    return 1;
  }
  char path[CT_CLI_RUN_PATH_MAX];
  if (r->rank0 && (ct_cli_run_path(r->dir, "metrics.jsonl", path, sizeof path) || !(r->run_mf = fopen(path, "a")))) {
    fprintf(stderr, "cuttle: cannot open %s/metrics.jsonl\n", r->dir);
    if (r->world > 1) ct_cli_rank_abort(NULL);
    return 1;
  }
  return 0;
}

/* Rank 0's account of what is about to train, on stderr. */
static void print_setup(const train_run *r) {
  const train_config *c = r->c;
  fprintf(stderr, "training %s on %s: %lld parameters, %s lr %g (%s), batch %lld, %d workers", c->model, r->devname,
          (long long)ct_module_num_params(r->m), c->optimizer, c->lr, c->schedule, (long long)c->batch, c->workers);
  if (c->weight_decay > 0) fprintf(stderr, ", weight_decay %g", c->weight_decay);
  if (r->dev.kind == CT_CPU) fprintf(stderr, ", %d thread%s", omp_get_max_threads(), omp_get_max_threads() == 1 ? "" : "s");
  if (r->world > 1 || c->accumulate > 1)
    fprintf(stderr, "\n  %d rank(s) x batch %lld per rank x %d accumulated = global batch %lld", r->world,
            (long long)c->batch, c->accumulate, (long long)r->global_batch);
  if (r->ddp)
    fprintf(stderr, ", %d gradient bucket(s) of %g MiB, timeout %g s", ct_ddp_num_buckets(r->ddp), c->bucket_mb,
            c->timeout);
  if (r->dp) fprintf(stderr, "\n  replicated on %d devices (%s), each batch split between them", c->ndevs, c->devices);
  if (c->amp_dtype != CT_F32)
    fprintf(stderr, "\n  mixed precision: autocast %s%s", ct_dtype_name(c->amp_dtype), r->scaler ? " with a GradScaler" : "");
  if (c->channels_last) fprintf(stderr, "\n  channels_last memory format");
  if (r->graph)
    fprintf(stderr, "\n  the step captured in a CUDA graph and replayed (--cuda-graph%s)",
            ct_device_can_capture(r->dev) ? "" : "; rehearsed here: run eagerly on static tensors, no capture");
  if (c->data.data) {
    int64_t x[3];
    ct_dataset_sample_shape(r->test, x);
    fprintf(stderr, "\n  data %s: %lld training and %lld test images of (%lld, %lld, %lld), %d classes%s", c->data.data,
            (long long)ct_dataset_len(r->train), (long long)ct_dataset_len(r->test), (long long)x[0], (long long)x[1],
            (long long)x[2], ct_dataset_num_classes(r->test), c->data.augment ? ", augmented (crop, flip)" : "");
  }
  fprintf(stderr, "\n");
  if (c->amp_dtype != CT_F32) {
    int64_t sample[3];
    ct_dataset_sample_shape(r->train, sample);
    ct_cli_print_alignment(r->m, r->dev, c->batch, sample, c->amp_dtype);
  }
}

/* Everything after the device and the data, up to the first epoch. 0, or 1 after saying why. */
static int setup(train_run *r) {
  r->global_batch = r->c->batch * r->world * r->c->accumulate;
  if (build_model(r) || resume(r) || open_tensorboard(r) || parallelize(r) || open_loader_and_metrics(r)) return 1;
  if (r->rank0) print_setup(r);
  return 0;
}

/* ---- the loop */

/* From here to release_signals, the first SIGINT or SIGTERM (in a job also SIGUSR1, SIGUSR2: what
 * mpirun forwards at once, ranks.c) stops the run after the current step (on_signal). */
static void catch_signals(train_run *r) {
  /* A stop by signal saves to last.safetensors (and --save), the temporary names of which a second
   * signal removes. */
  const char *paths[3] = {r->c->save, r->last, r->best}; /* last and best are "" on the ranks that do not save */
  for (int i = 0; i < 3; i++) {
    int w = paths[i] && *paths[i] ? snprintf(doomed_tmp[i], sizeof doomed_tmp[i], "%s.tmp.%ld", paths[i], (long)getpid()) : -1;
    if (w < 0 || (size_t)w >= sizeof doomed_tmp[i]) doomed_tmp[i][0] = 0; /* never unlink a truncated name */
  }
  if (ct_monitor_stats_path((int)getpid(), doomed_stats, sizeof doomed_stats) != CT_OK) doomed_stats[0] = 0;
  ct_clear_error();
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &r->old_int);
  sigaction(SIGTERM, &sa, &r->old_term);
  if (r->c->launched) {
    sigaction(SIGUSR1, &sa, &r->old_usr1);
    sigaction(SIGUSR2, &sa, &r->old_usr2);
  }
}

static void release_signals(train_run *r) {
  sigaction(SIGINT, &r->old_int, NULL);
  sigaction(SIGTERM, &r->old_term, NULL);
  if (r->c->launched) {
    sigaction(SIGUSR1, &r->old_usr1, NULL);
    sigaction(SIGUSR2, &r->old_usr2, NULL);
  }
}

/* The training part of an epoch: its learning rate, then ct_cli_train_epoch with the step hook. */
static ct_status train_epoch(train_run *r, int64_t epoch, ct_cli_epoch_stats *es) {
  const train_config *c = r->c;
  ct_optimizer_set_lr(r->opt, ct_sched_lr(&c->sched, c->lr, (int)epoch));
  ct_cli_tb_epoch_start(r->tb);
  ct_cli_epoch_opts eo = {.interrupted = r->world > 1 ? &agreed : &interrupted, .progress = c->progress && r->rank0,
                          .plain = !isatty(STDERR_FILENO), .plain_every = c->progress_every,
                          .epoch = (int)epoch + 1, .epochs = c->epochs, .per_epoch = ct_dataset_len(r->train),
                          .publish = 1, .after_step = after_step, .ctx = r, .ddp = r->ddp,
                          .accumulate = c->accumulate, .skip = epoch == r->start_epoch ? r->skip : 0,
                          .position = &r->position, .world = r->world, .global_batch = r->global_batch,
                          .amp = c->amp_dtype, .scaler = r->scaler, .channels_last = c->channels_last, .dp = r->dp,
                          .dp_ctx = &r->dp_ctx, .running = &r->running, .graph = r->graph};
  return ct_cli_train_epoch(r->m, r->opt, r->loader, &eo, es);
}

/* A stop in the middle of an epoch, by signal (sig) or --max-steps: say so, and save where it
 * stopped. 0, or 1 when the save failed. */
static int stop_and_save(train_run *r, int sig, int64_t epoch, const ct_cli_epoch_stats *es) {
  const char *nl = r->c->progress && isatty(STDERR_FILENO) ? "\n" : ""; /* ends the live bar */
  if (r->rank0 && sig)
    fprintf(stderr, "%s%s in epoch %lld after %lld images\n", nl, sig == SIGTERM ? "terminated (SIGTERM)" : "interrupted",
            (long long)epoch + 1, (long long)(es->seen * r->world));
  else if (r->rank0)
    fprintf(stderr, "%sstopped after %lld steps (--max-steps) in epoch %lld\n", nl, (long long)r->steps, (long long)epoch + 1);
  /* What --tensorboard holds goes to its file first, so that a second signal during the save
   * loses none of it. */
  ct_cli_tb_close(r->tb);
  /* The checkpoint records the position in the epoch, where a resume with the same ranks and
   * batch size continues. A stop right after an epoch's save (the signal came during the
   * evaluation) has nothing new to save. */
  int fresh = r->saved_steps == ct_optimizer_steps(r->opt);
  return !fresh && save_run(r, r->position) != CT_OK;
}

/* What an epoch's end reports. */
typedef struct {
  double train_loss, acc, test_loss, ips, secs;
  int64_t counts[2]; /* test images predicted right, test images */
  int64_t step;      /* the global step (--tensorboard's x axis) */
} epoch_report;

/* The epoch's line on stdout (rank 0) and its JSON line in --metrics. */
static void report_epoch(const train_run *r, int64_t epoch, const epoch_report *e) {
  const train_config *c = r->c;
  if (c->progress && r->rank0 && isatty(STDERR_FILENO)) fputc('\n', stderr); /* ends the live bar */
  if (r->rank0) {
    printf("epoch %lld: train_loss %.4f  test_acc %.2f%%  %.0f images/s  %.1f s  (%s", (long long)epoch + 1, e->train_loss,
           100 * e->acc, e->ips, e->secs, r->devname);
    if (r->world > 1) printf(", %d ranks", r->world);
    printf(")\n");
    fflush(stdout);
  }
  if (!r->mf && !r->run_mf) return;
  char line[1024];
  int k = snprintf(line, sizeof line, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.6f, \"test_acc\": %.6f, \"test_loss\": %.6f, "
                 "\"test_correct\": %lld, \"test_total\": %lld, \"images_per_s\": %.1f, \"seconds\": %.3f, \"device\": \"%s\", "
                 "\"batch\": %lld, \"batch_per_rank\": %lld, \"world_size\": %d, \"accumulate\": %d, \"amp\": \"%s\", "
                 "\"channels_last\": %s",
          (long long)epoch + 1, (long long)e->step, e->train_loss, e->acc, e->test_loss, (long long)e->counts[0],
          (long long)e->counts[1], e->ips, e->secs, r->devname, (long long)r->global_batch, (long long)c->batch, r->world, c->accumulate, c->amp ? c->amp : "none",
          c->channels_last ? "true" : "false");
  if (r->scaler && k > 0 && (size_t)k < sizeof line) /* pytorch#55585: what the scaler did, in total */
    k += snprintf(line + k, sizeof line - (size_t)k, ", \"grad_scale\": %g, \"steps_taken\": %lld, \"steps_skipped\": %lld",
                  ct_grad_scaler_scale_value(r->scaler), (long long)ct_grad_scaler_steps_taken(r->scaler),
                  (long long)ct_grad_scaler_steps_skipped(r->scaler));
  if (k > 0 && (size_t)k < sizeof line - 2) snprintf(line + k, sizeof line - (size_t)k, "}\n");
  metrics_line(r, line, 1);
}

/* A whole epoch's end: the loss over all ranks, the test accuracy, the report, the save to --save.
 * 0, or 1 after saying why. */
static int end_epoch(train_run *r, int64_t epoch, const ct_cli_epoch_stats *es) {
  double sums[2] = {es->loss_sum, (double)es->seen};
  if (r->world > 1) { /* the epoch's loss and images over all ranks */
    ct_tensor *t = ct_from_host(sums, 1, (int64_t[]){2}, CT_F64, CT_DEVICE_CPU);
    if (!t || ct_dist_all_reduce_sum(&t, 1) != CT_OK || ct_to_host(t, sums, sizeof sums, CT_F64) != CT_OK)
      ct_cli_rank_abort("summing the epoch's loss over the ranks failed");
    ct_tensor_free(t);
  }
  epoch_report e = {.secs = es->seconds, .step = global_step(r)};
  e.acc = ct_cli_evaluate_loss(r->m, r->test, r->dev, r->c->workers, e.counts, &e.test_loss);
  if (e.acc < 0) {
    if (r->world > 1) ct_cli_rank_abort("evaluation failed");
    fprintf(stderr, "\ncuttle: evaluation failed: %s\n", ct_last_error());
    return 1;
  }
  e.ips = sums[1] / e.secs, e.train_loss = sums[1] ? sums[0] / sums[1] : NAN;
  int64_t skipped = ct_dataset_skipped(r->train) + ct_dataset_skipped(r->test);
  if (skipped > 0 && r->rank0) fprintf(stderr, "%s: %lld image(s) did not decode and were skipped (--skip-bad-images)\n",
                                       r->prog, (long long)skipped);
  report_epoch(r, epoch, &e);
  ct_cli_tb_epoch_end(r->tb, e.step, &(ct_cli_tb_epoch){.epoch = epoch + 1, .train_loss = e.train_loss,
                                                         .images_per_s = e.ips, .test_acc = e.acc, .test_loss = e.test_loss});
  r->epoch = epoch + 1;
  r->acc = e.acc;
  return save_run(r, 0) != CT_OK || keep_best(r);
}

/* One epoch: its training (unless a signal came during the last evaluation or save), then a stop
 * (*stopped = 1) or the epoch's end. 0, or 1 after a failure. */
static int run_epoch(train_run *r, int64_t epoch, int *stopped) {
  r->epoch = epoch, r->position = 0;
  ct_cli_epoch_stats es = {0};
  agree(r); /* a signal during the last evaluation or save */
  profile_on(r);
  ct_status ts = stop_signal(r) ? CT_OK : train_epoch(r, epoch, &es);
  profile_off(r);
  if (ts != CT_OK) {
    if (r->world > 1) ct_cli_rank_abort(NULL); /* printed; the other ranks would wait in the next all-reduce */
    return 1;
  }
  int sig = stop_signal(r);
  if (sig || r->hit_max_steps) {
    *stopped = 1;
    return stop_and_save(r, sig, epoch, &es);
  }
  return end_epoch(r, epoch, &es);
}

/* The epochs from the resumed one to --epochs, under catch_signals. The exit status: 0, 1 after a
 * failure, or 128 + the signal that cut the run short (as a shell reports it); a signal that came
 * after the last epoch changed nothing. */
static int run_epochs(train_run *r) {
  catch_signals(r);
  int status = 0, stopped = 0;
  int64_t epoch = r->start_epoch;
  for (; epoch < r->c->epochs; epoch++)
    if ((status = run_epoch(r, epoch, &stopped)) != 0 || stopped) break;
  if (status == 0 && stop_signal(r) && epoch < r->c->epochs) status = 128 + stop_signal(r);
  release_signals(r);
  ct_monitor_unpublish();
  return status;
}

/* Free what setup made, and leave the job. Returns status, or 1 when leaving the job failed. */
static int finish(train_run *r, int status) {
  if (status == 1 && r->world > 1) ct_cli_rank_abort(NULL); /* said why above; the others would wait */
  if (r->mf) fclose(r->mf);
  if (r->run_mf) fclose(r->run_mf);
  free(r->recipe);
  ct_cli_tb_free(r->tb); /* closes it: what waits is written */
  ct_tensor_free(r->flags);
  ct_ddp_free(r->ddp);
  ct_data_parallel_free(r->dp);
  ct_grad_scaler_free(r->scaler);
  if (r->graph && status == 0) ct_cli_graph_step_report(r->graph, stderr);
  ct_cli_graph_step_free(r->graph);
  ct_loader_free(r->loader);
  ct_optimizer_free(r->opt);
  ct_module_free(r->m);
  ct_dataset_free(r->train);
  ct_dataset_free(r->test);
  /* Every rank gets here at the same point (a failure that could strand the others left at once),
   * so the barrier of ct_dist_finalize does not wait on a lost rank. */
  if (r->c->launched && ct_dist_finalize() != CT_OK) {
    fprintf(stderr, "%s: leaving the job failed: %s\n", r->prog, ct_last_error());
    if (!status) status = 1;
  }
  return status;
}

/* ---- the command */

/* Rank 0: the run folder (run_dir.h) and the recipe every checkpoint records (config.json is
 * written once setup has succeeded: write_config). GO_ON, or the exit status after saying why (a
 * job ends). */
static int open_run_dir(train_run *r) {
  r->acc = -1, r->best_acc = -1;
  if (!r->rank0) return GO_ON;
  const train_config *c = r->c;
  int continuing = 0, rc = ct_cli_run_dir_make(r->prog, c, r->dir, sizeof r->dir, &r->dir_made, &continuing);
  if (!rc && (ct_cli_run_path(r->dir, "last.safetensors", r->last, sizeof r->last) ||
              ct_cli_run_path(r->dir, "best.safetensors", r->best, sizeof r->best))) {
    fprintf(stderr, "%s: the run folder's name is too long: %s\n", r->prog, r->dir);
    rc = 2;
  }
  if (!rc && !(r->recipe = ct_cli_recipe_json(c, r->test, 0))) {
    fprintf(stderr, "%s: cannot make the run's recipe: %s\n", r->prog, ct_last_error());
    rc = 1;
  }
  if (rc) {
    if (r->dir_made) ct_cli_run_dir_discard(r->dir);
    r->dir[0] = 0;
    if (r->world > 1) ct_cli_rank_abort(NULL);
    return rc;
  }
  /* A run continued in its own folder keeps the best figure it had reached. */
  ct_safetensors *f = continuing && access(r->best, F_OK) == 0 ? ct_safetensors_open(r->best) : NULL;
  const char *acc = f ? ct_safetensors_metadata(f, ACC_KEY) : NULL;
  if (acc && *acc) r->best_acc = atof(acc);
  ct_safetensors_close(f);
  ct_clear_error();
  fprintf(stderr, "run folder: %s\n", r->dir);
  return GO_ON;
}

/* Rank 0, once setup has succeeded: the recipe as the folder's config.json. 0, or 1 after saying
 * why. */
static int write_config(train_run *r) {
  if (!r->rank0) return 0;
  char *pretty = ct_cli_recipe_json(r->c, r->test, 1);
  int bad = !pretty || ct_cli_run_write_config(r->prog, r->dir, pretty);
  if (!pretty) fprintf(stderr, "%s: cannot make the run's recipe: %s\n", r->prog, ct_last_error());
  free(pretty);
  if (bad && r->world > 1) ct_cli_rank_abort(NULL);
  return bad;
}

int ct_cmd_train(int argc, char **argv) {
  /* --nproc passes the command line on to the ranks as the user wrote it. */
  char **orig = malloc(((size_t)argc + 1) * sizeof *orig);
  unsigned char *given = calloc((size_t)ct_cli_run_options_n, 1);
  if (!orig || !given) {
    fprintf(stderr, "cuttle: out of memory\n");
    free(orig), free(given);
    return 1;
  }
  memcpy(orig, argv, ((size_t)argc + 1) * sizeof *orig);
  train_config c;
  int status = parse_options(argc, argv, &c, given);
  if (status == GO_ON) status = check_options(&c, given);
  if (status == GO_ON) {
    /* the per-step TensorBoard scalars: every --tensorboard-every steps when given, else as
     * --tensorboard always did (10), else (the run folder's own) every --log-every */
    const ct_cli_opt *tbe = ct_cli_opt_find(ct_cli_run_options, ct_cli_run_options_n, "tensorboard-every");
    if (!given[tbe - ct_cli_run_options] && !c.tensorboard) c.tb_every = c.log_every;
    status = launch(&c, argc, orig);
  }
  free(orig);
  free(given);
  if (status != GO_ON) return status;
  train_run r = {.c = &c, .saved_steps = -1, .step_base = -1, .log_epoch = -1, .dp_ctx = {.group = 1, .scale = 1.0}};
  status = open_device_and_data(&r);
  if (status != GO_ON) return status;
  status = open_run_dir(&r);
  if (status == GO_ON) status = setup(&r);
  if (status == 0) status = write_config(&r);
  /* a folder this run made and never began to use goes again */
  if (status == 1 && r.rank0 && r.dir_made && r.dir[0]) ct_cli_run_dir_discard(r.dir), r.dir[0] = 0;
  if (status == 0) status = run_epochs(&r);
  if (status == 0 || status > 128) profile_report(&r);
  if (r.rank0 && r.dir[0] && (status == 0 || status > 128))
    fprintf(stderr, "run folder: %s (evaluate: cuttle eval --checkpoint %s)\n", r.dir,
            access(r.best, F_OK) == 0 ? r.best : r.last);
  return finish(&r, status);
}
