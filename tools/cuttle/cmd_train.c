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
#include "tensorboard_log.h"
#include "graph_step.h"
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

/* ---- options -> the run's configuration */

/* What parse_options and check_options return when the command goes on. */
enum { GO_ON = -1 };

/* Everything `cuttle train` was told: the options as given, then what check_options read from
 * them. */
typedef struct {
  const char *model, *device, *optimizer, *schedule, *save, *resume, *metrics;
  double weight_decay; /* --weight-decay: torch.optim's weight_decay (0: AdamW's default, 1e-2) */
  const char *amp, *devices, *tensorboard, *profile, *profile_trace;
  int epochs, workers, progress, nproc, accumulate, channels_last;
  int cuda_graph; /* --cuda-graph (graph_step.h) */
  int64_t batch, max_steps, save_every, tb_every;
  double lr, bucket_mb, timeout;
  uint64_t seed;
  ct_dtype amp_dtype;                 /* --amp: CT_BF16, CT_F16, or CT_F32 without it */
  ct_profile_mode profile_mode;       /* --profile: CT_PROFILE_HOST or _SYNC, or CT_PROFILE_OFF */
  ct_optim_opts optim;                /* --optimizer and --lr */
  ct_sched_opts sched;                /* --schedule over --epochs */
  ct_device devs[CT_CLI_MAX_DEVICES]; /* --devices: ndevs of them, 0 without it */
  int ndevs;
  int launched; /* this process is one rank of a job a launcher (mpirun) started */
  ct_cli_data_opts data; /* --data, --data-dir, --augment, --val-split, --image-size, --gray, ... */
} train_config;

/* The data options both commands take, as getopt_long entries (their letters are the ones
 * data_option reads). */
#define DATA_LONGOPTS                                                                                       \
  {"data", 1, 0, 'Z'}, {"data-dir", 1, 0, 'D'}, {"augment", 0, 0, 'U'}, {"val-split", 1, 0, 'v'},          \
      {"image-size", 1, 0, 'I'}, {"gray", 0, 0, 'Y'}, {"skip-bad-images", 0, 0, 'K'}, {"normalize", 1, 0, 'N'}

/* One of DATA_LONGOPTS into *d: 1, or 0 when ch is not one of them. */
static int data_option(int ch, ct_cli_data_opts *d) {
  switch (ch) {
    case 'Z': d->data = optarg; return 1;
    case 'D': d->data_dir = optarg; return 1;
    case 'U': d->augment = 1; return 1;
    case 'v': d->val_split = atof(optarg); return 1;
    case 'I': d->image_size = optarg; return 1;
    case 'Y': d->gray = 1; return 1;
    case 'K': d->skip_bad = 1; return 1;
    case 'N': d->normalize = optarg; return 1;
    default: return 0;
  }
}

#define DATA_HELP                                                                                           \
  "--data fashion-mnist|cifar10:DIR|cifar100:DIR|imagefolder:DIR  the data set (default fashion-mnist, read\n" \
  "                  from --data-dir DIR or the installed copy): CIFAR's binary files (data_batch_*.bin and\n"   \
  "                  test_batch.bin; train.bin and test.bin, fine labels), or DIR/<class>/*.png|jpg, read from\n" \
  "                  DIR/train and DIR/val (or DIR/test) when they exist; the model takes the data's\n"         \
  "                  channels, image size and classes\n"                                                         \
  "--val-split F     imagefolder without train/ and val/: the fraction F of the images held out for testing,\n" \
  "                  drawn with --seed (pass the same --val-split and --seed to cuttle eval)\n"                  \
  "--image-size H[,W] imagefolder: resize the shorter side to min(H, W), then center-crop to H x W (default:\n" \
  "                  every image must have the first one's size)\n"                                             \
  "--gray            imagefolder: decode to 1 channel (grayscale; default RGB, 3 channels)\n"                    \
  "--skip-bad-images imagefolder: leave out (and count) an image that does not decode, instead of failing\n"   \
  "--normalize M/S   torchvision's Normalize(mean, std) after ToTensor, replacing the data set's own\n"           \
  "                  (Fashion-MNIST 0.2860/0.3530, CIFAR's published per-channel values; an image folder has\n" \
  "                  none: pixel / 255); in each list one value for every channel or one per channel, e.g.\n"   \
  "                  0.485,0.456,0.406/0.229,0.224,0.225; give eval and --resume the same (a checkpoint\n"   \
  "                  records --normalize, --gray and --image-size, and a run given others warns)\n"

static int usage_train(FILE *f) {
  fprintf(f, "usage: cuttle train [--model mlp|cnn|resnet18|resnet34|resnet50] [--device auto|cpu|cuda:N|opencl:N] [--epochs N] [--batch-size N]\n"
             "                    [--lr X] [--optimizer adam|adamw|sgd] [--weight-decay X] [--workers N] [--seed N]\n"
             "                    [--data-dir DIR] [--data fashion-mnist|cifar10:DIR|cifar100:DIR|imagefolder:DIR] [--augment]\n"
             "                    [--val-split F] [--image-size H[,W]] [--gray] [--skip-bad-images] [--normalize M/S]\n"
             "                    [--schedule constant|step|cosine] [--save FILE] [--save-every N] [--resume FILE]\n"
             "                    [--max-steps N] [--metrics FILE] [--no-progress] [--accumulate K]\n"
             "                    [--nproc N] [--bucket-mb X] [--timeout S] [--amp bf16|f16] [--channels-last]\n"
             "                    [--devices D0,D1,...] [--tensorboard DIR] [--tensorboard-every N]\n"
             "                    [--profile host|sync] [--profile-trace FILE]\n"
             "defaults: --model cnn --device auto --epochs 5 --batch-size 128 --lr 1e-3 --optimizer adam\n"
             "          --schedule cosine --workers 2 --seed 0 --accumulate 1 --bucket-mb 25 --timeout 60\n"
             "--model NAME      mlp, cnn (cuttle's recipes), or torchvision's resnet18, resnet34, resnet50 (state_dict\n"
             "                  keys as torchvision's; in_channels and num_classes from the data); NAME-small, e.g.\n"
             "                  resnet18-small: the 3x3 stride-1 stem without max-pool, for 28x28 and 32x32 images\n"
             DATA_HELP
             "--optimizer       adam, adamw or sgd (momentum 0.9), as torch.optim's\n"
             "--weight-decay X  torch.optim's weight_decay: L2 added to the gradient for adam and sgd (default 0),\n"
             "                  decoupled for adamw (default 1e-2)\n"
             "--augment         train split: RandomCrop(image size, padding=4) and RandomHorizontalFlip(0.5)\n"
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
             "--cuda-graph      capture the training step once in a CUDA graph and replay it for every batch (after\n"
             "                  3 eager steps; the epoch's last, smaller batch runs eagerly; a new --schedule lr\n"
             "                  captures again): one launch a step instead of a hundred, for small networks bound\n"
             "                  by the host. The optimizer runs capturable (its step count on the GPU). Not with\n"
             "                  --amp f16, --accumulate, --devices, several ranks or --profile sync\n"
             "--tensorboard DIR log the run for `tensorboard --logdir DIR` (an event file in DIR, rank 0's), with the\n"
             "                  optimizer step as x axis: every N steps train/loss, images_per_s, lr (and with --amp\n"
             "                  f16 amp/scale, amp/skipped_steps); each epoch train/loss_epoch, images_per_s_epoch,\n"
             "                  test/accuracy, test/loss, epoch (its --metrics values); the options as text. A\n"
             "                  --resume'd run continues the steps and drops what the interrupted run logged after\n"
             "                  the checkpoint (SummaryWriter's purge_step); a write error mid-run is reported\n"
             "                  and the run goes on unlogged\n"
             "--tensorboard-every N  the per-step scalars every N optimizer steps (default 10)\n"
             "--profile host|sync  time every kernel call and host<->device copy of the training steps after the\n"
             "                  first (the warm-up) and print their self times per kernel, op and device at the\n"
             "                  end (cuttle/profiler.h): host = the host's time in each call (on a GPU the\n"
             "                  launch), sync = each call waited for (its execution too; slower steps); beside\n"
             "                  the wall time per step, so that what the device's rows leave of a step is the\n"
             "                  front-end's, autograd's and the wait for the loader\n"
             "--profile-trace FILE  with --profile, also write every profiled call to FILE as a Chrome trace (a\n"
             "                  timeline for chrome://tracing or ui.perfetto.dev, as torch.profiler's\n"
             "                  export_chrome_trace; at most a million calls)\n"
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

/* Read argv into *c, over the defaults. Returns GO_ON, or the exit status after --help (0) or a
 * usage error (2, said). */
static int parse_options(int argc, char **argv, train_config *c) {
  *c = (train_config){.model = "cnn", .device = "auto", .optimizer = "adam", .schedule = "cosine", .epochs = 5,
                      .workers = 2, .batch = 128, .lr = 1e-3, .progress = 1, .accumulate = 1, .bucket_mb = 25,
                      .timeout = 60};
  static const struct option longopts[] = {
      {"model", 1, 0, 'm'},   {"device", 1, 0, 'd'},  {"epochs", 1, 0, 'e'},  {"batch-size", 1, 0, 'b'},
      {"lr", 1, 0, 'l'},      {"optimizer", 1, 0, 'o'}, {"workers", 1, 0, 'w'}, {"seed", 1, 0, 's'},
      DATA_LONGOPTS, {"save", 1, 0, 'S'},   {"resume", 1, 0, 'r'},  {"metrics", 1, 0, 'M'},
      {"no-progress", 0, 0, 'P'}, {"schedule", 1, 0, 'L'}, {"max-steps", 1, 0, 'x'}, {"save-every", 1, 0, 'E'},
      {"nproc", 1, 0, 'n'}, {"accumulate", 1, 0, 'A'}, {"bucket-mb", 1, 0, 'B'}, {"timeout", 1, 0, 'T'},
      {"amp", 1, 0, 'a'}, {"channels-last", 0, 0, 'C'}, {"devices", 1, 0, 'V'}, {"tensorboard", 1, 0, 'G'},
      {"tensorboard-every", 1, 0, 'g'}, {"weight-decay", 1, 0, 'W'}, {"profile", 1, 0, 'p'}, {"profile-trace", 1, 0, 'q'},
      {"cuda-graph", 0, 0, 'j'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (ch) {
      case 'm': c->model = optarg; break;
      case 'd': c->device = optarg; break;
      case 'e': c->epochs = atoi(optarg); break;
      case 'b': c->batch = atoll(optarg); break;
      case 'l': c->lr = atof(optarg); break;
      case 'W':
        c->weight_decay = atof(optarg);
        if (!(c->weight_decay >= 0)) { /* NaN too */
          fprintf(stderr, "cuttle: --weight-decay must be >= 0, not %s\n", optarg);
          return 2;
        }
        break;
      case 'o': c->optimizer = optarg; break;
      case 'w': c->workers = atoi(optarg); break;
      case 's': c->seed = strtoull(optarg, NULL, 10); break;
      case 'S': c->save = optarg; break;
      case 'r': c->resume = optarg; break;
      case 'M': c->metrics = optarg; break;
      case 'P': c->progress = 0; break;
      case 'L': c->schedule = optarg; break;
      case 'x': c->max_steps = atoll(optarg); break;
      case 'E': c->save_every = atoll(optarg); break;
      case 'n': c->nproc = atoi(optarg); break;
      case 'A': c->accumulate = atoi(optarg); break;
      case 'B': c->bucket_mb = atof(optarg); break;
      case 'T': c->timeout = atof(optarg); break;
      case 'a': c->amp = optarg; break;
      case 'C': c->channels_last = 1; break;
      case 'j': c->cuda_graph = 1; break;
      case 'V': c->devices = optarg; break;
      case 'G': c->tensorboard = optarg; break;
      case 'p': c->profile = optarg; break;
      case 'q': c->profile_trace = optarg; break;
      case 'g': c->tb_every = atoll(optarg) > 0 ? atoll(optarg) : -1; break; /* 0 means "not given" */
      case 'h': return usage_train(stdout);
      default:
        if (!data_option(ch, &c->data)) return usage_train(stderr);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cuttle train: unexpected argument \"%s\"\n", argv[optind]);
    return usage_train(stderr);
  }
  return GO_ON;
}

/* --amp, --devices, --optimizer and --schedule, read from their names. GO_ON, or 2 after saying
 * why. */
static int read_choices(train_config *c) {
  c->amp_dtype = CT_F32;
  if (c->amp && strcmp(c->amp, "bf16") == 0) c->amp_dtype = CT_BF16;
  else if (c->amp && strcmp(c->amp, "f16") == 0) c->amp_dtype = CT_F16;
  else if (c->amp) {
    fprintf(stderr, "cuttle: unknown --amp \"%s\": use bf16 (no scaler needed) or f16 (with a GradScaler)\n", c->amp);
    return 2;
  }
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
  else if (c->profile) {
    fprintf(stderr, "cuttle: unknown --profile \"%s\": use host (the host's time in each kernel call) or sync "
                    "(each call waited for)\n", c->profile);
    return 2;
  }
  if (c->profile_trace && !c->profile) {
    fprintf(stderr, "cuttle: --profile-trace needs --profile host|sync (the trace holds the profiled calls)\n");
    return 2;
  }
  c->optim = (ct_optim_opts){.lr = c->lr, .weight_decay = c->weight_decay};
  if (strcmp(c->optimizer, "adam") == 0) c->optim.kind = CT_OPTIM_ADAM;
  else if (strcmp(c->optimizer, "adamw") == 0) c->optim.kind = CT_OPTIM_ADAMW;
  else if (strcmp(c->optimizer, "sgd") == 0) c->optim.kind = CT_OPTIM_SGD, c->optim.momentum = 0.9;
  else {
    fprintf(stderr, "cuttle: unknown optimizer \"%s\": use adam, adamw or sgd\n", c->optimizer);
    return 2;
  }
  /* the learning rate of each epoch, in closed form, so a resumed run continues the same curve */
  c->sched = (ct_sched_opts){.kind = CT_SCHED_CONSTANT, .step_size = 2, .gamma = 0.5, .t_max = c->epochs};
  if (strcmp(c->schedule, "step") == 0) c->sched.kind = CT_SCHED_STEP;
  else if (strcmp(c->schedule, "cosine") == 0) c->sched.kind = CT_SCHED_COSINE;
  else if (strcmp(c->schedule, "constant") != 0) {
    fprintf(stderr, "cuttle: unknown schedule \"%s\": use constant, step (halve every 2 epochs) or cosine\n", c->schedule);
    return 2;
  }
  return GO_ON;
}

/* The numbers' ranges, then the choices. GO_ON, or 2 after saying why. */
static int check_options(train_config *c) {
  if (c->epochs < 1 || c->batch < 1 || c->workers < 0 || !(c->lr > 0) || c->max_steps < 0 || c->save_every < 0) {
    fprintf(stderr, "cuttle: --epochs, --batch-size must be >= 1, --workers, --max-steps, --save-every >= 0 and --lr > 0\n");
    return 2;
  }
  if (c->accumulate < 1 || c->nproc < 0 || !(c->bucket_mb > 0) || !(c->timeout > 0) || isinf(c->bucket_mb) ||
      isinf(c->timeout)) {
    fprintf(stderr, "cuttle: --accumulate and --nproc must be >= 1, --bucket-mb and --timeout finite numbers > 0\n");
    return 2;
  }
  if (c->save_every && !c->save) {
    fprintf(stderr, "cuttle: --save-every needs --save FILE\n");
    return 2;
  }
  if (c->tb_every < 0 || (c->tb_every && !c->tensorboard) || (c->tensorboard && !*c->tensorboard)) {
    fprintf(stderr, "cuttle: --tensorboard-every N needs --tensorboard DIR and N >= 1; DIR must not be empty\n");
    return 2;
  }
  if (!c->tb_every) c->tb_every = 10;
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

static ct_status save(const char *path, ct_module *m, ct_optimizer *o, int64_t epoch, int64_t position,
                      int64_t batch, ct_generator *gen, ct_grad_scaler *scaler, const ct_cli_data_opts *data) {
  char pos[32], world[32], bs[32], transform[512];
  ct_cli_data_transform(data, transform, sizeof transform);
  snprintf(pos, sizeof pos, "%lld", (long long)position);
  snprintf(world, sizeof world, "%d", ct_dist_world_size());
  snprintf(bs, sizeof bs, "%lld", (long long)batch);
  ct_metadata_kv extra[] = {{POS_KEY, pos}, {WORLD_KEY, world}, {BATCH_KEY, bs}, {CT_CLI_TRANSFORM_KEY, transform}};
  ct_checkpoint_meta meta = {.epoch = epoch, .rng = *gen, .n_extra = 4, .extra = extra};
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
  const char *stop_path;    /* where a stop by signal saves */
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

static ct_status save_run(train_run *r, const char *path, int64_t position) {
  if (!r->rank0) return CT_OK; /* only rank 0 writes */
  ct_status s = save(path, r->m, r->opt, r->epoch, position, r->c->batch, &r->gen, r->scaler, &r->c->data);
  if (s == CT_OK && r->c->save && strcmp(path, r->c->save) == 0) r->saved_steps = ct_optimizer_steps(r->opt);
  if (s != CT_OK && r->world > 1) ct_cli_rank_abort(NULL); /* save() said why; the others would wait */
  return s;
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

static int after_step(void *ctx) {
  train_run *r = ctx;
  r->steps++;
  profile_on(r);
  ct_cli_tb_step(r->tb, global_step(r), &r->running, ct_optimizer_lr(r->opt), r->scaler);
  agree(r);
  if (r->c->max_steps && r->steps >= r->c->max_steps) {
    r->hit_max_steps = 1;
    return 1; /* the stop path saves */
  }
  /* After a signal the loop stops at once and the stop path saves; saving here too would only
   * delay the exit the scheduler is waiting for. */
  if (r->c->save_every && r->steps % r->c->save_every == 0 && !stop_signal(r)) {
    ct_status s = save_run(r, r->c->save, r->position);
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
  if (!c->tensorboard || !r->rank0) return 0;
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
      {"resume", c->resume ? c->resume : "-"}, {"save", c->save ? c->save : "-"},
      {"data", c->data.data ? c->data.data : "fashion-mnist"}, {"augment", c->data.augment ? "yes" : "no"},
      {"data-dir", c->data.data_dir ? c->data.data_dir : "(default)"}};
  int64_t start = global_step(r);
  ct_cli_tb_opts o = {.dir = c->tensorboard, .every = c->tb_every, .start_step = start, .purge_step = start ? start + 1 : 0,
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
  /* Where a stop by signal saves: --save, or a fixed name so that Ctrl-C never loses the run. */
  r->stop_path = r->c->save ? r->c->save : "cuttle-interrupted.safetensors";
  int w = snprintf(doomed_tmp, sizeof doomed_tmp, "%s.tmp.%ld", r->stop_path, (long)getpid());
  if (w < 0 || (size_t)w >= sizeof doomed_tmp) doomed_tmp[0] = 0; /* never unlink a truncated name */
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
  const train_config *c = r->c;
  if (r->rank0 && sig)
    fprintf(stderr, "\n%s in epoch %lld after %lld images\n", sig == SIGTERM ? "terminated (SIGTERM)" : "interrupted",
            (long long)epoch + 1, (long long)(es->seen * r->world));
  else if (r->rank0)
    fprintf(stderr, "\nstopped after %lld steps (--max-steps) in epoch %lld\n", (long long)r->steps, (long long)epoch + 1);
  /* What --tensorboard holds goes to its file first, so that a second signal during the save
   * loses none of it. */
  ct_cli_tb_close(r->tb);
  /* The checkpoint records the position in the epoch, where a resume with the same ranks and
   * batch size continues. A stop right after an epoch's save (the signal came during the
   * evaluation) has nothing new to save. */
  const char *path = sig ? r->stop_path : c->save;
  int fresh = c->save && path == c->save && r->saved_steps == ct_optimizer_steps(r->opt);
  return path && !fresh && save_run(r, path, r->position) != CT_OK;
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
  if (c->progress && r->rank0) fputc('\n', stderr);
  if (r->rank0) {
    printf("epoch %lld: train_loss %.4f  test_acc %.2f%%  %.0f images/s  %.1f s  (%s", (long long)epoch + 1, e->train_loss,
           100 * e->acc, e->ips, e->secs, r->devname);
    if (r->world > 1) printf(", %d ranks", r->world);
    printf(")\n");
    fflush(stdout);
  }
  if (!r->mf) return;
  fprintf(r->mf, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.6f, \"test_acc\": %.6f, \"test_loss\": %.6f, "
                 "\"test_correct\": %lld, \"test_total\": %lld, \"images_per_s\": %.1f, \"seconds\": %.3f, \"device\": \"%s\", "
                 "\"batch\": %lld, \"batch_per_rank\": %lld, \"world_size\": %d, \"accumulate\": %d, \"amp\": \"%s\", "
                 "\"channels_last\": %s",
          (long long)epoch + 1, (long long)e->step, e->train_loss, e->acc, e->test_loss, (long long)e->counts[0],
          (long long)e->counts[1], e->ips, e->secs, r->devname, (long long)r->global_batch, (long long)c->batch, r->world, c->accumulate, c->amp ? c->amp : "none",
          c->channels_last ? "true" : "false");
  if (r->scaler) /* pytorch#55585: what the scaler did, in total */
    fprintf(r->mf, ", \"grad_scale\": %g, \"steps_taken\": %lld, \"steps_skipped\": %lld",
            ct_grad_scaler_scale_value(r->scaler), (long long)ct_grad_scaler_steps_taken(r->scaler),
            (long long)ct_grad_scaler_steps_skipped(r->scaler));
  fprintf(r->mf, "}\n");
  fflush(r->mf);
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
  return r->c->save && save_run(r, r->c->save, 0) != CT_OK;
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

int ct_cmd_train(int argc, char **argv) {
  /* --nproc passes the command line on to the ranks as the user wrote it, before getopt_long
   * reorders argv. */
  char **orig = malloc(((size_t)argc + 1) * sizeof *orig);
  if (!orig) {
    fprintf(stderr, "cuttle: out of memory\n");
    return 1;
  }
  memcpy(orig, argv, ((size_t)argc + 1) * sizeof *orig);
  train_config c;
  int status = parse_options(argc, argv, &c);
  if (status == GO_ON) status = check_options(&c);
  if (status == GO_ON) status = launch(&c, argc, orig);
  free(orig);
  if (status != GO_ON) return status;
  train_run r = {.c = &c, .saved_steps = -1, .step_base = -1, .dp_ctx = {.group = 1, .scale = 1.0}};
  status = open_device_and_data(&r);
  if (status != GO_ON) return status;
  status = setup(&r);
  if (status == 0) status = run_epochs(&r);
  if (status == 0 || status > 128) profile_report(&r);
  return finish(&r, status);
}

/* ---- cuttle eval */

typedef struct {
  const char *checkpoint, *model, *device;
  double timeout;
  ct_cli_data_opts data; /* the test split of --data (--augment is refused: it is for training) */
} eval_config;

/* Read argv into *c, over the defaults, and check it. GO_ON, or the exit status after --help (0)
 * or a usage error (2, said). */
static int parse_eval_options(int argc, char **argv, eval_config *c) {
  *c = (eval_config){.model = "cnn", .device = "auto", .timeout = 60};
  static const struct option longopts[] = {{"checkpoint", 1, 0, 'c'}, {"model", 1, 0, 'm'}, {"device", 1, 0, 'd'},
                                           DATA_LONGOPTS, {"seed", 1, 0, 's'}, {"timeout", 1, 0, 'T'},
                                           {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (ch) {
      case 'c': c->checkpoint = optarg; break;
      case 'm': c->model = optarg; break;
      case 'd': c->device = optarg; break;
      case 'T': c->timeout = atof(optarg); break;
      case 's': c->data.seed = strtoull(optarg, NULL, 10); break;
      default:
        if (data_option(ch, &c->data)) break;
        fprintf(ch == 'h' ? stdout : stderr,
                "usage: cuttle eval --checkpoint FILE [--model mlp|cnn|resnet18|resnet34|resnet50] [--device auto|cpu|cuda:N|opencl:N] [--data-dir DIR]\n"
                "                   [--data fashion-mnist|cifar10:DIR|cifar100:DIR|imagefolder:DIR] [--val-split F]\n"
                "                   [--seed N] [--image-size H[,W]] [--gray] [--skip-bad-images] [--normalize M/S]\n"
                "                   [--timeout S]\n"
                "Evaluates on the test split (DIR/val or DIR/test, or --val-split's share drawn with --seed) with\n"
                "the data options the model was trained with.\n"
                DATA_HELP
                "Under mpirun (mpirun -np N cuttle eval ...) each rank evaluates its shard of the test set and the\n"
                "correct counts are summed over the ranks: the accuracy is exact, the one a single process reports.\n");
        return ch == 'h' ? 0 : 2;
    }
  }
  if (!c->checkpoint) {
    fprintf(stderr, "cuttle eval: --checkpoint FILE is required\n");
    return 2;
  }
  if (!(c->timeout > 0)) {
    fprintf(stderr, "cuttle eval: --timeout must be > 0\n");
    return 2;
  }
  if (c->data.augment) {
    fprintf(stderr, "cuttle eval: --augment is for training; the test split is never augmented\n");
    return 2;
  }
  if (ct_cli_data_check("cuttle eval", &c->data)) return 2;
  return GO_ON;
}

int ct_cmd_eval(int argc, char **argv) {
  eval_config c;
  int parsed = parse_eval_options(argc, argv, &c);
  if (parsed != GO_ON) return parsed;
  int launched = ct_cli_under_launcher();
  if (launched && ct_cli_rank_init("cuttle eval", c.timeout) != 0) return 1;
  ct_device dev;
  if (ct_cli_rank_device("cuttle eval", c.device, &dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
    if (ct_dist_world_size() > 1) ct_cli_rank_abort(NULL);
    return 2;
  }
  ct_dataset *test = ct_cli_data_open("cuttle eval", &c.data, CT_SPLIT_TEST);
  ct_module *m = test ? ct_cli_model_for("cuttle eval", c.model, test, dev, NULL) : NULL;
  int status = 1;
  /* In a job every rank must reach the sum in ct_cli_evaluate_counts, so a rank whose own part
   * failed leaves at once and mpirun ends the others. */
  if (!m || ct_checkpoint_load(c.checkpoint, m, NULL, NULL) != CT_OK) {
    if (ct_dist_world_size() > 1) ct_cli_rank_abort("cuttle eval");
  } else {
    ct_safetensors *f = ct_dist_rank() == 0 ? ct_safetensors_open(c.checkpoint) : NULL;
    if (!f) ct_clear_error();
    ct_cli_data_compare_saved("cuttle eval", &c.data, f, c.checkpoint);
    ct_safetensors_close(f);
    int64_t counts[2];
    double acc = ct_cli_evaluate_counts(m, test, dev, 2, counts);
    if (acc < 0 && ct_dist_world_size() > 1) ct_cli_rank_abort("cuttle eval: the evaluation failed");
    if (acc >= 0) {
      char name[32];
      if (ct_dist_rank() == 0) {
        printf("test_acc %.2f%% (%lld images, %s, %s; %lld correct", 100 * acc, (long long)counts[1], c.model,
               ct_device_str(dev, name, sizeof name), (long long)counts[0]);
        if (ct_dist_world_size() > 1) printf(", %d ranks", ct_dist_world_size());
        printf(")\n");
      }
      status = 0;
    }
  }
  if (status && m) fprintf(stderr, "cuttle eval: %s\n", ct_last_error()); /* without m: said above */
  ct_dataset_free(test);
  ct_module_free(m);
  if (launched && ct_dist_finalize() != CT_OK && !status) {
    fprintf(stderr, "cuttle eval: %s\n", ct_last_error());
    status = 1;
  }
  return status;
}
