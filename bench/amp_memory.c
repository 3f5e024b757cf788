/* bench/amp_memory.c: `cuttle bench amp-memory`: the peak bytes one training step of a model
 * allocates on its device, in float32 and under autocast (float16, bfloat16), and their ratio.
 *
 * A step is what `cuttle train` does: forward, cross-entropy, backward (the parameters' gradients
 * stay, as they would until the optimizer steps). Before it the model, its gradients from a
 * warm-up step and the batch are already allocated; the figure is the peak of the device's
 * allocated bytes during the step minus the allocated bytes before it (ct_memory_stats_get's
 * peak_allocated after ct_reset_peak_memory_stats, the counters of torch.cuda.max_memory_allocated).
 * Under autocast the activations kept for backward are 16-bit, which issue 11 wants to show as a
 * peak at most 0.6x float32's. The caching allocators count blocks as handed out (rounded), not
 * bytes requested, as PyTorch's allocated_bytes does. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "bench.h"

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench amp-memory [--model cnn|mlp] [--batch-size N] [--device cpu|opencl:N|cuda:N] [--csv FILE]\n"
             "peak allocated bytes of one training step (forward, loss, backward) in float32 and under autocast\n"
             "float16 and bfloat16, and the ratio to float32; defaults: --model cnn --batch-size 128 --device cpu\n");
  return f == stdout ? 0 : 2;
}

/* One step's peak bytes above the bytes allocated before it, or -1 with the error printed. */
static int64_t step_peak(ct_module *m, ct_tensor *x, ct_tensor *y, ct_device dev, ct_dtype amp) {
  ct_memory_stats st;
  if (ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK || ct_reset_peak_memory_stats(dev) != CT_OK)
    return -1;
  size_t before = st.allocated;
  if (ct_scope_begin() != CT_OK) return -1;
  int on = amp != CT_F32 && ct_autocast_begin(dev.kind, amp, 1) == CT_OK;
  if (amp != CT_F32 && !on) return ct_scope_end(), -1;
  ct_tensor *logits = ct_module_forward(m, x);
  ct_tensor *loss = ct_cross_entropy(logits, y, CT_REDUCTION_MEAN, 0.0);
  if (on) ct_autocast_end(); /* backward outside the region, as torch recommends */
  ct_status s = loss ? ct_backward(loss) : ct_last_status();
  ct_scope_end();
  if (s != CT_OK || ct_synchronize(dev) != CT_OK || ct_memory_stats_get(dev, &st) != CT_OK) return -1;
  return (int64_t)st.peak_allocated - (int64_t)before;
}

int ct_bench_amp_memory(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  const char *model = "cnn";
  int64_t batch = 128;
  const ct_bench_opt opts[] = {{.name = "model", .dst = &model},
                               {.name = "batch-size", .kind = CT_BENCH_I64, .dst = &batch},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_DEVICE | CT_BENCH_CSV, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *device = common.device, *csv = common.csv;
  if (batch < 1) return usage(stderr);
  ct_device dev;
  if (ct_bench_device(device, &dev)) return 1;
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_model_new(model, dev, &gen);
  int64_t xs[4] = {batch, 1, 28, 28};
  ct_tensor *x = m ? ct_randn(4, xs, 0, 1, CT_F32, dev, &gen) : NULL;
  ct_tensor *y = x ? ct_randint(1, &batch, 0, 10, CT_I64, dev, &gen) : NULL;
  if (!y) {
    fprintf(stderr, "cuttle bench amp-memory: %s\n", ct_last_error());
    ct_tensor_free(x), ct_module_free(m);
    return 1;
  }
  char dn[32];
  ct_device_str(dev, dn, sizeof dn);
  static const char *headers[] = {"precision", "peak bytes of a step", "ratio to float32"};
  char title[160];
  snprintf(title, sizeof title, "one %s training step on %s, batch %lld: peak allocated bytes above the model and batch",
           model, dn, (long long)batch);
  ct_bench_table *t = ct_bench_table_new(title, 3, headers);
  static const ct_dtype modes[] = {CT_F32, CT_BF16, CT_F16};
  static const char *names[] = {"float32", "autocast bfloat16", "autocast float16"};
  int64_t f32 = 0;
  int rc = 0;
  /* a warm-up step in float32 leaves the gradients allocated, as in training */
  if (step_peak(m, x, y, dev, CT_F32) < 0) rc = 1;
  for (int i = 0; i < 3 && !rc; i++) {
    int64_t p = step_peak(m, x, y, dev, modes[i]);
    if (p < 0) {
      rc = 1;
      break;
    }
    if (i == 0) f32 = p;
    ct_bench_table_rowf(t, "%s|%lld|%.3f", names[i], (long long)p, f32 > 0 ? (double)p / (double)f32 : 0.0);
  }
  if (rc) fprintf(stderr, "cuttle bench amp-memory: %s\n", ct_last_error());
  ct_bench_table_print(t, stdout);
  if (!rc && ct_bench_table_csv(t, csv)) rc = 1;
  ct_bench_table_free(t);
  ct_tensor_free(x), ct_tensor_free(y), ct_module_free(m);
  return rc;
}
