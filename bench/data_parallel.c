/* bench/data_parallel.c: `cuttle bench data-parallel`: one process, several devices (d2l's
 * "Training on Multiple GPUs"). A training step of the mlp or the cnn (forward, cross-entropy,
 * backward, SGD with momentum) on a synthetic batch of B images, timed two ways, each sample ending
 * when the first device has synchronized:
 *  - one device: the whole batch on the first device of --devices;
 *  - data parallel: ct_data_parallel over every device of --devices, B/n images each, one host
 *    thread per device, the gradients summed onto the first device and the parameters broadcast
 *    back (cuttle/data_parallel.h).
 * It prints images/s, ms per step, the speedup over one device and the copies per step (from the
 * ledger). With GPUs of their own the replicas' compute overlaps; two PoCL devices share the same
 * CPU cores, so there the copies between devices (staged through host memory) are all it adds.
 * Before timing, both ways train a few steps from the same initialization and must agree. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#define DP_MAX 16

typedef struct {
  ct_module *m;
  ct_optimizer *opt;
  ct_data_parallel *dp; /* NULL: one device */
  ct_device dev;
  ct_tensor *x, *y; /* the batch, on the host */
} dp_ctx;

static int step(void *p) {
  dp_ctx *c = p;
  ct_scope_begin();
  ct_status s;
  if (c->dp) {
    s = ct_data_parallel_forward_backward(c->dp, c->x, c->y, NULL);
  } else {
    ct_tensor *logits = ct_module_forward(c->m, ct_to(c->x, c->dev, 0));
    ct_tensor *loss = ct_cross_entropy(logits, ct_to(c->y, c->dev, 0), CT_REDUCTION_MEAN, 0);
    s = loss ? ct_backward(loss) : ct_last_status();
  }
  if (s == CT_OK) s = ct_optimizer_step(c->opt);
  ct_optimizer_zero_grad(c->opt);
  if (s == CT_OK && c->dp) s = ct_data_parallel_broadcast(c->dp);
  ct_scope_end();
  return s != CT_OK;
}

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench data-parallel [--devices A,B,...] [--model mlp|cnn] [--batch N] [--quick] [--csv FILE]\n"
             "defaults: --devices opencl:0,opencl:1 (POCL_DEVICES=\"pthread pthread\" gives PoCL two), --model mlp,\n"
             "          --batch 256 (--quick: 64)\n");
  return f == stdout ? 0 : 2;
}

static int parse_devices(const char *s, ct_device *out, int *n) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == DP_MAX) {
      fprintf(stderr, "cuttle bench data-parallel: at most %d devices\n", DP_MAX);
      return 1;
    }
    if (ct_bench_device(tok, &out[(*n)++])) return 1;
  }
  if (*n < 1) fprintf(stderr, "cuttle bench data-parallel: --devices names no device\n");
  return *n < 1;
}

/* Model, optimizer and (n > 1) data-parallel wrapper on devs, from seed 7. */
static int setup(dp_ctx *c, const char *model, int n, const ct_device *devs) {
  ct_generator g = ct_generator_new(7);
  c->dev = devs[0];
  c->m = ct_model_new(model, devs[0], &g);
  c->opt = c->m ? ct_optimizer_new(c->m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.01, .momentum = 0.9}) : NULL;
  if (c->opt && n > 1) c->dp = ct_data_parallel_new(c->m, n, devs, NULL);
  return !c->opt || (n > 1 && !c->dp);
}

static void teardown(dp_ctx *c) {
  ct_data_parallel_free(c->dp);
  ct_optimizer_free(c->opt);
  ct_module_free(c->m);
}

/* max |a - b| over the parameters of two models of one architecture. */
static double max_diff(ct_module *a, ct_module *b) {
  ct_named_tensor pa[64], pb[64];
  int n = ct_module_named_tensors(a, 0, pa, 64);
  ct_module_named_tensors(b, 0, pb, 64);
  double worst = 0;
  for (int i = 0; i < n && i < 64; i++) {
    int64_t k = ct_tensor_numel(pa[i].tensor);
    float *x = malloc((size_t)k * sizeof *x), *y = malloc((size_t)k * sizeof *y);
    if (!x || !y || ct_to_host(pa[i].tensor, x, (size_t)k * sizeof *x, CT_F32) != CT_OK ||
        ct_to_host(pb[i].tensor, y, (size_t)k * sizeof *y, CT_F32) != CT_OK)
      worst = NAN;
    for (int64_t j = 0; x && y && j < k && !isnan(worst); j++) worst = fmax(worst, fabs((double)x[j] - (double)y[j]));
    free(x), free(y);
  }
  return worst;
}

int ct_bench_data_parallel(int argc, char **argv) {
  ct_bench_common common = {0};
  const char *devices = "opencl:0,opencl:1", *model = "mlp";
  int64_t batch = 0;
  const ct_bench_opt opts[] = {{.name = "devices", .dst = &devices},
                               {.name = "model", .dst = &model},
                               {.name = "batch", .kind = CT_BENCH_I64, .dst = &batch},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_CSV | CT_BENCH_QUICK, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *csv = common.csv;
  int quick = common.quick;
  if (batch == 0) batch = quick ? 64 : 256;
  if (batch < 1) return fprintf(stderr, "cuttle bench data-parallel: --batch must be positive\n"), 2;
  ct_device devs[DP_MAX];
  int n;
  if (parse_devices(devices, devs, &n)) return 2;
  int64_t xs[4] = {batch, 1, 28, 28}, ys[1] = {batch};
  ct_generator g = ct_generator_new(1);
  dp_ctx one = {0}, par = {0};
  int rc = 1;
  ct_tensor *x = ct_randn(4, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y = ct_randint(1, ys, 0, 10, CT_I64, CT_DEVICE_CPU, &g);
  if (!x || !y || setup(&one, model, 1, devs) || setup(&par, model, n, devs)) goto done;
  one.x = par.x = x, one.y = par.y = y;
  /* the check: a few steps from the same initialization agree */
  for (int i = 0; i < 3; i++)
    if (step(&one) || step(&par)) goto done;
  double diff = max_diff(one.m, par.m);
  ct_bench_result r1, rn;
  ct_bench_opts bo = {.warmup = 2, .min_repeats = quick ? 3 : 5, .target_s = quick ? 0.5 : 2.0};
  if (ct_bench_time(step, &one, devs[0], &bo, &r1)) goto done;
  ct_ledger_reset();
  if (step(&one)) goto done;
  ct_ledger l1 = ct_ledger_get();
  ct_ledger_reset();
  if (step(&par)) goto done;
  ct_ledger l = ct_ledger_get();
  if (ct_bench_time(step, &par, devs[0], &bo, &rn)) goto done;
  char dn[32], all[256] = "";
  for (int k = 0; k < n; k++) {
    char d[32];
    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? "+" : "", ct_device_str(devs[k], d, sizeof d));
  }
  printf("data parallel: %s, batch %lld, max abs difference after 3 steps %.3g (one device vs %d replicas)\n", model,
         (long long)batch, diff, n);
  const char *hdr[] = {"way", "devices", "ms/step", "images/s", "speedup", "copies/step (h2d, d2h)"};
  ct_bench_table *t = ct_bench_table_new("data-parallel training step", 6, hdr);
  ct_bench_table_rowf(t, "one device|%s|%.2f|%.0f|1.00|%llu, %llu", ct_device_str(devs[0], dn, sizeof dn), 1e3 * r1.median,
                      batch / r1.median, (unsigned long long)l1.h2d_copies, (unsigned long long)l1.d2h_copies);
  ct_bench_table_rowf(t, "data parallel|%s|%.2f|%.0f|%.2f|%llu, %llu", all, 1e3 * rn.median, batch / rn.median,
                      r1.median / rn.median, (unsigned long long)l.h2d_copies, (unsigned long long)l.d2h_copies);
  ct_bench_table_print(t, stdout);
  rc = ct_bench_table_csv(t, csv);
  ct_bench_table_free(t);
done:
  if (rc && ct_last_status() != CT_OK) fprintf(stderr, "cuttle bench data-parallel: %s\n", ct_last_error());
  teardown(&one), teardown(&par);
  ct_tensor_free(x), ct_tensor_free(y);
  return rc;
}
