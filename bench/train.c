/* bench/train.c: `cuttle bench train`: the training recipes of `cuttle train` (mlp, cnn, and
 * torchvision's resnet18/34/50 with a 1-channel conv1 and 10 classes, or their "-small" form with
 * a 3x3 stride-1 stem and no max-pool; Adam at lr 1e-3 (or --optimizer, --lr), constant; batch 128; shuffled
 * Fashion-MNIST; seed 0) timed per epoch, images/s over the
 * training loop and the test accuracy after it, through the very loop `cuttle train` runs
 * (tools/cuttle/train_loop.c). With --pytorch the same recipe runs in PyTorch
 * (bench/pytorch_recipe.py, one JSON line per epoch) with the same number of threads, and the table
 * puts the two side by side with the ratio of their images/s; --pytorch-compile adds PyTorch with
 * the model in torch.compile (compiled before the timed loop; a failure of torch.compile fills its
 * cells with "failed" without failing the bench). The "cuttle loader wait" column is the share of
 * cuttle's epoch time spent in ct_loader_next waiting for the next batch. --max-steps N ends each
 * epoch after N optimizer steps on both sides (a resnet run of a few hundred steps rather than a
 * whole epoch), --test-limit N evaluates on the first N test images on both sides, --losses prints
 * cuttle's loss of every step to stderr ("step S loss L", the batch's mean cross-entropy), to compare
 * one device's losses with another's for the same seed; --optimizer sgd (plain SGD) and --lr change the
 * recipe on both sides; --channels-last trains in the channels_last memory format on both sides
 * (ct_module_to_memory_format and channels_last batches; model.to(memory_format=torch.channels_last)
 * and channels_last inputs in PyTorch); --amp bf16|f16 trains in mixed precision on both sides
 * (cuttle train's --amp: the forward and the loss in an autocast region, f16 with a GradScaler;
 * torch.autocast and torch.amp.GradScaler in PyTorch, its "Automatic Mixed Precision" recipe; the
 * test accuracy is measured in float32 on both sides); --cuda-graph runs cuttle's step as `cuttle train --cuda-graph`
 * (captured once in a CUDA graph, tools/cuttle/graph_step.h; PyTorch's side stays eager), and
 * --pytorch-graph adds PyTorch's own CUDA graph of the same step (pytorch_recipe.py --cuda-graph) in
 * place of torch.compile's columns, so that graph meets graph. Below the table, the CPU seconds of each side's training loop (all its
 * threads: CLOCK_PROCESS_CPUTIME_ID in cuttle, time.process_time() in PyTorch) per image, a figure
 * the other processes of a shared machine disturb less than the wall clock. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cblas.h>
#include "bench.h"
#include "graph_step.h"
#include "train_loop.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

typedef struct {
  double ips, acc, secs, loss, wait, compile_secs, cpu; /* cpu: CPU seconds of the training loop, all threads */
  int64_t seen;
  int ok;
} epoch_result;

typedef struct {
  const char *device, *data_dir, *python, *script, *optimizer, *amp; /* amp: NULL, "bf16" or "f16" */
  double lr;
  int epochs, threads, workers, pytorch, pytorch_compile, pytorch_graph, progress, losses, channels_last, cuda_graph;
  int64_t limit, max_steps, test_limit, batch;
} train_opts;

/* The per-step hook of cuttle's epoch: --max-steps and --losses. */
typedef struct {
  const train_opts *o;
  ct_cli_running running;
  int64_t steps;
  double last_sum;
  int64_t last_seen;
} step_hook;

static int after_step(void *ctx) {
  step_hook *h = ctx;
  h->steps++;
  if (h->o->losses) {
    double sum = ct_item(h->running.loss_sum); /* waits for the device: only with --losses */
    int64_t b = h->running.seen - h->last_seen;
    fprintf(stderr, "step %lld loss %.6f\n", (long long)h->steps, b > 0 ? (sum - h->last_sum) / (double)b : NAN);
    h->last_sum = sum, h->last_seen = h->running.seen;
  }
  return h->o->max_steps && h->steps >= h->o->max_steps;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One recipe in cuttle: fills res[0..epochs-1]; returns 0 or 1 (after printing why). */
static int run_cuttle(const char *model, ct_device dev, const train_opts *o, ct_dataset *train, ct_dataset *test,
                      epoch_result *res) {
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_model_new_for(model, 1, 28, 28, 10, dev, &gen);
  ct_optim_opts oo = {.kind = strcmp(o->optimizer, "sgd") == 0 ? CT_OPTIM_SGD : CT_OPTIM_ADAM, .lr = o->lr,
                      .capturable = o->cuda_graph};
  if (m && o->channels_last && ct_module_to_memory_format(m, CT_CHANNELS_LAST) != CT_OK) ct_module_free(m), m = NULL;
  ct_optimizer *opt = m ? ct_optimizer_new(m, &oo) : NULL;
  ct_dtype amp = !o->amp ? CT_F32 : strcmp(o->amp, "f16") == 0 ? CT_F16 : CT_BF16;
  ct_grad_scaler *scaler = opt && amp == CT_F16 ? ct_grad_scaler_new(&(ct_grad_scaler_opts){0}) : NULL; /* as cuttle train */
  if (amp == CT_F16 && !scaler) ct_optimizer_free(opt), opt = NULL;
  ct_loader_opts lo = {.batch_size = o->batch, .shuffle = 1, .seed = 0, .num_workers = o->workers,
                       .pin_memory = dev.kind != CT_CPU, .device = dev}; /* as cuttle train */
  ct_loader *loader = opt ? ct_loader_new(train, &lo) : NULL;
  ct_cli_graph_step *graph = loader && o->cuda_graph ? ct_cli_graph_step_new(dev, 0) : NULL; /* as cuttle train's */
  if (loader && o->cuda_graph && !graph) ct_loader_free(loader), loader = NULL;
  int status = loader ? 0 : 1;
  if (status) fprintf(stderr, "cuttle bench train: %s\n", ct_last_error());
  for (int e = 0; e < o->epochs && !status; e++) {
    /* a previous epoch ended by --max-steps leaves its rest unread: start epoch e afresh */
    if (ct_loader_set_epoch(loader, e) != CT_OK) {
      status = 1;
      break;
    }
    step_hook h = {.o = o};
    int64_t n = ct_dataset_len(train), per_epoch = o->max_steps && o->max_steps * o->batch < n ? o->max_steps * o->batch : n;
    ct_cli_epoch_opts eo = {.progress = o->progress, .epoch = e + 1, .epochs = o->epochs, .per_epoch = per_epoch,
                            .after_step = after_step, .ctx = &h, .running = &h.running, .channels_last = o->channels_last,
                            .graph = graph, .amp = amp, .scaler = scaler};
    ct_cli_epoch_stats es;
    double c0 = cpu_now();
    if (ct_cli_train_epoch(m, opt, loader, &eo, &es) != CT_OK) {
      status = 1;
      break;
    }
    double cpu = cpu_now() - c0;
    if (o->progress) fputc('\n', stderr);
    double acc = ct_cli_evaluate(m, test, dev, o->workers);
    if (acc < 0) {
      fprintf(stderr, "cuttle bench train: evaluation failed: %s\n", ct_last_error());
      status = 1;
      break;
    }
    res[e] = (epoch_result){.ips = es.seen / es.seconds, .acc = acc, .secs = es.seconds,
                            .loss = es.seen ? es.loss_sum / es.seen : 0,
                            .wait = es.seconds > 0 ? es.loader_wait / es.seconds : 0, .ok = 1,
                            .cpu = cpu, .seen = es.seen};
  }
  if (graph && !status) ct_cli_graph_step_report(graph, stderr);
  ct_cli_graph_step_free(graph);
  ct_loader_free(loader);
  ct_grad_scaler_free(scaler);
  ct_optimizer_free(opt);
  ct_module_free(m);
  return status;
}

/* printf-style append to the string in buf (cap bytes), cut at the end of buf rather than past it */
static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
  size_t k = strlen(buf);
  if (k + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + k, cap - k, fmt, ap);
  va_end(ap);
}

/* One recipe in PyTorch, through popen: eager (mode 0), in torch.compile (1) or captured in a CUDA
 * graph (2); fills res; returns 0 or 1 (after printing why). */
static int run_pytorch(const char *model, ct_device dev, const train_opts *o, int mode, epoch_result *res) {
  char devname[32], cmd[2048], limit[256] = "";
  ct_device_str(dev, devname, sizeof devname);
  append(limit, sizeof limit, " --batch-size %lld", (long long)o->batch);
  if (strcmp(o->optimizer, "adam") != 0) append(limit, sizeof limit, " --optimizer %s", o->optimizer);
  if (o->lr != 1e-3) append(limit, sizeof limit, " --lr %.17g", o->lr);
  if (o->limit) append(limit, sizeof limit, " --limit %lld", (long long)o->limit);
  if (o->max_steps) append(limit, sizeof limit, " --max-steps %lld", (long long)o->max_steps);
  if (o->test_limit) append(limit, sizeof limit, " --test-limit %lld", (long long)o->test_limit);
  if (o->channels_last) append(limit, sizeof limit, " --channels-last");
  if (o->amp) append(limit, sizeof limit, " --amp %s", o->amp);
  snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d '%s' '%s' --model %s --epochs %d --threads %d --device %s%s%s%s%s%s",
           o->threads, o->python, o->script, model, o->epochs, o->threads, devname, limit,
           o->data_dir ? " --data-dir '" : "", o->data_dir ? o->data_dir : "", o->data_dir ? "'" : "",
           mode == 1 ? " --compile" : mode == 2 ? " --cuda-graph" : "");
  fprintf(stderr, "running: %s\n", cmd);
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (!p) {
    fprintf(stderr, "cuttle bench train: cannot run %s\n", o->python);
    return 1;
  }
  char line[4096];
  int got = 0;
  while (fgets(line, sizeof line, p)) {
    if (strstr(line, "\"error\":")) fprintf(stderr, "cuttle bench train: PyTorch says: %s", line);
    int epoch = (int)ct_bench_json_number(line, "epoch");
    if (epoch < 1 || epoch > o->epochs) continue; /* not one of the recipe's JSON lines */
    epoch_result *r = &res[epoch - 1];
    *r = (epoch_result){.ips = ct_bench_json_number(line, "images_per_s"), .acc = ct_bench_json_number(line, "test_acc"),
                        .secs = ct_bench_json_number(line, "seconds"), .loss = ct_bench_json_number(line, "train_loss"),
                        .compile_secs = ct_bench_json_number(line, "compile_seconds"), .ok = 1,
                        .cpu = ct_bench_json_number(line, "cpu_seconds"),
                        .seen = 0};
    double images = ct_bench_json_number(line, "images"); /* an older recipe has neither */
    if (!isnan(images)) r->seen = (int64_t)images;
    got++;
  }
  int rc = pclose(p);
  if (rc != 0 || got < o->epochs) {
    fprintf(stderr, "cuttle bench train: the PyTorch recipe%s failed (exit status %d, %d of %d epochs reported); "
                    "is torch importable by %s? (--python PATH picks the interpreter)\n",
            mode == 1 ? " with torch.compile" : mode == 2 ? " with a CUDA graph" : "", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, got, o->epochs, o->python);
    return 1;
  }
  return 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench train [--model MODEL|all] [--device cpu|cuda:N|opencl:N|auto] [--epochs N] [--threads N]\n"
             "                          [--workers N] [--data-dir DIR] [--pytorch] [--pytorch-compile] [--python PATH]\n"
             "                          [--script FILE] [--limit N] [--max-steps N] [--test-limit N] [--batch-size N]\n"
             "                          [--losses] [--optimizer adam|sgd] [--lr X] [--channels-last] [--no-progress]\n"
             "                          [--amp bf16|f16] [--cuda-graph] [--pytorch-graph] [--quick] [--csv FILE]\n"
             "MODEL: mlp, cnn, resnet18, resnet34, resnet50 (torchvision's, conv1 taking 1 channel, 10 classes),\n"
             "       resnet18-small, resnet34-small, resnet50-small (3x3 stride-1 stem, no max-pool); all: mlp and cnn\n"
             "       gpt2: tokens/s of GPT-2 training beside PyTorch, options of its own (--model gpt2 --help)\n"
             "defaults: --model all --device auto --epochs 1 --threads <online cores> --workers 2 --batch-size 128\n"
             "          --optimizer adam --lr 1e-3 (sgd: plain SGD, no momentum)\n"
             "          --python python3 --script %s/bench/pytorch_recipe.py\n"
             "--pytorch: the same recipe in PyTorch eager on the same device; --pytorch-compile: also (or only,\n"
             "          without --pytorch) with the model in torch.compile (a failing compile says so in its cells)\n"
             "--limit N trains on the first N training images only (both sides); --quick: --limit 6000, 1 epoch\n"
             "--max-steps N ends each epoch after N optimizer steps (both sides); --test-limit N evaluates on the\n"
             "          first N test images (both sides); --losses prints cuttle's loss of every step to stderr\n"
             "--channels-last: conv weights and input batches in the channels_last memory format (both sides)\n"
             "--amp bf16|f16: mixed precision on both sides, as cuttle train --amp (f16 with a GradScaler;\n"
             "          torch.autocast and torch.amp.GradScaler in PyTorch); not --amp f16 with --cuda-graph\n"
             "          or --pytorch-graph\n"
             "--cuda-graph: cuttle's step captured once in a CUDA graph and replayed, as `cuttle train --cuda-graph`\n"
             "          (cuttle's side only: PyTorch eager stays eager; torch.compile is PyTorch's own answer)\n"
             "--pytorch-graph: also PyTorch with its step captured in a CUDA graph (torch.cuda.graph, Adam\n"
             "          capturable; a CUDA device; instead of --pytorch-compile's columns)\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* The training set (the first --limit images of it with --limit) and the test set. 0, or 1 after
 * saying why. *train is *full or a dataset of its own. */
static int load_sets(const train_opts *o, ct_dataset **full, ct_dataset **train, ct_dataset **test) {
  *full = ct_fashion_mnist_load(o->data_dir, CT_SPLIT_TRAIN);
  *test = *full ? ct_fashion_mnist_load(o->data_dir, CT_SPLIT_TEST) : NULL;
  if (*test && o->test_limit && o->test_limit < ct_dataset_len(*test)) {
    ct_dataset *t = ct_dataset_from_u8(ct_dataset_pixels(*test), ct_dataset_labels(*test), o->test_limit, 1, 28, 28,
                                       10, CT_FASHION_MNIST_MEAN, CT_FASHION_MNIST_STD);
    ct_dataset_free(*test);
    *test = t;
  }
  *train = *full;
  if (*test && o->limit && o->limit < ct_dataset_len(*full))
    *train = ct_dataset_from_u8(ct_dataset_pixels(*full), ct_dataset_labels(*full), o->limit, 1, 28, 28, 10,
                                CT_FASHION_MNIST_MEAN, CT_FASHION_MNIST_STD);
  if (*train && *test) return 0;
  fprintf(stderr, "cuttle bench train: %s\n", ct_last_error());
  ct_dataset_free(*test);
  if (*train != *full) ct_dataset_free(*train);
  ct_dataset_free(*full);
  return 1;
}

/* One row per epoch of model: cuttle's figures (cu), PyTorch's (py, with --pytorch) and torch.compile's
 * or PyTorch's CUDA graph's (pc, with --pytorch-compile or --pytorch-graph); a side that failed
 * says "failed" in its cells. */
static void add_rows(ct_bench_table *t, const char *model, const train_opts *o, const epoch_result *cu,
                     const epoch_result *py, int py_failed, const epoch_result *pc, int pc_failed) {
  for (int e = 0; e < o->epochs; e++) {
    char p1[32] = "-", p2[32] = "-", p3[32] = "-", ratio[32] = "-";
    if (py_failed) {
      snprintf(p1, sizeof p1, "failed"), snprintf(p2, sizeof p2, "failed"), snprintf(p3, sizeof p3, "failed");
    } else if (o->pytorch) {
      snprintf(p1, sizeof p1, "%.0f", py[e].ips), snprintf(p2, sizeof p2, "%.2f%%", 100 * py[e].acc);
      snprintf(p3, sizeof p3, "%.2f", py[e].secs), snprintf(ratio, sizeof ratio, "%.2f", cu[e].ips / py[e].ips);
    }
    char c[5][48] = {"-", "-", "-", "-", "-"};
    if (pc_failed) {
      for (int k = 0; k < 4; k++) snprintf(c[k], sizeof c[k], "failed");
    } else if (o->pytorch_compile || o->pytorch_graph) {
      snprintf(c[0], sizeof c[0], "%.0f", pc[e].ips), snprintf(c[1], sizeof c[1], "%.2f%%", 100 * pc[e].acc);
      snprintf(c[2], sizeof c[2], "%.2f", pc[e].secs), snprintf(c[3], sizeof c[3], "%.2f", pc[e].compile_secs);
      snprintf(c[4], sizeof c[4], "%.2f", cu[e].ips / pc[e].ips);
    }
    char extra[256] = "";
    if (o->pytorch_compile || o->pytorch_graph)
      snprintf(extra, sizeof extra, "|%s|%s|%s|%s|%s", c[0], c[1], c[2], c[3], c[4]);
    ct_bench_table_rowf(t, "%s|%d|%.0f|%.2f%%|%.2f|%.1f%%|%s|%s|%s|%s%s", model, e + 1, cu[e].ips, 100 * cu[e].acc,
                        cu[e].secs, 100 * cu[e].wait, p1, p2, p3, ratio, extra);
  }
}

/* model in cuttle, then (as asked) in PyTorch eager and in torch.compile, its rows added to t; res
 * holds 3 x epochs results. 0, or 1 when cuttle or PyTorch eager failed (a failing torch.compile
 * is a result, said in its cells, not the bench's failure). */
enum { NOTES = 4096 };
static char notes[NOTES]; /* printed below the table */

static int bench_model(ct_bench_table *t, const char *model, ct_device dev, const train_opts *o, ct_dataset *train,
                       ct_dataset *test, epoch_result *res) {
  epoch_result *cu = res, *py = res + o->epochs, *pc = res + 2 * o->epochs;
  memset(cu, 0, sizeof *cu * (size_t)o->epochs), memset(py, 0, sizeof *py * (size_t)o->epochs);
  if (run_cuttle(model, dev, o, train, test, cu)) return 1;
  /* a failed PyTorch run still leaves cuttle's rows in the table, its cells saying so */
  int py_failed = o->pytorch && run_pytorch(model, dev, o, 0, py);
  memset(pc, 0, sizeof *pc * (size_t)o->epochs);
  int pc_failed = (o->pytorch_compile || o->pytorch_graph) && run_pytorch(model, dev, o, o->pytorch_graph ? 2 : 1, pc);
  add_rows(t, model, o, cu, py, py_failed, pc, pc_failed);
  for (int e = 0; e < o->epochs; e++) {
    char line[256];
    int k = snprintf(line, sizeof line, "%s epoch %d: CPU seconds of the training loop: cuttle %.2f (%.2f ms/image)", model,
                     e + 1, cu[e].cpu, cu[e].seen ? 1e3 * cu[e].cpu / (double)cu[e].seen : NAN);
    if (o->pytorch && !py_failed && !isnan(py[e].cpu) && py[e].seen > 0)
      snprintf(line + k, sizeof line - (size_t)k, ", pytorch %.2f (%.2f ms/image)", py[e].cpu,
               1e3 * py[e].cpu / (double)py[e].seen);
    snprintf(notes + strlen(notes), NOTES - strlen(notes), "%s\n", line);
  }
  return py_failed;
}

/* The models both sides build: ct_model_new_for's names, and the PyTorch recipe's. */
static int known_model(const char *m) {
  static const char *names[] = {"mlp", "cnn", "resnet18", "resnet34", "resnet50",
                                "resnet18-small", "resnet34-small", "resnet50-small"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(m, names[i]) == 0) return 1;
  return 0;
}

int ct_bench_train(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* --model gpt2: a bench of its own (bench/train_gpt2.c) */
    if ((strcmp(argv[i], "--model") == 0 && i + 1 < argc && strcmp(argv[i + 1], "gpt2") == 0) ||
        strcmp(argv[i], "--model=gpt2") == 0)
      return ct_bench_train_gpt2(argc, argv);
  train_opts o = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_recipe.py", .epochs = 1,
                  .workers = 2, .progress = 1, .batch = 128, .optimizer = "adam", .lr = 1e-3};
  const char *model_arg = "all";
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  o.threads = online > 0 ? (int)online : 1;
  ct_bench_common common = {.device = "auto"};
  const ct_bench_opt opts[] = {{.name = "model", .dst = &model_arg},
                               {.name = "epochs", .kind = CT_BENCH_INT, .dst = &o.epochs},
                               {.name = "threads", .kind = CT_BENCH_INT, .dst = &o.threads},
                               {.name = "workers", .kind = CT_BENCH_INT, .dst = &o.workers},
                               {.name = "data-dir", .dst = &o.data_dir},
                               {.name = "pytorch", .kind = CT_BENCH_FLAG, .dst = &o.pytorch, .value = 1},
                               {.name = "python", .dst = &o.python},
                               {.name = "script", .dst = &o.script},
                               {.name = "limit", .kind = CT_BENCH_I64, .dst = &o.limit},
                               {.name = "no-progress", .kind = CT_BENCH_FLAG, .dst = &o.progress, .value = 0},
                               {.name = "pytorch-compile", .kind = CT_BENCH_FLAG, .dst = &o.pytorch_compile, .value = 1},
                               {.name = "max-steps", .kind = CT_BENCH_I64, .dst = &o.max_steps},
                               {.name = "test-limit", .kind = CT_BENCH_I64, .dst = &o.test_limit},
                               {.name = "batch-size", .kind = CT_BENCH_I64, .dst = &o.batch},
                               {.name = "losses", .kind = CT_BENCH_FLAG, .dst = &o.losses, .value = 1},
                               {.name = "optimizer", .dst = &o.optimizer},
                               {.name = "lr", .kind = CT_BENCH_DOUBLE, .dst = &o.lr},
                               {.name = "channels-last", .kind = CT_BENCH_FLAG, .dst = &o.channels_last, .value = 1},
                               {.name = "amp", .dst = &o.amp},
                               {.name = "cuda-graph", .kind = CT_BENCH_FLAG, .dst = &o.cuda_graph, .value = 1},
                               {.name = "pytorch-graph", .kind = CT_BENCH_FLAG, .dst = &o.pytorch_graph, .value = 1},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  o.device = common.device;
  if (common.quick && !o.limit) o.limit = 6000;
  const char *models[2];
  int nmodels = 0;
  if (strcmp(model_arg, "all") == 0) models[0] = "mlp", models[1] = "cnn", nmodels = 2;
  else if (known_model(model_arg)) models[0] = model_arg, nmodels = 1;
  if (!nmodels || o.epochs < 1 || o.epochs > 1000 || o.threads < 1 || o.workers < 0 || o.limit < 0 ||
      o.max_steps < 0 || o.test_limit < 0 || o.batch < 1 || !(o.lr > 0) || (o.pytorch_compile && o.pytorch_graph) ||
      (strcmp(o.optimizer, "adam") != 0 && strcmp(o.optimizer, "sgd") != 0) ||
      (o.amp && strcmp(o.amp, "bf16") != 0 && strcmp(o.amp, "f16") != 0) ||
      (o.amp && strcmp(o.amp, "f16") == 0 && (o.cuda_graph || o.pytorch_graph))) {
    fprintf(stderr, "cuttle bench train: --model is mlp, cnn, resnet18, resnet34, resnet50 (each resnet also -small) "
                    "or all; --epochs in 1..1000, --threads >= 1, --workers >= 0, --limit, --max-steps, --test-limit "
                    ">= 0, --batch-size >= 1, --lr > 0, --optimizer adam or sgd, --amp bf16 or f16; --pytorch-compile or "
                    "--pytorch-graph, not both; --amp f16 (its GradScaler reads the found-inf flag every step) "
                    "not with --cuda-graph or --pytorch-graph\n");
    return 2;
  }
  ct_device dev;
  if (ct_bench_device(o.device, &dev)) return 2;
  /* cuttle's OpenMP pool (which OpenBLAS's OpenMP build shares) gets the same threads as PyTorch */
  omp_set_num_threads(o.threads);
  openblas_set_num_threads(o.threads);
  ct_dataset *full, *train, *test;
  if (load_sets(&o, &full, &train, &test)) return 1;
  char devname[32], title[384];
  ct_device_str(dev, devname, sizeof devname);
  char steps[64] = "";
  if (o.max_steps) snprintf(steps, sizeof steps, " (at most %lld steps/epoch)", (long long)o.max_steps);
  snprintf(title, sizeof title, "train: %s lr %g, batch %lld, %lld training images/epoch%s, %lld test images, on %s, "
           "%d threads, %d loader workers%s%s%s%s", strcmp(o.optimizer, "sgd") == 0 ? "SGD" : "Adam", o.lr, (long long)o.batch, (long long)ct_dataset_len(train), steps,
           (long long)ct_dataset_len(test), devname, o.threads, o.workers, o.channels_last ? ", channels_last" : "",
           o.amp ? ", autocast " : "", o.amp ? o.amp : "", o.cuda_graph ? ", cuttle's step in a CUDA graph" : "");
  const char *heads[] = {"model", "epoch", "cuttle img/s", "cuttle test acc", "cuttle s", "cuttle loader wait",
                         "pytorch img/s", "pytorch test acc", "pytorch s", "cuttle/pytorch img/s",
                         "compiled img/s", "compiled test acc", "compiled s", "compile s", "cuttle/compiled img/s"};
  if (o.pytorch_graph) /* the third PyTorch run is its CUDA graph's */
    heads[10] = "pytorch graph img/s", heads[11] = "pytorch graph test acc", heads[12] = "pytorch graph s",
    heads[13] = "capture s", heads[14] = "cuttle/pytorch graph img/s";
  ct_bench_table *t = ct_bench_table_new(title, o.pytorch_compile || o.pytorch_graph ? 15 : 10, heads);
  epoch_result *res = calloc(3 * (size_t)o.epochs, sizeof *res); /* cuttle, PyTorch, torch.compile */
  int status = !t || !res;
  for (int i = 0; i < nmodels && !status; i++) {
    fprintf(stderr, "cuttle: %s on %s\n", models[i], devname);
    status = bench_model(t, models[i], dev, &o, train, test, res);
  }
  ct_bench_table_print(t, stdout);
  fputs(notes, stdout);
  fflush(stdout); /* before the CSV's message on stderr */
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  free(res);
  if (train != full) ct_dataset_free(train);
  ct_dataset_free(test);
  ct_dataset_free(full);
  return status;
}
