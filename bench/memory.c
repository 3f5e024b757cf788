/* bench/memory.c: `cuttle bench memory`: the peak bytes of one training step of a model (by default
 * torchvision's resnet18 on Fashion-MNIST-sized (1, 28, 28) images, batch 128), in cuttle and, with
 * --pytorch, in PyTorch on the CPU (bench/pytorch_memory.py), side by side.
 *
 * The step is the one `cuttle train` runs (tools/cuttle/train_loop.c): in a scope, forward,
 * cross-entropy, backward, Adam's step, gradients set to none. A warm-up step before it leaves
 * Adam's state allocated and the gradients set to none, so the measured step allocates the
 * gradients again, as every step of training does. Before it the model, Adam's state and the batch
 * are allocated; nothing else is.
 *
 * Two measures, on both sides:
 *  - allocator: the peak of the bytes held by tensors during the step minus those held before it.
 *    cuttle: its caching allocator's peak_allocated after ct_reset_peak_memory_stats minus
 *    allocated before (blocks as handed out, after the cache's rounding; amp-memory's measure).
 *    PyTorch: torch.profiler.profile(profile_memory=True) around the step: the CPU allocator's
 *    allocation and free events in time order, summed from the step's start; its peak (the bytes
 *    requested, which PyTorch's CPU allocator passes to posix_memalign unrounded). Given both for
 *    forward + loss + backward and for the whole step with Adam's update.
 *  - RSS: the process's resident-set high-water mark during the step (/proc/self/clear_refs "5"
 *    resets VmHWM before it, /proc/self/status's VmHWM after it) minus VmRSS before it. This is what
 *    the step costs the machine in pages it touches that were not resident: for cuttle, whose cache
 *    keeps the warm-up step's blocks, little; for PyTorch, whose large blocks are mmap'd and
 *    munmap'd by glibc at each allocation and free, about its allocator peak.
 * The last column gives VmHWM itself, the whole process's peak resident set (libraries included:
 * PyTorch's are several hundred MiB). */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cblas.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench memory [--model MODEL] [--batch-size N] [--in-channels C] [--size HW] [--classes K]\n"
             "                           [--device cpu|opencl:N|cuda:N] [--threads N] [--pytorch] [--python PATH]\n"
             "                           [--script FILE] [--csv FILE]\n"
             "peak bytes of one training step (forward, cross-entropy, backward, Adam step; gradients set to none\n"
             "before it, as in training): the allocator's peak above the bytes held before the step, and the RSS\n"
             "high-water mark's growth; --pytorch: the same in PyTorch on the CPU (torch.profiler's memory events)\n"
             "MODEL: resnet18 (default), resnet34, resnet50, their -small forms, cnn, mlp\n"
             "defaults: --batch-size 128 --in-channels 1 --size 28 --classes 10 --device cpu --threads <online cores>\n"
             "          --python python3 --script %s/bench/pytorch_memory.py\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* A "Vm...:" line of /proc/self/status in bytes, or -1. */
static int64_t proc_status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') {
      v = strtoll(line + n + 1, NULL, 10) * 1024;
      break;
    }
  fclose(f);
  return v;
}

/* Reset VmHWM to VmRSS (Linux >= 4.0); 0 or -1. */
static int reset_hwm(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return -1;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

typedef struct {
  int64_t before, peak_fwd_bwd, peak_step, rss_before, rss_growth, hwm, reserved;
} mem_result;

/* One training step as train_loop.c runs it. 0, or nonzero with ct_last_error() saying why. When
 * r is not NULL, the figures are taken around it. */
static int step(ct_module *m, ct_optimizer *opt, ct_tensor *x, ct_tensor *y, ct_device dev, mem_result *r) {
  ct_memory_stats st;
  if (r) {
    if (ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK ||
        ct_reset_peak_memory_stats(dev) != CT_OK)
      return 1;
    r->before = (int64_t)st.allocated;
    r->rss_before = proc_status_kb("VmRSS");
    if (reset_hwm()) r->rss_before = -1;
  }
  if (ct_scope_begin() != CT_OK) return 1;
  ct_tensor *logits = ct_module_forward(m, x);
  ct_tensor *loss = logits ? ct_cross_entropy(logits, y, CT_REDUCTION_MEAN, 0.0) : NULL;
  ct_status s = loss ? ct_backward(loss) : ct_last_status();
  if (s == CT_OK && r) {
    if (ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK) s = ct_last_status();
    r->peak_fwd_bwd = (int64_t)st.peak_allocated - r->before;
  }
  if (s == CT_OK) s = ct_optimizer_step(opt);
  ct_optimizer_zero_grad(opt);
  ct_scope_end();
  if (s != CT_OK) return 1;
  if (r) {
    if (ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK) return 1;
    r->peak_step = (int64_t)st.peak_allocated - r->before;
    r->reserved = (int64_t)st.reserved;
    r->hwm = r->rss_before >= 0 ? proc_status_kb("VmHWM") : -1;
    r->rss_growth = r->hwm >= 0 ? r->hwm - r->rss_before : -1;
  }
  return 0;
}

typedef struct {
  const char *model;
  ct_bench_pytorch py;
  int64_t batch, channels, size, classes;
  int threads;
} mem_opts;

/* PyTorch's figures through bench/pytorch_memory.py (one JSON line, ct_bench_peer_run); 0, or 1
 * after saying why (the reason also in *peer). */
static int run_pytorch(const mem_opts *o, mem_result *r, ct_bench_peer *peer) {
  char env[48], args[512];
  snprintf(env, sizeof env, "OMP_NUM_THREADS=%d", o->threads);
  snprintf(args, sizeof args, "--model %s --batch-size %lld --in-channels %lld --size %lld --classes %lld --threads %d",
           o->model, (long long)o->batch, (long long)o->channels, (long long)o->size, (long long)o->classes, o->threads);
  if (ct_bench_peer_run("cuttle bench memory", env, &o->py, args, "alloc_peak_step", peer) != CT_BENCH_PEER_OK) return 1;
  const char *line = peer->line;
  *r = (mem_result){.before = (int64_t)ct_bench_json_number(line, "held_before"),
                    .peak_fwd_bwd = (int64_t)ct_bench_json_number(line, "alloc_peak_fwd_bwd"),
                    .peak_step = (int64_t)ct_bench_json_number(line, "alloc_peak_step"),
                    .rss_before = (int64_t)ct_bench_json_number(line, "rss_before"),
                    .rss_growth = (int64_t)ct_bench_json_number(line, "rss_growth"),
                    .hwm = (int64_t)ct_bench_json_number(line, "hwm"),
                    .reserved = -1};
  return 0;
}

static const char *mib(int64_t b, char *buf, size_t cap) {
  if (b < 0) snprintf(buf, cap, "n/a");
  else snprintf(buf, cap, "%lld (%.1f MiB)", (long long)b, (double)b / (1024.0 * 1024.0));
  return buf;
}

static void add_row(ct_bench_table *t, const char *side, const mem_result *r) {
  char a[5][64];
  ct_bench_table_rowf(t, "%s|%s|%s|%s|%s|%s", side, mib(r->before, a[0], sizeof a[0]),
                      mib(r->peak_fwd_bwd, a[1], sizeof a[1]), mib(r->peak_step, a[2], sizeof a[2]),
                      mib(r->rss_growth, a[3], sizeof a[3]), mib(r->hwm, a[4], sizeof a[4]));
}

int ct_bench_memory(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  mem_opts o = {.model = "resnet18", .py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_memory.py"},
                .batch = 128, .channels = 1, .size = 28, .classes = 10};
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  o.threads = online > 0 ? (int)online : 1;
  const ct_bench_opt opts[] = {{.name = "model", .dst = &o.model},
                               {.name = "batch-size", .kind = CT_BENCH_I64, .dst = &o.batch},
                               {.name = "in-channels", .kind = CT_BENCH_I64, .dst = &o.channels},
                               {.name = "size", .kind = CT_BENCH_I64, .dst = &o.size},
                               {.name = "classes", .kind = CT_BENCH_I64, .dst = &o.classes},
                               {.name = "threads", .kind = CT_BENCH_INT, .dst = &o.threads},
                               CT_BENCH_PYTORCH_OPTS(o.py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_DEVICE | CT_BENCH_CSV, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  if (o.batch < 1 || o.channels < 1 || o.size < 1 || o.classes < 1 || o.threads < 1) return usage(stderr);
  ct_device dev;
  if (ct_bench_device(common.device, &dev)) return 1;
  int pytorch = o.py.on;
  if (pytorch && dev.kind != CT_CPU) {
    fprintf(stderr, "cuttle bench memory: --pytorch compares on the CPU only (--device cpu)\n");
    return 2;
  }
  omp_set_num_threads(o.threads);
  openblas_set_num_threads(o.threads);
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_model_new_for(o.model, o.channels, o.size, o.size, o.classes, dev, &gen);
  ct_optim_opts oo = {.kind = CT_OPTIM_ADAM, .lr = 1e-3};
  ct_optimizer *opt = m ? ct_optimizer_new(m, &oo) : NULL;
  int64_t xs[4] = {o.batch, o.channels, o.size, o.size};
  ct_tensor *x = opt ? ct_randn(4, xs, 0, 1, CT_F32, dev, &gen) : NULL;
  ct_tensor *y = x ? ct_randint(1, &o.batch, 0, o.classes, CT_I64, dev, &gen) : NULL;
  mem_result cu = {0}, py = {0};
  int rc = !y || step(m, opt, x, y, dev, NULL) || step(m, opt, x, y, dev, &cu);
  if (rc) fprintf(stderr, "cuttle bench memory: %s\n", ct_last_error());
  ct_tensor_free(x), ct_tensor_free(y), ct_optimizer_free(opt), ct_module_free(m);
  if (rc) return 1;
  char dn[32], title[320];
  ct_device_str(dev, dn, sizeof dn);
  static ct_bench_peer peer;
  int py_failed = pytorch && run_pytorch(&o, &py, &peer);
  const char *version = peer.torch[0] ? peer.torch : "?";
  snprintf(title, sizeof title, "one %s training step (Adam) on %s, batch %lld of (%lld, %lld, %lld), %d threads: bytes%s%s",
           o.model, dn, (long long)o.batch, (long long)o.channels, (long long)o.size, (long long)o.size, o.threads,
           pytorch ? "; PyTorch " : "", pytorch ? version : "");
  static const char *headers[] = {"side", "held before the step", "allocator peak above it: fwd+loss+bwd",
                                  "allocator peak above it: whole step", "RSS high-water growth", "process VmHWM"};
  ct_bench_table *t = ct_bench_table_new(title, 6, headers);
  add_row(t, "cuttle", &cu);
  if (pytorch && !py_failed) add_row(t, "pytorch", &py);
  else if (pytorch) ct_bench_table_rowf(t, "pytorch|failed|failed|failed|failed|failed");
  if (pytorch && !py_failed && py.peak_step > 0)
    ct_bench_table_rowf(t, "cuttle/pytorch|%.3f|%.3f|%.3f|%s|%s", (double)cu.before / (double)py.before,
                        (double)cu.peak_fwd_bwd / (double)py.peak_fwd_bwd, (double)cu.peak_step / (double)py.peak_step,
                        "-", "-");
  ct_bench_table_print(t, stdout);
  char rb[64];
  printf("cuttle's cache holds %s after the step (reserved)\n", mib(cu.reserved, rb, sizeof rb));
  if (py_failed) ct_bench_peer_note(&peer, stdout);
  fflush(stdout);
  if (ct_bench_table_csv(t, common.csv)) rc = 1;
  ct_bench_table_free(t);
  return rc || py_failed;
}
