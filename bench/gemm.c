/* bench/gemm.c: `cuttle bench gemm`: n x n matrix multiply in GFLOP/s (2 n^3 flops) for
 * n = 256, 512, 1024, 2048 (on a CUDA device up to 8192), per dtype (--dtype: float32, float32 with
 * TF32 allowed, bfloat16, float16; default float32), three ways on the same buffers:
 *  - ct_matmul, the public op (validation, output allocation, the tape check, the kernel);
 *  - the backend's matmul kernel called directly with a preallocated output (OpenBLAS on the CPU,
 *    cuBLAS on a GPU, CLBlast on an OpenCL device) through src/ops/bench_access.h, so the
 *    difference is the front-end's cost;
 *  - the raw BLAS called directly, the ceiling for cuttle: cblas_sgemm on the CPU, CLBlastSgemm on
 *    an OpenCL device's buffers (through bench_access.h, which resolves the buffers once so that
 *    only the library call is timed); on CUDA cublasGemmEx (src/backend/cuda/bench_access.h) with
 *    the compute type of the dtype: CUBLAS_COMPUTE_32F for float32 and, with float32 accumulation,
 *    bfloat16 and float16; CUBLAS_COMPUTE_32F_FAST_TF32 for tf32 (float32 tensors, ct_set_allow_tf32
 *    on for ct_matmul). TF32 exists on CUDA only; elsewhere tf32 is skipped with a message, and so
 *    are bfloat16 and float16 where the device's matmul refuses them (the raw column is then the
 *    backend kernel: there is no raw half-precision BLAS call here).
 * The ratio of ct_matmul to the raw call comes from pairs of single calls, taken alternately (one
 * of each, the order swapped every pair) and reduced to the median of the per-pair ratios: on a
 * machine shared with other work, load changes between two separately timed series moved the
 * ratio of their medians by up to 2x, while a pair sees nearly the same load on both sides.
 * With --pytorch, PyTorch's torch.mm runs after cuttle's rows on the same device, sizes and dtypes
 * (tf32: torch.backends.cuda.matmul.allow_tf32 = True), timed the same way (bench/pytorch_gemm.py,
 * run by --python, one JSON line: warmup, the median of samples, torch.cuda.synchronize before every
 * clock reading on a GPU); the table adds its GFLOP/s and ct_matmul's GFLOP/s divided by it. Where
 * the peer cannot run, cuttle's rows still print, its cells read "failed" and a line says why; on an
 * OpenCL device they read "no PyTorch peer on opencl". */
#define _GNU_SOURCE
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "ops/bench_access.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif
#ifdef CUTTLE_WITH_OPENCL
#include "backend/opencl/bench_access.h"
#endif
#ifdef CUTTLE_WITH_CUDA
#include "backend/cuda/bench_access.h"
#endif

typedef struct {
  ct_tensor *a, *b, *c;    /* (n, n) */
  ct_tensor *a3, *b3, *c3; /* (1, n, n) views, the backend kernel's shapes */
  int n;
#ifdef CUTTLE_WITH_OPENCL
  ct__ocl_raw_gemm *clblast; /* on an OpenCL device: CLBlastSgemm on a, b, c */
#endif
#ifdef CUTTLE_WITH_CUDA
  ct__cuda_raw_gemm *cublas; /* on a CUDA device: cublasGemmEx on a, b, c */
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
  return ct__matmul_kernel_into(g->c3, g->a3, g->b3) != CT_OK;
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
#ifdef CUTTLE_WITH_CUDA
static int run_cublas(void *p) { return ct__cuda_raw_gemm_run(((gemm_ctx *)p)->cublas) != CT_OK; }
#endif

/* The dtypes of --dtype: the tensors' dtype, and whether TF32 is allowed for ct_matmul. */
typedef struct {
  const char *name;
  ct_dtype dtype;
  int tf32;
} gemm_dtype;
static const gemm_dtype gemm_dtypes[] = {
    {"f32", CT_F32, 0}, {"tf32", CT_F32, 1}, {"bf16", CT_BF16, 0}, {"f16", CT_F16, 0}};

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

/* The raw library call on dev's buffers for dtype dt, or NULL where there is none here (then the
 * comparison is with the backend kernel). */
static ct_bench_fn raw_fn(ct_device dev, const gemm_dtype *dt, const char **name) {
#ifdef CUTTLE_WITH_CUDA
  if (dev.kind == CT_CUDA)
    return *name = dt->tf32 ? "cublasGemmEx 32F_FAST_TF32" : "cublasGemmEx 32F", run_cublas;
#endif
  if (dt->dtype != CT_F32) return *name = "none (the kernel)", NULL;
  if (dev.kind == CT_CPU) return *name = "cblas_sgemm", run_cblas;
#ifdef CUTTLE_WITH_OPENCL
  if (dev.kind == CT_OPENCL) return *name = "CLBlastSgemm", run_clblast;
#endif
  return *name = "none (the kernel)", NULL;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench gemm [--device cpu|cuda:N|opencl:N|auto] [--dtype f32|tf32|bf16|f16|all]\n"
             "                         [--sizes N,N,...] [--quick] [--csv FILE] [--pytorch] [--python PATH] [--script FILE]\n"
             "defaults: --device cpu --dtype f32 --sizes 256,512,1024,2048 (on a CUDA device\n"
             "          256,512,1024,2048,4096,8192; --quick: 128,256)\n"
             "          --python python3 --script %s/bench/pytorch_gemm.py\n"
             "--dtype: f32 = float32 with TF32 off, tf32 = float32 with ct_set_allow_tf32(1) (CUDA only),\n"
             "         bf16, f16; all = the four, one after another\n"
             "--pytorch: time torch.mm the same way on the same device, sizes and dtypes (tf32: allow_tf32 on),\n"
             "           and add PyTorch's GFLOP/s and ct_matmul's divided by it to each row\n",
          CUTTLE_SOURCE_DIR);
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

/* --dtype: the index of its first entry in gemm_dtypes (with *count of them), or -1 when unknown. */
static int parse_dtype(const char *arg, int *count) {
  *count = 1;
  if (strcmp(arg, "all") == 0) return *count = 4, 0;
  for (int k = 0; k < 4; k++)
    if (strcmp(arg, gemm_dtypes[k].name) == 0) return k;
  return -1;
}

/* The sizes: --sizes, else the defaults (more on a CUDA device, fewer with --quick). Returns their
 * number (at most 32), 0 on a malformed --sizes. */
static int choose_sizes(const char *arg, int quick, ct_device dev, int *sizes) {
  if (arg) return parse_sizes(arg, sizes, 32);
  if (quick) return sizes[0] = 128, sizes[1] = 256, 2;
  sizes[0] = 256, sizes[1] = 512, sizes[2] = 1024, sizes[3] = 2048;
  if (dev.kind != CT_CUDA) return 4;
  return sizes[4] = 4096, sizes[5] = 8192, 6;
}

/* The operands of one size in dt's dtype on dev, in the caller's scope, and raw's handle on them
 * where raw is a library call through a bench_access.h; g->c3 is NULL when any of it failed. */
static void make_operands(gemm_ctx *g, ct_device dev, const gemm_dtype *dt, ct_bench_fn raw, ct_generator *gen) {
  int64_t s2[2] = {g->n, g->n}, s3[3] = {1, g->n, g->n};
  g->a = ct_randn(2, s2, 0, 1, CT_F32, dev, gen);
  g->b = ct_randn(2, s2, 0, 1, CT_F32, dev, gen);
  if (dt->dtype != CT_F32) g->a = g->a ? ct_cast(g->a, dt->dtype) : NULL, g->b = g->b ? ct_cast(g->b, dt->dtype) : NULL;
  g->c = g->a && g->b ? ct_empty(2, s2, dt->dtype, dev) : NULL;
  g->a3 = ct_view(g->a, 3, s3), g->b3 = ct_view(g->b, 3, s3), g->c3 = ct_view(g->c, 3, s3);
#ifdef CUTTLE_WITH_OPENCL
  if (g->c3 && raw == run_clblast && !(g->clblast = ct__ocl_raw_gemm_new(g->c, g->a, g->b))) g->c3 = NULL;
#endif
#ifdef CUTTLE_WITH_CUDA
  if (g->c3 && raw == run_cublas && !(g->cublas = ct__cuda_raw_gemm_new(g->c, g->a, g->b, dt->tf32))) g->c3 = NULL;
#endif
}

static void free_raw(gemm_ctx *g) {
#ifdef CUTTLE_WITH_OPENCL
  ct__ocl_raw_gemm_free(g->clblast);
#endif
#ifdef CUTTLE_WITH_CUDA
  ct__cuda_raw_gemm_free(g->cublas);
#endif
}

/* What bench_size returns when dev has no matmul of dt's dtype: the dtype is skipped. */
enum { SKIP_DTYPE = 2 };

/* One row of the table, cuttle's side: kept until PyTorch's side has run, after all of them. */
typedef struct {
  const gemm_dtype *dt;
  int n;
  const char *rawname;
  double matmul_s, kernel_s, raw_s; /* median seconds per call; raw_s 0 without a raw call */
  double ratio;                     /* time(ct_matmul) / time(raw), paired */
} gemm_row;

/* dt at size n, three ways, into *row. 0, 1 after a failure, or SKIP_DTYPE (both said). */
static int bench_size(gemm_row *row, ct_device dev, const char *devname, const gemm_dtype *dt, int n,
                      const ct_bench_opts *bo, ct_generator *gen) {
  const char *rawname;
  ct_bench_fn raw = raw_fn(dev, dt, &rawname);
  int status = 0;
  ct_scope_begin();
  gemm_ctx g = {.n = n};
  make_operands(&g, dev, dt, raw, gen);
  ct_bench_result rm, rk, rb = {0};
  double ratio; /* time(ct_matmul) / time(raw), paired */
  /* bfloat16 and float16 where the device has no such matmul: skip the dtype, not the bench */
  if (dt->dtype != CT_F32 && dev.kind != CT_CUDA && (!g.c3 || run_matmul(&g))) {
    fprintf(stderr, "cuttle bench gemm: skipping %s on %s: %s\n", dt->name, devname, ct_last_error());
    status = SKIP_DTYPE;
  } else if (!g.c3 || ct_bench_time(run_matmul, &g, dev, bo, &rm) || ct_bench_time(run_kernel, &g, dev, bo, &rk) ||
             (raw && ct_bench_time(raw, &g, dev, bo, &rb)) ||
             paired_ratio(run_matmul, raw ? raw : run_kernel, &g, dev, bo->target_s, &ratio)) {
    fprintf(stderr, "cuttle bench gemm: %s n = %d failed: %s\n", dt->name, n, ct_last_error());
    status = 1;
  } else {
    *row = (gemm_row){.dt = dt, .n = n, .rawname = rawname, .matmul_s = rm.median, .kernel_s = rk.median,
                      .raw_s = raw ? rb.median : 0, .ratio = ratio};
  }
  free_raw(&g);
  ct_scope_end();
  return status;
}

/* The peer's arguments for the rows cuttle measured: their dtypes and sizes, in order, and the
 * timing options cuttle used, into buf (cap bytes). */
static void peer_args(const gemm_row *rows, int nrows, const char *devname, const ct_bench_opts *bo, char *buf,
                      size_t cap) {
  char dtypes[64] = "", sizes[512] = "";
  for (int i = 0; i < nrows; i++) {
    size_t dl = strlen(dtypes), sl = strlen(sizes);
    char tok[16];
    snprintf(tok, sizeof tok, ",%s,", rows[i].dt->name);
    char have[72];
    snprintf(have, sizeof have, ",%s,", dtypes);
    if (!strstr(have, tok)) snprintf(dtypes + dl, sizeof dtypes - dl, "%s%s", dl ? "," : "", rows[i].dt->name);
    snprintf(tok, sizeof tok, ",%d,", rows[i].n);
    char shave[520];
    snprintf(shave, sizeof shave, ",%s,", sizes);
    if (!strstr(shave, tok)) snprintf(sizes + sl, sizeof sizes - sl, "%s%d", sl ? "," : "", rows[i].n);
  }
  snprintf(buf, cap, "--device %s --dtypes %s --sizes %s --warmup %d --min-repeats %d --max-repeats %d --target-s %g",
           devname, dtypes, sizes, bo->warmup, bo->min_repeats, bo->max_repeats, bo->target_s);
}

/* Row r into t, with PyTorch's cells from the peer's line (or its failure) when --pytorch. */
static void add_row(ct_bench_table *t, const gemm_row *r, int pytorch, const ct_bench_peer *peer) {
  double flops = 2.0 * r->n * (double)r->n * r->n, gf = flops / r->matmul_s * 1e-9;
  char blas[48], py[2][96];
  if (r->raw_s > 0) snprintf(blas, sizeof blas, "%.1f", flops / r->raw_s * 1e-9);
  else snprintf(blas, sizeof blas, "n/a (see kernel)");
  if (pytorch) {
    char key[48], cell[96];
    snprintf(key, sizeof key, "%s_%d_s", r->dt->name, r->n);
    double secs = ct_bench_json_number(peer->line, key);
    snprintf(key, sizeof key, "%s_error", r->dt->name);
    if (ct_bench_peer_cell(peer, cell, sizeof cell)) {
      snprintf(py[0], sizeof py[0], "%s", cell), snprintf(py[1], sizeof py[1], "%s", cell);
    } else if (ct_bench_json_string(peer->line, key, cell, sizeof cell)) {
      snprintf(py[0], sizeof py[0], "unsupported"), snprintf(py[1], sizeof py[1], "-"); /* said below the table */
    } else if (isnan(secs) || secs <= 0) {
      snprintf(py[0], sizeof py[0], "missing"), snprintf(py[1], sizeof py[1], "-");
    } else {
      snprintf(py[0], sizeof py[0], "%.1f", flops / secs * 1e-9), snprintf(py[1], sizeof py[1], "%.3g", gf / (flops / secs * 1e-9));
    }
  }
  ct_bench_table_rowf(t, "%s|%d|%.3f|%.1f|%.1f|%s|%s|%+.1f%%|%.1f%%%s%s%s%s", r->dt->name, r->n, r->matmul_s * 1e3, gf,
                      flops / r->kernel_s * 1e-9, r->rawname, blas, 100 * (r->ratio - 1), 100 / r->ratio,
                      pytorch ? "|" : "", pytorch ? py[0] : "", pytorch ? "|" : "", pytorch ? py[1] : "");
}

int ct_bench_gemm(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  const char *sizes_arg = NULL, *dtype_arg = "f32";
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_gemm.py"};
  const ct_bench_opt opts[] = {{.name = "sizes", .dst = &sizes_arg}, {.name = "dtype", .dst = &dtype_arg},
                               CT_BENCH_PYTORCH_OPTS(py), {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  int dt_count, dt_first = parse_dtype(dtype_arg, &dt_count);
  if (dt_first < 0) {
    fprintf(stderr, "cuttle bench gemm: --dtype is f32, tf32, bf16, f16 or all, not '%s'\n", dtype_arg);
    return 2;
  }
  ct_device dev;
  if (ct_bench_device(common.device, &dev)) return 2;
  int sizes[32], ns = choose_sizes(sizes_arg, common.quick, dev, sizes);
  if (!ns) {
    fprintf(stderr, "cuttle bench gemm: --sizes wants a comma-separated list of sizes in 1..65536\n");
    return 2;
  }
  char devname[32];
  ct_device_str(dev, devname, sizeof devname);
  const char *heads[] = {"dtype", "n", "ct_matmul ms", "ct_matmul GFLOP/s", "kernel GFLOP/s", "raw", "raw GFLOP/s",
                         "ct_matmul vs raw (paired)", "ct_matmul % of raw (paired)", "PyTorch GFLOP/s",
                         "ct_matmul / PyTorch (GFLOP/s)"};
  char title[200];
  snprintf(title, sizeof title, "gemm: n x n, 2n^3 flops, median of repeats, on %s (kernel = the backend's matmul)",
           devname);
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 11 : 9, heads);
  ct_bench_opts bo = {.warmup = 2, .min_repeats = 3, .max_repeats = common.quick ? 10 : 50,
                      .target_s = common.quick ? 0.1 : 1.0};
  ct_generator gen = ct_generator_new(1);
  gemm_row rows[4 * 32];
  int nrows = 0, status = 0, tf32_before = ct_allow_tf32();
  for (int d = dt_first; d < dt_first + dt_count && !status; d++) {
    const gemm_dtype *dt = &gemm_dtypes[d];
    if (dt->tf32 && dev.kind != CT_CUDA) {
      fprintf(stderr, "cuttle bench gemm: skipping tf32 on %s: TF32 exists on CUDA devices only\n", devname);
      continue;
    }
    ct_set_allow_tf32(dt->tf32);
    for (int i = 0; i < ns && !status; i++) {
      if ((status = bench_size(&rows[nrows], dev, devname, dt, sizes[i], &bo, &gen)) == SKIP_DTYPE) {
        status = 0;
        break;
      }
      if (!status) nrows++;
    }
  }
  ct_set_allow_tf32(tf32_before);
  /* PyTorch after all of cuttle's rows, so neither warms the device or the caches for the other */
  static ct_bench_peer peer;
  if (py.on && nrows) {
    char args[1024];
    peer_args(rows, nrows, devname, &bo, args, sizeof args);
    if (ct_bench_peer_run("cuttle bench gemm", NULL, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  } else if (py.on) {
    peer = (ct_bench_peer){.status = CT_BENCH_PEER_FAILED};
    snprintf(peer.why, sizeof peer.why, "not run: cuttle measured no row");
  }
  for (int i = 0; i < nrows; i++) add_row(t, &rows[i], py.on, &peer);
  ct_bench_table_print(t, stdout);
  if (py.on) {
    ct_bench_peer_note(&peer, stdout);
    char key[32], why[256];
    for (int d = 0; d < 4 && peer.status == CT_BENCH_PEER_OK; d++) {
      snprintf(key, sizeof key, "%s_error", gemm_dtypes[d].name);
      if (ct_bench_json_string(peer.line, key, why, sizeof why)) printf("PyTorch has no %s torch.mm on %s: %s\n",
                                                                       gemm_dtypes[d].name, devname, why);
    }
  }
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
