/* tools/cuttle/run_options.c: every option of `cuttle train` and `cuttle eval`, declared once
 * (options.h): the parser, both commands' --help and the README's option lists come from this
 * table (tests/cli/test_cli_options.c checks that the README agrees). */
#include <stddef.h>
#include <string.h>
#include "run_config.h"

/* An entry without a choices list leaves it out (NULL): said once here, not on every line. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define T CT_OPT_TRAIN
#define E CT_OPT_EVAL
#define R CT_OPT_RECIPE
#define M CT_OPT_MODEL
#define D CT_OPT_DATA
#define AT(f) offsetof(ct_cli_run_config, f)
#define NONE 1, 0 /* no range: min > max */
#define BIG 9.2e18

static const char *const models[] = {"mlp", "cnn", "resnet18", "resnet34", "resnet50", "resnet18-small",
                                     "resnet34-small", "resnet50-small", NULL};
static const char *const optimizers[] = {"adam", "adamw", "sgd", NULL};
static const char *const schedules[] = {"constant", "step", "cosine", NULL};
static const char *const amps[] = {"bf16", "f16", NULL};
static const char *const profiles[] = {"host", "sync", NULL};

const ct_cli_opt ct_cli_run_options[] = {
    {"model", CT_OPT_STR, AT(model), "NAME", NONE, T | E | R | M,
     "mlp, cnn (cuttle's recipes), or torchvision's resnet18, resnet34, resnet50 (state_dict keys as\n"
     "torchvision's; in_channels and num_classes from the data); NAME-small, e.g. resnet18-small: the 3x3\n"
     "stride-1 stem without max-pool, for 28x28 and 32x32 images. eval: taken from the checkpoint",
     models},
    {"checkpoint", CT_OPT_STR, AT(checkpoint), "FILE", NONE, E,
     "the checkpoint to evaluate (required); its recorded recipe gives the model and the data options,\n"
     "which options given here override (each override is noted)"},
    {"device", CT_OPT_STR, AT(device), "D", NONE, T | E, "auto (the best device present), cpu, cuda:N or opencl:N"},
    {"epochs", CT_OPT_INT, AT(epochs), "N", 1, 1e9, T | R, "epochs to train"},
    {"batch-size", CT_OPT_I64, AT(batch), "N", 1, BIG, T | R, "images per batch (per rank in a job)"},
    {"lr", CT_OPT_F64, AT(lr), "X", 0, 1e300, T | R | CT_OPT_GT, "the learning rate (a finite number > 0)"},
    {"optimizer", CT_OPT_STR, AT(optimizer), "NAME", NONE, T | R, "adam, adamw or sgd (momentum 0.9), as torch.optim's",
     optimizers},
    {"weight-decay", CT_OPT_F64, AT(weight_decay), "X", 0, 1e300, T | R,
     "torch.optim's weight_decay: L2 added to the gradient for adam and sgd (default 0), decoupled for\n"
     "adamw (default 1e-2)"},
    {"schedule", CT_OPT_STR, AT(schedule), "NAME", NONE, T | R,
     "the learning rate over the epochs: constant, step (halve every 2 epochs) or cosine", schedules},
    {"workers", CT_OPT_INT, AT(workers), "N", 0, 1024, T | R, "data loader threads (0: the training thread loads)"},
    {"seed", CT_OPT_U64, AT(seed), "N", NONE, T | E | R | D,
     "seeds the model's initialization, the shuffling, --augment and the --val-split draw"},
    {"data", CT_OPT_STR, AT(data.data), "SPEC", NONE, T | E | R | D,
     "fashion-mnist (default; read from --data-dir DIR or the installed copy), cifar10:DIR, cifar100:DIR\n"
     "(CIFAR's binary files: data_batch_*.bin and test_batch.bin; train.bin and test.bin, fine labels), or\n"
     "imagefolder:DIR (DIR/<class>/*.png|jpg, read from DIR/train and DIR/val (or DIR/test) when they\n"
     "exist); the model takes the data's channels, image size and classes"},
    {"data-dir", CT_OPT_STR, AT(data.data_dir), "DIR", NONE, T | E | R | D, "Fashion-MNIST's folder of IDX files"},
    {"val-split", CT_OPT_F64, AT(data.val_split), "F", 0, 1, T | E | R | D,
     "imagefolder without train/ and val/: the fraction F in [0, 1) of the images held out for testing,\n"
     "drawn with --seed (torch.utils.data.random_split); eval takes both from the checkpoint and refuses\n"
     "a split that would score images the model trained on"},
    {"image-size", CT_OPT_STR, AT(data.image_size), "H[,W]", NONE, T | E | R | D,
     "imagefolder: resize the shorter side to min(H, W), then center-crop to H x W (default: every image\n"
     "must have the first one's size)"},
    {"gray", CT_OPT_FLAG, AT(data.gray), NULL, NONE, T | E | R | D,
     "imagefolder: decode to 1 channel (grayscale; default RGB, 3 channels)"},
    {"skip-bad-images", CT_OPT_FLAG, AT(data.skip_bad), NULL, NONE, T | E | R | D,
     "imagefolder: leave out (and count) an image that does not decode, instead of failing"},
    {"normalize", CT_OPT_STR, AT(data.normalize), "M/S", NONE, T | E | R | D,
     "torchvision's Normalize(mean, std) after ToTensor, replacing the data set's own (Fashion-MNIST\n"
     "0.2860/0.3530, CIFAR's published per-channel values; an image folder has none: pixel / 255); in each\n"
     "list one value for every channel or one per channel, e.g. 0.485,0.456,0.406/0.229,0.224,0.225"},
    {"augment", CT_OPT_FLAG, AT(data.augment), NULL, NONE, T | R,
     "train split: RandomCrop(image size, padding=4) and RandomHorizontalFlip(0.5), seeded: the same\n"
     "batches for any --workers"},
    {"allow-overlap", CT_OPT_FLAG, AT(allow_overlap), NULL, NONE, E,
     "evaluate even on a split that differs from the one the checkpoint held out (which may score images\n"
     "the model trained on)"},
    {"out", CT_OPT_STR, AT(out), "DIR", NONE, T,
     "the run folder (default runs/<model>-<data>-<date>-<time>): config.json, last.safetensors,\n"
     "best.safetensors, metrics.jsonl and the TensorBoard events"},
    {"save", CT_OPT_STR, AT(save), "FILE", NONE, T,
     "also save a checkpoint to FILE after every epoch, at the end and at a stop (written atomically:\n"
     "FILE is always whole)"},
    {"save-every", CT_OPT_I64, AT(save_every), "N", 0, BIG, T,
     "also save last.safetensors (and --save) every N optimizer steps; a checkpoint records the position in\n"
     "the epoch, where --resume continues with the same ranks and --batch-size (other ranks or batch sizes\n"
     "repeat that epoch from its start)"},
    {"max-steps", CT_OPT_I64, AT(max_steps), "N", 0, BIG, T | R,
     "stop after N optimizer steps of this run, saving last.safetensors (and --save) as at an interrupt;\n"
     "exit 0"},
    {"resume", CT_OPT_STR, AT(resume), "FILE", NONE, T,
     "continue from a checkpoint; the --optimizer must be the one it was saved with"},
    {"metrics", CT_OPT_STR, AT(metrics), "FILE", NONE, T,
     "also append each epoch's JSON line (as in the run folder's metrics.jsonl) to FILE"},
    {"log-every", CT_OPT_I64, AT(log_every), "N", 1, BIG, T,
     "metrics.jsonl gets a line (and is flushed) every N optimizer steps, besides each epoch's line"},
    {"no-progress", CT_OPT_FLAG, AT(no_progress), NULL, NONE, T, "print no progress while an epoch runs"},
    {"progress-every", CT_OPT_F64, AT(progress_every), "S", 0, 1e9, T | CT_OPT_GT,
     "when stderr is not a terminal (a log file), a plain progress line every S seconds instead of the\n"
     "live bar (tqdm's and Lightning's behaviour)"},
    {"accumulate", CT_OPT_INT, AT(accumulate), "K", 1, 1e9, T | R,
     "sum the gradients of K batches (each loss divided by K) before each optimizer step; in a job only\n"
     "every K-th backward all-reduces (DDP's no_sync)"},
    {"amp", CT_OPT_STR, AT(amp), "bf16|f16", NONE, T | R,
     "mixed precision: forward and loss under autocast (cuttle/autocast.h), parameters and gradients\n"
     "float32; f16 adds a GradScaler (progress shows its scale and the skipped steps; metrics and\n"
     "checkpoints keep them); on a GPU the layers whose sizes break the tensor-core rule (multiples of 8)\n"
     "are listed once",
     amps},
    {"channels-last", CT_OPT_FLAG, AT(channels_last), NULL, NONE, T | R,
     "conv weights and input batches in the channels_last (NHWC) memory format"},
    {"cuda-graph", CT_OPT_FLAG, AT(cuda_graph), NULL, NONE, T | R,
     "capture the training step once in a CUDA graph and replay it for every batch (after 3 eager steps;\n"
     "the epoch's last, smaller batch runs eagerly; a new --schedule lr captures again): one launch a step\n"
     "instead of a hundred, for small networks bound by the host. The optimizer runs capturable (its step\n"
     "count on the GPU). Not with --amp f16, --accumulate, --devices, several ranks or --profile sync"},
    {"tensorboard", CT_OPT_STR, AT(tensorboard), "DIR", NONE, T,
     "also log the run for `tensorboard --logdir DIR` (the run folder always has its own), with the\n"
     "optimizer step as x axis: every --tensorboard-every steps train/loss, images_per_s, lr (and with\n"
     "--amp f16 amp/scale, amp/skipped_steps); each epoch train/loss_epoch, images_per_s_epoch,\n"
     "test/accuracy, test/loss, epoch; the options as text. A --resume'd run continues the steps and\n"
     "drops what the interrupted run logged after the checkpoint (SummaryWriter's purge_step)"},
    {"tensorboard-every", CT_OPT_I64, AT(tb_every), "N", 1, BIG, T, "the per-step TensorBoard scalars every N optimizer steps"},
    {"profile", CT_OPT_STR, AT(profile), "host|sync", NONE, T,
     "time every kernel call and host<->device copy of the training steps after the first (the warm-up)\n"
     "and print their self times per kernel, op and device at the end (cuttle/profiler.h): host = the\n"
     "host's time in each call (on a GPU the launch), sync = each call waited for (its execution too)",
     profiles},
    {"profile-trace", CT_OPT_STR, AT(profile_trace), "FILE", NONE, T,
     "with --profile, also write every profiled call to FILE as a Chrome trace (chrome://tracing or\n"
     "ui.perfetto.dev, as torch.profiler's export_chrome_trace; at most a million calls)"},
    {"devices", CT_OPT_STR, AT(devices), "LIST", NONE, T,
     "one process, several devices (cpu, opencl:N, cuda:N, comma-separated): the model is replicated,\n"
     "each batch split between the replicas, one thread per device"},
    {"nproc", CT_OPT_INT, AT(nproc), "N", 1, 4096, T,
     "start N ranks on this machine (runs mpirun for you, as torchrun --nproc_per_node)"},
    {"bucket-mb", CT_OPT_F64, AT(bucket_mb), "X", 0, 1e9, T | R | CT_OPT_GT,
     "gradient bucket size in MiB for the all-reduce (DDP's bucket_cap_mb)"},
    {"timeout", CT_OPT_F64, AT(timeout), "S", 0, 1e9, T | E | CT_OPT_GT,
     "seconds a rank waits for the others in a collective before failing (exit 1)"},
};
const int ct_cli_run_options_n = (int)(sizeof ct_cli_run_options / sizeof ct_cli_run_options[0]);

ct_cli_run_config ct_cli_run_defaults(void) {
  return (ct_cli_run_config){.model = "cnn", .device = "auto", .optimizer = "adam", .schedule = "cosine", .epochs = 5,
                             .workers = 2, .batch = 128, .lr = 1e-3, .accumulate = 1, .bucket_mb = 25,
                             .timeout = 60, .tb_every = 10, .log_every = 50, .progress_every = 10};
}

void ct_cli_run_help(FILE *f, unsigned command) {
  ct_cli_run_config d = ct_cli_run_defaults();
  if (command == CT_OPT_EVAL) {
    d.model = NULL; /* eval's model comes from the checkpoint */
    fprintf(f, "usage: cuttle eval --checkpoint FILE [options]\n"
               "Evaluates a checkpoint on the test split it was trained beside. The checkpoint records the run's\n"
               "recipe (model, data, split), so --checkpoint alone reproduces the run's validation figure; a file\n"
               "without one (written by PyTorch) takes --model and the data options (default cnn on\n"
               "Fashion-MNIST).\n\noptions:\n");
  } else {
    fprintf(f, "usage: cuttle train [options]\n"
               "Trains an image classifier on the best device present and keeps the run in a folder (--out).\n\n"
               "options:\n");
  }
  ct_cli_print_options(f, ct_cli_run_options, ct_cli_run_options_n, command, &d, 0);
  if (command == CT_OPT_EVAL) {
    fprintf(f, "\nUnder mpirun (mpirun -np N cuttle eval ...) each rank evaluates its shard of the test set and the\n"
               "correct counts are summed over the ranks: the accuracy is exact, the one a single process reports.\n"
               "exit status: 0 done, 1 failure, 2 usage error (a bad option, or a split that overlaps training).\n");
    return;
  }
  fprintf(f,
          "\nseveral processes (data-parallel, as torch's DistributedDataParallel):\n"
          "  mpirun -np N cuttle train ...   each rank trains on its shard with its device: cuda:<local rank>,\n"
          "  opencl:<local rank>, or the CPU with cores / local ranks threads (--device auto picks by kind;\n"
          "  --device cpu keeps the CPU). --batch-size is per rank; the progress line and the metrics show the\n"
          "  global batch (per rank x ranks x K); only rank 0 prints progress and writes metrics and\n"
          "  checkpoints; every rank reads --resume.\n"
          "exit status: 0 done, 1 failure, 2 usage error; on the first SIGINT (Ctrl-C) or SIGTERM (what batch\n"
          "schedulers send before a kill) the current step is finished, last.safetensors (and --save) saved and\n"
          "the exit status is 128+signal: 130 (SIGINT), 143 (SIGTERM); a second signal ends the process at once\n"
          "by that signal and leaves the last checkpoint as it was. In a job, send SIGUSR2 to mpirun: it\n"
          "forwards it to every rank at once, and they take it as SIGTERM (SIGUSR1 as SIGINT, where a launcher\n"
          "forwards it; Open MPI 4.1's mpirun does not). mpirun's own SIGINT/SIGTERM kills the ranks\n"
          "odls_base_sigkill_timeout seconds (1) after it has passed the signal on (--mca\n"
          "odls_base_sigkill_timeout 30 gives them longer) and exits 1. --nproc passes its SIGINT/SIGTERM on to\n"
          "the ranks (as SIGUSR2) and exits 130/143 as one process does.\n");
}
