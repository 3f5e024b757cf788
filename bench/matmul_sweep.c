/* bench/matmul_sweep.c: `cuttle bench matmul-sweep`: float32 n x n matmul for n = 16, 32, ... on
 * the CPU and on a device (a CUDA GPU or an OpenCL device, "dev" in the table), the device twice:
 * compute only (inputs already there) and with the copies (both inputs host-to-device and the
 * result device-to-host with ct_to, from pageable memory), so the table shows from which n the
 * device wins, with and without paying for the transfers. Without a device the device columns say
 * so. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "bench.h"

typedef struct {
  ct_tensor *a, *b;         /* where the compute runs */
  ct_tensor *ha, *hb;       /* host copies, for the with-copies variant */
  ct_device dev;
} mm_ctx;

static int run_compute(void *p) {
  mm_ctx *m = p;
  ct_tensor *c = ct_matmul(m->a, m->b);
  ct_tensor_free(c);
  return c == NULL;
}

/* host inputs -> device -> matmul -> host result: what a caller holding host data pays */
static int run_with_copies(void *p) {
  mm_ctx *m = p;
  ct_scope_begin();
  ct_tensor *a = ct_to(m->ha, m->dev, 0), *b = ct_to(m->hb, m->dev, 0);
  ct_tensor *c = ct_to(ct_matmul(a, b), CT_DEVICE_CPU, 0);
  ct_scope_end();
  return c == NULL;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench matmul-sweep [--device cuda:N|opencl:N|auto|cpu] [--max-n N] [--cpu-max-n N] [--quick] [--csv FILE]\n"
             "defaults: --device auto (the dev columns use it; cpu = CPU only), --max-n 8192 with a device, 4096 without,\n"
             "          --cpu-max-n 4096 (the CPU is not timed above it); --quick: --max-n 512\n");
  return f == stdout ? 0 : 2;
}

static int time_one(ct_bench_fn fn, mm_ctx *m, ct_device dev, int quick, double *ms) {
  ct_bench_opts bo = {.warmup = 1, .min_repeats = 3, .max_repeats = quick ? 20 : 100, .target_s = quick ? 0.05 : 0.5};
  ct_bench_result r;
  if (ct_bench_time(fn, m, dev, &bo, &r)) return 1;
  *ms = r.median * 1e3;
  return 0;
}

/* The median ms of one size: on the CPU (-1 above cpu_max_n), and on gpu compute only and with
 * the copies (-1 without a device). */
typedef struct {
  double cpu, dev, copies;
} sweep_ms;

/* Time n x n on the CPU and on gpu (have_gpu). 0, or 1 when a run failed. */
static int time_size(int n, ct_device gpu, int have_gpu, int cpu_max_n, int quick, ct_generator *gen, sweep_ms *ms) {
  int64_t s2[2] = {n, n};
  *ms = (sweep_ms){-1, -1, -1};
  int status = 0;
  ct_scope_begin();
  mm_ctx m = {.dev = gpu};
  m.ha = ct_randn(2, s2, 0, 1, CT_F32, CT_DEVICE_CPU, gen);
  m.hb = ct_randn(2, s2, 0, 1, CT_F32, CT_DEVICE_CPU, gen);
  if (!m.ha || !m.hb) status = 1;
  if (!status && n <= cpu_max_n) {
    mm_ctx c = {.a = m.ha, .b = m.hb, .dev = CT_DEVICE_CPU};
    status = time_one(run_compute, &c, CT_DEVICE_CPU, quick, &ms->cpu);
  }
  if (!status && have_gpu) {
    m.a = ct_to(m.ha, gpu, 0), m.b = ct_to(m.hb, gpu, 0);
    status = !m.a || !m.b || time_one(run_compute, &m, gpu, quick, &ms->dev) ||
             time_one(run_with_copies, &m, gpu, quick, &ms->copies);
  }
  ct_scope_end();
  return status;
}

/* The row of size n, and the first n where the device won (*win_compute, *win_copies, 0 before). */
static void add_row(ct_bench_table *t, int n, int have_gpu, const sweep_ms *ms, int *win_compute, int *win_copies) {
  double flops = 2.0 * n * (double)n * n;
  char c1[32], c2[32], g1[32], g2[32], p1[32], p2[32], fast[64];
  if (ms->cpu >= 0) snprintf(c1, sizeof c1, "%.4f", ms->cpu), snprintf(c2, sizeof c2, "%.1f", flops / ms->cpu * 1e-6);
  else snprintf(c1, sizeof c1, "skipped"), snprintf(c2, sizeof c2, "(> --cpu-max-n)");
  if (have_gpu) {
    snprintf(g1, sizeof g1, "%.4f", ms->dev), snprintf(g2, sizeof g2, "%.1f", flops / ms->dev * 1e-6);
    snprintf(p1, sizeof p1, "%.4f", ms->copies), snprintf(p2, sizeof p2, "%.1f", flops / ms->copies * 1e-6);
  } else {
    for (char *b[] = {g1, g2, p1, p2}, **q = b; q < b + 4; q++) snprintf(*q, 32, "n/a (no device)");
  }
  if (!have_gpu) snprintf(fast, sizeof fast, "CPU (only)");
  else if (ms->cpu < 0) snprintf(fast, sizeof fast, "dev (CPU not timed)");
  else {
    int wc = ms->dev < ms->cpu, wp = ms->copies < ms->cpu;
    if (wc && !*win_compute) *win_compute = n;
    if (wp && !*win_copies) *win_copies = n;
    snprintf(fast, sizeof fast, "%s", wp ? "dev, even with copies" : wc ? "dev compute only" : "CPU");
  }
  ct_bench_table_rowf(t, "%d|%s|%s|%s|%s|%s|%s|%s", n, c1, c2, g1, g2, p1, p2, fast);
}

int ct_bench_matmul_sweep(int argc, char **argv) {
  ct_bench_common common = {.device = "auto"};
  int max_n = 0, cpu_max_n = 4096;
  const ct_bench_opt opts[] = {{.name = "max-n", .kind = CT_BENCH_INT, .dst = &max_n},
                               {.name = "cpu-max-n", .kind = CT_BENCH_INT, .dst = &cpu_max_n},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  ct_device gpu;
  if (ct_bench_device(common.device, &gpu)) return 2;
  int have_gpu = gpu.kind != CT_CPU;
  if (max_n <= 0) max_n = common.quick ? 512 : have_gpu ? 8192 : 4096;
  if (max_n < 16 || cpu_max_n < 0) {
    fprintf(stderr, "cuttle bench matmul-sweep: --max-n must be >= 16\n");
    return 2;
  }
  char gname[32], title[160];
  ct_device_str(gpu, gname, sizeof gname);
  snprintf(title, sizeof title, "matmul-sweep: float32 n x n, median ms (GFLOP/s), CPU vs %s (dev)",
           have_gpu ? gname : "no device");
  const char *heads[] = {"n", "CPU ms", "CPU GFLOP/s", "dev compute ms", "dev compute GFLOP/s", "dev+copies ms",
                         "dev+copies GFLOP/s", "faster"};
  ct_bench_table *t = ct_bench_table_new(title, 8, heads);
  ct_generator gen = ct_generator_new(3);
  int status = 0, win_compute = 0, win_copies = 0;
  for (int n = 16; n <= max_n && !status; n *= 2) {
    sweep_ms ms;
    if ((status = time_size(n, gpu, have_gpu, cpu_max_n, common.quick, &gen, &ms)) != 0)
      fprintf(stderr, "cuttle bench matmul-sweep: n = %d failed: %s\n", n, ct_last_error());
    else add_row(t, n, have_gpu, &ms, &win_compute, &win_copies);
  }
  ct_bench_table_print(t, stdout);
  if (have_gpu && !status) {
    if (win_compute) printf("%s is faster from n = %d (compute only)", gname, win_compute);
    else printf("%s is never faster (compute only) up to n = %d", gname, max_n < cpu_max_n ? max_n : cpu_max_n);
    if (win_copies) printf(", from n = %d with the copies\n", win_copies);
    else printf(", never with the copies\n");
  } else if (!status) {
    printf("no device: the device columns are n/a\n");
  }
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
