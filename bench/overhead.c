/* bench/overhead.c: `cuttle bench overhead`: what one op costs beyond its arithmetic, in
 * microseconds per call (median over many calls, each inside a scope that frees its result):
 *  - ct_add of two 1-element tensors (nothing but overhead);
 *  - ct_matmul of two 100 x 100 matrices (small BLAS work);
 * each with grad recording off (inputs not requiring grad) and on (inputs requiring grad, so every
 * call records a tape node that the scope then frees). On a GPU the clock is read after
 * ct_synchronize, so a call is launch + kernel + synchronization. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

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
             "defaults: --device cpu --iters 20000 (--quick: 2000); the matmul runs a tenth as many\n");
  return f == stdout ? 0 : 2;
}

int ct_bench_overhead(int argc, char **argv) {
  const char *device = "cpu", *csv = NULL;
  int quick = 0, iters = 0;
  static const struct option longopts[] = {{"device", 1, 0, 'd'}, {"csv", 1, 0, 'c'}, {"quick", 0, 0, 'q'},
                                           {"iters", 1, 0, 'i'},  {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (opt) {
      case 'd': device = optarg; break;
      case 'c': csv = optarg; break;
      case 'q': quick = 1; break;
      case 'i': iters = atoi(optarg); break;
      case 'h': return usage(stdout);
      default: return usage(stderr);
    }
  }
  if (iters <= 0) iters = quick ? 2000 : 20000;
  ct_device dev;
  if (ct_bench_device(device, &dev)) return 2;
  char devname[32], title[128];
  ct_device_str(dev, devname, sizeof devname);
  snprintf(title, sizeof title, "overhead: microseconds per call on %s (each call in a scope that frees its result)",
           devname);
  const char *heads[] = {"op", "grad recording", "median us", "p10 us", "p90 us", "calls"};
  ct_bench_table *t = ct_bench_table_new(title, 6, heads);
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
        ct_bench_table_rowf(t, "%s|%s|%.2f|%.2f|%.2f|%d", matmul ? "matmul 100x100" : "add 1 element",
                            grad ? "on (inputs require grad)" : "off", r.median * 1e6, r.p10 * 1e6, r.p90 * 1e6,
                            r.samples);
      }
      ct_tensor_free(o.a);
      ct_tensor_free(o.b);
    }
  ct_bench_table_print(t, stdout);
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
