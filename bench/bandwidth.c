/* bench/bandwidth.c: `cuttle bench bandwidth`: host<->device copy bandwidth in GB/s (1e9 bytes/s)
 * for 4 KiB ... 1 GiB (powers of 4), from and to pageable host memory (ct_zeros on the CPU,
 * blocking ct_to) and pinned host memory (ct_empty_pinned_for the device, so that the device's own
 * backend pinned it; ct_to with CT_NON_BLOCKING, then ct_synchronize). Where the device's backend
 * cannot pin (ct_device_can_pin), the pinned columns say so and the pageable ones are measured. Each figure is the median of repeats of one copy, synchronized before the clock
 * is read; the device-side tensor comes from the caching allocator, so no cudaMalloc is timed after
 * the warmup. Without a GPU there is nothing to measure: one line says so and it exits 0.
 * With --pytorch the same copies run in PyTorch after cuttle's (bench/pytorch_bandwidth.py, run by
 * --python, one JSON line) on the same CUDA device, timed the same way (warmup, the median of
 * repeats, torch.cuda.synchronize before every clock reading): pageable .to(device) and .to("cpu"),
 * pinned torch.zeros(pin_memory=True) .to(device, non_blocking=True) and .to("cpu",
 * non_blocking=True), each then synchronized; the table adds PyTorch's four GB/s columns. PyTorch
 * has no OpenCL device: on one the peer says so and those cells read "no PyTorch peer on opencl".
 * Where the peer cannot run, cuttle's rows still print, its cells read "failed" and a line says
 * why. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

typedef struct {
  ct_tensor *src; /* host (pageable or pinned) for h2d, device for d2h */
  ct_device dst;
  int flags;
} copy_ctx;

static int run_copy(void *p) {
  copy_ctx *c = p;
  ct_tensor *r = ct_to(c->src, c->dst, c->flags);
  /* a non-blocking copy must end before its destination (or source, for the pinned cache) goes */
  if (r && (c->flags & CT_NON_BLOCKING)) {
    ct_device d = c->dst.kind == CT_CPU ? ct_tensor_device(c->src) : c->dst;
    if (ct_synchronize(d) != CT_OK) {
      ct_tensor_free(r);
      return 1;
    }
  }
  ct_tensor_free(r);
  return r == NULL;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench bandwidth [--device cuda:N|opencl:N|auto] [--max-size BYTES] [--quick] [--csv FILE]\n"
             "                              [--pytorch] [--python PATH] [--script FILE]\n"
             "defaults: --device auto, sizes 4 KiB ... 1 GiB in powers of 4 (--quick: up to 16 MiB)\n"
             "          --python python3 --script %s/bench/pytorch_bandwidth.py\n"
             "--pytorch: time the same copies in PyTorch on the same CUDA device (pageable .to(); pinned tensors and\n"
             "           .to(non_blocking=True) + synchronize), its GB/s beside cuttle's (opencl: no PyTorch peer)\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* The timing options of every copy, which the peer gets too. */
static ct_bench_opts copy_opts(int quick) {
  return (ct_bench_opts){.warmup = 2, .min_repeats = 3, .max_repeats = quick ? 20 : 100, .target_s = quick ? 0.05 : 0.3};
}

/* cuttle's GB/s of one size: H2D pageable, H2D pinned, D2H pageable, D2H pinned (pinned 0 where
 * the device cannot pin). */
typedef struct {
  size_t bytes;
  double gbs[4];
} bw_row;

int ct_bench_bandwidth(int argc, char **argv) {
  ct_bench_common common = {.device = "auto"};
  size_t max_size = 0;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_bandwidth.py"};
  const ct_bench_opt opts[] = {{.name = "max-size", .kind = CT_BENCH_SIZE, .dst = &max_size}, CT_BENCH_PYTORCH_OPTS(py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *device = common.device, *csv = common.csv;
  int quick = common.quick;
  if (!max_size) max_size = quick ? (size_t)16 << 20 : (size_t)1 << 30;
  ct_device dev;
  /* a GPU asked for by name that is not there reads as "no GPU" too: nothing to measure is no error */
  if (strcmp(device, "auto") != 0 && ct_device_parse(device, &dev) == CT_OK && dev.kind != CT_CPU &&
      !ct_device_available(dev))
    dev = CT_DEVICE_CPU;
  else if (ct_bench_device(device, &dev))
    return 2;
  if (dev.kind == CT_CPU) {
    printf("bandwidth: no device but the CPU (%d cuda, %d opencl device(s) visible): nothing to measure%s\n",
           ct_device_count(CT_CUDA), ct_device_count(CT_OPENCL), py.on ? " (nor for PyTorch)" : "");
    return 0;
  }
  char devname[32], title[160];
  ct_device_str(dev, devname, sizeof devname);
  snprintf(title, sizeof title, "bandwidth: host <-> %s in GB/s (1e9 B/s), median of repeats", devname);
  const char *heads[] = {"size", "H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned",
                         "PyTorch H2D pageable", "PyTorch H2D pinned", "PyTorch D2H pageable", "PyTorch D2H pinned"};
  int can_pin = ct_device_can_pin(dev);
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 9 : 5, heads);
  int status = 0, nrows = 0;
  bw_row rows[32];
  ct_bench_opts bo = copy_opts(quick);
  for (size_t bytes = 4096; bytes <= max_size && !status && nrows < 32; bytes *= 4) {
    int64_t shape[1] = {(int64_t)bytes};
    double gbs[4] = {0};
    ct_scope_begin();
    ct_tensor *pageable = ct_zeros(1, shape, CT_U8, CT_DEVICE_CPU); /* written, so its pages exist */
    ct_tensor *pinned = can_pin ? ct_empty_pinned_for(dev, 1, shape, CT_U8) : NULL;
    ct_tensor *ondev = ct_zeros(1, shape, CT_U8, dev);
    status = !pageable || (can_pin && !pinned) || !ondev || (pinned && ct_zero_(pinned) != CT_OK);
    if (!status && can_pin && !ct_tensor_is_pinned(pinned)) {
      fprintf(stderr, "cuttle bench bandwidth: ct_empty_pinned_for(%s) did not pin\n", devname);
      status = 1;
    }
    copy_ctx cases[4] = {{pageable, dev, 0}, {pinned, dev, CT_NON_BLOCKING}, {ondev, CT_DEVICE_CPU, 0},
                         {ondev, CT_DEVICE_CPU, CT_NON_BLOCKING}};
    for (int i = 0; i < 4 && !status; i++) {
      ct_bench_result r;
      if (!can_pin && (i == 1 || i == 3)) continue;
      if (ct_bench_time(run_copy, &cases[i], dev, &bo, &r)) status = 1;
      else gbs[i] = (double)bytes / r.median * 1e-9;
    }
    ct_scope_end();
    if (status) {
      fprintf(stderr, "cuttle bench bandwidth: %zu bytes failed: %s\n", bytes, ct_last_error());
      break;
    }
    rows[nrows].bytes = bytes;
    memcpy(rows[nrows++].gbs, gbs, sizeof gbs);
  }
  /* PyTorch after cuttle's copies, up to the size they reached */
  static ct_bench_peer peer;
  if (py.on && nrows) {
    char args[256];
    snprintf(args, sizeof args, "--device %s --max-size %zu --warmup %d --min-repeats %d --max-repeats %d --target-s %g",
             devname, rows[nrows - 1].bytes, bo.warmup, bo.min_repeats, bo.max_repeats, bo.target_s);
    if (ct_bench_peer_run("cuttle bench bandwidth", NULL, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  }
  for (int i = 0; i < nrows; i++) {
    char sz[32], pin[2][32], pycells[4 * 72 + 8] = "", cell[64];
    for (int k = 0; k < 2; k++)
      if (can_pin) snprintf(pin[k], sizeof pin[k], "%.2f", rows[i].gbs[2 * k + 1]);
      else snprintf(pin[k], sizeof pin[k], "n/a (cannot pin)");
    if (py.on && ct_bench_peer_cell(&peer, cell, sizeof cell)) {
      snprintf(pycells, sizeof pycells, "|%s|%s|%s|%s", cell, cell, cell, cell);
    } else if (py.on) {
      static const char *const keys[4] = {"h2d_pageable", "h2d_pinned", "d2h_pageable", "d2h_pinned"};
      for (int k = 0; k < 4; k++) {
        char key[48];
        snprintf(key, sizeof key, "%s_%zu", keys[k], rows[i].bytes);
        double v = ct_bench_json_number(peer.line, key);
        size_t len = strlen(pycells);
        if (isnan(v)) snprintf(pycells + len, sizeof pycells - len, "|missing");
        else snprintf(pycells + len, sizeof pycells - len, "|%.2f", v);
      }
    }
    ct_bench_table_rowf(t, "%s|%.2f|%s|%.2f|%s%s", ct_bench_bytes(rows[i].bytes, sz, sizeof sz), rows[i].gbs[0], pin[0],
                        rows[i].gbs[2], pin[1], pycells);
  }
  ct_bench_table_print(t, stdout);
  if (py.on && nrows) ct_bench_peer_note(&peer, stdout);
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
