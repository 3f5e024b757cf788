/* bench/norms.c: `cuttle bench norms`: the cost of reading results on the host one at a time. 1000
 * matmuls of 100 x 100 matrices, logging the Frobenius norm (ct_norm) of each result:
 *  (a) ct_item on every norm: 1000 device-to-host copies, 1000 synchronizations;
 *  (b) the norms kept on the device, joined with ct_stack and copied to the host once;
 *  (c) the norms written into a preallocated device tensor (ct_copy_), copied to the host once.
 * The copy ledger (ct_ledger_get) of one run of each path is printed beside its time; on the CPU
 * every path runs too and the ledger shows no copies.
 * With --pytorch the same three paths run in PyTorch after cuttle's (bench/pytorch_norms.py, run by
 * --python, one JSON line) on the same device, timed the same way (warmup, the median of runs,
 * torch.cuda.synchronize before every clock reading on a GPU): (a) .item() on each norm, (b)
 * torch.stack of the norms kept on the device and one .cpu(), (c) each norm copied into a
 * preallocated device tensor and one .cpu(); the table adds PyTorch's median ms and cuttle's
 * divided by it. Where the peer cannot run, cuttle's rows still print, its cells read "failed" and
 * a line says why; on an OpenCL device they read "no PyTorch peer on opencl". */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

typedef struct {
  ct_tensor *a;  /* (100, 100) */
  ct_tensor *bs; /* (count, 100, 100): a different right-hand side per matmul */
  int count, path;
  double *out;   /* count norms, on the host */
} norms_ctx;

static const char *path_names[] = {"(a) ct_item each norm", "(b) keep on device, ct_stack, copy once",
                                   "(c) preallocated device tensor, copy once"};

/* C_i = A B_i, norm_i = ||C_i||_F; every path leaves the count norms in o->out. */
static int run_path(void *p) {
  norms_ctx *o = p;
  ct_device dev = ct_tensor_device(o->a);
  int64_t n = ct_tensor_size(o->a, 0), mat[2] = {n, n}, cnt[1] = {o->count};
  int ok = 1;
  ct_scope_begin();
  ct_tensor **kept = o->path == 1 ? calloc((size_t)o->count, sizeof *kept) : NULL;
  ct_tensor *log = o->path == 2 ? ct_empty(1, cnt, CT_F32, dev) : NULL;
  if ((o->path == 1 && !kept) || (o->path == 2 && !log)) ok = 0;
  for (int i = 0; i < o->count && ok; i++) {
    ct_scope_begin();
    ct_tensor *c = ct_matmul(o->a, ct_view(ct_narrow(o->bs, 0, i, 1), 2, mat));
    ct_tensor *nrm = ct_norm(c);
    if (!nrm) ok = 0;
    else if (o->path == 0) ok = !isnan(o->out[i] = ct_item(nrm));
    else if (o->path == 1) kept[i] = ct_scope_keep(nrm); /* moves to the outer scope */
    else ok = ct_copy_(ct_narrow(log, 0, i, 1), nrm) == CT_OK;
    ct_scope_end();
  }
  if (ok && o->path == 1) {
    ct_tensor *all = ct_stack(o->count, kept, 0);
    ok = all && ct_to_host(all, o->out, sizeof(double) * (size_t)o->count, CT_F64) == CT_OK;
  } else if (ok && o->path == 2) {
    ok = ct_to_host(log, o->out, sizeof(double) * (size_t)o->count, CT_F64) == CT_OK;
  }
  free(kept);
  ct_scope_end();
  return !ok;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench norms [--device cpu|cuda:N|opencl:N|auto] [--count N] [--size N] [--quick] [--csv FILE]\n"
             "                          [--pytorch] [--python PATH] [--script FILE]\n"
             "defaults: --device auto --count 1000 --size 100 (--quick: --count 100)\n"
             "          --python python3 --script %s/bench/pytorch_norms.py\n"
             "--pytorch: run the three paths in PyTorch the same way on the same device (.item() each; torch.stack\n"
             "           and one copy; a preallocated device tensor and one copy), PyTorch's ms beside cuttle's\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* One path's row, cuttle's side: kept until PyTorch's side has run. */
typedef struct {
  double median_s;
  ct_ledger ledger;
  double diff; /* max |norm - (a)'s norm| */
} norms_row;

int ct_bench_norms(int argc, char **argv) {
  ct_bench_common common = {.device = "auto"};
  int count = 0, size = 100;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_norms.py"};
  const ct_bench_opt opts[] = {{.name = "count", .kind = CT_BENCH_INT, .dst = &count},
                               {.name = "size", .kind = CT_BENCH_INT, .dst = &size},
                               CT_BENCH_PYTORCH_OPTS(py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *device = common.device, *csv = common.csv;
  int quick = common.quick;
  if (count <= 0) count = quick ? 100 : 1000;
  if (size < 1) {
    fprintf(stderr, "cuttle bench norms: --size must be >= 1\n");
    return 2;
  }
  ct_device dev;
  if (ct_bench_device(device, &dev)) return 2;
  char devname[32], title[160];
  ct_device_str(dev, devname, sizeof devname);
  snprintf(title, sizeof title, "norms: %d matmuls of %d x %d on %s, logging each Frobenius norm (ledger of one run)",
           count, size, size, devname);
  const char *heads[] = {"path",  "median ms",       "us per norm", "d2h copies", "d2h bytes", "syncs", "max |diff| vs (a)",
                         "PyTorch median ms", "cuttle / PyTorch (ms)"};
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 9 : 7, heads);
  ct_generator gen = ct_generator_new(4);
  int64_t mat[2] = {size, size}, batch[3] = {count, size, size};
  norms_ctx o = {.count = count};
  o.a = ct_randn(2, mat, 0, 1, CT_F32, dev, &gen);
  o.bs = ct_randn(3, batch, 0, 1, CT_F32, dev, &gen);
  double *ref = malloc(sizeof(double) * (size_t)count);
  o.out = malloc(sizeof(double) * (size_t)count);
  int status = !o.a || !o.bs || !ref || !o.out, npaths = 0;
  norms_row rows[3];
  ct_bench_opts bo = {.warmup = 1, .min_repeats = 3, .max_repeats = quick ? 5 : 11, .target_s = quick ? 0.1 : 1.0};
  for (int path = 0; path < 3 && !status; path++) {
    o.path = path;
    ct_bench_result r;
    if (ct_bench_time(run_path, &o, dev, &bo, &r)) {
      status = 1;
      break;
    }
    /* the ledger of one more run, alone */
    ct_ledger_reset();
    if (run_path(&o)) {
      status = 1;
      break;
    }
    rows[path] = (norms_row){.median_s = r.median, .ledger = ct_ledger_get()};
    if (path == 0) memcpy(ref, o.out, sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++) rows[path].diff = fmax(rows[path].diff, fabs(o.out[i] - ref[i]));
    npaths++;
  }
  if (status) fprintf(stderr, "cuttle bench norms: %s\n", ct_last_error());
  /* PyTorch after cuttle's paths, so neither warms the device for the other */
  static ct_bench_peer peer;
  if (py.on && npaths) {
    char args[256];
    snprintf(args, sizeof args, "--device %s --count %d --size %d --warmup %d --min-repeats %d --max-repeats %d --target-s %g",
             devname, count, size, bo.warmup, bo.min_repeats, bo.max_repeats, bo.target_s);
    if (ct_bench_peer_run("cuttle bench norms", NULL, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  }
  for (int path = 0; path < npaths; path++) {
    const norms_row *r = &rows[path];
    char pycells[160] = "", cell[64];
    static const char *const keys[3] = {"a_ms", "b_ms", "c_ms"};
    if (py.on && ct_bench_peer_cell(&peer, cell, sizeof cell)) {
      snprintf(pycells, sizeof pycells, "|%s|%s", cell, cell);
    } else if (py.on) {
      double ms = ct_bench_json_number(peer.line, keys[path]);
      if (isnan(ms) || ms <= 0) snprintf(pycells, sizeof pycells, "|missing|-");
      else snprintf(pycells, sizeof pycells, "|%.3f|%.3g", ms, r->median_s * 1e3 / ms);
    }
    ct_bench_table_rowf(t, "%s|%.3f|%.2f|%llu|%llu|%llu|%.3g%s", path_names[path], r->median_s * 1e3,
                        r->median_s * 1e6 / count, (unsigned long long)r->ledger.d2h_copies,
                        (unsigned long long)r->ledger.d2h_bytes, (unsigned long long)r->ledger.syncs, r->diff, pycells);
  }
  ct_bench_table_print(t, stdout);
  if (py.on && npaths) {
    ct_bench_peer_note(&peer, stdout);
    if (peer.status == CT_BENCH_PEER_OK)
      printf("PyTorch's (b) and (c) norms differ from its (a) by at most %.3g\n", ct_bench_json_number(peer.line, "max_diff"));
  }
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  free(ref);
  free(o.out);
  ct_tensor_free(o.a);
  ct_tensor_free(o.bs);
  return status;
}
