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
 * status 1, without a save that would wait on the lost rank. */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <omp.h>
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
#include "ranks.h"
#include "train_loop.h"

/* The number of the first SIGINT or SIGTERM (SIGUSR1, SIGUSR2 in a job), 0 until one arrives. */
static volatile sig_atomic_t interrupted;
/* In a job of several ranks: the stop signal the ranks agreed on (agree()), 0 until then. */
static volatile sig_atomic_t agreed;
/* What a second signal removes before the process ends, filled in before the handler is installed:
 * the temporary name ct_safetensors_save gives a finished file just before renaming it (or writes
 * to, without O_TMPFILE), and this process's monitor stats file. Empty strings are skipped. */
static char doomed_tmp[4200], doomed_stats[256];

static void on_signal(int sig) {
  if (!interrupted) {
    interrupted = sig == SIGUSR1 ? SIGINT : sig == SIGUSR2 ? SIGTERM : sig;
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
  const char *amp, *devices;
  int epochs, workers, progress, nproc, accumulate, channels_last;
  int64_t batch, max_steps, save_every;
  double lr, bucket_mb, timeout;
  uint64_t seed;
} options;

static int usage_train(FILE *f) {
  fprintf(f, "usage: cuttle train [--model mlp|cnn] [--device auto|cpu|cuda:N|opencl:N] [--epochs N] [--batch-size N]\n"
             "                    [--lr X] [--optimizer adam|adamw|sgd] [--workers N] [--seed N] [--data-dir DIR]\n"
             "                    [--schedule constant|step|cosine] [--save FILE] [--save-every N] [--resume FILE]\n"
             "                    [--max-steps N] [--metrics FILE] [--no-progress] [--accumulate K]\n"
             "                    [--nproc N] [--bucket-mb X] [--timeout S] [--amp bf16|f16] [--channels-last]\n"
             "                    [--devices D0,D1,...]\n"
             "defaults: --model cnn --device auto --epochs 5 --batch-size 128 --lr 1e-3 --optimizer adam\n"
             "          --schedule cosine --workers 2 --seed 0 --accumulate 1 --bucket-mb 25 --timeout 60\n"
             "--save FILE       save a checkpoint after every epoch (written atomically: FILE is always whole)\n"
             "--save-every N    also save it every N optimizer steps (needs --save); it records the position in\n"
             "                  the epoch, where --resume continues with the same ranks and --batch-size (other\n"
             "                  ranks or batch sizes repeat that epoch from its start)\n"
             "--max-steps N     stop after N optimizer steps of this run (saving as at an interrupt; exit 0)\n"
             "--resume FILE     continue from a checkpoint; the --optimizer must be the one it was saved with\n"
             "--accumulate K    sum the gradients of K batches (each loss divided by K) before each optimizer\n"
             "                  step; in a job only every K-th backward all-reduces (DDP's no_sync)\n"
             "--amp bf16|f16    mixed precision: forward and loss under autocast (cuttle/autocast.h), parameters\n"
             "                  and gradients float32; f16 adds a GradScaler (progress shows its scale and the\n"
             "                  skipped steps; metrics and checkpoints keep them); on a GPU the layers whose\n"
             "                  sizes break the tensor-core rule (multiples of 8) are listed once\n"
             "--channels-last   conv weights and input batches in the channels_last (NHWC) memory format\n"
             "--devices LIST    one process, several devices (cpu, opencl:N, cuda:N, comma-separated): the model\n"
             "                  is replicated, each batch split between the replicas, one thread per device;\n"
             "                  gradients are summed onto the first device and the parameters copied back;\n"
             "                  with --amp each replica's forward runs in autocast on its own thread\n"
             "several processes (data-parallel, as torch's DistributedDataParallel):\n"
             "  mpirun -np N cuttle train ...   each rank trains on its shard with its device: cuda:<local rank>,\n"
             "                  opencl:<local rank>, or the CPU with cores / local ranks threads (--device auto\n"
             "                  picks by kind; --device cpu keeps the CPU)\n"
             "--nproc N         start N ranks on this machine (runs mpirun for you, as torchrun --nproc_per_node)\n"
             "--batch-size N    is per rank; the progress line and the metrics show the global batch\n"
             "                  (per rank x ranks x K); only rank 0 prints progress and writes metrics and\n"
             "                  checkpoints; every rank reads --resume\n"
             "--bucket-mb X     gradient bucket size in MiB for the all-reduce (DDP's bucket_cap_mb)\n"
             "--timeout S       seconds a rank waits for the others in a collective before failing (exit 1)\n"
             "exit status: 0 done, 1 failure, 2 usage error; on the first SIGINT (Ctrl-C) or SIGTERM (what batch\n"
             "schedulers send before a kill) the current step is finished, a checkpoint saved (--save FILE, else\n"
             "cuttle-interrupted.safetensors) and the exit status is 128+signal: 130 (SIGINT), 143 (SIGTERM);\n"
             "a second signal ends the process at once by that signal and leaves the last checkpoint as it was.\n"
             "In a job, send SIGUSR2 to mpirun: it forwards it to every rank at once, and they take it as SIGTERM\n"
             "(SIGUSR1 as SIGINT, where a launcher forwards it; Open MPI 4.1's mpirun does not).\n"
             "mpirun's own SIGINT/SIGTERM kills the ranks odls_base_sigkill_timeout seconds (1) after it has\n"
             "passed the signal on (--mca odls_base_sigkill_timeout 30 gives them longer) and exits 1.\n"
             "--nproc passes its SIGINT/SIGTERM on to the ranks (as SIGUSR2) and exits 130/143 as one process does.\n");
  return f == stdout ? 0 : 2;
}

/* Where in an epoch a checkpoint was saved, as metadata strings beside "epoch": the batches each
 * rank had consumed, the ranks, and the per-rank batch size, which together make the position
 * meaningful (the distributed sampler's shards depend on both). */
#define POS_KEY "cuttle.position"
#define WORLD_KEY "cuttle.world_size"
#define BATCH_KEY "cuttle.batch_size"

static ct_status save(const char *path, ct_module *m, ct_optimizer *o, int64_t epoch, int64_t position,
                      int64_t batch, ct_generator *gen, ct_grad_scaler *scaler) {
  char pos[32], world[32], bs[32];
  snprintf(pos, sizeof pos, "%lld", (long long)position);
  snprintf(world, sizeof world, "%d", ct_dist_world_size());
  snprintf(bs, sizeof bs, "%lld", (long long)batch);
  ct_metadata_kv extra[] = {{POS_KEY, pos}, {WORLD_KEY, world}, {BATCH_KEY, bs}};
  ct_checkpoint_meta meta = {.epoch = epoch, .rng = *gen, .n_extra = 3, .extra = extra};
  ct_status s = scaler ? ct_grad_scaler_state_get(scaler, &meta.grad_scaler) : CT_OK;
  meta.has_grad_scaler = scaler != NULL;
  if (s == CT_OK) s = ct_checkpoint_save(path, m, o, &meta);
  if (s != CT_OK) fprintf(stderr, "%s: could not save the checkpoint: %s\n", ct_cli_rank_prog(), ct_last_error());
  else if (position)
    fprintf(stderr, "saved %s (epoch %lld, batch %lld of epoch %lld)\n", path, (long long)epoch, (long long)position,
            (long long)epoch + 1);
  else fprintf(stderr, "saved %s (epoch %lld)\n", path, (long long)epoch);
  return s;
}

/* The position a checkpoint records (0 when none, or when it was saved by other ranks or with
 * another batch size, which rank 0 then says). */
static int64_t saved_position(const char *path, int64_t epoch, int64_t batch) {
  ct_safetensors *f = ct_safetensors_open(path);
  if (!f) {
    ct_clear_error(); /* ct_checkpoint_load read it a moment ago; without it the epoch starts over */
    return 0;
  }
  const char *p = ct_safetensors_metadata(f, POS_KEY), *w = ct_safetensors_metadata(f, WORLD_KEY),
             *b = ct_safetensors_metadata(f, BATCH_KEY);
  int64_t pos = p ? atoll(p) : 0, world = w ? atoll(w) : 1, bs = b ? atoll(b) : batch;
  ct_safetensors_close(f);
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

/* What the per-step hook (--save-every, --max-steps, the ranks' agreement) needs. */
typedef struct {
  const options *o;
  ct_module *m;
  ct_optimizer *opt;
  ct_generator *gen;
  int64_t epoch;        /* epochs completed: what a save in the middle of an epoch records */
  int64_t position;     /* batches of the current epoch consumed (per rank) */
  int64_t steps;        /* optimizer steps of this run */
  int64_t saved_steps;  /* the optimizer's step count at the last save to --save, -1 before one */
  int hit_max_steps;
  int rank0, world;
  ct_tensor *flags;     /* int64 (2): this rank's SIGINT and SIGTERM flags, summed over the ranks */
  ct_grad_scaler *scaler; /* --amp f16's, saved with the checkpoints; NULL otherwise */
} run_state;

/* In a job: sum the ranks' signal flags, so that all of them see a signal any of them got at the
 * same step. A collective every rank reaches at the same point; a failure ends the rank. */
static void agree(run_state *r) {
  if (r->world <= 1) return;
  int64_t *v = ct_tensor_data(r->flags);
  v[0] = interrupted == SIGINT, v[1] = interrupted == SIGTERM;
  if (ct_dist_all_reduce_sum(&r->flags, 1) != CT_OK) ct_cli_rank_abort("the ranks could not agree on whether to stop");
  if (!agreed) agreed = v[1] ? SIGTERM : v[0] ? SIGINT : 0;
}

/* The stop signal that counts: this process's alone, or the ranks' agreed one. */
static int stop_signal(const run_state *r) { return r->world > 1 ? agreed : interrupted; }

static ct_status save_run(run_state *r, const char *path, int64_t position) {
  if (!r->rank0) return CT_OK; /* only rank 0 writes */
  ct_status s = save(path, r->m, r->opt, r->epoch, position, r->o->batch, r->gen, r->scaler);
  if (s == CT_OK && r->o->save && strcmp(path, r->o->save) == 0) r->saved_steps = ct_optimizer_steps(r->opt);
  if (s != CT_OK && r->world > 1) ct_cli_rank_abort(NULL); /* save() said why; the others would wait */
  return s;
}

static int after_step(void *ctx) {
  run_state *r = ctx;
  r->steps++;
  agree(r);
  if (r->o->max_steps && r->steps >= r->o->max_steps) {
    r->hit_max_steps = 1;
    return 1; /* the stop path saves */
  }
  /* After a signal the loop stops at once and the stop path saves; saving here too would only
   * delay the exit the scheduler is waiting for. */
  if (r->o->save_every && r->steps % r->o->save_every == 0 && !stop_signal(r)) {
    ct_status s = save_run(r, r->o->save, r->position);
    if (s != CT_OK) return s;
  }
  return 0;
}

int ct_cmd_train(int argc, char **argv) {
  options o = {.model = "cnn", .device = "auto", .optimizer = "adam", .schedule = "cosine", .epochs = 5, .workers = 2, .batch = 128, .lr = 1e-3,
               .progress = 1, .accumulate = 1, .bucket_mb = 25, .timeout = 60};
  static const struct option longopts[] = {
      {"model", 1, 0, 'm'},   {"device", 1, 0, 'd'},  {"epochs", 1, 0, 'e'},  {"batch-size", 1, 0, 'b'},
      {"lr", 1, 0, 'l'},      {"optimizer", 1, 0, 'o'}, {"workers", 1, 0, 'w'}, {"seed", 1, 0, 's'},
      {"data-dir", 1, 0, 'D'}, {"save", 1, 0, 'S'},   {"resume", 1, 0, 'r'},  {"metrics", 1, 0, 'M'},
      {"no-progress", 0, 0, 'P'}, {"schedule", 1, 0, 'L'}, {"max-steps", 1, 0, 'x'}, {"save-every", 1, 0, 'E'},
      {"nproc", 1, 0, 'n'}, {"accumulate", 1, 0, 'A'}, {"bucket-mb", 1, 0, 'B'}, {"timeout", 1, 0, 'T'},
      {"amp", 1, 0, 'a'}, {"channels-last", 0, 0, 'C'}, {"devices", 1, 0, 'V'},
      {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  /* --nproc passes the command line on to the ranks as the user wrote it, before getopt_long
   * reorders argv. */
  char **orig = malloc(((size_t)argc + 1) * sizeof *orig);
  if (!orig) {
    fprintf(stderr, "cuttle: out of memory\n");
    return 1;
  }
  memcpy(orig, argv, ((size_t)argc + 1) * sizeof *orig);
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
      case 'n': o.nproc = atoi(optarg); break;
      case 'A': o.accumulate = atoi(optarg); break;
      case 'B': o.bucket_mb = atof(optarg); break;
      case 'T': o.timeout = atof(optarg); break;
      case 'a': o.amp = optarg; break;
      case 'C': o.channels_last = 1; break;
      case 'V': o.devices = optarg; break;
      case 'h': free(orig); return usage_train(stdout);
      default: free(orig); return usage_train(stderr);
    }
  }
  int status = 2;
  if (optind < argc) {
    fprintf(stderr, "cuttle train: unexpected argument \"%s\"\n", argv[optind]);
    free(orig);
    return usage_train(stderr);
  }
  if (o.epochs < 1 || o.batch < 1 || o.workers < 0 || !(o.lr > 0) || o.max_steps < 0 || o.save_every < 0) {
    fprintf(stderr, "cuttle: --epochs, --batch-size must be >= 1, --workers, --max-steps, --save-every >= 0 and --lr > 0\n");
    goto early;
  }
  if (o.accumulate < 1 || o.nproc < 0 || !(o.bucket_mb > 0) || !(o.timeout > 0) || isinf(o.bucket_mb) || isinf(o.timeout)) {
    fprintf(stderr, "cuttle: --accumulate and --nproc must be >= 1, --bucket-mb and --timeout finite numbers > 0\n");
    goto early;
  }
  if (o.save_every && !o.save) {
    fprintf(stderr, "cuttle: --save-every needs --save FILE\n");
    goto early;
  }
  ct_dtype amp = CT_F32;
  if (o.amp && strcmp(o.amp, "bf16") == 0) amp = CT_BF16;
  else if (o.amp && strcmp(o.amp, "f16") == 0) amp = CT_F16;
  else if (o.amp) {
    fprintf(stderr, "cuttle: unknown --amp \"%s\": use bf16 (no scaler needed) or f16 (with a GradScaler)\n", o.amp);
    goto early;
  }
  ct_device devs[CT_CLI_MAX_DEVICES];
  int ndevs = 0;
  if (o.devices) {
    if ((ndevs = ct_cli_device_list("cuttle", o.devices, devs, CT_CLI_MAX_DEVICES)) < 1) goto early;
    if (o.nproc > 0 || ct_cli_under_launcher()) {
      fprintf(stderr, "cuttle: --devices is one process over several devices; with --nproc or mpirun each rank has "
                      "its own device: use one or the other\n");
      goto early;
    }
  }
  ct_optim_opts oo = {.lr = o.lr};
  if (strcmp(o.optimizer, "adam") == 0) oo.kind = CT_OPTIM_ADAM;
  else if (strcmp(o.optimizer, "adamw") == 0) oo.kind = CT_OPTIM_ADAMW;
  else if (strcmp(o.optimizer, "sgd") == 0) oo.kind = CT_OPTIM_SGD, oo.momentum = 0.9;
  else {
    fprintf(stderr, "cuttle: unknown optimizer \"%s\": use adam, adamw or sgd\n", o.optimizer);
    goto early;
  }
  /* the learning rate of each epoch, in closed form, so a resumed run continues the same curve */
  ct_sched_opts sched = {.kind = CT_SCHED_CONSTANT, .step_size = 2, .gamma = 0.5, .t_max = o.epochs};
  if (strcmp(o.schedule, "step") == 0) sched.kind = CT_SCHED_STEP;
  else if (strcmp(o.schedule, "cosine") == 0) sched.kind = CT_SCHED_COSINE;
  else if (strcmp(o.schedule, "constant") != 0) {
    fprintf(stderr, "cuttle: unknown schedule \"%s\": use constant, step (halve every 2 epochs) or cosine\n", o.schedule);
    goto early;
  }
  int launched = ct_cli_under_launcher();
  if (o.nproc > 0) {
    if (launched) {
      fprintf(stderr, "cuttle: --nproc starts mpirun itself; under mpirun (this process is a rank) leave it out\n");
      goto early;
    }
    status = ct_cli_launch("train", o.nproc, argc, orig);
    goto early;
  }
  free(orig), orig = NULL;
  if (launched && ct_cli_rank_init("cuttle", o.timeout) != 0) return 1;
  const char *prog = ct_cli_rank_prog();
  int world = ct_dist_world_size(), rank0 = ct_dist_rank() == 0;
  ct_device dev = devs[0];
  if (!ndevs && ct_cli_rank_device(prog, o.device, &dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    if (world > 1) ct_cli_rank_abort(NULL); /* not MPI_Finalize's barrier: some ranks may have gone on */
    return 2;
  }
  char devname[32];
  ct_device_str(dev, devname, sizeof devname);

  ct_dataset *train = ct_fashion_mnist_load(o.data_dir, CT_SPLIT_TRAIN);
  ct_dataset *test = train ? ct_fashion_mnist_load(o.data_dir, CT_SPLIT_TEST) : NULL;
  if (!train || !test) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    if (world > 1) ct_cli_rank_abort(NULL);
    ct_dataset_free(train);
    return 1;
  }
  ct_generator gen = ct_generator_new(o.seed);
  ct_module *m = ct_model_new(o.model, dev, &gen);
  if (m && o.channels_last && ct_module_to_memory_format(m, CT_CHANNELS_LAST) != CT_OK) ct_module_free(m), m = NULL;
  ct_optimizer *opt = m ? ct_optimizer_new(m, &oo) : NULL;
  ct_grad_scaler *scaler = opt && amp == CT_F16 ? ct_grad_scaler_new(&(ct_grad_scaler_opts){0}) : NULL;
  ct_data_parallel *dp = NULL;
  ct_cli_replica_ctx dp_ctx = {.group = 1, .scale = 1.0};
  status = 1;
  ct_loader *loader = NULL;
  ct_ddp *ddp = NULL;
  FILE *mf = NULL;
  run_state rs = {.o = &o, .m = m, .opt = opt, .gen = &gen, .saved_steps = -1, .rank0 = rank0, .world = world,
                  .scaler = scaler};
  if (!opt || (amp == CT_F16 && !scaler)) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    goto done;
  }
  int64_t start_epoch = 0, skip = 0;
  if (o.resume) {
    ct_checkpoint_meta meta = {0};
    if (ct_checkpoint_load(o.resume, m, opt, &meta) != CT_OK) {
      fprintf(stderr, "%s: cannot resume: %s\n", prog, ct_last_error());
      if (ct_last_status() == CT_EINVAL) fprintf(stderr, "%s: pass the --optimizer the checkpoint was saved with\n", prog);
      goto done;
    }
    start_epoch = meta.epoch;
    if (meta.has_training_state) gen = meta.rng;
    if (scaler && meta.has_grad_scaler && ct_grad_scaler_state_set(scaler, &meta.grad_scaler) != CT_OK) {
      fprintf(stderr, "%s: cannot resume the GradScaler: %s\n", prog, ct_last_error());
      goto done;
    }
    skip = saved_position(o.resume, start_epoch, o.batch);
    if (rank0) {
      if (skip) fprintf(stderr, "resumed from %s at epoch %lld, batch %lld\n", o.resume, (long long)start_epoch + 1, (long long)skip);
      else fprintf(stderr, "resumed from %s at epoch %lld\n", o.resume, (long long)start_epoch);
    }
  }
  if (world > 1) {
    /* after the resume, so that the broadcast of rank 0's parameters changes nothing */
    ddp = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = o.bucket_mb});
    if (!ddp) ct_cli_rank_abort("cannot set up data-parallel training (ct_ddp_new)");
    rs.flags = ct_from_host((int64_t[]){0, 0}, 1, (int64_t[]){2}, CT_I64, CT_DEVICE_CPU);
    if (!rs.flags) ct_cli_rank_abort("cannot allocate the stop flags");
  }
  if (ndevs > 1) { /* after the resume: the replicas copy the loaded parameters */
    dp = ct_data_parallel_new(m, ndevs, devs,
                              &(ct_data_parallel_opts){.loss = ct_cli_replica_loss, .loss_ctx = &dp_ctx,
                                                       .autocast = amp != CT_F32, .autocast_dtype = amp});
    if (!dp) {
      fprintf(stderr, "%s: cannot replicate the model over --devices: %s\n", prog, ct_last_error());
      goto done;
    }
  }
  ct_loader_opts lo = {.batch_size = o.batch, .shuffle = 1, .seed = o.seed, .num_workers = o.workers, .device = dev,
                       .rank = ct_dist_rank(), .world_size = world};
  loader = ct_loader_new(train, &lo);
  if (!loader || ct_loader_set_epoch(loader, start_epoch) != CT_OK) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    goto done;
  }
  if (rank0 && o.metrics && !(mf = fopen(o.metrics, "a"))) {
    fprintf(stderr, "cuttle: cannot open --metrics file %s\n", o.metrics);
    if (world > 1) ct_cli_rank_abort(NULL);
    goto done;
  }
  int64_t global_batch = o.batch * world * o.accumulate;
  if (rank0) {
    fprintf(stderr, "training %s on %s: %lld parameters, %s lr %g (%s), batch %lld, %d workers", o.model, devname,
            (long long)ct_module_num_params(m), o.optimizer, o.lr, o.schedule, (long long)o.batch, o.workers);
    if (dev.kind == CT_CPU) fprintf(stderr, ", %d thread%s", omp_get_max_threads(), omp_get_max_threads() == 1 ? "" : "s");
    if (world > 1 || o.accumulate > 1)
      fprintf(stderr, "\n  %d rank(s) x batch %lld per rank x %d accumulated = global batch %lld", world, (long long)o.batch,
              o.accumulate, (long long)global_batch);
    if (ddp) fprintf(stderr, ", %d gradient bucket(s) of %g MiB, timeout %g s", ct_ddp_num_buckets(ddp), o.bucket_mb, o.timeout);
    if (dp) fprintf(stderr, "\n  replicated on %d devices (%s), each batch split between them", ndevs, o.devices);
    if (amp != CT_F32) fprintf(stderr, "\n  mixed precision: autocast %s%s", ct_dtype_name(amp), scaler ? " with a GradScaler" : "");
    if (o.channels_last) fprintf(stderr, "\n  channels_last memory format");
    fprintf(stderr, "\n");
    if (amp != CT_F32) ct_cli_print_alignment(m, dev, o.batch, amp);
  }
  /* Where a stop by signal saves: --save, or a fixed name so that Ctrl-C never loses the run. */
  const char *stop_path = o.save ? o.save : "cuttle-interrupted.safetensors";
  int w = snprintf(doomed_tmp, sizeof doomed_tmp, "%s.tmp.%ld", stop_path, (long)getpid());
  if (w < 0 || (size_t)w >= sizeof doomed_tmp) doomed_tmp[0] = 0; /* never unlink a truncated name */
  if (ct_monitor_stats_path((int)getpid(), doomed_stats, sizeof doomed_stats) != CT_OK) doomed_stats[0] = 0;
  ct_clear_error();
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART}, old_int, old_term, old_usr1, old_usr2;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  if (launched) { /* what mpirun forwards at once (ranks.c) */
    sigaction(SIGUSR1, &sa, &old_usr1);
    sigaction(SIGUSR2, &sa, &old_usr2);
  }
  int64_t per_epoch = ct_dataset_len(train);
  status = 0;
  int64_t epoch = start_epoch;
  for (; epoch < o.epochs && status == 0; epoch++) {
    rs.epoch = epoch, rs.position = 0;
    ct_cli_epoch_stats es = {0};
    agree(&rs); /* a signal during the last evaluation or save */
    if (!stop_signal(&rs)) {
      ct_optimizer_set_lr(opt, ct_sched_lr(&sched, o.lr, (int)epoch));
      ct_cli_epoch_opts eo = {.interrupted = world > 1 ? &agreed : &interrupted, .progress = o.progress && rank0,
                              .epoch = (int)epoch + 1, .epochs = o.epochs, .per_epoch = per_epoch, .publish = 1,
                              .after_step = after_step, .ctx = &rs, .ddp = ddp, .accumulate = o.accumulate,
                              .skip = epoch == start_epoch ? skip : 0, .position = &rs.position, .world = world,
                              .global_batch = global_batch, .amp = amp, .scaler = scaler,
                              .channels_last = o.channels_last, .dp = dp, .dp_ctx = &dp_ctx};
      if (ct_cli_train_epoch(m, opt, loader, &eo, &es) != CT_OK) {
        if (world > 1) ct_cli_rank_abort(NULL); /* printed; the other ranks would wait in the next all-reduce */
        status = 1;
        break;
      }
    }
    int sig = stop_signal(&rs);
    if (sig || rs.hit_max_steps) {
      if (rank0 && sig)
        fprintf(stderr, "\n%s in epoch %lld after %lld images\n", sig == SIGTERM ? "terminated (SIGTERM)" : "interrupted",
                (long long)epoch + 1, (long long)(es.seen * world));
      else if (rank0)
        fprintf(stderr, "\nstopped after %lld steps (--max-steps) in epoch %lld\n", (long long)rs.steps, (long long)epoch + 1);
      /* The checkpoint records the position in the epoch, where a resume with the same ranks and
       * batch size continues. A stop right after an epoch's save (the signal came during the
       * evaluation) has nothing new to save. */
      const char *path = sig ? stop_path : o.save;
      int fresh = o.save && path == o.save && rs.saved_steps == ct_optimizer_steps(opt);
      if (path && !fresh && save_run(&rs, path, rs.position) != CT_OK) status = 1;
      break;
    }
    double secs = es.seconds, sums[2] = {es.loss_sum, (double)es.seen};
    if (world > 1) { /* the epoch's loss and images over all ranks */
      ct_tensor *t = ct_from_host(sums, 1, (int64_t[]){2}, CT_F64, CT_DEVICE_CPU);
      if (!t || ct_dist_all_reduce_sum(&t, 1) != CT_OK || ct_to_host(t, sums, sizeof sums, CT_F64) != CT_OK)
        ct_cli_rank_abort("summing the epoch's loss over the ranks failed");
      ct_tensor_free(t);
    }
    double loss_sum = sums[0], seen = sums[1];
    int64_t counts[2] = {0, 0};
    double acc = ct_cli_evaluate_counts(m, test, dev, o.workers, counts);
    if (acc < 0) {
      if (world > 1) ct_cli_rank_abort("evaluation failed");
      fprintf(stderr, "\ncuttle: evaluation failed: %s\n", ct_last_error());
      status = 1;
      break;
    }
    double ips = seen / secs, train_loss = seen ? loss_sum / seen : NAN;
    if (o.progress && rank0) fputc('\n', stderr);
    if (rank0) {
      printf("epoch %lld: train_loss %.4f  test_acc %.2f%%  %.0f images/s  %.1f s  (%s", (long long)epoch + 1, train_loss,
             100 * acc, ips, secs, devname);
      if (world > 1) printf(", %d ranks", world);
      printf(")\n");
      fflush(stdout);
    }
    if (mf) {
      fprintf(mf, "{\"epoch\": %lld, \"train_loss\": %.6f, \"test_acc\": %.6f, \"test_correct\": %lld, \"test_total\": %lld, "
                  "\"images_per_s\": %.1f, \"seconds\": %.3f, \"device\": \"%s\", \"batch\": %lld, \"batch_per_rank\": %lld, "
                  "\"world_size\": %d, \"accumulate\": %d, \"amp\": \"%s\", \"channels_last\": %s",
              (long long)epoch + 1, train_loss, acc, (long long)counts[0], (long long)counts[1], ips, secs, devname,
              (long long)global_batch, (long long)o.batch, world, o.accumulate, o.amp ? o.amp : "none",
              o.channels_last ? "true" : "false");
      if (scaler) /* pytorch#55585: what the scaler did, in total */
        fprintf(mf, ", \"grad_scale\": %g, \"steps_taken\": %lld, \"steps_skipped\": %lld",
                ct_grad_scaler_scale_value(scaler), (long long)ct_grad_scaler_steps_taken(scaler),
                (long long)ct_grad_scaler_steps_skipped(scaler));
      fprintf(mf, "}\n");
      fflush(mf);
    }
    rs.epoch = epoch + 1;
    if (o.save && save_run(&rs, o.save, 0) != CT_OK) status = 1;
  }
  /* A signal that cut the run short is the exit status (128 + its number, as a shell reports);
   * one that came after the last epoch changed nothing. */
  if (status == 0 && stop_signal(&rs) && epoch < o.epochs) status = 128 + stop_signal(&rs);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (launched) {
    sigaction(SIGUSR1, &old_usr1, NULL);
    sigaction(SIGUSR2, &old_usr2, NULL);
  }
  ct_monitor_unpublish();
done:
  if (status == 1 && world > 1) ct_cli_rank_abort(NULL); /* said why above; the others would wait */
  if (mf) fclose(mf);
  ct_tensor_free(rs.flags);
  ct_ddp_free(ddp);
  ct_data_parallel_free(dp);
  ct_grad_scaler_free(scaler);
  ct_loader_free(loader);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_dataset_free(train);
  ct_dataset_free(test);
  /* Every rank gets here at the same point (a failure that could strand the others left at once),
   * so the barrier of ct_dist_finalize does not wait on a lost rank. */
  if (launched && ct_dist_finalize() != CT_OK) {
    fprintf(stderr, "%s: leaving the job failed: %s\n", prog, ct_last_error());
    if (!status) status = 1;
  }
  return status;
early:
  free(orig);
  return status;
}

int ct_cmd_eval(int argc, char **argv) {
  const char *checkpoint = NULL, *model = "cnn", *device = "auto", *data_dir = NULL;
  double timeout = 60;
  static const struct option longopts[] = {{"checkpoint", 1, 0, 'c'}, {"model", 1, 0, 'm'}, {"device", 1, 0, 'd'},
                                           {"data-dir", 1, 0, 'D'},   {"timeout", 1, 0, 'T'}, {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case 'c': checkpoint = optarg; break;
      case 'm': model = optarg; break;
      case 'd': device = optarg; break;
      case 'D': data_dir = optarg; break;
      case 'T': timeout = atof(optarg); break;
      default:
        fprintf(c == 'h' ? stdout : stderr,
                "usage: cuttle eval --checkpoint FILE [--model mlp|cnn] [--device auto|cpu|cuda:N|opencl:N] [--data-dir DIR]\n"
                "                   [--timeout S]\n"
                "Under mpirun (mpirun -np N cuttle eval ...) each rank evaluates its shard of the test set and the\n"
                "correct counts are summed over the ranks: the accuracy is exact, the one a single process reports.\n");
        return c == 'h' ? 0 : 2;
    }
  }
  if (!checkpoint) {
    fprintf(stderr, "cuttle eval: --checkpoint FILE is required\n");
    return 2;
  }
  if (!(timeout > 0)) {
    fprintf(stderr, "cuttle eval: --timeout must be > 0\n");
    return 2;
  }
  int launched = ct_cli_under_launcher();
  if (launched && ct_cli_rank_init("cuttle eval", timeout) != 0) return 1;
  ct_device dev;
  if (ct_cli_rank_device("cuttle eval", device, &dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
    if (ct_dist_world_size() > 1) ct_cli_rank_abort(NULL);
    return 2;
  }
  ct_module *m = ct_model_new(model, dev, NULL);
  ct_dataset *test = m ? ct_fashion_mnist_load(data_dir, CT_SPLIT_TEST) : NULL;
  int status = 1;
  /* In a job every rank must reach the sum in ct_cli_evaluate_counts, so a rank whose own part
   * failed leaves at once and mpirun ends the others. */
  if (!test || ct_checkpoint_load(checkpoint, m, NULL, NULL) != CT_OK) {
    if (ct_dist_world_size() > 1) ct_cli_rank_abort("cuttle eval");
  } else {
    int64_t counts[2];
    double acc = ct_cli_evaluate_counts(m, test, dev, 2, counts);
    if (acc < 0 && ct_dist_world_size() > 1) ct_cli_rank_abort("cuttle eval: the evaluation failed");
    if (acc >= 0) {
      char name[32];
      if (ct_dist_rank() == 0) {
        printf("test_acc %.2f%% (%lld images, %s, %s; %lld correct", 100 * acc, (long long)counts[1], model,
               ct_device_str(dev, name, sizeof name), (long long)counts[0]);
        if (ct_dist_world_size() > 1) printf(", %d ranks", ct_dist_world_size());
        printf(")\n");
      }
      status = 0;
    }
  }
  if (status) fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
  ct_dataset_free(test);
  ct_module_free(m);
  if (launched && ct_dist_finalize() != CT_OK && !status) {
    fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
    status = 1;
  }
  return status;
}
