/* bench/bandwidth.c: `cuttle bench bandwidth`: host<->device copy bandwidth in GB/s (1e9 bytes/s)
 * for 4 KiB ... 1 GiB (powers of 4), from and to pageable host memory (ct_zeros on the CPU,
 * blocking ct_to) and pinned host memory (ct_empty_pinned_for the device, so that the device's own
 * backend pinned it; ct_to with CT_NON_BLOCKING, then ct_synchronize). Where the device's backend
 * cannot pin (ct_device_can_pin), the pinned columns say so and the pageable ones are measured. Each figure is the median of repeats of one copy, synchronized before the clock
 * is read; the device-side tensor comes from the caching allocator, so no cudaMalloc is timed after
 * the warmup. Without a GPU there is nothing to measure: one line says so and it exits 0. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "bench.h"

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
             "defaults: --device auto, sizes 4 KiB ... 1 GiB in powers of 4 (--quick: up to 16 MiB)\n");
  return f == stdout ? 0 : 2;
}

int ct_bench_bandwidth(int argc, char **argv) {
  ct_bench_common common = {.device = "auto"};
  size_t max_size = 0;
  const ct_bench_opt opts[] = {{.name = "max-size", .kind = CT_BENCH_SIZE, .dst = &max_size}, {0}};
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
    printf("bandwidth: no device but the CPU (%d cuda, %d opencl device(s) visible): nothing to measure\n",
           ct_device_count(CT_CUDA), ct_device_count(CT_OPENCL));
    return 0;
  }
  char devname[32], title[160];
  ct_device_str(dev, devname, sizeof devname);
  snprintf(title, sizeof title, "bandwidth: host <-> %s in GB/s (1e9 B/s), median of repeats", devname);
  const char *heads[] = {"size", "H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"};
  int can_pin = ct_device_can_pin(dev);
  ct_bench_table *t = ct_bench_table_new(title, 5, heads);
  int status = 0;
  for (size_t bytes = 4096; bytes <= max_size && !status; bytes *= 4) {
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
    ct_bench_opts bo = {.warmup = 2, .min_repeats = 3, .max_repeats = quick ? 20 : 100, .target_s = quick ? 0.05 : 0.3};
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
    char sz[32];
    char pin[2][32];
    for (int k = 0; k < 2; k++)
      if (can_pin) snprintf(pin[k], sizeof pin[k], "%.2f", gbs[2 * k + 1]);
      else snprintf(pin[k], sizeof pin[k], "n/a (cannot pin)");
    ct_bench_table_rowf(t, "%s|%.2f|%s|%.2f|%s", ct_bench_bytes(bytes, sz, sizeof sz), gbs[0], pin[0], gbs[2], pin[1]);
  }
  ct_bench_table_print(t, stdout);
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
