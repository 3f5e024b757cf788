/* bench/matmul_sweep.c: `cuttle bench matmul-sweep`: float32 n x n matmul for n = 16, 32, ... on
 * the CPU and on a device (a CUDA GPU or an OpenCL device, "dev" in the table), the device twice:
 * compute only (inputs already there) and with the copies (both inputs host-to-device and the
 * result device-to-host with ct_to, from pageable memory), so the table shows from which n the
 * device wins, with and without paying for the transfers. Without a device the device columns say
 * so. With --pytorch, PyTorch's torch.mm runs after cuttle's rows (bench/pytorch_matmul_sweep.py, run
 * by --python, one JSON line), timed the same way (warmup, the median of samples,
 * torch.cuda.synchronize before every clock reading on a GPU): on the CPU, and on a CUDA device
 * compute only and with both inputs copied from pageable CPU tensors and the result copied back,
 * as cuttle's columns; the table adds its three ms columns. PyTorch has no OpenCL device: there its
 * device cells read "no PyTorch peer on opencl" (its CPU column is still measured). Where the peer
 * cannot run, cuttle's rows still print, its cells read "failed" and a line says why. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

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
             "                                 [--pytorch] [--python PATH] [--script FILE]\n"
             "defaults: --device auto (the dev columns use it; cpu = CPU only), --max-n 8192 with a device, 4096 without,\n"
             "          --cpu-max-n 4096 (the CPU is not timed above it); --quick: --max-n 512\n"
             "          --python python3 --script %s/bench/pytorch_matmul_sweep.py\n"
             "--pytorch: time torch.mm the same way on the CPU and on the device (compute only, and with the copies from\n"
             "           pageable tensors), beside cuttle's columns (no PyTorch device on opencl: its CPU column only)\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* The timing options of time_one, which the peer gets too. */
static ct_bench_opts sweep_opts(int quick) {
  return (ct_bench_opts){.warmup = 1, .min_repeats = 3, .max_repeats = quick ? 20 : 100, .target_s = quick ? 0.05 : 0.5};
}

static int time_one(ct_bench_fn fn, mm_ctx *m, ct_device dev, int quick, double *ms) {
  ct_bench_opts bo = sweep_opts(quick);
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

/* PyTorch's three cells of size n (CPU, dev compute, dev + copies ms) from the peer's line: its
 * figure, "skipped" / "n/a (no device)" as cuttle's cells, the no-peer text for a device it lacks,
 * or "failed"; into cells. */
static void pytorch_cells(const ct_bench_peer *peer, int n, int have_gpu, int cpu_max_n, char cells[3][64]) {
  char cell[64];
  if (ct_bench_peer_cell(peer, cell, sizeof cell)) {
    for (int k = 0; k < 3; k++) snprintf(cells[k], 64, "%s", cell);
    return;
  }
  char dev_none[64] = "";
  if (ct_bench_json_string(peer->line, "dev_no_peer", cell, sizeof cell))
    snprintf(dev_none, sizeof dev_none, "%.*s", (int)strcspn(cell, ":"), cell);
  static const char *const keys[3] = {"cpu", "dev", "copies"};
  for (int k = 0; k < 3; k++) {
    char key[32];
    snprintf(key, sizeof key, "%s_%d_ms", keys[k], n);
    double v = ct_bench_json_number(peer->line, key);
    if (k == 0 && n > cpu_max_n) snprintf(cells[k], 64, "skipped");
    else if (k > 0 && !have_gpu) snprintf(cells[k], 64, "n/a (no device)");
    else if (k > 0 && dev_none[0]) snprintf(cells[k], 64, "%s", dev_none);
    else if (isnan(v)) snprintf(cells[k], 64, "missing");
    else snprintf(cells[k], 64, "%.4f", v);
  }
}

/* The row of size n, and the first n where the device won (*win_compute, *win_copies, 0 before);
 * with py (--pytorch), PyTorch's three cells after cuttle's. */
static void add_row(ct_bench_table *t, int n, int have_gpu, const sweep_ms *ms, int *win_compute, int *win_copies,
                    const char (*py)[64]) {
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
  if (py) ct_bench_table_rowf(t, "%d|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s", n, c1, c2, g1, g2, p1, p2, fast, py[0], py[1], py[2]);
  else ct_bench_table_rowf(t, "%d|%s|%s|%s|%s|%s|%s|%s", n, c1, c2, g1, g2, p1, p2, fast);
}

int ct_bench_matmul_sweep(int argc, char **argv) {
  ct_bench_common common = {.device = "auto"};
  int max_n = 0, cpu_max_n = 4096;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_matmul_sweep.py"};
  const ct_bench_opt opts[] = {{.name = "max-n", .kind = CT_BENCH_INT, .dst = &max_n},
                               {.name = "cpu-max-n", .kind = CT_BENCH_INT, .dst = &cpu_max_n},
                               CT_BENCH_PYTORCH_OPTS(py),
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
  const char *heads[] = {"n",          "CPU ms",       "CPU GFLOP/s",        "dev compute ms",
                         "dev compute GFLOP/s", "dev+copies ms", "dev+copies GFLOP/s", "faster",
                         "PyTorch CPU ms", "PyTorch dev compute ms", "PyTorch dev+copies ms"};
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 11 : 8, heads);
  ct_generator gen = ct_generator_new(3);
  int status = 0, win_compute = 0, win_copies = 0, nrows = 0;
  sweep_ms rows[32];
  for (int n = 16; n <= max_n && !status && nrows < 32; n *= 2) {
    if ((status = time_size(n, gpu, have_gpu, cpu_max_n, common.quick, &gen, &rows[nrows])) != 0)
      fprintf(stderr, "cuttle bench matmul-sweep: n = %d failed: %s\n", n, ct_last_error());
    else nrows++;
  }
  int cuttle_failed = status;
  /* PyTorch after cuttle's rows, for the sizes they reached, so neither warms the other's first row */
  static ct_bench_peer peer;
  if (py.on && nrows) {
    ct_bench_opts bo = sweep_opts(common.quick);
    char args[512];
    snprintf(args, sizeof args, "--device %s --max-n %d --cpu-max-n %d --warmup %d --min-repeats %d --max-repeats %d "
             "--target-s %g", gname, 16 << (nrows - 1), cpu_max_n, bo.warmup, bo.min_repeats, bo.max_repeats, bo.target_s);
    if (ct_bench_peer_run("cuttle bench matmul-sweep", NULL, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  }
  for (int i = 0, n = 16; i < nrows; i++, n *= 2) {
    char cells[3][64];
    if (py.on) pytorch_cells(&peer, n, have_gpu, cpu_max_n, cells);
    add_row(t, n, have_gpu, &rows[i], &win_compute, &win_copies, py.on ? (const char (*)[64])cells : NULL);
  }
  ct_bench_table_print(t, stdout);
  int done = nrows && !cuttle_failed; /* every size of cuttle's ran (whatever became of the peer) */
  if (have_gpu && done) {
    if (win_compute) printf("%s is faster from n = %d (compute only)", gname, win_compute);
    else printf("%s is never faster (compute only) up to n = %d", gname, max_n < cpu_max_n ? max_n : cpu_max_n);
    if (win_copies) printf(", from n = %d with the copies\n", win_copies);
    else printf(", never with the copies\n");
  } else if (done) {
    printf("no device: the device columns are n/a\n");
  }
  if (py.on && nrows) {
    ct_bench_peer_note(&peer, stdout);
    char why[256];
    if (peer.status == CT_BENCH_PEER_OK && ct_bench_json_string(peer.line, "dev_no_peer", why, sizeof why))
      printf("PyTorch: %s\n", why);
  }
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
