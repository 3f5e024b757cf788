/* tools/cuttle/train_loop.c: the training epoch and the evaluation shared by `cuttle train`,
 * `cuttle eval` and `cuttle bench train` (train_loop.h). */
#define _GNU_SOURCE
#include "train_loop.h"
#include "graph_step.h"
#include <math.h>
#include <stdio.h>
#include <time.h>

double ct_cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This rank's share of ds: the loader's distributed sampler without shuffling gives rank r the
 * samples r, r + W, r + 2W, ..., padded by repeating the first ones up to ceil(N / W) in all; the
 * real ones come first, so the rank counts only its first ceil((N - r) / W) samples. */
static int64_t real_samples(int64_t n, int rank, int world) { return n > rank ? (n - rank + world - 1) / world : 0; }

double ct_cli_evaluate_loss(ct_module *m, ct_dataset *ds, ct_device dev, int workers, int64_t counts[2], double *loss) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  ct_loader_opts lo = {.batch_size = 1000, .num_workers = workers, .device = dev, .rank = rank, .world_size = world};
  int64_t mine = real_samples(ct_dataset_len(ds), rank, world);
  ct_loader *l = ct_loader_new(ds, &lo);
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  int r = l ? 0 : ct_last_status();
  if (l) {
    ct_module_train(m, 0);
    ct_no_grad_begin();
    ct_tensor *x, *y;
    while ((r = ct_loader_next(l, &x, &y)) == 1) {
      ct_scope_begin();
      int64_t b = ct_tensor_size(y, 0), keep = mine - total < b ? mine - total : b;
      double c = 0;
      if (keep > 0) { /* keep < b only in the last batch of a padded shard */
        ct_tensor *xs = keep < b ? ct_narrow(x, 0, 0, keep) : x, *ys = keep < b ? ct_narrow(y, 0, 0, keep) : y;
        ct_tensor *logits = ct_module_forward(m, xs);
        ct_tensor *pred = ct_argmax(logits, 1, 0);
        ct_tensor *eq = ct_eq(pred, ys);
        ct_tensor *s = ct_sum(eq, 0, NULL, 0);
        c = s ? ct_item(s) : NAN;
        if (loss && !isnan(c)) { /* the batch's summed cross-entropy (NaN stays NaN: a diverged model) */
          ct_tensor *ce = ct_cross_entropy(logits, ys, CT_REDUCTION_SUM, 0);
          if (ce) loss_sum += ct_item(ce);
          else c = NAN;
        }
        total += keep;
      }
      ct_scope_end();
      ct_tensor_free(x), ct_tensor_free(y);
      if (isnan(c)) {
        r = ct_last_status() ? ct_last_status() : CT_EINVAL;
        break;
      }
      correct += (int64_t)c;
    }
    ct_no_grad_end();
    ct_module_train(m, 1);
    ct_loader_free(l);
  }
  if (r < 0) correct = total = 0, loss_sum = 0;
  if (world > 1) {
    /* Every rank takes part, a failed one too (its third count says so), so none waits alone. The
     * counts are exact in float64 (below 2^53), beside the loss. */
    double v[4] = {(double)correct, (double)total, r < 0, loss_sum};
    ct_tensor *t = ct_from_host(v, 1, (int64_t[]){4}, CT_F64, CT_DEVICE_CPU);
    ct_status s = t ? ct_dist_all_reduce_sum(&t, 1) : ct_last_status();
    if (s == CT_OK) s = ct_to_host(t, v, sizeof v, CT_F64);
    ct_tensor_free(t);
    if (s != CT_OK) return s;
    if (r >= 0 && v[2] > 0) {
      ct_clear_error(); /* the failing ranks hold the reason and print it */
      fprintf(stderr, "cuttle: rank %d: the evaluation failed on %lld of %d ranks (their messages say why)\n", rank,
              (long long)v[2], world);
      return CT_EINVAL;
    }
    correct = (int64_t)v[0], total = (int64_t)v[1], loss_sum = v[3];
  }
  if (r < 0) return r;
  if (counts) counts[0] = correct, counts[1] = total;
  if (loss) *loss = total ? loss_sum / (double)total : NAN;
  return total ? (double)correct / (double)total : 0;
}

double ct_cli_evaluate_counts(ct_module *m, ct_dataset *ds, ct_device dev, int workers, int64_t counts[2]) {
  return ct_cli_evaluate_loss(m, ds, dev, workers, counts, NULL);
}

double ct_cli_evaluate(ct_module *m, ct_dataset *ds, ct_device dev, int workers) {
  return ct_cli_evaluate_counts(m, ds, dev, workers, NULL);
}

/* The progress of the epoch on stderr: a live bar redrawn in place (carriage returns) on a
 * terminal; else (a log file, a pipe) one plain line each time, as tqdm and Lightning print when
 * stderr is not a terminal. */
static void progress(const ct_cli_epoch_opts *o, int64_t done, double img_s, double loss, double elapsed) {
  int64_t total = o->per_epoch;
  if (done > total) done = total; /* the distributed sampler pads the last batches of an epoch */
  int width = 30, fill = total ? (int)(width * done / total) : width;
  double eta = done ? elapsed * (double)(total - done) / (double)done : 0;
  if (o->plain) {
    fprintf(stderr, "epoch %d/%d: %lld/%lld images (%d%%)  %.0f img/s  loss %.4f  ", o->epoch, o->epochs,
            (long long)done, (long long)total, total ? (int)(100 * done / total) : 100, img_s, loss);
    if (o->global_batch > 0) fprintf(stderr, "batch %lld  ", (long long)o->global_batch);
    if (o->scaler)
      fprintf(stderr, "scale %g  skipped %lld  ", ct_grad_scaler_scale_value(o->scaler),
              (long long)ct_grad_scaler_steps_skipped(o->scaler));
    fprintf(stderr, "ETA %02d:%02d\n", (int)eta / 60, (int)eta % 60);
    fflush(stderr);
    return;
  }
  fprintf(stderr, "\repoch %d/%d [", o->epoch, o->epochs);
  for (int i = 0; i < width; i++) fputc(i < fill ? '=' : i == fill ? '>' : ' ', stderr);
  fprintf(stderr, "] %3d%% %7.0f img/s  loss %.4f  ", total ? (int)(100 * done / total) : 100, img_s, loss);
  if (o->global_batch > 0) fprintf(stderr, "batch %lld  ", (long long)o->global_batch);
  if (o->scaler) /* pytorch#55585: say what the scaler did */
    fprintf(stderr, "scale %g  skipped %lld  ", ct_grad_scaler_scale_value(o->scaler),
            (long long)ct_grad_scaler_steps_skipped(o->scaler));
  fprintf(stderr, "ETA %02d:%02d ", (int)eta / 60, (int)eta % 60);
  fflush(stderr);
}

/* The epoch's loss is summed on the device, so a step does not wait for its loss to reach the
 * host: reading it back (ct_item) is a synchronization on a GPU, and happens only when the
 * progress line is drawn and at the end of the epoch. */
static double read_sum(ct_tensor *acc) { return acc ? ct_item(acc) : 0.0; }

ct_tensor *ct_cli_replica_loss(ct_tensor *output, ct_tensor *target, int replica, void *ctx) {
  (void)replica;
  const ct_cli_replica_ctx *c = ctx;
  ct_tensor *loss = ct_cross_entropy(output, target, CT_REDUCTION_MEAN, 0);
  double k = c->scale / c->group;
  return k != 1.0 ? ct_mul_scalar(loss, k) : loss;
}

/* Add loss x batch size to the epoch's sum *acc, on the device, without recording a graph. With
 * finite_only (a GradScaler runs), an inf or NaN loss adds 0: the scaler skips that step, which is
 * its purpose, and one such batch must not turn the epoch's loss into NaN (the epoch's mean then
 * leaves it out of the sum but not of the image count, a bias of one batch in hundreds). */
static ct_status add_loss(ct_tensor *loss, int64_t batch, ct_tensor **acc, int finite_only, int in_place) {
  ct_no_grad_begin();
  if (finite_only && loss) { /* |loss| <= FLT_MAX is false for inf and for NaN */
    ct_tensor *big = ct_scalar(3.4028234663852886e38, ct_tensor_dtype(loss), ct_tensor_device(loss));
    ct_tensor *zero = big ? ct_scalar(0, ct_tensor_dtype(loss), ct_tensor_device(loss)) : NULL;
    ct_tensor *ok = zero ? ct_le(ct_abs(loss), big) : NULL;
    loss = ok ? ct_where(ok, loss, zero) : NULL;
  }
  ct_tensor *w = ct_mul_scalar(loss, (double)batch);
  ct_tensor *next = *acc ? ct_add(*acc, w) : ct_cast(w, CT_F64);
  /* --cuda-graph: the sum is a static tensor the graph writes in place */
  ct_status s = !next ? ct_last_status() : in_place ? ct_copy_(*acc, next) : CT_OK;
  ct_no_grad_end();
  if (s != CT_OK || in_place) return s;
  ct_tensor_free(*acc);
  *acc = ct_scope_keep(next);
  return CT_OK;
}

/* One micro-batch: forward (in an autocast region with --amp), the loss divided by the group's
 * size, backward (of the scaled loss with a GradScaler); the unscaled loss times the batch size is
 * added to *acc. Runs in the caller's scope. */
static ct_status micro_step(ct_module *m, ct_tensor *x, ct_tensor *y, int group, ct_tensor **acc,
                            const ct_cli_epoch_opts *o) {
  if (o->channels_last && ct_tensor_ndim(x) == 4 && !(x = ct_contiguous_format(x, CT_CHANNELS_LAST))) return ct_last_status();
  if (o->dp) { /* the replicas run forward (autocast with --amp), loss and backward; the loss comes back */
    double scale = o->scaler ? ct_grad_scaler_scale_value(o->scaler) : 1.0;
    if (o->dp_ctx) o->dp_ctx->group = group, o->dp_ctx->scale = scale;
    double l = 0;
    ct_status s = ct_data_parallel_forward_backward(o->dp, x, y, &l);
    if (s != CT_OK) return s;
    ct_tensor *loss = ct_scalar(l * group / scale, CT_F32, ct_tensor_device(y));
    return loss ? add_loss(loss, ct_tensor_size(y, 0), acc, o->scaler != NULL, 0) : ct_last_status();
  }
  ct_device dev = ct_tensor_device(x);
  int amp = o->amp == CT_F16 || o->amp == CT_BF16;
  if (amp && ct_autocast_begin(dev.kind, o->amp, 1) != CT_OK) return ct_last_status();
  /* in a job, DDP's forward: rank 0's BatchNorm statistics first, as torch's DDP */
  ct_tensor *logits = o->ddp ? ct_ddp_forward(o->ddp, x) : ct_module_forward(m, x);
  ct_tensor *loss = ct_cross_entropy(logits, y, CT_REDUCTION_MEAN, 0);
  if (amp) ct_autocast_end(); /* backward runs outside the region, as torch recommends */
  ct_tensor *scaled = group > 1 ? ct_mul_scalar(loss, 1.0 / group) : loss;
  if (o->scaler && scaled) scaled = ct_grad_scaler_scale(o->scaler, scaled);
  ct_status s = scaled ? ct_backward(scaled) : ct_last_status();
  return s == CT_OK ? add_loss(loss, ct_tensor_size(y, 0), acc, o->scaler != NULL, o->graph != NULL) : s;
}

/* The optimizer step of a group: through the GradScaler with --amp f16 (skipped when a gradient is
 * inf or NaN, then the scale updated), else ct_optimizer_step; with --devices the new parameters
 * are then copied to the other replicas. */
static ct_status optimizer_step(ct_optimizer *opt, const ct_cli_epoch_opts *o) {
  ct_status s = CT_OK;
  if (o->scaler) {
    int stepped = ct_grad_scaler_step(o->scaler, opt);
    s = stepped < 0 ? (ct_status)stepped : ct_grad_scaler_update(o->scaler);
  } else s = ct_optimizer_step(opt);
  if (s == CT_OK && o->dp) s = ct_data_parallel_broadcast(o->dp);
  return s;
}

/* --cuda-graph's step (graph_step.h): a whole step of one batch, in a scope of its own, run eagerly
 * or inside the capture. */
typedef struct {
  ct_module *m;
  ct_optimizer *opt;
  const ct_cli_epoch_opts *o;
  ct_tensor **acc;
} graph_body_ctx;

static ct_status graph_body(ct_tensor *x, ct_tensor *y, void *ctx) {
  graph_body_ctx *c = ctx;
  ct_scope_begin();
  ct_status s = micro_step(c->m, x, y, 1, c->acc, c->o);
  if (s == CT_OK) s = optimizer_step(c->opt, c->o);
  ct_optimizer_zero_grad(c->opt);
  ct_scope_end();
  return s;
}

ct_status ct_cli_train_epoch(ct_module *m, ct_optimizer *opt, ct_loader *loader, const ct_cli_epoch_opts *o,
                             ct_cli_epoch_stats *out) {
  double t0 = ct_cli_now(), loss_sum = 0, last_print = 0, last_publish = 0;
  int64_t seen = 0, skipped = 0, steps = 0, micro = 0, pos = 0, nb = ct_loader_len(loader);
  int k = o->accumulate > 1 ? o->accumulate : 1, world = o->world > 1 ? o->world : 1;
  int in_group = 0; /* micro-batches of the current group done so far */
  ct_status status = CT_OK;
  ct_tensor *x, *y, *acc = NULL; /* acc: float64 0-dim sum of loss x batch size, on the device */
  int r = 1;
  if (o->graph) { /* the graph's static sum (borrowed), zeroed for this epoch */
    acc = ct_cli_graph_step_loss_sum(o->graph);
    if (ct_zero_(acc) != CT_OK) return ct_last_status();
  }
  for (; pos < o->skip && (r = ct_loader_next(loader, &x, &y)) == 1; pos++) {
    skipped += ct_tensor_size(y, 0);
    ct_tensor_free(x), ct_tensor_free(y);
  }
  double wait = 0, tw = 0, t1 = ct_cli_now(); /* wait: seconds spent in ct_loader_next for trained batches */
  while (r == 1 && !(in_group == 0 && o->interrupted && *o->interrupted) && ((tw = ct_cli_now()), 1) &&
         (r = ct_loader_next(loader, &x, &y), wait += ct_cli_now() - tw, r) == 1) {
    /* The group that starts at a multiple of k after the skip has k micro-batches, or fewer at the
     * end of the epoch; the last one of it all-reduces and steps. */
    int64_t start = pos - in_group, group = nb - start < k ? nb - start : k;
    int last = in_group + 1 >= group;
    ct_status s = CT_OK;
    if (o->graph) { /* one whole step a batch (no accumulation, no ddp: cmd_train checks) */
      graph_body_ctx gc = {m, opt, o, &acc};
      s = ct_cli_graph_step_run(o->graph, x, y, ct_optimizer_lr(opt), graph_body, &gc);
    } else {
      ct_scope_begin();
      s = o->ddp ? ct_ddp_set_grad_sync(o->ddp, last) : CT_OK;
      if (s == CT_OK) s = micro_step(m, x, y, (int)group, &acc, o);
      if (s == CT_OK && last && o->ddp) s = ct_ddp_sync_grads(o->ddp);
      if (s == CT_OK && last) s = optimizer_step(opt, o);
      if (last || s != CT_OK) ct_optimizer_zero_grad(opt);
      ct_scope_end();
    }
    int64_t b = ct_tensor_size(y, 0);
    ct_tensor_free(x), ct_tensor_free(y);
    if (s != CT_OK) {
      fprintf(stderr, "\ncuttle: training step failed: %s\n", ct_last_error());
      status = s;
      break;
    }
    seen += b, micro++, pos++;
    in_group = last ? 0 : in_group + 1;
    if (!last) continue;
    steps++;
    if (o->position) *o->position = pos;
    if (o->running) *o->running = (ct_cli_running){.seen = seen, .seconds = ct_cli_now() - t1, .loss_sum = acc};
    if (o->after_step) {
      int a = o->after_step(o->ctx);
      if (a < 0) {
        status = a;
        break;
      }
      if (a > 0) break;
    }
    double t = ct_cli_now();
    if (o->publish && t - last_publish > 2.0) { /* `cuttle smi --pid` shows these allocator figures */
      ct_monitor_publish();
      ct_clear_error(); /* a monitor that cannot write its file is no training error */
      last_publish = t;
    }
    double every = o->plain ? (o->plain_every > 0 ? o->plain_every : 10.0) : 0.25;
    if (o->progress && (t - last_print > every || (pos == nb && !o->plain))) {
      loss_sum = read_sum(acc);
      progress(o, world * (skipped + seen), world * seen / (t - t0), loss_sum / seen, t - t0);
      last_print = t;
    }
  }
  if (status == CT_OK && r < 0) {
    fprintf(stderr, "\ncuttle: reading a batch failed: %s\n", ct_last_error());
    status = r;
  }
  double secs = ct_cli_now() - t0;
  if (status == CT_OK) {
    /* the read waits for the device: with non-blocking copies the host may be steps ahead of it, so
     * the loop's time ends when its last step has run (as PyTorch's recipe synchronizes) */
    loss_sum = read_sum(acc);
    secs = ct_cli_now() - t0;
    if (isnan(loss_sum)) {
      fprintf(stderr, "\ncuttle: the training loss is NaN: %s\n",
              ct_last_status() != CT_OK ? ct_last_error() : "the model diverged (try a smaller --lr)");
      status = ct_last_status() != CT_OK ? ct_last_status() : CT_EINVAL;
    }
  }
  if (!o->graph) ct_tensor_free(acc);
  *out = (ct_cli_epoch_stats){.loss_sum = loss_sum, .seen = seen, .steps = steps, .batches = micro, .seconds = secs,
                              .loader_wait = wait};
  return status;
}
