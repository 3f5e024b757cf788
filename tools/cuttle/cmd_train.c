/* tools/cuttle/cmd_train.c: `cuttle train` and `cuttle eval` on Fashion-MNIST.
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
 * progress. */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "commands.h"
#include "cuttle.h"
#include "cuttle/data.h"
#include "cuttle/io.h"
#include "train_loop.h"

/* The number of the first SIGINT or SIGTERM, 0 until one arrives. */
static volatile sig_atomic_t interrupted;
/* What a second signal removes before the process ends, filled in before the handler is installed:
 * the temporary name ct_safetensors_save gives a finished file just before renaming it (or writes
 * to, without O_TMPFILE), and this process's monitor stats file. Empty strings are skipped. */
static char doomed_tmp[4200], doomed_stats[256];

static void on_signal(int sig) {
  if (!interrupted) {
    interrupted = sig;
    return;
  }
  /* Only async-signal-safe calls from here on (POSIX signal-safety(7)): unlink, sigaction,
   * sigprocmask, raise. */
  if (doomed_tmp[0]) unlink(doomed_tmp);
  if (doomed_stats[0]) unlink(doomed_stats);
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigaction(sig, &dfl, NULL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
}

typedef struct {
  const char *model, *device, *optimizer, *schedule, *data_dir, *save, *resume, *metrics, *checkpoint;
  int epochs, workers, progress;
  int64_t batch, max_steps, save_every;
  double lr;
  uint64_t seed;
} options;

static ct_status pick_device(const char *s, ct_device *d) { return ct_cli_device("cuttle", s, d); }

static int usage_train(FILE *f) {
  fprintf(f, "usage: cuttle train [--model mlp|cnn] [--device auto|cpu|cuda:N|opencl:N] [--epochs N] [--batch-size N]\n"
             "                    [--lr X] [--optimizer adam|adamw|sgd] [--workers N] [--seed N] [--data-dir DIR]\n"
             "                    [--schedule constant|step|cosine] [--save FILE] [--save-every N] [--resume FILE]\n"
             "                    [--max-steps N] [--metrics FILE] [--no-progress]\n"
             "defaults: --model cnn --device auto --epochs 5 --batch-size 128 --lr 1e-3 --optimizer adam\n"
             "          --schedule cosine --workers 2 --seed 0\n"
             "--save FILE       save a checkpoint after every epoch (written atomically: FILE is always whole)\n"
             "--save-every N    also save it every N training steps (needs --save); the epoch in progress is\n"
             "                  not counted, so --resume repeats it from its start\n"
             "--max-steps N     stop after N training steps of this run (saving as at an interrupt; exit 0)\n"
             "--resume FILE     continue from a checkpoint; the --optimizer must be the one it was saved with\n"
             "exit status: 0 done, 1 failure, 2 usage error; on the first SIGINT (Ctrl-C) or SIGTERM (what batch\n"
             "schedulers send before a kill) the current step is finished, a checkpoint saved (--save FILE, else\n"
             "cuttle-interrupted.safetensors) and the exit status is 128+signal: 130 (SIGINT), 143 (SIGTERM);\n"
             "a second signal ends the process at once by that signal and leaves the last checkpoint as it was\n");
  return f == stdout ? 0 : 2;
}

static ct_status save(const char *path, ct_module *m, ct_optimizer *o, int64_t epoch, ct_generator *gen) {
  ct_checkpoint_meta meta = {.epoch = epoch, .rng = *gen};
  ct_status s = ct_checkpoint_save(path, m, o, &meta);
  if (s != CT_OK) fprintf(stderr, "cuttle: could not save the checkpoint: %s\n", ct_last_error());
  else fprintf(stderr, "saved %s (epoch %lld)\n", path, (long long)epoch);
  return s;
}

/* What the per-step hook (--save-every, --max-steps) needs. */
typedef struct {
  const options *o;
  ct_module *m;
  ct_optimizer *opt;
  ct_generator *gen;
  int64_t epoch;        /* epochs completed: what a save in the middle of an epoch records */
  int64_t steps;        /* training steps of this run */
  int64_t saved_steps;  /* the optimizer's step count at the last save to --save, -1 before one */
  int hit_max_steps;
} run_state;

static ct_status save_run(run_state *r, const char *path) {
  ct_status s = save(path, r->m, r->opt, r->epoch, r->gen);
  if (s == CT_OK && r->o->save && strcmp(path, r->o->save) == 0) r->saved_steps = ct_optimizer_steps(r->opt);
  return s;
}

static int after_step(void *ctx) {
  run_state *r = ctx;
  r->steps++;
  if (r->o->max_steps && r->steps >= r->o->max_steps) {
    r->hit_max_steps = 1;
    return 1; /* the stop path saves */
  }
  /* After a signal the loop stops at once and the stop path saves; saving here too would only
   * delay the exit the scheduler is waiting for. */
  if (r->o->save_every && r->steps % r->o->save_every == 0 && !interrupted) {
    ct_status s = save_run(r, r->o->save);
    if (s != CT_OK) return s;
  }
  return 0;
}

int ct_cmd_train(int argc, char **argv) {
  options o = {.model = "cnn", .device = "auto", .optimizer = "adam", .schedule = "cosine", .epochs = 5, .workers = 2, .batch = 128, .lr = 1e-3,
               .progress = 1};
  static const struct option longopts[] = {
      {"model", 1, 0, 'm'},   {"device", 1, 0, 'd'},  {"epochs", 1, 0, 'e'},  {"batch-size", 1, 0, 'b'},
      {"lr", 1, 0, 'l'},      {"optimizer", 1, 0, 'o'}, {"workers", 1, 0, 'w'}, {"seed", 1, 0, 's'},
      {"data-dir", 1, 0, 'D'}, {"save", 1, 0, 'S'},   {"resume", 1, 0, 'r'},  {"metrics", 1, 0, 'M'},
      {"no-progress", 0, 0, 'P'}, {"schedule", 1, 0, 'L'}, {"max-steps", 1, 0, 'x'}, {"save-every", 1, 0, 'E'},
      {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case 'm': o.model = optarg; break;
      case 'd': o.device = optarg; break;
      case 'e': o.epochs = atoi(optarg); break;
      case 'b': o.batch = atoll(optarg); break;
      case 'l': o.lr = atof(optarg); break;
      case 'o': o.optimizer = optarg; break;
      case 'w': o.workers = atoi(optarg); break;
      case 's': o.seed = strtoull(optarg, NULL, 10); break;
      case 'D': o.data_dir = optarg; break;
      case 'S': o.save = optarg; break;
      case 'r': o.resume = optarg; break;
      case 'M': o.metrics = optarg; break;
      case 'P': o.progress = 0; break;
      case 'L': o.schedule = optarg; break;
      case 'x': o.max_steps = atoll(optarg); break;
      case 'E': o.save_every = atoll(optarg); break;
      case 'h': return usage_train(stdout);
      default: return usage_train(stderr);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cuttle train: unexpected argument \"%s\"\n", argv[optind]);
    return usage_train(stderr);
  }
  if (o.epochs < 1 || o.batch < 1 || o.workers < 0 || !(o.lr > 0) || o.max_steps < 0 || o.save_every < 0) {
    fprintf(stderr, "cuttle: --epochs, --batch-size must be >= 1, --workers, --max-steps, --save-every >= 0 and --lr > 0\n");
    return 2;
  }
  if (o.save_every && !o.save) {
    fprintf(stderr, "cuttle: --save-every needs --save FILE\n");
    return 2;
  }
  ct_optim_opts oo = {.lr = o.lr};
  if (strcmp(o.optimizer, "adam") == 0) oo.kind = CT_OPTIM_ADAM;
  else if (strcmp(o.optimizer, "adamw") == 0) oo.kind = CT_OPTIM_ADAMW;
  else if (strcmp(o.optimizer, "sgd") == 0) oo.kind = CT_OPTIM_SGD, oo.momentum = 0.9;
  else {
    fprintf(stderr, "cuttle: unknown optimizer \"%s\": use adam, adamw or sgd\n", o.optimizer);
    return 2;
  }
  /* the learning rate of each epoch, in closed form, so a resumed run continues the same curve */
  ct_sched_opts sched = {.kind = CT_SCHED_CONSTANT, .step_size = 2, .gamma = 0.5, .t_max = o.epochs};
  if (strcmp(o.schedule, "step") == 0) sched.kind = CT_SCHED_STEP;
  else if (strcmp(o.schedule, "cosine") == 0) sched.kind = CT_SCHED_COSINE;
  else if (strcmp(o.schedule, "constant") != 0) {
    fprintf(stderr, "cuttle: unknown schedule \"%s\": use constant, step (halve every 2 epochs) or cosine\n", o.schedule);
    return 2;
  }
  ct_device dev;
  if (pick_device(o.device, &dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "cuttle: %s\n", ct_last_error());
    return 2;
  }
  char devname[32];
  ct_device_str(dev, devname, sizeof devname);

  ct_dataset *train = ct_fashion_mnist_load(o.data_dir, CT_SPLIT_TRAIN);
  ct_dataset *test = train ? ct_fashion_mnist_load(o.data_dir, CT_SPLIT_TEST) : NULL;
  if (!train || !test) {
    fprintf(stderr, "cuttle: %s\n", ct_last_error());
    ct_dataset_free(train);
    return 1;
  }
  ct_generator gen = ct_generator_new(o.seed);
  ct_module *m = ct_model_new(o.model, dev, &gen);
  ct_optimizer *opt = m ? ct_optimizer_new(m, &oo) : NULL;
  int status = 1;
  ct_loader *loader = NULL;
  FILE *mf = NULL;
  if (!opt) {
    fprintf(stderr, "cuttle: %s\n", ct_last_error());
    goto done;
  }
  int64_t start_epoch = 0;
  if (o.resume) {
    ct_checkpoint_meta meta = {0};
    if (ct_checkpoint_load(o.resume, m, opt, &meta) != CT_OK) {
      fprintf(stderr, "cuttle: cannot resume: %s\n", ct_last_error());
      if (ct_last_status() == CT_EINVAL) fprintf(stderr, "cuttle: pass the --optimizer the checkpoint was saved with\n");
      goto done;
    }
    start_epoch = meta.epoch;
    if (meta.has_training_state) gen = meta.rng;
    fprintf(stderr, "resumed from %s at epoch %lld\n", o.resume, (long long)start_epoch);
  }
  ct_loader_opts lo = {.batch_size = o.batch, .shuffle = 1, .seed = o.seed, .num_workers = o.workers, .device = dev};
  loader = ct_loader_new(train, &lo);
  if (!loader || ct_loader_set_epoch(loader, start_epoch) != CT_OK) {
    fprintf(stderr, "cuttle: %s\n", ct_last_error());
    goto done;
  }
  if (o.metrics && !(mf = fopen(o.metrics, "a"))) {
    fprintf(stderr, "cuttle: cannot open --metrics file %s\n", o.metrics);
    goto done;
  }
  fprintf(stderr, "training %s on %s: %lld parameters, %s lr %g (%s), batch %lld, %d workers\n", o.model, devname,
          (long long)ct_module_num_params(m), o.optimizer, o.lr, o.schedule, (long long)o.batch, o.workers);
  /* Where a stop by signal saves: --save, or a fixed name so that Ctrl-C never loses the run. */
  const char *stop_path = o.save ? o.save : "cuttle-interrupted.safetensors";
  int w = snprintf(doomed_tmp, sizeof doomed_tmp, "%s.tmp.%ld", stop_path, (long)getpid());
  if (w < 0 || (size_t)w >= sizeof doomed_tmp) doomed_tmp[0] = 0; /* never unlink a truncated name */
  if (ct_monitor_stats_path((int)getpid(), doomed_stats, sizeof doomed_stats) != CT_OK) doomed_stats[0] = 0;
  ct_clear_error();
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART}, old_int, old_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  int64_t per_epoch = ct_dataset_len(train);
  run_state rs = {.o = &o, .m = m, .opt = opt, .gen = &gen, .saved_steps = -1};
  status = 0;
  int64_t epoch = start_epoch;
  for (; epoch < o.epochs && status == 0; epoch++) {
    rs.epoch = epoch;
    ct_cli_epoch_stats es = {0};
    if (!interrupted) {
      ct_optimizer_set_lr(opt, ct_sched_lr(&sched, o.lr, (int)epoch));
      ct_cli_epoch_opts eo = {.interrupted = &interrupted, .progress = o.progress, .epoch = (int)epoch + 1,
                              .epochs = o.epochs, .per_epoch = per_epoch, .publish = 1, .after_step = after_step,
                              .ctx = &rs};
      if (ct_cli_train_epoch(m, opt, loader, &eo, &es) != CT_OK) {
        status = 1;
        break;
      }
    }
    if (interrupted || rs.hit_max_steps) {
      if (interrupted)
        fprintf(stderr, "\n%s in epoch %lld after %lld images\n", interrupted == SIGTERM ? "terminated (SIGTERM)" : "interrupted",
                (long long)epoch + 1, (long long)es.seen);
      else
        fprintf(stderr, "\nstopped after %lld steps (--max-steps) in epoch %lld\n", (long long)rs.steps, (long long)epoch + 1);
      /* The partial epoch is not counted: resuming repeats it from its start. A stop right after an
       * epoch's save (the signal came during the evaluation) has nothing new to save. */
      const char *path = interrupted ? stop_path : o.save;
      int fresh = o.save && path == o.save && rs.saved_steps == ct_optimizer_steps(opt);
      if (path && !fresh && save_run(&rs, path) != CT_OK) status = 1;
      break;
    }
    double secs = es.seconds, loss_sum = es.loss_sum;
    int64_t seen = es.seen;
    double acc = ct_cli_evaluate(m, test, dev, o.workers);
    if (acc < 0) {
      fprintf(stderr, "\ncuttle: evaluation failed: %s\n", ct_last_error());
      status = 1;
      break;
    }
    double ips = seen / secs, train_loss = seen ? loss_sum / seen : NAN;
    if (o.progress) fputc('\n', stderr);
    printf("epoch %lld: train_loss %.4f  test_acc %.2f%%  %.0f images/s  %.1f s  (%s)\n", (long long)epoch + 1, train_loss,
           100 * acc, ips, secs, devname);
    fflush(stdout);
    if (mf) {
      fprintf(mf, "{\"epoch\": %lld, \"train_loss\": %.6f, \"test_acc\": %.6f, \"images_per_s\": %.1f, \"seconds\": %.3f, "
                  "\"device\": \"%s\"}\n", (long long)epoch + 1, train_loss, acc, ips, secs, devname);
      fflush(mf);
    }
    rs.epoch = epoch + 1;
    if (o.save && save_run(&rs, o.save) != CT_OK) status = 1;
  }
  /* A signal that cut the run short is the exit status (128 + its number, as a shell reports);
   * one that came after the last epoch changed nothing. */
  if (status == 0 && interrupted && epoch < o.epochs) status = 128 + interrupted;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  ct_monitor_unpublish();
done:
  if (mf) fclose(mf);
  ct_loader_free(loader);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_dataset_free(train);
  ct_dataset_free(test);
  return status;
}

int ct_cmd_eval(int argc, char **argv) {
  const char *checkpoint = NULL, *model = "cnn", *device = "auto", *data_dir = NULL;
  static const struct option longopts[] = {{"checkpoint", 1, 0, 'c'}, {"model", 1, 0, 'm'}, {"device", 1, 0, 'd'},
                                           {"data-dir", 1, 0, 'D'},   {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case 'c': checkpoint = optarg; break;
      case 'm': model = optarg; break;
      case 'd': device = optarg; break;
      case 'D': data_dir = optarg; break;
      default:
        fprintf(c == 'h' ? stdout : stderr, "usage: cuttle eval --checkpoint FILE [--model mlp|cnn] [--device auto|cpu|cuda:N|opencl:N] [--data-dir DIR]\n");
        return c == 'h' ? 0 : 2;
    }
  }
  if (!checkpoint) {
    fprintf(stderr, "cuttle eval: --checkpoint FILE is required\n");
    return 2;
  }
  ct_device dev;
  if (pick_device(device, &dev) != CT_OK) return 2;
  ct_module *m = ct_model_new(model, dev, NULL);
  ct_dataset *test = m ? ct_fashion_mnist_load(data_dir, CT_SPLIT_TEST) : NULL;
  int status = 1;
  if (test && ct_checkpoint_load(checkpoint, m, NULL, NULL) == CT_OK) {
    double acc = ct_cli_evaluate(m, test, dev, 2);
    if (acc >= 0) {
      char name[32];
      printf("test_acc %.2f%% (%lld images, %s, %s)\n", 100 * acc, (long long)ct_dataset_len(test), model,
             ct_device_str(dev, name, sizeof name));
      status = 0;
    }
  }
  if (status) fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
  ct_dataset_free(test);
  ct_module_free(m);
  return status;
}
