/* tools/cuttle/train_loop.c: the training epoch and the evaluation shared by `cuttle train`,
 * `cuttle eval` and `cuttle bench train` (train_loop.h). */
#define _GNU_SOURCE
#include "train_loop.h"
#include <math.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ct_cli_evaluate(ct_module *m, ct_dataset *ds, ct_device dev, int workers) {
  ct_loader_opts lo = {.batch_size = 1000, .num_workers = workers, .device = dev};
  ct_loader *l = ct_loader_new(ds, &lo);
  if (!l) return ct_last_status();
  int64_t correct = 0, total = 0;
  ct_module_train(m, 0);
  ct_no_grad_begin();
  ct_tensor *x, *y;
  int r;
  while ((r = ct_loader_next(l, &x, &y)) == 1) {
    ct_scope_begin();
    ct_tensor *logits = ct_module_forward(m, x);
    ct_tensor *pred = ct_argmax(logits, 1, 0);
    ct_tensor *eq = ct_eq(pred, y);
    ct_tensor *s = ct_sum(eq, 0, NULL, 0);
    double c = s ? ct_item(s) : NAN;
    total += ct_tensor_size(y, 0);
    ct_scope_end();
    ct_tensor_free(x), ct_tensor_free(y);
    if (isnan(c)) {
      r = -1;
      break;
    }
    correct += (int64_t)c;
  }
  ct_no_grad_end();
  ct_module_train(m, 1);
  ct_loader_free(l);
  if (r < 0) return r < -1 ? r : ct_last_status() ? ct_last_status() : CT_EINVAL;
  return total ? (double)correct / (double)total : 0;
}

static void progress(int epoch, int epochs, int64_t done, int64_t total, double img_s, double loss, double elapsed) {
  int width = 30, fill = total ? (int)(width * done / total) : width;
  double eta = done ? elapsed * (double)(total - done) / (double)done : 0;
  fprintf(stderr, "\repoch %d/%d [", epoch, epochs);
  for (int i = 0; i < width; i++) fputc(i < fill ? '=' : i == fill ? '>' : ' ', stderr);
  fprintf(stderr, "] %3d%% %7.0f img/s  loss %.4f  ETA %02d:%02d ", total ? (int)(100 * done / total) : 100, img_s, loss,
          (int)eta / 60, (int)eta % 60);
  fflush(stderr);
}

/* The epoch's loss is summed on the device, so a step does not wait for its loss to reach the
 * host: reading it back (ct_item) is a synchronization on a GPU, and happens only when the
 * progress line is drawn and at the end of the epoch. */
static double read_sum(ct_tensor *acc) { return acc ? ct_item(acc) : 0.0; }

ct_status ct_cli_train_epoch(ct_module *m, ct_optimizer *opt, ct_loader *loader, const ct_cli_epoch_opts *o,
                             ct_cli_epoch_stats *out) {
  double t0 = now(), loss_sum = 0, last_print = 0, last_publish = 0;
  int64_t seen = 0, steps = 0;
  ct_status status = CT_OK;
  ct_tensor *x, *y, *acc = NULL; /* acc: float64 0-dim sum of loss x batch size, on the device */
  while (!(o->interrupted && *o->interrupted) && ct_loader_next(loader, &x, &y) == 1) {
    ct_scope_begin();
    ct_tensor *logits = ct_module_forward(m, x);
    ct_tensor *loss = ct_cross_entropy(logits, y, CT_REDUCTION_MEAN, 0);
    ct_status s = loss ? ct_backward(loss) : ct_last_status();
    if (s == CT_OK) s = ct_optimizer_step(opt);
    ct_optimizer_zero_grad(opt);
    int64_t b = ct_tensor_size(y, 0);
    if (s == CT_OK) {
      ct_no_grad_begin();
      ct_tensor *w = ct_mul_scalar(loss, (double)b);
      ct_tensor *next = acc ? ct_add(acc, w) : ct_cast(w, CT_F64);
      ct_no_grad_end();
      if (!next) s = ct_last_status();
      else ct_tensor_free(acc), acc = ct_scope_keep(next);
    }
    ct_scope_end();
    ct_tensor_free(x), ct_tensor_free(y);
    if (s != CT_OK) {
      fprintf(stderr, "\ncuttle: training step failed: %s\n", ct_last_error());
      status = s;
      break;
    }
    seen += b, steps++;
    if (o->after_step) {
      int r = o->after_step(o->ctx);
      if (r < 0) {
        status = r;
        break;
      }
      if (r > 0) break;
    }
    double t = now();
    if (o->publish && t - last_publish > 2.0) { /* `cuttle smi --pid` shows these allocator figures */
      ct_monitor_publish();
      ct_clear_error(); /* a monitor that cannot write its file is no training error */
      last_publish = t;
    }
    if (o->progress && (t - last_print > 0.25 || seen == o->per_epoch)) {
      loss_sum = read_sum(acc);
      progress(o->epoch, o->epochs, seen, o->per_epoch, seen / (t - t0), loss_sum / seen, t - t0);
      last_print = t;
    }
  }
  double secs = now() - t0; /* the final read below is not part of the training loop's time */
  if (status == CT_OK) {
    loss_sum = read_sum(acc);
    if (isnan(loss_sum)) {
      fprintf(stderr, "\ncuttle: the training loss is NaN: %s\n",
              ct_last_status() != CT_OK ? ct_last_error() : "the model diverged (try a smaller --lr)");
      status = ct_last_status() != CT_OK ? ct_last_status() : CT_EINVAL;
    }
  }
  ct_tensor_free(acc);
  *out = (ct_cli_epoch_stats){.loss_sum = loss_sum, .seen = seen, .steps = steps, .seconds = secs};
  return status;
}
