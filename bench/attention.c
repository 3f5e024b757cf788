/* bench/attention.c: `cuttle bench attention`: scaled dot-product attention, forward and backward,
 * at sequence lengths T = 128 ... 4096 (B = 4, H = 8, D = 64, float32), three ways side by side:
 *  (a) fused: ct_scaled_dot_product_attention(q, k, v, NULL, 0, causal, 0), which on the CPU runs
 *      the FlashAttention-2 kernels forward and backward (src/backend/cpu/attention.c; memory O(T)),
 *      and a backend's own fused kernels where it has them;
 *  (b) composed: ct__sdpa_composed (src/ops/attention_internal.h), matmul, softmax and the causal
 *      where, torch's math reference (memory O(T^2): the (B, H, T, T) scores and probabilities);
 *  (c) with --pytorch: torch.nn.functional.scaled_dot_product_attention on the same device, shapes,
 *      dtype and thread count (bench/pytorch_attention.py, one JSON line), whichever kernel PyTorch
 *      picks (it says which; torch 1.13, which lacks the public function, runs its private math form
 *      torch.nn.functional._scaled_dot_product_attention).
 * One run is: the gradients of q, k, v set to none, out = attention(q, k, v), loss = sum(out * r)
 * for a fixed r, backward. Timing: ct_bench_time's median (warmup, repeats; a GPU synchronized
 * before every clock reading). Peak bytes: ct_reset_peak_memory_stats before one run, the
 * allocator's peak_allocated after it minus the bytes allocated before it (the inputs q, k, v, r
 * are not counted; the gradients of q, k, v are, as every other tensor the run makes).
 * The inputs are formulas of the flat index i, the same in the peer (q[i] = sin(0.37 i),
 * k[i] = sin(0.61 i + 1), v[i] = sin(0.23 i + 2), r[i] = sin(0.11 i + 3), in double then rounded
 * to float32), so that sum(out) and sum(dq * r) (dq = dL/dq), printed for each side in float64, show
 * that the three computed the same thing; max |fused - composed| of out and dq is a column too.
 * The composed form (and PyTorch's math form) is skipped where its predicted bytes exceed
 * --max-composed-bytes (the cells read "skipped (N GiB)"). On a backend without fused kernels
 * (src/backend/kernels_by_backend.def) ct_scaled_dot_product_attention composes itself; a line
 * under the table says so (the output's grad_fn tells). */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cblas.h>
#include "bench.h"
#include "ops/attention_internal.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

/* The composed form's peak above its inputs on the CPU: 4 (B, H, T, T) float32 tensors (during the
 * backward: the probabilities, their gradient and softmax's temporaries), 3 (B, H, T, D) ones, and
 * with is_causal the (T, T) bool mask; measured exactly so at T = 512 and 1024 (B H = 4). */
static double composed_bytes(int64_t B, int64_t H, int64_t T, int64_t D, int causal) {
  double bh = (double)B * (double)H, t = (double)T;
  return 4 * bh * t * t * sizeof(float) + 3 * bh * t * (double)D * sizeof(float) + (causal ? t * t : 0);
}

typedef struct {
  ct_tensor *q, *k, *v, *r;
  int causal, composed;
  double scale; /* 1 / sqrt(D), the composed form's resolved scale */
  /* the check run's results: sum(out) and sum(dq * r) in float64, and out and dq on the host */
  double sum_out, sum_dq;
  float *out_host, *dq_host;
  const float *r_host; /* r's elements: the weights of dq's checksum */
} attn_ctx;

/* The sum of t's elements (times weight's, when weight is not NULL) in float64, and t's elements as
 * float32 into keep (n of them) when keep is not NULL; 0 or 1. */
static int host_sum(ct_tensor *t, int64_t n, const float *weight, double *sum, float *keep) {
  double *h = malloc(sizeof(double) * (size_t)n);
  if (!h) return 1;
  if (!t || ct_to_host(t, h, sizeof(double) * (size_t)n, CT_F64) != CT_OK) return free(h), 1;
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    s += weight ? h[i] * (double)weight[i] : h[i];
    if (keep) keep[i] = (float)h[i];
  }
  *sum = s;
  free(h);
  return 0;
}

/* One run: out = attention(q, k, v), backward of sum(out * r); the gradients of q, k, v set to none
 * after it, so that the next run starts with the inputs alone. With check, also sum(out) and
 * sum(dq * r) into c (dq = dL/dq; a plain sum of dq nearly cancels, since each row of softmax's
 * gradient sums to 0), and their elements into c->out_host, c->dq_host. */
static int run_once(attn_ctx *c, int check, const char **grad_fn) {
  if (ct_scope_begin() != CT_OK) return 1;
  ct_tensor *out = c->composed ? ct__sdpa_composed(c->q, c->k, c->v, NULL, 0, c->causal, c->scale)
                               : ct_scaled_dot_product_attention(c->q, c->k, c->v, NULL, 0, c->causal, 0);
  if (out && grad_fn) *grad_fn = ct_grad_fn_name(out);
  ct_tensor *prod = out ? ct_mul(out, c->r) : NULL;
  ct_tensor *loss = prod ? ct_sum(prod, 0, NULL, 0) : NULL;
  int bad = (loss ? ct_backward(loss) : ct_last_status()) != CT_OK;
  if (!bad && check) {
    int64_t n = ct_tensor_numel(c->q);
    bad = host_sum(out, ct_tensor_numel(out), NULL, &c->sum_out, c->out_host) ||
          host_sum(ct_grad(c->q), n, c->r_host, &c->sum_dq, c->dq_host);
  }
  ct_zero_grad(c->q), ct_zero_grad(c->k), ct_zero_grad(c->v);
  ct_scope_end();
  return bad;
}

static int run_timed(void *p) { return run_once(p, 0, NULL); }

/* Bytes the allocator's peak rose above what was allocated before one run. 0 or 1. */
static int run_peak(attn_ctx *c, ct_device dev, int64_t *peak) {
  ct_memory_stats st;
  if (ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK || ct_reset_peak_memory_stats(dev) != CT_OK)
    return 1;
  size_t before = st.allocated;
  if (run_once(c, 0, NULL) || ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK) return 1;
  *peak = (int64_t)st.peak_allocated - (int64_t)before;
  return 0;
}

/* One side's figures at one T. */
typedef struct {
  int ran;        /* 0: skipped (predicted bytes over the limit) */
  double ms;      /* median ms per run */
  int64_t peak;   /* bytes above the inputs */
  double sum_out, sum_dq;
} side_result;

typedef struct {
  int64_t T;
  side_result fused, composed;
  double predicted; /* the composed form's predicted bytes */
  double diff_out, diff_dq; /* max |fused - composed| */
} attn_row;

/* A (B, H, T, D) float32 tensor on dev whose flat element i is sin(f i + phase); its elements stay in
 * *host when host is not NULL (the caller frees them). */
static ct_tensor *formula(const int64_t shape[4], double f, double phase, ct_device dev, float **host) {
  int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
  float *h = malloc(sizeof(float) * (size_t)n);
  if (!h) return NULL;
  for (int64_t i = 0; i < n; i++) {
    volatile double x = (double)i * f; /* no fused multiply-add: the peer's arithmetic, step by step */
    h[i] = (float)sin(x + phase);
  }
  ct_tensor *t = ct_from_host(h, 4, shape, CT_F32, dev);
  if (host && t) *host = h;
  else free(h);
  return t;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
  return m;
}

/* One side (fused or composed) at one T: a check run (the sums), a peak run, then the timing. */
static int measure_side(attn_ctx *c, ct_device dev, const ct_bench_opts *bo, side_result *r, const char **grad_fn) {
  ct_bench_result br;
  if (run_once(c, 1, grad_fn) || run_peak(c, dev, &r->peak) || ct_bench_time(run_timed, c, dev, bo, &br)) return 1;
  r->ran = 1, r->ms = br.median * 1e3, r->sum_out = c->sum_out, r->sum_dq = c->sum_dq;
  return 0;
}

/* One T: the fused side, then the composed one unless its predicted bytes exceed max_composed (and
 * the fused side too when fused_composes: a backend without fused kernels, as an earlier row found). */
static int measure_row(attn_row *row, int64_t B, int64_t H, int64_t D, int causal, size_t max_composed, int fused_composes,
                       ct_device dev, const ct_bench_opts *bo, const char **grad_fn) {
  int64_t T = row->T, shape[4] = {B, H, T, D}, n = B * H * T * D;
  attn_ctx c = {.causal = causal, .scale = 1.0 / sqrt((double)D)};
  float *rh = NULL;
  c.q = formula(shape, 0.37, 0, dev, NULL), c.k = formula(shape, 0.61, 1, dev, NULL), c.v = formula(shape, 0.23, 2, dev, NULL);
  c.r = formula(shape, 0.11, 3, dev, &rh);
  c.r_host = rh;
  float *fo = malloc(sizeof(float) * (size_t)n), *fd = malloc(sizeof(float) * (size_t)n);
  int status = !c.q || !c.k || !c.v || !c.r || !fo || !fd || ct_requires_grad_(c.q, 1) != CT_OK ||
               ct_requires_grad_(c.k, 1) != CT_OK || ct_requires_grad_(c.v, 1) != CT_OK;
  row->predicted = composed_bytes(B, H, T, D, causal);
  row->diff_out = row->diff_dq = NAN;
  int fits = row->predicted <= (double)max_composed;
  if (!status && (fits || !fused_composes)) {
    c.out_host = fo, c.dq_host = fd;
    status = measure_side(&c, dev, bo, &row->fused, grad_fn);
  }
  if (!status && fits) {
    c.composed = 1;
    float *co = malloc(sizeof(float) * (size_t)n), *cd = malloc(sizeof(float) * (size_t)n);
    c.out_host = co, c.dq_host = cd;
    status = !co || !cd || measure_side(&c, dev, bo, &row->composed, NULL);
    if (!status && row->fused.ran) row->diff_out = max_abs_diff(fo, co, n), row->diff_dq = max_abs_diff(fd, cd, n);
    free(co), free(cd);
  }
  free(fo), free(fd), free(rh);
  ct_tensor_free(c.q), ct_tensor_free(c.k), ct_tensor_free(c.v), ct_tensor_free(c.r);
  return status;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: cuttle bench attention [--device cpu|cuda:N|opencl:N|auto] [--batch B] [--heads H] [--head-dim D]\n"
          "                              [--sizes T,T,...] [--causal] [--max-composed-bytes N] [--threads N] [--quick]\n"
          "                              [--csv FILE] [--pytorch] [--python PATH] [--script FILE]\n"
          "forward + backward of sum(attention(q, k, v) * r), float32, (B, H, T, D): time and peak bytes above the\n"
          "inputs, (a) ct_scaled_dot_product_attention (fused kernels where the backend has them),\n"
          "(b) the composed form (matmul, softmax: O(T^2) memory), (c) --pytorch: torch's\n"
          "scaled_dot_product_attention on the same device, shapes and threads (one JSON line)\n"
          "defaults: --device cpu --batch 4 --heads 8 --head-dim 64 --sizes 128,256,512,1024,2048,4096\n"
          "          (--quick: --sizes 128,256, fewer repeats) --max-composed-bytes 4294967296 (4 GiB: the\n"
          "          composed form, and PyTorch's math form, are skipped where their predicted bytes exceed it)\n"
          "          --threads <online cores> --python python3 --script %s/bench/pytorch_attention.py\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* Parse "128,256" into out (at most cap); returns the count, 0 on a malformed list. */
static int parse_sizes(const char *s, int64_t *out, int cap) {
  int n = 0;
  while (*s && n < cap) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 1048576 || (*end && *end != ',')) return 0;
    out[n++] = v;
    s = *end == ',' ? end + 1 : end;
  }
  return *s ? 0 : n;
}

/* "skipped (8.0 GiB)", "skipped (38 MiB)": the predicted bytes of a skipped form. */
static const char *skipped(double b, char *buf, size_t cap) {
  if (b >= 1024.0 * 1024.0 * 1024.0) snprintf(buf, cap, "skipped (%.1f GiB)", b / (1024.0 * 1024.0 * 1024.0));
  else snprintf(buf, cap, "skipped (%.0f MiB)", b / (1024.0 * 1024.0));
  return buf;
}

int ct_bench_attention(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  int64_t B = 4, H = 8, D = 64;
  int causal = 0, threads;
  size_t max_composed = (size_t)4 << 30;
  const char *sizes_arg = NULL;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  threads = online > 0 ? (int)online : 1;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_attention.py"};
  const ct_bench_opt opts[] = {{.name = "batch", .kind = CT_BENCH_I64, .dst = &B},
                               {.name = "heads", .kind = CT_BENCH_I64, .dst = &H},
                               {.name = "head-dim", .kind = CT_BENCH_I64, .dst = &D},
                               {.name = "sizes", .dst = &sizes_arg},
                               {.name = "causal", .kind = CT_BENCH_FLAG, .dst = &causal, .value = 1},
                               {.name = "max-composed-bytes", .kind = CT_BENCH_SIZE, .dst = &max_composed},
                               {.name = "threads", .kind = CT_BENCH_INT, .dst = &threads},
                               CT_BENCH_PYTORCH_OPTS(py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  int64_t sizes[32];
  int ns;
  if (sizes_arg) ns = parse_sizes(sizes_arg, sizes, 32);
  else if (common.quick) ns = 2, sizes[0] = 128, sizes[1] = 256;
  else {
    ns = 6;
    for (int i = 0; i < ns; i++) sizes[i] = (int64_t)128 << i;
  }
  if (!ns || B < 1 || H < 1 || D < 1 || B > 65536 || H > 65536 || D > 65536 || threads < 1) {
    if (!ns) fprintf(stderr, "cuttle bench attention: --sizes wants a comma-separated list of lengths in 1..1048576\n");
    else fprintf(stderr, "cuttle bench attention: --batch, --heads and --head-dim want 1..65536, --threads >= 1\n");
    return 2;
  }
  ct_device dev;
  if (ct_bench_device(common.device, &dev)) return 2;
  /* cuttle's OpenMP pool (which OpenBLAS's OpenMP build shares) gets the threads PyTorch gets */
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  char devname[32], title[320];
  ct_device_str(dev, devname, sizeof devname);
  ct_bench_opts bo = {.warmup = 1, .min_repeats = 3, .max_repeats = common.quick ? 5 : 20,
                      .target_s = common.quick ? 0.1 : 1.0};

  attn_row rows[32];
  int nrows = 0, status = 0;
  const char *grad_fn = NULL;
  for (int i = 0; i < ns && !status; i++) {
    rows[nrows] = (attn_row){.T = sizes[i]};
    int composes = grad_fn && strcmp(grad_fn, "scaled_dot_product_attention") != 0;
    if (measure_row(&rows[nrows], B, H, D, causal, max_composed, composes, dev, &bo, &grad_fn)) {
      fprintf(stderr, "cuttle bench attention: T = %lld: %s\n", (long long)sizes[i], ct_last_error());
      status = 1;
    } else {
      nrows++;
    }
  }
  int fused_kernels = !grad_fn || strcmp(grad_fn, "scaled_dot_product_attention") == 0;

  /* PyTorch after all of cuttle's rows, so neither warms the caches for the other */
  static ct_bench_peer peer;
  if (py.on && nrows) {
    char env[48], args[1024], list[512] = "";
    for (int i = 0; i < nrows; i++) {
      size_t l = strlen(list);
      snprintf(list + l, sizeof list - l, "%s%lld", i ? "," : "", (long long)rows[i].T);
    }
    snprintf(env, sizeof env, "OMP_NUM_THREADS=%d", threads);
    snprintf(args, sizeof args,
             "--device %s --batch %lld --heads %lld --head-dim %lld --sizes %s%s --threads %d --max-math-bytes %zu "
             "--warmup %d --min-repeats %d --max-repeats %d --target-s %g",
             devname, (long long)B, (long long)H, (long long)D, list, causal ? " --causal" : "", threads, max_composed,
             bo.warmup, bo.min_repeats, bo.max_repeats, bo.target_s);
    if (ct_bench_peer_run("cuttle bench attention", env, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  } else if (py.on) {
    peer = (ct_bench_peer){.status = CT_BENCH_PEER_FAILED};
    snprintf(peer.why, sizeof peer.why, "not run: cuttle measured no row");
  }

  snprintf(title, sizeof title,
           "attention forward + backward of sum(out * r), float32, B = %lld, H = %lld, D = %lld%s, on %s, %d threads: "
           "median ms, peak bytes above the inputs",
           (long long)B, (long long)H, (long long)D, causal ? ", causal" : "", devname, threads);
  const char *heads[] = {"T", "fused ms", "composed ms", "PyTorch ms", "fused / PyTorch (ms)", "fused peak bytes",
                         "composed peak bytes", "PyTorch peak bytes", "max |fused - composed| out, dq"};
  const char *cheads[] = {"T", "fused sum(out)", "composed sum(out)", "PyTorch sum(out)", "fused sum(dq*r)",
                          "composed sum(dq*r)", "PyTorch sum(dq*r)"};
  int ncols = py.on ? 9 : 6;
  const char *heads_nopy[] = {heads[0], heads[1], heads[2], heads[5], heads[6], heads[8]};
  const char *cheads_nopy[] = {cheads[0], cheads[1], cheads[2], cheads[4], cheads[5]};
  ct_bench_table *t = ct_bench_table_new(title, ncols, py.on ? heads : heads_nopy);
  ct_bench_table *ct = ct_bench_table_new("checksums in float64: sum(out) and sum(dq * r), dq = dL/dq (the same inputs on every side)",
                                          py.on ? 7 : 5, py.on ? cheads : cheads_nopy);
  char kernels[512] = "", first_kernel[96] = "";
  int same_kernel = 1;
  for (int i = 0; i < nrows; i++) {
    const attn_row *r = &rows[i];
    char fms[48], fpeak[48], cms[48], cpeak[48], diff[64], skip[48];
    if (r->fused.ran) snprintf(fms, sizeof fms, "%.3f", r->fused.ms), snprintf(fpeak, sizeof fpeak, "%lld", (long long)r->fused.peak);
    else snprintf(fms, sizeof fms, "%s", skipped(r->predicted, skip, sizeof skip)), snprintf(fpeak, sizeof fpeak, "%s", fms);
    if (r->composed.ran) {
      snprintf(cms, sizeof cms, "%.3f", r->composed.ms), snprintf(cpeak, sizeof cpeak, "%lld", (long long)r->composed.peak);
      if (r->fused.ran) snprintf(diff, sizeof diff, "%.2g, %.2g", r->diff_out, r->diff_dq);
      else snprintf(diff, sizeof diff, "-");
    } else {
      snprintf(cms, sizeof cms, "%s", skipped(r->predicted, skip, sizeof skip)), snprintf(cpeak, sizeof cpeak, "%s", cms);
      snprintf(diff, sizeof diff, "-");
    }
    char pms[64] = "", pratio[64] = "", ppeak[64] = "", pso[64] = "", psd[64] = "", cell[64], key[48];
    if (py.on && ct_bench_peer_cell(&peer, cell, sizeof cell)) {
      snprintf(pms, sizeof pms, "%s", cell), snprintf(ppeak, sizeof ppeak, "%s", cell);
      snprintf(pso, sizeof pso, "%s", cell), snprintf(psd, sizeof psd, "%s", cell), snprintf(pratio, sizeof pratio, "-");
    } else if (py.on) {
      snprintf(key, sizeof key, "skip_%lld", (long long)r->T);
      if (ct_bench_json_string(peer.line, key, cell, sizeof cell)) {
        snprintf(pms, sizeof pms, "%s", cell), snprintf(ppeak, sizeof ppeak, "%s", cell);
        snprintf(pso, sizeof pso, "-"), snprintf(psd, sizeof psd, "-"), snprintf(pratio, sizeof pratio, "-");
      } else {
        snprintf(key, sizeof key, "ms_%lld", (long long)r->T);
        double ms = ct_bench_json_number(peer.line, key);
        if (isnan(ms) || ms <= 0) snprintf(pms, sizeof pms, "missing"), snprintf(pratio, sizeof pratio, "-");
        else snprintf(pms, sizeof pms, "%.3f", ms), snprintf(pratio, sizeof pratio, "%.3g", r->fused.ms / ms);
        if (!r->fused.ran) snprintf(pratio, sizeof pratio, "-");
        snprintf(key, sizeof key, "peak_%lld", (long long)r->T);
        double pk = ct_bench_json_number(peer.line, key);
        if (isnan(pk)) snprintf(ppeak, sizeof ppeak, "not measured (below)");
        else snprintf(ppeak, sizeof ppeak, "%.0f", pk);
        snprintf(key, sizeof key, "sum_out_%lld", (long long)r->T);
        snprintf(pso, sizeof pso, "%.6g", ct_bench_json_number(peer.line, key));
        snprintf(key, sizeof key, "sum_dq_%lld", (long long)r->T);
        snprintf(psd, sizeof psd, "%.6g", ct_bench_json_number(peer.line, key));
      }
      /* which kernel PyTorch ran at this T, gathered for the note under the table */
      char kern[96];
      snprintf(key, sizeof key, "kernel_%lld", (long long)r->T);
      if (ct_bench_json_string(peer.line, key, kern, sizeof kern)) {
        size_t l = strlen(kernels);
        snprintf(kernels + l, sizeof kernels - l, "%sT = %lld: %s", l ? ", " : "", (long long)r->T, kern);
        if (!first_kernel[0]) snprintf(first_kernel, sizeof first_kernel, "%s", kern);
        else if (strcmp(first_kernel, kern) != 0) same_kernel = 0;
      }
    }
    char fso[48], fsd[48], cso[48], csd[48];
    if (r->fused.ran) snprintf(fso, sizeof fso, "%.6g", r->fused.sum_out), snprintf(fsd, sizeof fsd, "%.6g", r->fused.sum_dq);
    else snprintf(fso, sizeof fso, "skipped"), snprintf(fsd, sizeof fsd, "skipped");
    if (r->composed.ran) snprintf(cso, sizeof cso, "%.6g", r->composed.sum_out), snprintf(csd, sizeof csd, "%.6g", r->composed.sum_dq);
    else snprintf(cso, sizeof cso, "skipped"), snprintf(csd, sizeof csd, "skipped");
    if (py.on) {
      ct_bench_table_rowf(t, "%lld|%s|%s|%s|%s|%s|%s|%s|%s", (long long)r->T, fms, cms, pms, pratio, fpeak, cpeak, ppeak,
                          diff);
      ct_bench_table_rowf(ct, "%lld|%s|%s|%s|%s|%s|%s", (long long)r->T, fso, cso, pso, fsd, csd, psd);
    } else {
      ct_bench_table_rowf(t, "%lld|%s|%s|%s|%s|%s", (long long)r->T, fms, cms, fpeak, cpeak, diff);
      ct_bench_table_rowf(ct, "%lld|%s|%s|%s|%s", (long long)r->T, fso, cso, fsd, csd);
    }
  }
  ct_bench_table_print(t, stdout);
  if (nrows && !fused_kernels)
    printf("note: on %s ct_scaled_dot_product_attention has no fused kernels and composes itself (its output's grad_fn is "
           "%s): the fused column is the composed form through the front-end (skipped, as the composed one, above "
           "--max-composed-bytes)\n",
           devname, grad_fn);
  printf("cuttle's peak bytes: the allocator's peak_allocated during one run minus allocated before it (blocks as handed "
         "out, after the cache's rounding); the composed form is predicted to need 4 (B, H, T, T) float32 tensors and "
         "3 (B, H, T, D)\n");
  if (py.on) {
    ct_bench_peer_note(&peer, stdout);
    char how[400];
    if (peer.status == CT_BENCH_PEER_OK) {
      if (kernels[0] && same_kernel) printf("PyTorch's kernel at every T: %s\n", first_kernel);
      else if (kernels[0]) printf("PyTorch's kernel: %s\n", kernels);
      if (ct_bench_json_string(peer.line, "peak_how", how, sizeof how)) printf("PyTorch's peak bytes: %s\n", how);
    }
  }
  printf("\n");
  ct_bench_table_print(ct, stdout);
  fflush(stdout);
  if (ct_bench_table_csv(t, common.csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  ct_bench_table_free(ct);
  return status;
}
