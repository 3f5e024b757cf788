/* tests/dist/test_ddp.c: N ranks with batch B/N each train the same model as one process with
 * batch B (issue 10, "Equivalence, asserted by a test").
 *
 * Run under mpirun (tests/CMakeLists.txt registers it with -np 2 and -np 3 over the TCP transport
 * on loopback). Every rank builds the same sequence of synthetic batches of B = 12 samples for the
 * mlp, takes its contiguous share of B/N samples of each, and trains with ct_ddp: a cross-entropy
 * mean over its share, backward, ct_ddp_sync_grads, an optimizer step. Since the shares together are
 * the batch and each loss is a mean over the same number of samples, the averaged gradient is the
 * full batch's, so after 50 steps the parameters must match those of the single-process run with
 * batch B, which rank 0 trains in the same process, to 1e-5 (float sums in another order are the
 * only difference). Each rank starts from a model initialized with its own seed, so the test also
 * proves that ct_ddp_new broadcasts rank 0's parameters; and every rank's parameters must equal
 * rank 0's bit for bit. It runs for SGD with momentum and for Adam, with small buckets (several
 * per step) and with the default 25 MiB (one bucket), and checks with the small buckets that every
 * bucket's all-reduce was started by a gradient hook during backward, none by ct_ddp_sync_grads.
 * A user module with BatchNorm buffers checks what happens to buffers (broadcast from rank 0 in
 * ct_ddp_new, then before every forward through ct_ddp_forward as torch's DDP, or never again with
 * local_buffers), and with gradient accumulation as `cuttle train --accumulate` drives it (the
 * broadcast only before a group's first micro-batch, torch's require_forward_param_sync).
 * It checks no_sync accumulation (K = 2 micro-batches of B/2N per rank, grad sync off for the first,
 * equals one batch of B), the collectives directly (mean, exact int64 sums, broadcast, and the
 * coalesced broadcast of a list mixing dtypes, strided views and devices, from rank 0 and from the
 * last rank, in one collective and in several chunks), and that
 * ranks holding different models (parameter counts, shapes with the same count, dtypes) all fail in
 * ct_ddp_new with a message naming the first parameter that differs and each rank's version of it,
 * rather than hang. The faults (a rank killed or stuck) are tests/dist/dist_faults.sh's.
 *
 * Built without MPI, CTest runs it as one plain process, and it checks that the functions say
 * CT_EUNSUPPORTED and how to install Open MPI.
 *
 * The ranks must make the same collective calls in the same order, so a failed check does not stop
 * a rank early: it is counted, and each rank's exit status reports its own failures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuttle.h"
#include "../support/residual_module.h"
#ifdef CUTTLE_WITH_MPI
#include "dist/dist_internal.h" /* ct__dist_announcements_sent */
#include "nn/module.h" /* to give one rank a float64 parameter, which no public constructor makes */
#endif

#define B 12
#define STEPS 50

static int failures;

#define CHECK(cond, ...)                                                                        \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "test_ddp rank %d: %s:%d: check failed: %s: ", ct_dist_rank(), __FILE__, \
              __LINE__, #cond);                                                                 \
      fprintf(stderr, __VA_ARGS__);                                                             \
      fprintf(stderr, " (last error: %s)\n", ct_last_error());                                 \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)

#ifdef CUTTLE_WITH_MPI
/* The parameters and buffers of m (its state_dict's tensors), borrowed, in registration order;
 * returns their count. */
static int params(ct_module *m, ct_named_tensor *out, int cap) { return ct_module_named_tensors(m, 1, out, cap); }

/* The values of t as float64 on the host (malloc'd), whatever its dtype: num_batches_tracked is int64. */
static double *values(ct_tensor *t) {
  int64_t k = ct_tensor_numel(t);
  double *v = malloc((size_t)(k > 0 ? k : 1) * sizeof *v);
  CHECK(v && ct_to_host(t, v, (size_t)k * sizeof *v, CT_F64) == CT_OK, "reading a tensor");
  return v;
}

/* Max |a - b| over the parameters and buffers of two models of the same architecture. */
static double max_diff(ct_module *a, ct_module *b) {
  ct_named_tensor pa[32], pb[32];
  int n = params(a, pa, 32);
  CHECK(n == params(b, pb, 32), "different models");
  double worst = 0;
  for (int i = 0; i < n; i++) {
    int64_t k = ct_tensor_numel(pa[i].tensor);
    double *x = values(pa[i].tensor), *y = values(pb[i].tensor);
    for (int64_t j = 0; j < k; j++) {
      double d = fabs(x[j] - y[j]);
      if (d > worst || isnan(d)) worst = d;
    }
    free(x), free(y);
  }
  return worst;
}

/* Max |t - rank 0's t| over m's parameters (with_buffers 0) or parameters and buffers (1); 0 on
 * rank 0. A collective: every rank calls it. */
static double spread_from_rank0(ct_module *m, int with_buffers) {
  ct_named_tensor p[32];
  int n = ct_module_named_tensors(m, with_buffers, p, 32);
  double spread = 0;
  for (int i = 0; i < n; i++) {
    ct_tensor *c = ct_to(p[i].tensor, CT_DEVICE_CPU, CT_COPY);
    CHECK(ct_dist_broadcast(&c, 1, 0) == CT_OK, "broadcast of %s", p[i].name);
    double *a = values(c), *b = values(p[i].tensor);
    for (int64_t j = 0; j < ct_tensor_numel(c); j++) spread = fmax(spread, fabs(a[j] - b[j]));
    free(a), free(b);
    ct_tensor_free(c);
  }
  return spread;
}

/* The rows of a batch: B, but batchnorm_buffers_accumulation's micro-batches need more. */
static int64_t batch_rows = B;

/* Batch `step` of the fixed sequence: x (batch_rows, 1, 28, 28) float32, y (batch_rows) int64, the
 * same on every rank. */
static void batch(int step, ct_tensor **x, ct_tensor **y) {
  ct_generator gen = ct_generator_new(1000 + (uint64_t)step);
  int64_t xs[4] = {batch_rows, 1, 28, 28}, ys[1] = {batch_rows};
  *x = ct_randn(4, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &gen);
  *y = ct_randint(1, ys, 0, 10, CT_I64, CT_DEVICE_CPU, &gen);
}

/* Forward (through d's ct_ddp_forward when d is not NULL) and backward of m on rows [lo, lo + n)
 * of batch s, the mean loss scaled by scale. */
static void forward_backward(ct_module *m, ct_ddp *d, int s, int64_t lo, int64_t n, double scale) {
  ct_scope_begin();
  ct_tensor *x, *y;
  batch(s, &x, &y);
  ct_tensor *xs = ct_narrow(x, 0, lo, n);
  ct_tensor *logits = d ? ct_ddp_forward(d, xs) : ct_module_forward(m, xs);
  ct_tensor *loss = ct_cross_entropy(logits, ct_narrow(y, 0, lo, n), CT_REDUCTION_MEAN, 0);
  if (scale != 1) loss = ct_mul_scalar(loss, scale);
  ct_status st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "backward at step %d", s);
  ct_scope_end();
}

/* One training step of m on rows [lo, lo + n) of the batch; with d, the gradients are averaged. */
static void step(ct_module *m, ct_optimizer *opt, ct_ddp *d, int s, int64_t lo, int64_t n) {
  ct_scope_begin();
  forward_backward(m, d, s, lo, n, 1);
  ct_status st;
  if (d) {
    st = ct_ddp_sync_grads(d);
    CHECK(st == CT_OK, "ct_ddp_sync_grads at step %d", s);
  }
  st = ct_optimizer_step(opt);
  CHECK(st == CT_OK, "optimizer step %d", s);
  ct_optimizer_zero_grad(opt);
  ct_scope_end();
}

/* The model of the equivalence runs: the mlp, or (model_name "residual") the module the user defines
 * of tests/support/residual_module.h. */
static const char *model_name = "mlp";
static ct_module *model_new(ct_generator *g) {
  if (strcmp(model_name, "residual") != 0) return ct_model_new(model_name, CT_DEVICE_CPU, g);
  ct_module *m = residual_new(CT_DEVICE_CPU, g);
  CHECK(m != NULL, "building the residual module: %s", ct_last_error());
  return m;
}

/* 1: the equivalence runs with ct_ddp_opts.progress_thread (MPI progress on a thread of its own
 * during backward), which must change nothing but the timing. */
static int progress_thread;

static void equivalence(const char *name, ct_optim_opts oo, double bucket_mb, int min_buckets, double tol) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  /* Rank 0 starts from the reference's initialization, every other rank from its own. */
  ct_generator g = ct_generator_new(rank == 0 ? 7 : 100 + (uint64_t)rank);
  ct_module *m = model_new(&g);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = bucket_mb, .progress_thread = progress_thread});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    return;
  }
  CHECK(ct_ddp_num_buckets(d) >= min_buckets, "%d buckets, expected at least %d", ct_ddp_num_buckets(d), min_buckets);
  ct_optimizer *opt = ct_optimizer_new(m, &oo);
  int64_t share = B / world;
  for (int s = 0; s < STEPS; s++) step(m, opt, d, s, rank * share, share);
  /* The overlap: every bucket of every step was started by a gradient hook, during backward. */
  ct_ddp_stats st;
  CHECK(ct_ddp_get_stats(d, &st) == CT_OK, "ct_ddp_get_stats");
  int nb = ct_ddp_num_buckets(d);
  CHECK(st.steps == STEPS && st.buckets_started_in_backward == (int64_t)STEPS * nb && st.buckets_started_in_sync == 0,
        "%s: %lld steps, %lld buckets started in backward and %lld in ct_ddp_sync_grads; expected %d, %lld, 0", name,
        (long long)st.steps, (long long)st.buckets_started_in_backward, (long long)st.buckets_started_in_sync, STEPS,
        (long long)STEPS * nb);
  CHECK(st.allreduce_s > 0 && st.wait_s >= 0 && st.sync_s >= st.wait_s, "%s: stats all-reduce %g s, wait %g s, sync %g s",
        name, st.allreduce_s, st.wait_s, st.sync_s);
  CHECK(st.buckets_done_in_backward >= 0 && st.buckets_done_in_backward <= st.buckets_started_in_backward,
        "%s: %lld buckets done in backward", name, (long long)st.buckets_done_in_backward);
  if (rank == 0)
    printf("test_ddp: %s: %d buckets x %d steps started by hooks during backward (%lld of them already complete "
           "before ct_ddp_sync_grads); all-reduces in flight %.4f s, waited for in ct_ddp_sync_grads %.4f s\n", name,
           nb, STEPS, (long long)st.buckets_done_in_backward, st.allreduce_s, st.wait_s);

  /* Every rank holds rank 0's parameters, bit for bit. */
  ct_named_tensor p[32];
  int n = params(m, p, 32);
  double spread = 0;
  for (int i = 0; i < n; i++) {
    ct_tensor *c = ct_to(p[i].tensor, CT_DEVICE_CPU, CT_COPY);
    CHECK(ct_dist_broadcast(&c, 1, 0) == CT_OK, "broadcast of %s", p[i].name);
    const float *a = ct_tensor_data(c), *b = ct_tensor_data(p[i].tensor);
    for (int64_t j = 0; j < ct_tensor_numel(c); j++) spread = fmax(spread, fabs((double)a[j] - (double)b[j]));
    ct_tensor_free(c);
  }
  CHECK(spread == 0, "%s: rank %d's parameters differ from rank 0's by %g", name, rank, spread);

  if (rank == 0) {
    ct_generator g0 = ct_generator_new(7);
    ct_module *ref = model_new(&g0);
    ct_optimizer *ropt = ct_optimizer_new(ref, &oo);
    for (int s = 0; s < STEPS; s++) step(ref, ropt, NULL, s, 0, B);
    double diff = max_diff(m, ref);
    printf("test_ddp: %s, %d ranks x batch %lld, %d buckets, %d steps: max abs difference from 1 process x batch %d = %.3g\n",
           name, world, (long long)share, ct_ddp_num_buckets(d), STEPS, B, diff);
    fflush(stdout);
    CHECK(diff <= tol, "%s: max abs difference %g > %g", name, diff, tol);
    /* The models did train: the parameters moved away from their initialization. */
    ct_generator g1 = ct_generator_new(7);
    ct_module *init = model_new(&g1);
    CHECK(max_diff(m, init) > 1e-3, "%s: the parameters did not move", name);
    ct_module_free(init);
    ct_optimizer_free(ropt);
    ct_module_free(ref);
  }
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
}

/* Ranks whose models differ all fail in ct_ddp_new, with a message naming the first parameter that
 * differs and what it is on each rank, instead of hanging later. kind: 0 different sizes (so the
 * element counts differ), 1 the same parameter count and element count but transposed shapes, 2 a
 * float64 weight on the last rank, 3 an extra layer (parameter counts differ), 4 different bucket_mb. */
static void mismatch(int kind) {
  int rank = ct_dist_rank(), last = ct_dist_world_size() - 1;
  ct_generator g = ct_generator_new(3);
  ct_module *m = NULL;
  const char *want[3] = {NULL, NULL, NULL};
  char w0[96], w1[96];
  double mb = 0;
  if (kind == 0) {
    m = ct_linear_new(4, rank == 0 ? 3 : 5, 1, CT_DEVICE_CPU, &g);
    snprintf(w0, sizeof w0, "float32 (3, 4) on rank 0");
    snprintf(w1, sizeof w1, "float32 (5, 4) on rank %d", last);
  } else if (kind == 1) {
    m = ct_linear_new(rank == last ? 6 : 4, rank == last ? 4 : 6, 0, CT_DEVICE_CPU, &g);
    snprintf(w0, sizeof w0, "float32 (6, 4) on rank 0");
    snprintf(w1, sizeof w1, "float32 (4, 6) on rank %d", last);
  } else if (kind == 2) {
    m = ct_linear_new(4, 6, 1, CT_DEVICE_CPU, &g);
    if (rank == last) { /* swap the weight for a float64 one */
      ct_tensor *w64 = ct_randn(2, (int64_t[]){6, 4}, 0, 1, CT_F64, CT_DEVICE_CPU, &g);
      CHECK(w64 && m->slot_is_buffer[0] == 0 && strcmp(m->slot_name[0], "weight") == 0, "Linear's slot 0 is its weight");
      ct_tensor_free(m->slot[0]);
      m->slot[0] = w64;
    }
    snprintf(w0, sizeof w0, "float32 (6, 4) on rank 0");
    snprintf(w1, sizeof w1, "float64 (6, 4) on rank %d", last);
  } else if (kind == 3) {
    ct_module *l[2] = {ct_linear_new(4, 4, 1, CT_DEVICE_CPU, &g), ct_linear_new(4, 4, 1, CT_DEVICE_CPU, &g)};
    m = ct_sequential_new(rank == last ? 2 : 1, l);
    if (rank != last) ct_module_free(l[1]);
    snprintf(w0, sizeof w0, "absent on rank 0");
    snprintf(w1, sizeof w1, "float32 (4, 4) on rank %d", last);
    want[2] = "parameter counts: 2 on rank 0";
  } else {
    m = ct_linear_new(4, 4, 1, CT_DEVICE_CPU, &g);
    mb = rank == last ? 2 : 1;
    snprintf(w0, sizeof w0, "bucket_mb 1 on rank 0");
    snprintf(w1, sizeof w1, "2 on rank %d", last);
  }
  want[0] = w0, want[1] = w1;
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = mb});
  CHECK(d == NULL && ct_last_status() == CT_EINVAL, "mismatch %d: ct_ddp_new accepted ranks with different models", kind);
  CHECK(strstr(ct_last_error(), kind == 4 ? "different buckets" : "different models") != NULL,
        "mismatch %d: the message says the models differ", kind);
  CHECK(kind == 3 || kind == 4 || strstr(ct_last_error(), "parameter 0 ") != NULL, "mismatch %d: names parameter 0", kind);
  CHECK(kind != 3 || strstr(ct_last_error(), "parameter 2 ") != NULL, "mismatch %d: names parameter 2", kind);
  for (int i = 0; i < 3; i++)
    CHECK(!want[i] || strstr(ct_last_error(), want[i]) != NULL, "mismatch %d: the message names \"%s\"", kind, want[i]);
  if (rank == 0) printf("test_ddp: mismatch %d: %s\n", kind, ct_last_error());
  ct_ddp_free(d);
  ct_module_free(m);
}

/* Two backward passes with grad sync on and no ct_ddp_sync_grads between them: the second pass's
 * hooks find gradients already reported, and ct_ddp_sync_grads says so (CT_EAUTOGRAD) on every rank,
 * without hanging; the DDP is usable again after the gradients are zeroed. */
static void double_backward(void) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, &g);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = 0.1});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    return;
  }
  ct_optimizer *opt = ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.01});
  int64_t share = B / world;
  forward_backward(m, d, 0, rank * share, share, 1);
  forward_backward(m, d, 1, rank * share, share, 1);
  ct_status s = ct_ddp_sync_grads(d);
  CHECK(s == CT_EAUTOGRAD && strstr(ct_last_error(), "without ct_ddp_sync_grads in between") != NULL,
        "two backward passes without a sync: status %d", (int)s);
  if (rank == 0) printf("test_ddp: two backward passes without a sync: %s\n", ct_last_error());
  ct_optimizer_zero_grad(opt);
  step(m, opt, d, 2, rank * share, share); /* and a normal step after it */
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
}

/* No_sync accumulation (DDP's no_sync()): each rank's share of B/N samples as K = 2 micro-batches of
 * B/2N, each loss scaled by 1/2 so that the accumulated gradient is the share's mean, with grad
 * sync off for the first backward and on for the second, then ct_ddp_sync_grads and an SGD step,
 * equals one process with batch B, to 1e-5. late_enable: keep grad sync off during both backward
 * passes and turn it on only before ct_ddp_sync_grads, which then starts every bucket itself (no
 * hook fired): the same result. */
static void accumulation(int late_enable) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  ct_optim_opts oo = {.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  ct_generator g = ct_generator_new(rank == 0 ? 7 : 200 + (uint64_t)rank);
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, &g);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = 0.1});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    return;
  }
  ct_optimizer *opt = ct_optimizer_new(m, &oo);
  int64_t share = B / world, micro = share / 2;
  const int steps = 20;
  for (int s = 0; s < steps; s++) {
    CHECK(ct_ddp_set_grad_sync(d, 0) == CT_OK, "grad sync off");
    forward_backward(m, d, s, rank * share, micro, 0.5);
    /* with sync off, ct_ddp_sync_grads leaves the local gradients alone */
    ct_named_tensor p[1];
    params(m, p, 1);
    ct_tensor *gw = ct_grad(p[0].tensor);
    float before = gw ? ((const float *)ct_tensor_data(gw))[0] : NAN;
    CHECK(ct_ddp_sync_grads(d) == CT_OK, "ct_ddp_sync_grads with sync off");
    CHECK(gw && ((const float *)ct_tensor_data(gw))[0] == before, "ct_ddp_sync_grads with sync off changed a gradient");
    if (!late_enable) CHECK(ct_ddp_set_grad_sync(d, 1) == CT_OK, "grad sync on");
    forward_backward(m, d, s, rank * share + micro, share - micro, 0.5);
    if (late_enable) CHECK(ct_ddp_set_grad_sync(d, 1) == CT_OK, "grad sync on");
    CHECK(ct_ddp_sync_grads(d) == CT_OK, "ct_ddp_sync_grads at step %d", s);
    CHECK(ct_optimizer_step(opt) == CT_OK, "optimizer step %d", s);
    ct_optimizer_zero_grad(opt);
  }
  ct_ddp_stats st;
  ct_ddp_get_stats(d, &st);
  int64_t nb = ct_ddp_num_buckets(d);
  CHECK(st.steps == steps, "%lld averaging syncs, expected %d (the syncs with grad sync off do nothing)", (long long)st.steps, steps);
  CHECK(late_enable ? st.buckets_started_in_sync == steps * nb && st.buckets_started_in_backward == 0
                    : st.buckets_started_in_backward == steps * nb && st.buckets_started_in_sync == 0,
        "accumulation (late %d): %lld buckets started in backward, %lld in sync", late_enable,
        (long long)st.buckets_started_in_backward, (long long)st.buckets_started_in_sync);
  if (rank == 0) {
    ct_generator g0 = ct_generator_new(7);
    ct_module *ref = ct_model_new("mlp", CT_DEVICE_CPU, &g0);
    ct_optimizer *ropt = ct_optimizer_new(ref, &oo);
    for (int s = 0; s < steps; s++) step(ref, ropt, NULL, s, 0, B);
    double diff = max_diff(m, ref);
    printf("test_ddp: no_sync accumulation%s, %d ranks x 2 micro-batches of %lld, %d steps: max abs difference from 1 "
           "process x batch %d = %.3g\n", late_enable ? " (sync turned on after both backward passes)" : "", world,
           (long long)micro, steps, B, diff);
    CHECK(diff <= 1e-5, "accumulation: max abs difference %g > 1e-5", diff);
    ct_optimizer_free(ropt);
    ct_module_free(ref);
  }
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
}

/* Buffers under DDP: the user module of residual_bn_new, whose child holds a BatchNorm1d, each rank
 * training on its own share of every batch (so each rank's batch statistics differ), forward
 * through ct_ddp_forward.
 *
 * Each rank starts from its own parameters and its own buffers (running_mean = rank, running_var =
 * 1 + rank, num_batches_tracked = 10 rank), so after ct_ddp_new every tensor must be rank 0's bit
 * for bit (the parameters only with local_buffers, torch's broadcast_buffers=False, which keeps
 * each rank's buffers from the start). After STEPS_BN SGD steps: the parameters are identical on
 * every rank; num_batches_tracked is STEPS_BN everywhere (10 rank + STEPS_BN with local_buffers);
 * and every rank's model equals, to 1e-5, one process that starts from rank 0's parameters (and
 * buffers; this rank's own with local_buffers) and takes every rank's share of each batch in turn (each loss scaled 1/world, the
 * gradients accumulating, which is DDP's averaged gradient), each share's forward from the same
 * running statistics, which then go on as:
 *  - torch's default (broadcast_buffers=True; local 0): rank 0's share's, since ct_ddp_forward
 *    copies rank 0's buffers to every rank before each forward; after the last step a rank holds
 *    its own share's update of them;
 *  - local_buffers (broadcast_buffers=False; local 1): this rank's share's, every step. */
#define STEPS_BN 10

/* Rank r's buffers, as described above (r = 0 gives BatchNorm's defaults). */
static void set_rank_buffers(ct_module *m, int r) {
  CHECK(ct_fill_(ct_module_tensor(m, "block.bn.running_mean"), r) == CT_OK, "fill running_mean");
  CHECK(ct_fill_(ct_module_tensor(m, "block.bn.running_var"), 1 + r) == CT_OK, "fill running_var");
  CHECK(ct_fill_(ct_module_tensor(m, "block.bn.num_batches_tracked"), 10 * r) == CT_OK, "fill num_batches_tracked");
}

static void batchnorm_buffers(int local) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  ct_optim_opts oo = {.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  ct_generator g = ct_generator_new(rank == 0 ? 7 : 300 + (uint64_t)rank);
  ct_module *m = residual_bn_new(CT_DEVICE_CPU, &g);
  CHECK(m != NULL, "building the BatchNorm module");
  if (!m) return;
  set_rank_buffers(m, rank);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = 0.05, .local_buffers = local});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    return;
  }
  double start = spread_from_rank0(m, !local); /* local_buffers: the parameters only, buffers stay each rank's */
  CHECK(start == 0, "BatchNorm: after ct_ddp_new rank %d's parameters (and buffers) differ from rank 0's by %g", rank, start);
  if (local && rank > 0)
    CHECK(ct_item(ct_module_tensor(m, "block.bn.num_batches_tracked")) == 10 * rank,
          "BatchNorm: local_buffers broadcast rank %d's buffers", rank);
  ct_optimizer *opt = ct_optimizer_new(m, &oo);
  int64_t share = B / world;
  for (int s = 0; s < STEPS_BN; s++) step(m, opt, d, s, rank * share, share);
  double spread = spread_from_rank0(m, 0);
  CHECK(spread == 0, "BatchNorm: rank %d's parameters differ from rank 0's by %g", rank, spread);
  double nbt = ct_item(ct_module_tensor(m, "block.bn.num_batches_tracked"));
  int nbt_want = STEPS_BN + (local ? 10 * rank : 0); /* local: counted on from the rank's own 10 rank */
  CHECK(nbt == nbt_want, "BatchNorm: rank %d counted %g batches, expected %d", rank, nbt, nbt_want);

  /* the reference, on every rank for its own buffers */
  ct_generator g0 = ct_generator_new(7);
  ct_module *ref = residual_bn_new(CT_DEVICE_CPU, &g0);
  ct_optimizer *ropt = ct_optimizer_new(ref, &oo);
  set_rank_buffers(ref, local ? rank : 0);
  static const char *const bufs[3] = {"block.bn.running_mean", "block.bn.running_var", "block.bn.num_batches_tracked"};
  for (int s = 0; s < STEPS_BN; s++) {
    /* the share whose statistics go on: this rank's (local, or after the last step), else rank 0's */
    int keep = local || s == STEPS_BN - 1 ? rank : 0;
    ct_tensor *before[3], *kept[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) before[i] = ct_to(ct_module_tensor(ref, bufs[i]), CT_DEVICE_CPU, CT_COPY);
    for (int k = 0; k < world; k++) {
      for (int i = 0; i < 3; i++) CHECK(ct_copy_(ct_module_tensor(ref, bufs[i]), before[i]) == CT_OK, "restore");
      forward_backward(ref, NULL, s, k * share, share, 1.0 / world);
      if (k == keep)
        for (int i = 0; i < 3; i++) kept[i] = ct_to(ct_module_tensor(ref, bufs[i]), CT_DEVICE_CPU, CT_COPY);
    }
    for (int i = 0; i < 3; i++) {
      CHECK(ct_copy_(ct_module_tensor(ref, bufs[i]), kept[i]) == CT_OK, "the statistics that go on");
      ct_tensor_free(before[i]), ct_tensor_free(kept[i]);
    }
    CHECK(ct_optimizer_step(ropt) == CT_OK, "reference step %d", s);
    ct_optimizer_zero_grad(ropt);
  }
  double diff = max_diff(m, ref);
  ct_named_tensor p[32];
  int n = params(m, p, 32);
  double moved = 0; /* the running mean, from rank 0's 0 */
  for (int i = 0; i < n; i++)
    if (strcmp(p[i].name, "block.bn.running_mean") == 0) {
      double *v = values(p[i].tensor);
      for (int64_t j = 0; j < ct_tensor_numel(p[i].tensor); j++) moved = fmax(moved, fabs(v[j]));
      free(v);
    }
  if (rank == 0)
    printf("test_ddp: BatchNorm user module%s, %d ranks x batch %lld, %d steps: max abs difference (parameters and "
           "buffers) from 1 process taking the shares in turn = %.3g\n", local ? " (local_buffers)" : "", world,
           (long long)share, STEPS_BN, diff);
  CHECK(diff <= 1e-5, "BatchNorm: rank %d's parameters and buffers differ from the reference by %g", rank, diff);
  CHECK(moved > 1e-3, "BatchNorm: rank %d's running mean did not move", rank);
  ct_optimizer_free(ropt);
  ct_module_free(ref);
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
}

/* Buffers under DDP with gradient accumulation, driven as `cuttle train --accumulate K` drives it
 * (tools/cuttle/train_loop.c): before each micro-batch ct_ddp_set_grad_sync(d, last of its group),
 * then ct_ddp_forward, backward of the loss scaled 1/K; after the group's last, ct_ddp_sync_grads and
 * an SGD step. torch's rule (require_forward_param_sync, set by _post_forward to grad enabled and
 * not in no_sync): the buffers are broadcast before a forward only when the previous forward ran
 * with grad and grad sync on, so before each group's first micro-batch (and the very first forward)
 * and never before the others. Two checks:
 *  - the collectives ct_ddp_forward starts: one (the buffers, coalesced) before a group's first
 *    micro-batch, none before the others;
 *  - as in batchnorm_buffers, every rank's model after STEPS_BN groups equals, to 1e-5, one process
 *    that starts from rank 0's parameters and buffers and takes every rank's share of each batch in
 *    turn, each share as K micro-batches (losses scaled 1/(world K)), each share's K forwards
 *    starting from rank 0's running statistics at the group's start and updating them in turn; the
 *    statistics that go on are rank 0's share's, and after the last group this rank's. Broadcasting
 *    before every forward instead would leave a rank other than 0 with rank 0's statistics after
 *    its first K - 1 micro-batches, updated by its own last one, and fail this on those ranks.
 * The batches have 4 B = 48 rows and K is 4, so that a micro-batch has 6 rows on 2 ranks, 4 on 3:
 * BatchNorm's gradient through the statistics of 2 rows is so ill-conditioned that the float
 * rounding of the all-reduce's other order of summation grew to 1e-1 in 10 steps (measured), and 3
 * rows came within 2x of the 1e-5 bound. */
#define ACC_ROWS (4 * B)
static void batchnorm_buffers_accumulation(void) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  batch_rows = ACC_ROWS;
  int64_t share = ACC_ROWS / world;
  const int K = 4;
  int64_t micro = share / K;
  ct_optim_opts oo = {.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  ct_generator g = ct_generator_new(rank == 0 ? 7 : 400 + (uint64_t)rank);
  ct_module *m = residual_bn_new(CT_DEVICE_CPU, &g);
  CHECK(m != NULL && share % K == 0, "building the BatchNorm module");
  if (!m) return (void)(batch_rows = B);
  set_rank_buffers(m, rank);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = 0.05});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    batch_rows = B;
    return;
  }
  ct_optimizer *opt = ct_optimizer_new(m, &oo);
  int wrong = 0; /* forwards that broke the rule */
  for (int s = 0; s < STEPS_BN; s++) {
    for (int q = 0; q < K; q++) {
      ct_scope_begin();
      CHECK(ct_ddp_set_grad_sync(d, q == K - 1) == CT_OK, "grad sync %d", q == K - 1);
      ct_tensor *x, *y;
      batch(s, &x, &y);
      int64_t lo = rank * share + q * micro;
      int64_t c0 = ct__dist_collectives_started();
      ct_tensor *logits = ct_ddp_forward(d, ct_narrow(x, 0, lo, micro));
      int64_t started = ct__dist_collectives_started() - c0;
      if (started != (q == 0) && !wrong++) /* the first forward that broke the rule */
        CHECK(started == (q == 0), "accumulation: group %d, micro-batch %d of %d: ct_ddp_forward started %lld collectives, expected %d "
              "(the buffers only before a group's first)", s, q, K, (long long)started, q == 0);
      ct_tensor *loss = ct_mul_scalar(ct_cross_entropy(logits, ct_narrow(y, 0, lo, micro), CT_REDUCTION_MEAN, 0), 1.0 / K);
      CHECK(loss && ct_backward(loss) == CT_OK, "backward, group %d micro-batch %d", s, q);
      ct_scope_end();
    }
    CHECK(ct_ddp_sync_grads(d) == CT_OK, "ct_ddp_sync_grads at group %d", s);
    CHECK(ct_optimizer_step(opt) == CT_OK, "optimizer step %d", s);
    ct_optimizer_zero_grad(opt);
  }
  CHECK(wrong == 0, "accumulation: %d of %d forwards broke the rule", wrong, STEPS_BN * K);
  double spread = spread_from_rank0(m, 0);
  CHECK(spread == 0, "BatchNorm accumulation: rank %d's parameters differ from rank 0's by %g", rank, spread);
  double nbt = ct_item(ct_module_tensor(m, "block.bn.num_batches_tracked"));
  CHECK(nbt == STEPS_BN * K, "BatchNorm accumulation: rank %d counted %g batches, expected %d", rank, nbt, STEPS_BN * K);

  /* the reference, on every rank for its own buffers */
  ct_generator g0 = ct_generator_new(7);
  ct_module *ref = residual_bn_new(CT_DEVICE_CPU, &g0);
  ct_optimizer *ropt = ct_optimizer_new(ref, &oo);
  set_rank_buffers(ref, 0);
  static const char *const bufs[3] = {"block.bn.running_mean", "block.bn.running_var", "block.bn.num_batches_tracked"};
  for (int s = 0; s < STEPS_BN; s++) {
    int keep = s == STEPS_BN - 1 ? rank : 0; /* the share whose statistics go on */
    ct_tensor *before[3], *kept[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) before[i] = ct_to(ct_module_tensor(ref, bufs[i]), CT_DEVICE_CPU, CT_COPY);
    for (int k = 0; k < world; k++) {
      for (int i = 0; i < 3; i++) CHECK(ct_copy_(ct_module_tensor(ref, bufs[i]), before[i]) == CT_OK, "restore");
      for (int q = 0; q < K; q++) forward_backward(ref, NULL, s, k * share + q * micro, micro, 1.0 / (world * K));
      if (k == keep)
        for (int i = 0; i < 3; i++) kept[i] = ct_to(ct_module_tensor(ref, bufs[i]), CT_DEVICE_CPU, CT_COPY);
    }
    for (int i = 0; i < 3; i++) {
      CHECK(ct_copy_(ct_module_tensor(ref, bufs[i]), kept[i]) == CT_OK, "the statistics that go on");
      ct_tensor_free(before[i]), ct_tensor_free(kept[i]);
    }
    CHECK(ct_optimizer_step(ropt) == CT_OK, "reference step %d", s);
    ct_optimizer_zero_grad(ropt);
  }
  double diff = max_diff(m, ref);
  if (rank == 0)
    printf("test_ddp: BatchNorm user module, --accumulate %d, %d ranks x %d micro-batches of %lld, %d steps: max abs "
           "difference (parameters and buffers) from 1 process taking the shares in turn = %.3g\n", K, world, K,
           (long long)micro, STEPS_BN, diff);
  CHECK(diff <= 1e-5, "BatchNorm accumulation: rank %d's parameters and buffers differ from the reference by %g", rank, diff);
  ct_optimizer_free(ropt);
  ct_module_free(ref);
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
  batch_rows = B;
}

/* ct_dist_broadcast, coalesced (process_group.c): one list mixing uint8 (3 bytes, so that what
 * follows lies unaligned in the staging buffer), float32, float64, int64 (values above 2^53, which
 * a trip through float64 would round), an empty tensor, a 0-dim one, strided views (a transposed
 * one, and a slice with step 2 whose base's other elements must stay this rank's) and, where an
 * OpenCL device exists (PoCL), a device tensor and a strided device view, every rank filling each
 * tensor with values of its own, then a broadcast from root. Afterwards every tensor holds root's
 * values bit for bit on every rank (on the root: its own, unchanged), the slice's base keeps this
 * rank's odd elements, the root's version counters did not move and every other rank's did
 * (autograd must see the write). Counting the collectives started: with the default 256 MiB chunk
 * the whole list is one broadcast (it was one per tensor); with a 40-byte chunk
 * (ct__dist_set_broadcast_chunk) it splits into [uint8, f32 (23 bytes)], the f64 (48, larger than
 * a chunk: alone, in place), [int64 (32)], the transposed view (48: alone, through a host copy),
 * [empty, 0-dim, slice (24)], and with OpenCL the device tensor (48: alone, through the host) and
 * [the device view (24)]: 5 broadcasts, 7 with OpenCL. */
#define NBC 10
static void coalesced_broadcast(int root, size_t chunk) {
  int rank = ct_dist_rank();
  ct_device ocl;
  int have_ocl = ct_device_count(CT_OPENCL) > 0 && ct_device_parse("opencl:0", &ocl) == CT_OK;
  ct_scope_begin();
  /* values of rank r: element i of tensor k (the bases: the transposed view's (3, 4), the slice's (8)) */
  ct_tensor *base[NBC] = {0}, *t[NBC] = {0};
  uint8_t u8[2][3];
  float f32[2][5], tr[2][12], sl[2][8], od[2][12], ov[2][6];
  double f64[2][6], sc[2][1];
  int64_t i64[2][4];
  for (int w = 0; w < 2; w++) { /* w 0: this rank's values, 1: root's */
    int r = w == 0 ? rank : root;
    for (int i = 0; i < 3; i++) u8[w][i] = (uint8_t)(7 * r + i + 1);
    for (int i = 0; i < 5; i++) f32[w][i] = (float)(100 * r + i) + 0.25f;
    for (int i = 0; i < 6; i++) f64[w][i] = 1000.0 * r + i + 1.0 / 3;
    for (int i = 0; i < 4; i++) i64[w][i] = ((int64_t)1 << 60) + 1000 * r + 2 * i + 1;
    for (int i = 0; i < 12; i++) tr[w][i] = (float)(-50 * r - i) - 0.5f;
    sc[w][0] = -7.0 * r - 0.125;
    for (int i = 0; i < 8; i++) sl[w][i] = (float)(300 * r + 10 * i) + 0.75f;
    for (int i = 0; i < 12; i++) od[w][i] = (float)(17 * r + i) / 8;
    for (int i = 0; i < 6; i++) ov[w][i] = (float)(-9 * r + i) / 16;
  }
  ct_device cpu = CT_DEVICE_CPU;
  t[0] = ct_from_host(u8[0], 1, (int64_t[]){3}, CT_U8, cpu);
  t[1] = ct_from_host(f32[0], 1, (int64_t[]){5}, CT_F32, cpu);
  t[2] = ct_from_host(f64[0], 2, (int64_t[]){2, 3}, CT_F64, cpu);
  t[3] = ct_from_host(i64[0], 1, (int64_t[]){4}, CT_I64, cpu);
  base[4] = ct_from_host(tr[0], 2, (int64_t[]){3, 4}, CT_F32, cpu);
  t[4] = ct_transpose(base[4], 0, 1);
  t[5] = ct_empty(1, (int64_t[]){0}, CT_F32, cpu);
  t[6] = ct_from_host(sc[0], 0, NULL, CT_F64, cpu);
  base[7] = ct_from_host(sl[0], 1, (int64_t[]){8}, CT_F32, cpu);
  t[7] = ct_slice(base[7], 0, 0, 8, 2);
  int n = 8;
  if (have_ocl) {
    t[8] = ct_from_host(od[0], 1, (int64_t[]){12}, CT_F32, ocl);
    base[9] = ct_from_host(ov[0], 2, (int64_t[]){2, 3}, CT_F32, ocl);
    t[9] = ct_transpose(base[9], 0, 1);
    n = 10;
  }
  for (int k = 0; k < n; k++) CHECK(t[k] != NULL, "coalesced broadcast: building tensor %d", k);
  CHECK(!ct_tensor_is_contiguous(t[4]) && !ct_tensor_is_contiguous(t[7]) && (!have_ocl || !ct_tensor_is_contiguous(t[9])),
        "coalesced broadcast: the views are strided");
  uint64_t v0[NBC];
  for (int k = 0; k < n; k++) v0[k] = ct__version(t[k]);
  size_t old = ct__dist_set_broadcast_chunk(chunk);
  int64_t c0 = ct__dist_collectives_started();
  ct_status st = ct_dist_broadcast(t, n, root);
  int64_t started = ct__dist_collectives_started() - c0;
  ct__dist_set_broadcast_chunk(old);
  CHECK(st == CT_OK, "coalesced broadcast from rank %d (chunk %zu): status %d", root, chunk, (int)st);
  int64_t want = chunk ? (have_ocl ? 7 : 5) : 1;
  CHECK(started == want, "coalesced broadcast from rank %d (chunk %zu): %lld collectives, expected %lld", root, chunk,
        (long long)started, (long long)want);
  /* what each tensor must hold: root's values, row-major (the views': their elements of root's base) */
  float trt[12], slv[4], ovt[6];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) trt[i * 3 + j] = tr[1][j * 4 + i];
  for (int i = 0; i < 4; i++) slv[i] = sl[1][2 * i];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) ovt[i * 2 + j] = ov[1][j * 3 + i];
  const void *want_bytes[NBC] = {u8[1], f32[1], f64[1], i64[1], trt, NULL, sc[1], slv, od[1], ovt};
  for (int k = 0; k < n; k++) {
    if (!t[k]) continue;
    size_t nb = (size_t)ct_tensor_numel(t[k]) * ct_dtype_size(ct_tensor_dtype(t[k]));
    char got[128];
    CHECK(nb <= sizeof got && ct_to_host(t[k], got, sizeof got, ct_tensor_dtype(t[k])) == CT_OK, "reading tensor %d", k);
    CHECK(nb == 0 || memcmp(got, want_bytes[k], nb) == 0,
          "coalesced broadcast from rank %d (chunk %zu): tensor %d (%s) differs from the root's", root, chunk, k,
          ct_dtype_name(ct_tensor_dtype(t[k])));
    uint64_t v = ct__version(t[k]);
    if (rank == root) CHECK(v == v0[k], "coalesced broadcast: the root's tensor %d was counted as written", k);
    else if (nb > 0) CHECK(v > v0[k], "coalesced broadcast: tensor %d written on rank %d without a version bump", k, rank);
  }
  /* the slice's base: root's values at the even elements, this rank's own at the odd ones */
  float b7[8];
  CHECK(base[7] && ct_to_host(base[7], b7, sizeof b7, CT_F32) == CT_OK, "reading the slice's base");
  for (int i = 0; i < 8; i++)
    CHECK(b7[i] == sl[i % 2 ? 0 : 1][i], "coalesced broadcast from rank %d: the slice's base element %d is %g, expected %g",
          root, i, b7[i], sl[i % 2 ? 0 : 1][i]);
  if (rank == 0)
    printf("test_ddp: coalesced broadcast from rank %d of %d tensors (%s, chunk %s): %lld collective(s)\n", root, n,
           have_ocl ? "CPU and opencl:0" : "CPU", chunk ? "40 bytes" : "256 MiB", (long long)started);
  /* the contract's edges: an empty list sends nothing; a NULL tensor, a NULL list, n < 0 and a root
   * outside the group are errors before any collective (every rank fails alike) */
  c0 = ct__dist_collectives_started();
  CHECK(ct_dist_broadcast(NULL, 0, root) == CT_OK && ct__dist_collectives_started() == c0, "an empty list");
  CHECK(ct_dist_broadcast((ct_tensor *[]){t[1], NULL}, 2, root) == CT_EINVAL && strstr(ct_last_error(), "tensor 1 of 2 is NULL"),
        "a NULL tensor in the list");
  CHECK(ct_dist_broadcast(NULL, 1, root) == CT_EINVAL && ct_dist_broadcast(t, -1, root) == CT_EINVAL, "a NULL list, n < 0");
  CHECK(ct_dist_broadcast(t, 1, -1) == CT_EINVAL && strstr(ct_last_error(), "outside"), "root -1");
  CHECK(ct__dist_collectives_started() == c0, "a rejected list started a collective");
  ct_scope_end();
}

static void collectives(void) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  int64_t shape[1] = {5};
  ct_tensor *f = ct_full(1, shape, rank + 1, CT_F32, CT_DEVICE_CPU);
  ct_tensor *dd = ct_full(1, shape, 2.0 * rank, CT_F64, CT_DEVICE_CPU);
  ct_tensor *list[2] = {f, dd};
  CHECK(ct_dist_all_reduce_mean(list, 2) == CT_OK, "all_reduce_mean");
  double want_f = (world + 1) / 2.0, want_d = world - 1.0;
  const float *pf = ct_tensor_data(f);
  const double *pd = ct_tensor_data(dd);
  for (int i = 0; i < 5; i++) {
    CHECK(fabs(pf[i] - want_f) < 1e-6, "float32 mean %g, expected %g", pf[i], want_f);
    CHECK(fabs(pd[i] - want_d) < 1e-12, "float64 mean %g, expected %g", pd[i], want_d);
  }
  ct_tensor *ids = ct_full(1, shape, 10 * rank + 3, CT_I64, CT_DEVICE_CPU);
  int root = world - 1;
  CHECK(ct_dist_broadcast(&ids, 1, root) == CT_OK, "broadcast");
  CHECK(((int64_t *)ct_tensor_data(ids))[4] == 10 * root + 3, "broadcast value %lld",
        (long long)((int64_t *)ct_tensor_data(ids))[4]);
  CHECK(ct_dist_broadcast(&ids, 1, world) == CT_EINVAL, "a root outside the group is an error");
  CHECK(ct_dist_all_reduce_mean(&ids, 1) == CT_EDTYPE, "the mean of an int64 tensor is an error");
  /* Exact sums: int64 counts beyond float32's 2^24, and float32/float64 values. */
  int64_t big = ((int64_t)1 << 40) + 7 * rank + 1;
  ct_tensor *cnt = ct_full(1, shape, (double)big, CT_I64, CT_DEVICE_CPU);
  ct_tensor *sf = ct_full(1, shape, rank + 0.5, CT_F32, CT_DEVICE_CPU);
  ct_tensor *sd = ct_full(1, shape, 0.25 * rank, CT_F64, CT_DEVICE_CPU);
  ct_tensor *sums[3] = {cnt, sf, sd};
  CHECK(ct_dist_all_reduce_sum(sums, 3) == CT_OK, "all_reduce_sum");
  int64_t want_c = world * (((int64_t)1 << 40) + 1) + 7 * (int64_t)world * (world - 1) / 2;
  CHECK(((int64_t *)ct_tensor_data(cnt))[3] == want_c, "int64 sum %lld, expected %lld",
        (long long)((int64_t *)ct_tensor_data(cnt))[3], (long long)want_c);
  CHECK(((float *)ct_tensor_data(sf))[2] == (float)(world * (world - 1) / 2.0 + 0.5 * world), "float32 sum %g",
        ((float *)ct_tensor_data(sf))[2]);
  CHECK(((double *)ct_tensor_data(sd))[4] == 0.25 * world * (world - 1) / 2.0, "float64 sum %g", ((double *)ct_tensor_data(sd))[4]);
  ct_tensor *u8 = ct_full(1, shape, 1, CT_U8, CT_DEVICE_CPU);
  CHECK(ct_dist_all_reduce_sum(&u8, 1) == CT_EDTYPE, "the sum of a uint8 tensor is an error");
  ct_tensor_free(cnt), ct_tensor_free(sf), ct_tensor_free(sd), ct_tensor_free(u8);
  ct_tensor_free(f), ct_tensor_free(dd), ct_tensor_free(ids);
}

/* A rank that arrives late, after the other ranks' grace period (a tenth of the timeout, at most
 * 0.1 s) but well within the timeout, delays a collective and breaks nothing: the waiting ranks
 * announce where they are (process_group.c), the collective completes with the right values, and
 * ct_dist_finalize, at the end of main, must still receive every announcement sent (or it fails
 * with CT_EBACKEND once its own bound has passed). Both ways of waiting: a broadcast (non-blocking, polled) and
 * a sum (the blocking MPI_Allreduce, announced by the watchdog thread). */
static void late_rank(void) {
  int rank = ct_dist_rank(), world = ct_dist_world_size(), late = world - 1;
  int64_t shape[1] = {3};
  for (int way = 0; way < 2; way++) {
    int64_t sent0 = ct__dist_announcements_sent();
    ct_tensor *t = ct_full(1, shape, rank + 1, CT_F64, CT_DEVICE_CPU);
    if (rank == late) nanosleep(&(struct timespec){0, 400 * 1000000L}, NULL); /* 0.4 s: 4 grace periods */
    /* the late rank is the broadcast's root: the others cannot complete before it comes */
    double t0 = ct__dist_now();
    ct_status s = way == 0 ? ct_dist_broadcast(&t, 1, late) : ct_dist_all_reduce_sum(&t, 1);
    double waited = ct__dist_now() - t0;
    double want = way == 0 ? late + 1.0 : world * (world + 1) / 2.0, got = ((double *)ct_tensor_data(t))[2];
    CHECK(s == CT_OK && got == want, "late rank, %s: status %d, value %g, expected %g", way == 0 ? "broadcast" : "sum",
          (int)s, got, want);
    int64_t sent = ct__dist_announcements_sent() - sent0;
    /* the ranks that waited 0.4 s announced themselves to every other rank (the watchdog does it for
     * the blocking sum); the late rank waited for nobody. A rank that a loaded machine kept off its
     * core until the late one came waited less than the grace period and a watchdog tick (0.15 s):
     * only a rank that measurably waited 0.25 s must have announced. */
    if (world > 1 && rank != late && waited < 0.25)
      printf("late rank, %s: rank %d was itself late (waited %.3f s): announcements not checked\n",
             way == 0 ? "broadcast" : "sum", rank, waited);
    else if (world > 1 && rank != late)
      CHECK(sent >= world - 1, "late rank, %s: rank %d waited past the grace period but sent %lld announcements",
            way == 0 ? "broadcast" : "sum", rank, (long long)sent);
    ct_tensor_free(t);
  }
}

#endif

int main(void) {
  ct_status s = ct_dist_init();
#ifndef CUTTLE_WITH_MPI
  /* Built without MPI: the process group says so, and how to get it. */
  CHECK(s == CT_EUNSUPPORTED, "ct_dist_init without MPI returned %d", (int)s);
  CHECK(strstr(ct_last_error(), "apt-get install libopenmpi-dev openmpi-bin") != NULL, "the message names the packages");
  CHECK(ct_dist_world_size() == 1 && ct_dist_rank() == 0, "one process is a group of one");
  printf("test_ddp: built without MPI; ct_dist_init says: %s\n", ct_last_error());
  return failures ? 1 : 0;
#else
  if (s != CT_OK) {
    fprintf(stderr, "test_ddp: ct_dist_init failed: %s\n", ct_last_error());
    return 1;
  }
  int world = ct_dist_world_size();
  CHECK(world >= 1 && B % world == 0, "world size %d must divide the batch %d", world, B);
  CHECK(ct_dist_local_rank() >= 0 && ct_dist_local_rank() < world, "local rank %d", ct_dist_local_rank());
  CHECK(ct_dist_init() == CT_OK, "a second ct_dist_init does nothing");
  CHECK(ct_dist_timeout() == 60.0, "the default timeout is 60 s");
  collectives();
  for (int root = 0; root < world; root += world - 1 > 0 ? world - 1 : 1) { /* rank 0 and the last rank */
    coalesced_broadcast(root, 0);
    coalesced_broadcast(root, 40);
  }
  for (int kind = 0; kind < 5; kind++) mismatch(kind);
  /* 0.1 MiB buckets split the mlp's 235146 floats (0.9 MiB) over several all-reduces. */
  equivalence("SGD lr 0.05 momentum 0.9", (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9}, 0.1, 4, 1e-5);
  progress_thread = 1;
  equivalence("SGD lr 0.05 momentum 0.9, progress thread", (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9},
              0.1, 4, 1e-5);
  progress_thread = 0;
  /* Adam divides each gradient by sqrt(v) + eps, so where a gradient entry is near zero (terms that
   * cancel) an absolute rounding error dg of the gradient moves the update by about lr * dg / eps:
   * 1e5 * dg with PyTorch's defaults lr 1e-3, eps 1e-8. Summing the batch in another order (as the
   * ranks do) makes dg about 1e-10 in float32, so Adam's parameters differ by up to a few 1e-5 after
   * 50 steps, which one process also shows when it accumulates the batch's gradient in N parts
   * (measured: 1.2e-5 for 2 parts, 8.6e-6 for 3; docs of issue 10). With eps 1e-6 the amplification
   * is 1e3 and the bound of the issue, 1e-5, holds with margin; with the defaults the test asserts
   * 1e-4, ten times the single-process accumulation's difference. */
  equivalence("Adam lr 1e-3 eps 1e-6", (ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3, .eps = 1e-6}, 0, 1, 1e-5);
  equivalence("Adam defaults (lr 1e-3 eps 1e-8)", (ct_optim_opts){.kind = CT_OPTIM_ADAM}, 0.1, 4, 1e-4);
  /* a module the user defines: its parameters bucketed and all-reduced by their names (0.05 MiB
   * buckets split its 26,506 floats in two) */
  model_name = "residual";
  equivalence("SGD lr 0.05 momentum 0.9, user module", (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9},
              0.05, 2, 1e-5);
  model_name = "mlp";
  accumulation(0);
  accumulation(1);
  batchnorm_buffers(0);
  batchnorm_buffers(1);
  batchnorm_buffers_accumulation();
  double_backward();
  late_rank();
  CHECK(ct_dist_finalize() == CT_OK, "finalize: %s", ct_last_error());
  return failures ? 1 : 0;
#endif
}
