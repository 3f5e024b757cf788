/* bench/overhead.c: `cuttle bench overhead`: what one op costs beyond its arithmetic, in
 * microseconds per call (median over many calls, each inside a scope that frees its result):
 *  - ct_add of two 1-element tensors (nothing but overhead);
 *  - ct_matmul of two 100 x 100 matrices (small BLAS work);
 * each with grad recording off (inputs not requiring grad) and on (inputs requiring grad, so every
 * call records a tape node that the scope then frees). On a GPU the clock is read after
 * ct_synchronize, so a call is launch + kernel + synchronization.
 * With --pytorch the same four are timed in PyTorch the same way (bench/pytorch_overhead.py, run by
 * --python, one JSON line) on the same device, and the table puts them side by side. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

typedef struct {
  ct_tensor *a, *b;
  int matmul;
} op_ctx;

static int run_op(void *p) {
  op_ctx *o = p;
  ct_scope_begin();
  ct_tensor *r = o->matmul ? ct_matmul(o->a, o->b) : ct_add(o->a, o->b);
  ct_scope_end();
  return r == NULL;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench overhead [--device cpu|cuda:N|opencl:N|auto] [--iters N] [--quick] [--csv FILE]\n"
             "                             [--pytorch] [--python PATH] [--script FILE]\n"
             "defaults: --device cpu --iters 20000 (--quick: 2000); the matmul runs a tenth as many\n"
             "          --python python3 --script %s/bench/pytorch_overhead.py\n"
             "--pytorch: time torch.add and torch.mm the same way on the same device, side by side\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* The four cases in cuttle (k = 2 matmul + grad: add/matmul, grad recording off/on), iters calls
 * each (a tenth for the matmul, at least 10): res[k] and ok[k] = 1 for each that ran. 0, or 1 after
 * saying why a case failed. */
static int time_cuttle(ct_device dev, int iters, ct_bench_result res[4], int ok[4]) {
  ct_generator gen = ct_generator_new(2);
  int status = 0;
  for (int matmul = 0; matmul < 2 && !status; matmul++)
    for (int grad = 0; grad < 2 && !status; grad++) {
      int64_t one[1] = {1}, hundred[2] = {100, 100};
      op_ctx o = {.matmul = matmul};
      o.a = matmul ? ct_randn(2, hundred, 0, 1, CT_F32, dev, &gen) : ct_randn(1, one, 0, 1, CT_F32, dev, &gen);
      o.b = matmul ? ct_randn(2, hundred, 0, 1, CT_F32, dev, &gen) : ct_randn(1, one, 0, 1, CT_F32, dev, &gen);
      int n = matmul ? (iters / 10 > 10 ? iters / 10 : 10) : iters;
      /* one call per sample: the median of n single-call timings */
      ct_bench_opts bo = {.warmup = n / 10 + 1, .min_repeats = n, .max_repeats = n, .target_s = 1e-9};
      ct_bench_result r;
      if (!o.a || !o.b || (grad && (ct_requires_grad_(o.a, 1) != CT_OK || ct_requires_grad_(o.b, 1) != CT_OK)) ||
          ct_bench_time(run_op, &o, dev, &bo, &r)) {
        fprintf(stderr, "cuttle bench overhead: %s\n", ct_last_error());
        status = 1;
      } else {
        res[matmul * 2 + grad] = r, ok[matmul * 2 + grad] = 1;
      }
      ct_tensor_free(o.a);
      ct_tensor_free(o.b);
    }
  return status;
}

/* Case k's row: cuttle's figures r, then with --pytorch PyTorch's from its JSON line (or "failed",
 * ct_bench_peer_cell). */
static void add_row(ct_bench_table *t, int k, const ct_bench_result *r, int pytorch, const ct_bench_peer *peer) {
  char row[512], cell[64];
  int len = snprintf(row, sizeof row, "%s|%s|%.2f|%.2f|%.2f|%d", k >= 2 ? "matmul 100x100" : "add 1 element",
                     k % 2 ? "on (inputs require grad)" : "off", r->median * 1e6, r->p10 * 1e6, r->p90 * 1e6,
                     r->samples);
  if (pytorch && ct_bench_peer_cell(peer, cell, sizeof cell)) {
    snprintf(row + len, sizeof row - (size_t)len, "|%s|%s|%s|-", cell, cell, cell);
  } else if (pytorch) {
    const char *line = peer->line;
    char key[32];
    const char *base = k == 0 ? "add_off" : k == 1 ? "add_on" : k == 2 ? "mm_off" : "mm_on";
    snprintf(key, sizeof key, "%s_median_us", base);
    double med = ct_bench_json_number(line, key);
    snprintf(key, sizeof key, "%s_p10_us", base);
    double p10 = ct_bench_json_number(line, key);
    snprintf(key, sizeof key, "%s_p90_us", base);
    double p90 = ct_bench_json_number(line, key);
    snprintf(row + len, sizeof row - (size_t)len, "|%.2f|%.2f|%.2f|%.2f", med, p10, p90, r->median * 1e6 / med);
  }
  ct_bench_table_rowf(t, "%s", row);
}

int ct_bench_overhead(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_overhead.py"};
  int iters = 0;
  const ct_bench_opt opts[] = {{.name = "iters", .kind = CT_BENCH_INT, .dst = &iters}, CT_BENCH_PYTORCH_OPTS(py), {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  if (iters <= 0) iters = common.quick ? 2000 : 20000;
  ct_device dev;
  if (ct_bench_device(common.device, &dev)) return 2;
  char devname[32], title[128];
  ct_device_str(dev, devname, sizeof devname);
  snprintf(title, sizeof title, "overhead: microseconds per call on %s (each call in a scope that frees its result)",
           devname);
  const char *heads[] = {"op",           "grad recording", "median us",     "p10 us",
                         "p90 us",       "calls",          "pytorch median us", "pytorch p10 us",
                         "pytorch p90 us", "cuttle/pytorch median"};
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 10 : 6, heads);
  int ok[4] = {0};
  ct_bench_result res[4];
  int status = time_cuttle(dev, iters, res, ok);
  /* PyTorch after cuttle's runs, so neither warms the device for the other's first row */
  static ct_bench_peer peer;
  if (py.on) {
    char args[96];
    snprintf(args, sizeof args, "--device %s --iters %d", devname, iters);
    if (ct_bench_peer_run("cuttle bench overhead", NULL, &py, args, "add_off_median_us", &peer) == CT_BENCH_PEER_FAILED)
      status = 1; /* a device PyTorch lacks (OpenCL) is no failure: the table says so */
  }
  for (int k = 0; k < 4; k++)
    if (ok[k]) add_row(t, k, &res[k], py.on, &peer);
  if (py.on && peer.status == CT_BENCH_PEER_OK) printf("pytorch: %s\n", peer.line);
  ct_bench_table_print(t, stdout);
  if (py.on) ct_bench_peer_note(&peer, stdout);
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
