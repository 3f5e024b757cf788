/* bench/gemm.c: `cuttle bench gemm`: float32 n x n matrix multiply in GFLOP/s (2 n^3 flops) for
 * n = 256, 512, 1024, 2048, three ways on the same buffers:
 *  - ct_matmul, the public op (validation, output allocation, the tape check, the kernel);
 *  - the backend's matmul kernel called directly with a preallocated output (OpenBLAS on the CPU,
 *    cuBLAS on a GPU, CLBlast on an OpenCL device), so the difference is the front-end's cost;
 *  - the raw BLAS called directly, the ceiling for cuttle: cblas_sgemm on the CPU, CLBlastSgemm on
 *    an OpenCL device's buffers (through bench_access.h, which resolves the buffers once so that
 *    only the library call is timed). On CUDA the kernel is the raw cuBLAS call.
 * The ratio of ct_matmul to the raw call comes from pairs of single calls, taken alternately (one
 * of each, the order swapped every pair) and reduced to the median of the per-pair ratios: on a
 * machine shared with other work, load changes between two separately timed series moved the
 * ratio of their medians by up to 2x, while a pair sees nearly the same load on both sides. */
#define _GNU_SOURCE
#include <cblas.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "bench.h"
#ifdef CUTTLE_WITH_OPENCL
#include "backend/opencl/bench_access.h"
#endif

typedef struct {
  ct_tensor *a, *b, *c;    /* (n, n) */
  ct_tensor *a3, *b3, *c3; /* (1, n, n) views, the backend kernel's shapes */
  int n;
#ifdef CUTTLE_WITH_OPENCL
  ct__ocl_raw_gemm *clblast; /* on an OpenCL device: CLBlastSgemm on a, b, c */
#endif
} gemm_ctx;

static int run_matmul(void *p) {
  gemm_ctx *g = p;
  ct_tensor *c = ct_matmul(g->a, g->b);
  ct_tensor_free(c);
  return c == NULL;
}

static int run_kernel(void *p) {
  gemm_ctx *g = p;
  return g->a->storage->backend->matmul(g->c3, g->a3, g->b3) != CT_OK;
}

static int run_cblas(void *p) {
  gemm_ctx *g = p;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, ct_tensor_data(g->a), g->n,
              ct_tensor_data(g->b), g->n, 0.0f, ct_tensor_data(g->c), g->n);
  return 0;
}

#ifdef CUTTLE_WITH_OPENCL
static int run_clblast(void *p) { return ct__ocl_raw_gemm_run(((gemm_ctx *)p)->clblast) != CT_OK; }
#endif

/* Median over pairs of time(a) / time(b), each call timed alone and synchronized, the order within
 * a pair alternating; at least 5 pairs, then more until target_s has passed (at most 50). Returns
 * 0, or nonzero when a call failed. */
static int paired_ratio(ct_bench_fn a, ct_bench_fn b, void *ctx, ct_device dev, double target_s, double *ratio) {
  enum { MAX_PAIRS = 50 };
  double r[MAX_PAIRS], spent = 0;
  int n = 0;
  if (a(ctx) || b(ctx) || (dev.kind != CT_CPU && ct_synchronize(dev) != CT_OK)) return 1; /* warm both */
  while (n < MAX_PAIRS && (n < 5 || spent < target_s)) {
    double t[2];
    for (int k = 0; k < 2; k++) {
      int first_a = n % 2 == 0, is_a = k == 0 ? first_a : !first_a;
      double t0 = ct_bench_now();
      if ((is_a ? a : b)(ctx) || (dev.kind != CT_CPU && ct_synchronize(dev) != CT_OK)) return 1;
      t[is_a ? 0 : 1] = ct_bench_now() - t0;
    }
    spent += t[0] + t[1];
    r[n++] = t[0] / t[1];
  }
  for (int i = 1; i < n; i++) /* insertion sort: at most 50 values */
    for (int j = i; j > 0 && r[j - 1] > r[j]; j--) {
      double x = r[j];
      r[j] = r[j - 1], r[j - 1] = x;
    }
  *ratio = n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
  return 0;
}

/* The raw library call on dev's buffers, or NULL where the kernel already is it (CUDA). */
static ct_bench_fn raw_fn(ct_device dev, const char **name) {
  if (dev.kind == CT_CPU) return *name = "cblas_sgemm", run_cblas;
#ifdef CUTTLE_WITH_OPENCL
  if (dev.kind == CT_OPENCL) return *name = "CLBlastSgemm", run_clblast;
#endif
  return *name = "cuBLAS (the kernel)", NULL;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench gemm [--device cpu|cuda:N|opencl:N|auto] [--sizes N,N,...] [--quick] [--csv FILE]\n"
             "defaults: --device cpu --sizes 256,512,1024,2048 (--quick: 128,256)\n");
  return f == stdout ? 0 : 2;
}

/* Parse "256,512" into out (at most cap); returns the count, 0 on a malformed list. */
static int parse_sizes(const char *s, int *out, int cap) {
  int n = 0;
  while (*s && n < cap) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 65536) return 0;
    out[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return 0;
  }
  return n;
}

int ct_bench_gemm(int argc, char **argv) {
  const char *device = "cpu", *csv = NULL, *sizes_arg = NULL;
  int quick = 0;
  static const struct option longopts[] = {{"device", 1, 0, 'd'}, {"csv", 1, 0, 'c'}, {"quick", 0, 0, 'q'},
                                           {"sizes", 1, 0, 's'},  {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (opt) {
      case 'd': device = optarg; break;
      case 'c': csv = optarg; break;
      case 'q': quick = 1; break;
      case 's': sizes_arg = optarg; break;
      case 'h': return usage(stdout);
      default: return usage(stderr);
    }
  }
  int sizes[32], ns;
  if (sizes_arg) {
    if (!(ns = parse_sizes(sizes_arg, sizes, 32))) {
      fprintf(stderr, "cuttle bench gemm: --sizes wants a comma-separated list of sizes in 1..65536\n");
      return 2;
    }
  } else if (quick) {
    ns = 2, sizes[0] = 128, sizes[1] = 256;
  } else {
    ns = 4, sizes[0] = 256, sizes[1] = 512, sizes[2] = 1024, sizes[3] = 2048;
  }
  ct_device dev;
  if (ct_bench_device(device, &dev)) return 2;
  char devname[32];
  ct_device_str(dev, devname, sizeof devname);
  const char *rawname;
  ct_bench_fn raw = raw_fn(dev, &rawname);
  const char *heads[] = {"n", "ct_matmul ms", "ct_matmul GFLOP/s", "kernel GFLOP/s", "raw GFLOP/s",
                         "ct_matmul vs raw (paired)", "ct_matmul % of raw (paired)"};
  char title[200];
  snprintf(title, sizeof title, "gemm: float32 n x n, 2n^3 flops, median of repeats, on %s (raw = %s)", devname, rawname);
  ct_bench_table *t = ct_bench_table_new(title, 7, heads);
  ct_bench_opts bo = {.warmup = 2, .min_repeats = 3, .max_repeats = quick ? 10 : 50, .target_s = quick ? 0.1 : 1.0};
  ct_generator gen = ct_generator_new(1);
  int status = 0;
  for (int i = 0; i < ns && !status; i++) {
    int n = sizes[i];
    int64_t s2[2] = {n, n}, s3[3] = {1, n, n};
    ct_scope_begin();
    gemm_ctx g = {.n = n};
    g.a = ct_randn(2, s2, 0, 1, CT_F32, dev, &gen);
    g.b = ct_randn(2, s2, 0, 1, CT_F32, dev, &gen);
    g.c = ct_empty(2, s2, CT_F32, dev);
    g.a3 = ct_view(g.a, 3, s3), g.b3 = ct_view(g.b, 3, s3), g.c3 = ct_view(g.c, 3, s3);
#ifdef CUTTLE_WITH_OPENCL
    if (g.c3 && dev.kind == CT_OPENCL && !(g.clblast = ct__ocl_raw_gemm_new(g.c, g.a, g.b))) g.c3 = NULL;
#endif
    ct_bench_result rm, rk, rb = {0};
    double ratio; /* time(ct_matmul) / time(raw), paired */
    if (!g.c3 || ct_bench_time(run_matmul, &g, dev, &bo, &rm) || ct_bench_time(run_kernel, &g, dev, &bo, &rk) ||
        (raw && ct_bench_time(raw, &g, dev, &bo, &rb)) ||
        paired_ratio(run_matmul, raw ? raw : run_kernel, &g, dev, bo.target_s, &ratio)) {
      fprintf(stderr, "cuttle bench gemm: n = %d failed: %s\n", n, ct_last_error());
      status = 1;
    } else {
      double flops = 2.0 * n * (double)n * n;
      char blas[48];
      if (raw) snprintf(blas, sizeof blas, "%.1f", flops / rb.median * 1e-9);
      else snprintf(blas, sizeof blas, "n/a (see kernel)");
      ct_bench_table_rowf(t, "%d|%.3f|%.1f|%.1f|%s|%+.1f%%|%.1f%%", n, rm.median * 1e3, flops / rm.median * 1e-9,
                          flops / rk.median * 1e-9, blas, 100 * (ratio - 1), 100 / ratio);
    }
#ifdef CUTTLE_WITH_OPENCL
    ct__ocl_raw_gemm_free(g.clblast);
#endif
    ct_scope_end();
  }
  ct_bench_table_print(t, stdout);
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
