/* bench/conv_format.c: `cuttle bench conv-format`: NCHW against channels_last (NHWC) for the cnn's
 * convolution layers (src/nn/models.c: Conv2d(1, 32, 3, padding=1) on 28 x 28 images, then
 * Conv2d(32, 64, 3, padding=1) on 14 x 14), on each device given with --device.
 *
 * Each layer runs as conv2d alone and as the block the cnn runs (conv2d, relu, max pooling 2x2:
 * ct_conv2d_relu_max_pool2d, which the CPU fuses for NCHW and runs op by op for channels_last),
 * timed forward only and forward + backward. The backward is that of sum(y * g) for a fixed random
 * g in the output's format (the same elementwise product and sum in both formats); conv1's input needs no gradient (it is
 * the images), conv2's does (it is an activation), as in training. The weights (and for NHWC the
 * input) are converted once, outside the timing, as model.to(memory_format=torch.channels_last)
 * and input.contiguous(memory_format=...) would be. The last column is the largest difference
 * between the two formats' outputs. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

typedef struct {
  const char *name;
  int64_t C, H, O;
  int input_grad; /* the layer's input needs a gradient (an activation, not the images) */
} layer;

static const layer layers[] = {{"conv1 (1->32, 28x28)", 1, 28, 32, 0}, {"conv2 (32->64, 14x14)", 32, 14, 64, 1}};

typedef struct {
  ct_tensor *x, *w, *b, *gy, *gblock; /* leaves (w, b, and x when input_grad) and the fixed upstream gradients */
  int block, backward;
} run_ctx;

static const ct_conv2d_opts conv_opts = {.padding = {1, 1}};
static const ct_pool2d_opts pool_opts = {.kernel = {2, 2}};

static ct_tensor *forward(run_ctx *c) {
  return c->block ? ct_conv2d_relu_max_pool2d(c->x, c->w, c->b, &conv_opts, &pool_opts) : ct_conv2d(c->x, c->w, c->b, &conv_opts);
}

static int run_once(void *p) {
  run_ctx *c = p;
  if (ct_scope_begin() != CT_OK) return 1;
  ct_tensor *y = forward(c);
  int ok = y != NULL;
  if (ok && c->backward) {
    ct_tensor *l = ct_sum(ct_mul(y, c->block ? c->gblock : c->gy), 0, NULL, 0);
    ok = l && ct_backward(l) == CT_OK;
    ct_zero_grad(c->x), ct_zero_grad(c->w), ct_zero_grad(c->b);
  }
  ct_scope_end();
  return !ok;
}

/* A leaf copy of t in format fmt, requiring grad when grad is set. NULL on error. */
static ct_tensor *leaf(ct_tensor *t, ct_memory_format fmt, int grad) {
  ct_tensor *c = ct_contiguous_format(t, fmt), *d = c ? ct_detach(c) : NULL;
  ct_tensor_free(c);
  if (d && grad && ct_requires_grad_(d, 1) != CT_OK) ct_tensor_free(d), d = NULL;
  return d;
}

static double max_diff(ct_tensor *a, ct_tensor *b) {
  int64_t n = ct_tensor_numel(a);
  double *ha = malloc(sizeof(double) * (size_t)n), *hb = malloc(sizeof(double) * (size_t)n), m = NAN;
  if (ha && hb && ct_to_host(a, ha, sizeof(double) * (size_t)n, CT_F64) == CT_OK &&
      ct_to_host(b, hb, sizeof(double) * (size_t)n, CT_F64) == CT_OK) {
    m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(ha[i] - hb[i]));
  }
  free(ha), free(hb);
  return m;
}

/* One layer on one device: both formats, both ops, forward and forward + backward. */
static int bench_layer(ct_bench_table *t, ct_device dev, const char *devname, const layer *L, int64_t N, int quick) {
  ct_generator gen = ct_generator_new(11);
  int64_t xs[4] = {N, L->C, L->H, L->H}, ws[4] = {L->O, L->C, 3, 3}, ys[4] = {N, L->O, L->H, L->H},
          ps[4] = {N, L->O, L->H / 2, L->H / 2};
  ct_tensor *x = ct_randn(4, xs, 0, 1, CT_F32, dev, &gen), *w = ct_randn(4, ws, 0, 0.1, CT_F32, dev, &gen);
  ct_tensor *b = ct_randn(1, &L->O, 0, 0.1, CT_F32, dev, &gen), *gy = ct_randn(4, ys, 0, 1, CT_F32, dev, &gen);
  ct_tensor *gp = ct_randn(4, ps, 0, 1, CT_F32, dev, &gen);
  int status = !x || !w || !b || !gy || !gp;
  run_ctx ctx[2] = {{0}};
  for (int f = 0; f < 2 && !status; f++) {
    ct_memory_format fmt = f ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT;
    /* the upstream gradients in the output's format, as the next layer's backward would give them */
    ctx[f] = (run_ctx){leaf(x, fmt, L->input_grad), leaf(w, fmt, 1), leaf(b, CT_CONTIGUOUS_FORMAT, 1), leaf(gy, fmt, 0),
                       leaf(gp, fmt, 0), 0, 0};
    status = !ctx[f].x || !ctx[f].w || !ctx[f].b || !ctx[f].gy || !ctx[f].gblock;
  }
  for (int block = 0; block < 2 && !status; block++) {
    double ms[2][2] = {{0}}, diff = NAN;
    ct_tensor *y[2] = {NULL, NULL};
    for (int f = 0; f < 2 && !status; f++) {
      run_ctx *c = &ctx[f];
      c->block = block;
      for (int bw = 0; bw < 2 && !status; bw++) {
        c->backward = bw;
        ct_bench_opts bo = {.warmup = 2, .min_repeats = 3, .max_repeats = quick ? 5 : 30, .target_s = quick ? 0.2 : 1.0};
        ct_bench_result r;
        status = ct_bench_time(run_once, c, dev, &bo, &r);
        ms[f][bw] = r.median * 1e3;
      }
      ct_no_grad_begin();
      if (!status) status = !(y[f] = forward(c));
      ct_no_grad_end();
    }
    if (!status) diff = max_diff(y[0], y[1]);
    ct_tensor_free(y[0]), ct_tensor_free(y[1]);
    for (int f = 0; f < 2 && !status; f++) {
      char ratio[64] = "", dcell[32] = "";
      if (f) {
        snprintf(ratio, sizeof ratio, "%.2f / %.2f", ms[1][0] / ms[0][0], ms[1][1] / ms[0][1]);
        snprintf(dcell, sizeof dcell, "%.2g", diff);
      }
      ct_bench_table_rowf(t, "%s|%s|%s|%s|%.3f|%.3f|%s|%s", devname, L->name, block ? "conv+relu+maxpool" : "conv2d",
                          f ? "NHWC" : "NCHW", ms[f][0], ms[f][1], ratio, dcell);
    }
  }
  for (int f = 0; f < 2; f++)
    ct_tensor_free(ctx[f].x), ct_tensor_free(ctx[f].w), ct_tensor_free(ctx[f].b), ct_tensor_free(ctx[f].gy),
        ct_tensor_free(ctx[f].gblock);
  ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(gy), ct_tensor_free(gp);
  return status;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench conv-format [--device cpu|cuda:N|opencl:N|auto]... [--batch N] [--quick] [--csv FILE]\n"
             "NCHW against channels_last (NHWC) for the cnn's conv layers, forward and forward + backward, on each\n"
             "--device given (repeat it, or give a comma-separated list). defaults: --device cpu --batch 128\n"
             "(--quick: fewer repeats)\n");
  return f == stdout ? 0 : 2;
}

/* --device, which may be repeated: each value is appended to the comma-separated list in the
 * 256-byte buffer devices. */
static int add_devices(const char *arg, void *devices) {
  char *list = devices;
  if (strlen(list) + strlen(arg) + 2 > 256) {
    fprintf(stderr, "cuttle bench conv-format: too many --device values\n");
    return 1;
  }
  if (list[0]) strcat(list, ",");
  strcat(list, arg);
  return 0;
}

int ct_bench_conv_format(int argc, char **argv) {
  ct_bench_common common = {0};
  char devices[256] = "";
  int64_t batch = 128;
  const ct_bench_opt opts[] = {{.name = "device", .kind = CT_BENCH_CALL, .dst = devices, .call = add_devices},
                               {.name = "batch", .kind = CT_BENCH_I64, .dst = &batch},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_CSV | CT_BENCH_QUICK, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *csv = common.csv;
  int quick = common.quick;
  if (batch < 1) {
    fprintf(stderr, "cuttle bench conv-format: --batch must be >= 1\n");
    return 2;
  }
  if (!devices[0]) strcpy(devices, "cpu");
  ct_device devs[8];
  int ndev = 0;
  for (char *save = NULL, *tok = strtok_r(devices, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (ndev == 8) {
      fprintf(stderr, "cuttle bench conv-format: at most 8 devices\n");
      return 2;
    }
    if (ct_bench_device(tok, &devs[ndev])) return 2;
    ndev++;
  }
  char title[160];
  snprintf(title, sizeof title, "conv-format: the cnn's conv layers, batch %lld, float32, NCHW vs channels_last (NHWC)",
           (long long)batch);
  const char *heads[] = {"device", "layer", "op", "format", "fwd ms", "fwd+bwd ms", "NHWC/NCHW (fwd / fwd+bwd)", "max |diff|"};
  ct_bench_table *t = ct_bench_table_new(title, 8, heads);
  int status = 0;
  for (int d = 0; d < ndev && !status; d++) {
    char devname[32];
    ct_device_str(devs[d], devname, sizeof devname);
    for (size_t l = 0; l < sizeof layers / sizeof layers[0] && !status; l++)
      status = bench_layer(t, devs[d], devname, &layers[l], batch, quick);
  }
  if (status) fprintf(stderr, "cuttle bench conv-format: %s\n", ct_last_error());
  ct_bench_table_print(t, stdout);
  if (ct_bench_table_csv(t, csv)) status = 1;
  ct_bench_table_free(t);
  return status;
}
