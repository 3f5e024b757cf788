/* tests/dist/test_data_parallel.c: one process, several devices (cuttle/data_parallel.h; issue 10,
 * "Training on Multiple GPUs").
 *
 * The equivalence of issue 10: N replicas with batch B/N each give the same parameters after k
 * steps as one device with batch B. Both runs start from the mlp initialized with the same seed and
 * see the same sequence of synthetic batches; the only difference is the order of the float sums
 * (each replica sums its shard, then the shards' gradients are added), so the parameters must
 * agree to 1e-5 after 50 steps of SGD with momentum, on the two PoCL devices opencl:0 and
 * opencl:1, and on three CPU replicas with an uneven split (13 = 5 + 4 + 4), which checks the
 * b_k / B weighting. Adam's bound is the one test_ddp.c justifies: Adam divides by sqrt(v) + eps,
 * so an absolute rounding difference dg of a near-zero gradient entry moves the update by about
 * lr * dg / eps; with eps 1e-6 that is 1e3 dg and 1e-5 holds, with the defaults (eps 1e-8) it is
 * 1e5 dg and the test asserts 1e-4.
 *
 * A user module with BatchNorm buffers (bn_equivalence) checks the running statistics' rule.
 *
 * Also: after ct_data_parallel_broadcast every replica holds m's values bit for bit; the copies are
 * in the ledger; the replicas really run at the same time (their loss functions meet at a barrier
 * that a sequential run could never pass); a replica's error comes back in the caller's thread
 * naming the replica and its device; a batch smaller than the number of devices; bad arguments. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "residual_module.h"
#include "core/internal.h" /* ct__fault_inject_alloc */

#define STEPS 50

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Batch `step` of the fixed sequence: x (b, 1, 28, 28) float32, y (b) int64, on the CPU. */
static void batch(int step, int64_t b, ct_tensor **x, ct_tensor **y) {
  ct_generator gen = ct_generator_new(1000 + (uint64_t)step);
  int64_t xs[4] = {b, 1, 28, 28}, ys[1] = {b};
  *x = ct_assert_nonnull(ct_randn(4, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &gen));
  *y = ct_assert_nonnull(ct_randint(1, ys, 0, 10, CT_I64, CT_DEVICE_CPU, &gen));
}

/* Max |a - b| over the parameters and buffers of two models of the same architecture (any devices). */
static double max_diff(ct_module *a, ct_module *b) {
  ct_named_tensor pa[32], pb[32];
  int n = ct_module_named_tensors(a, 1, pa, 32);
  assert_int_equal(n, ct_module_named_tensors(b, 1, pb, 32));
  double worst = 0;
  for (int i = 0; i < n; i++) {
    int64_t k = ct_tensor_numel(pa[i].tensor);
    assert_int_equal(k, ct_tensor_numel(pb[i].tensor));
    double *x = ct_test_values(pa[i].tensor), *y = ct_test_values(pb[i].tensor);
    for (int64_t j = 0; j < k; j++) {
      double d = fabs(x[j] - y[j]);
      if (d > worst || isnan(d)) worst = d;
    }
    free(x), free(y);
  }
  return worst;
}

/* One step of the reference: one device, the whole batch; returns the loss. */
static double ref_step(ct_module *m, ct_optimizer *opt, int s, int64_t b) {
  ct_scope_begin();
  ct_tensor *x, *y;
  batch(s, b, &x, &y);
  ct_named_tensor p[1];
  ct_module_named_tensors(m, 0, p, 1);
  ct_device md = ct_tensor_device(p[0].tensor);
  ct_tensor *logits = ct_module_forward(m, ct_to(x, md, 0));
  ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(logits, ct_to(y, md, 0), CT_REDUCTION_MEAN, 0));
  ct_assert_ok(ct_backward(loss));
  double l = ct_item(loss);
  ct_assert_ok(ct_optimizer_step(opt));
  ct_optimizer_zero_grad(opt);
  ct_scope_end();
  return l;
}

/* One data-parallel step; returns the loss. */
static double dp_step(ct_data_parallel *dp, ct_optimizer *opt, int s, int64_t b) {
  ct_scope_begin();
  ct_tensor *x, *y;
  batch(s, b, &x, &y);
  double l = NAN;
  ct_assert_ok(ct_data_parallel_forward_backward(dp, x, y, &l));
  ct_assert_ok(ct_optimizer_step(opt));
  ct_optimizer_zero_grad(opt);
  ct_assert_ok(ct_data_parallel_broadcast(dp));
  ct_scope_end();
  return l;
}

/* Every replica holds m's parameters and buffers bit for bit. */
static void assert_replicas_equal(ct_data_parallel *dp) {
  ct_module *m = ct_data_parallel_replica(dp, 0);
  for (int k = 1; k < ct_data_parallel_num_replicas(dp); k++) {
    double d = max_diff(m, ct_assert_nonnull(ct_data_parallel_replica(dp, k)));
    if (d != 0) fprintf(stderr, "replica %d differs from m by %g\n", k, d);
    assert_true(d == 0);
  }
}

/* ct_model_new, and "residual": tests/support/residual_module.h's module the user defines. */
static ct_module *model_new(const char *model, ct_device dev, ct_generator *g) {
  if (strcmp(model, "residual") != 0) return ct_model_new(model, dev, g);
  return residual_new(dev, g);
}

/* n replicas on devs with batch b against one device (devs[0]) with batch b, for `steps` steps. */
static double equivalence_of(const char *model, const char *name, int n, const ct_device *devs, int64_t b, int steps,
                             ct_optim_opts oo, double tol) {
  ct_generator g = ct_generator_new(7), g0 = ct_generator_new(7), g1 = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(model_new(model, devs[0], &g));
  ct_module *ref = ct_assert_nonnull(model_new(model, devs[0], &g0));
  ct_module *init = ct_assert_nonnull(model_new(model, devs[0], &g1));
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, n, devs, NULL));
  assert_int_equal(ct_data_parallel_num_replicas(dp), n);
  assert_true(ct_data_parallel_replica(dp, 0) == m);
  assert_replicas_equal(dp); /* the replicas start as copies of m */
  for (int k = 0; k < n; k++) {
    ct_named_tensor p[1];
    ct_module_named_tensors(ct_data_parallel_replica(dp, k), 0, p, 1);
    assert_true(ct_device_eq(ct_tensor_device(p[0].tensor), devs[k]));
  }
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &oo));
  ct_optimizer *ropt = ct_assert_nonnull(ct_optimizer_new(ref, &oo));
  double worst_loss = 0, t_dp = 0, t_ref = 0;
  ct_ledger_reset();
  for (int s = 0; s < steps; s++) {
    double t0 = now();
    double l = dp_step(dp, opt, s, b);
    double t1 = now();
    double lr = ref_step(ref, ropt, s, b);
    t_dp += t1 - t0, t_ref += now() - t1;
    worst_loss = fmax(worst_loss, fabs(l - lr));
  }
  ct_ledger led = ct_ledger_get();
  double diff = max_diff(m, ref), moved = max_diff(m, init);
  char d[32];
  printf("test_data_parallel: %s %s: %d replicas (%s first) x batch %lld/%d, %d steps: max abs difference from one device x "
         "batch %lld = %.3g (loss %.3g); moved %.3g from init; %.1f ms/step against %.1f ms/step on one device; ledger: "
         "h2d %llu, d2h %llu, d2d %llu\n",
         model, name, n, ct_device_str(devs[0], d, sizeof d), (long long)b, n, steps, (long long)b, diff, worst_loss, moved,
         1e3 * t_dp / steps, 1e3 * t_ref / steps, (unsigned long long)led.h2d_copies, (unsigned long long)led.d2h_copies,
         (unsigned long long)led.d2d_copies);
  fflush(stdout);
  assert_true(diff <= tol);
  assert_true(worst_loss <= 1e-5); /* the weighted shard losses add up to the batch's mean loss */
  assert_true(moved > 1e-3);       /* and the model did train */
  assert_replicas_equal(dp);
  ct_optimizer_free(opt), ct_optimizer_free(ropt);
  ct_data_parallel_free(dp);
  ct_module_free(m), ct_module_free(ref), ct_module_free(init);
  return diff;
}

static double equivalence(const char *name, int n, const ct_device *devs, int64_t b, int steps, ct_optim_opts oo,
                          double tol) {
  return equivalence_of("mlp", name, n, devs, b, steps, oo, tol);
}

static const ct_optim_opts SGD = {.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};

/* ---- CPU: the logic, on three replicas of one device, with an uneven split */

static void test_cpu_three_replicas_uneven(void **state) {
  (void)state;
  ct_device devs[3] = {CT_DEVICE_CPU, CT_DEVICE_CPU, CT_DEVICE_CPU};
  equivalence("SGD lr 0.05 momentum 0.9, cpu x 3, 13 = 5 + 4 + 4", 3, devs, 13, STEPS, SGD, 1e-5);
}

/* A batch smaller than the number of replicas: replicas without a shard sit the step out. */
static void test_cpu_batch_smaller_than_replicas(void **state) {
  (void)state;
  ct_device devs[3] = {CT_DEVICE_CPU, CT_DEVICE_CPU, CT_DEVICE_CPU};
  equivalence("SGD, cpu x 3, batch 2", 3, devs, 2, 5, SGD, 1e-5);
  equivalence("SGD, cpu x 3, batch 1", 3, devs, 1, 5, SGD, 1e-5);
}

/* The cnn (convolutions, pooling) on two CPU replicas: the CPU backend's per-thread convolution
 * scratch lives on the workers' threads, and must not leak when they end (ASan's leak check). */
static void test_cpu_cnn(void **state) {
  (void)state;
  ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  equivalence_of("cnn", "SGD lr 0.05 momentum 0.9, cpu x 2, 6 = 3 + 3", 2, devs, 6, 3, SGD, 1e-5);
}

/* A module the user defines replicates with its names, children and forward. */
static void test_cpu_user_module(void **state) {
  (void)state;
  ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  equivalence_of("residual", "SGD lr 0.05 momentum 0.9, user module, cpu x 2, 10 = 5 + 5", 2, devs, 10, 10, SGD, 1e-5);
}

/* ---- BatchNorm buffers: the user module of residual_bn_new (a BatchNorm1d in a child user module)
 *
 * In training mode each replica normalizes its shard with the shard's own statistics, so the
 * reference is not one pass over the batch but one device taking the shards in turn, in the
 * replicas' order, each loss weighted b_k / B, the gradients accumulating. The running statistics
 * follow data_parallel.h's rule, torch.nn.DataParallel's: m's are replica 0's, updated on shard 0
 * only (the other replicas' updates are overwritten by the broadcast), so the reference puts its
 * buffers back after each shard but the first. After the steps m's parameters AND buffers
 * (running_mean, running_var, num_batches_tracked = steps, not steps times the replicas) must equal
 * the reference's, and every replica m's, bit for bit, after the broadcast. A rule that averaged
 * the replicas' statistics, or took the last replica's, fails on the buffers. */

/* The buffers of m (borrowed) and copies of them on their device; returns their count. */
static int save_buffers(ct_module *m, ct_named_tensor *bufs, ct_tensor **saved) {
  ct_named_tensor nt[32];
  int n = ct_module_named_tensors(m, 1, nt, 32), k = 0;
  for (int i = 0; i < n; i++)
    if (nt[i].is_buffer) {
      bufs[k] = nt[i];
      saved[k] = ct_assert_nonnull(ct_to(nt[i].tensor, ct_tensor_device(nt[i].tensor), CT_COPY));
      k++;
    }
  return k;
}

static void bn_equivalence(const char *name, int n, const ct_device *devs, int64_t b, int steps, double tol) {
  ct_generator g = ct_generator_new(7), g0 = ct_generator_new(7), g1 = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(residual_bn_new(devs[0], &g));
  ct_module *ref = ct_assert_nonnull(residual_bn_new(devs[0], &g0));
  ct_module *init = ct_assert_nonnull(residual_bn_new(devs[0], &g1));
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, n, devs, NULL));
  assert_replicas_equal(dp); /* the buffers were copied to the replicas */
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &SGD));
  ct_optimizer *ropt = ct_assert_nonnull(ct_optimizer_new(ref, &SGD));
  for (int s = 0; s < steps; s++) {
    dp_step(dp, opt, s, b);
    ct_scope_begin();
    ct_tensor *x, *y;
    batch(s, b, &x, &y);
    x = ct_to(x, devs[0], 0), y = ct_to(y, devs[0], 0);
    ct_named_tensor bufs[8];
    ct_tensor *saved[8];
    int nb = 0;
    for (int k = 0, start = 0; k < n && k < b; k++) {
      int64_t bk = b / n + (k < b % n); /* data_parallel.h's split: the first B mod n get one more */
      ct_tensor *out = ct_module_forward(ref, ct_narrow(x, 0, start, bk));
      ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(out, ct_narrow(y, 0, start, bk), CT_REDUCTION_MEAN, 0));
      ct_assert_ok(ct_backward(ct_mul_scalar(loss, (double)bk / (double)b)));
      if (k == 0) nb = save_buffers(ref, bufs, saved); /* shard 0's statistics are the ones kept */
      else
        for (int i = 0; i < nb; i++) ct_assert_ok(ct_copy_(bufs[i].tensor, saved[i]));
      start += (int)bk;
    }
    assert_int_equal(nb, 3);
    for (int i = 0; i < nb; i++) ct_tensor_free(saved[i]);
    ct_assert_ok(ct_optimizer_step(ropt));
    ct_optimizer_zero_grad(ropt);
    ct_scope_end();
  }
  double diff = max_diff(m, ref);
  double *rm = ct_test_values(ct_module_tensor(m, "block.bn.running_mean")), rm_moved = 0;
  for (int j = 0; j < 32; j++) rm_moved = fmax(rm_moved, fabs(rm[j])); /* from its initial 0 */
  free(rm);
  printf("test_data_parallel: residual_bn %s: %d replicas x batch %lld/%d, %d steps: max abs difference (parameters and "
         "buffers) from one device taking the shards in turn, statistics of shard 0 = %.3g\n",
         name, n, (long long)b, n, steps, diff);
  fflush(stdout);
  assert_true(diff <= tol);
  assert_true(max_diff(m, init) > 1e-3); /* it trained */
  assert_true(rm_moved > 1e-3);          /* and the running statistics moved */
  assert_int_equal((int64_t)ct_item(ct_module_tensor(m, "block.bn.num_batches_tracked")), steps);
  assert_replicas_equal(dp); /* the broadcast carried the buffers: each replica's own statistics are gone */
  ct_optimizer_free(opt), ct_optimizer_free(ropt);
  ct_data_parallel_free(dp);
  ct_module_free(m), ct_module_free(ref), ct_module_free(init);
}

static void test_cpu_user_module_batchnorm(void **state) {
  (void)state;
  ct_device devs[3] = {CT_DEVICE_CPU, CT_DEVICE_CPU, CT_DEVICE_CPU};
  bn_equivalence("SGD lr 0.05 momentum 0.9, cpu x 3, 13 = 5 + 4 + 4", 3, devs, 13, 10, 1e-5);
}

/* The loss of the autocast test: cross-entropy, recording the dtype of each replica's output. */
static ct_tensor *dtype_spy_loss(ct_tensor *output, ct_tensor *target, int replica, void *ctx) {
  ((ct_dtype *)ctx)[replica] = ct_tensor_dtype(output);
  return ct_cross_entropy(output, target, CT_REDUCTION_MEAN, 0);
}

/* ct_data_parallel_opts.autocast: each replica's forward runs in a bfloat16 autocast region of its
 * own thread (the caller's region would not reach it): every replica's logits are bfloat16. The
 * reference is one device running the same region over the two shards one after the other and
 * accumulating their gradients (each loss weighted 1/2), which is the replicas' arithmetic in the
 * same order: after 10 SGD steps the parameters agree bit for bit. (Against the whole batch of 12 in
 * one pass they differ by about 2.5e-3: the weight gradients are bfloat16 GEMM results, rounded per
 * shard.) A dtype that is not a half is refused. */
static void test_cpu_autocast_replicas(void **state) {
  (void)state;
  ct_device devs[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  ct_generator g = ct_generator_new(7), g0 = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, &g));
  ct_module *ref = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, &g0));
  assert_null(ct_data_parallel_new(m, 2, devs, &(ct_data_parallel_opts){.autocast = 1, .autocast_dtype = CT_F32}));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_dtype seen[2] = {CT_DTYPE_COUNT, CT_DTYPE_COUNT};
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(
      m, 2, devs, &(ct_data_parallel_opts){.loss = dtype_spy_loss, .loss_ctx = seen, .autocast = 1, .autocast_dtype = CT_BF16}));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &SGD));
  ct_optimizer *ropt = ct_assert_nonnull(ct_optimizer_new(ref, &SGD));
  const int steps = 10;
  for (int s = 0; s < steps; s++) {
    dp_step(dp, opt, s, 12);
    assert_int_equal(seen[0], CT_BF16);
    assert_int_equal(seen[1], CT_BF16);
    seen[0] = seen[1] = CT_DTYPE_COUNT;
    ct_scope_begin();
    ct_tensor *x, *y;
    batch(s, 12, &x, &y);
    for (int half = 0; half < 2; half++) { /* the replicas' shards, one after the other */
      ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
      ct_tensor *out = ct_module_forward(ref, ct_narrow(x, 0, 6 * half, 6));
      ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(out, ct_narrow(y, 0, 6 * half, 6), CT_REDUCTION_MEAN, 0));
      ct_assert_ok(ct_autocast_end());
      ct_assert_ok(ct_backward(ct_mul_scalar(loss, 0.5)));
    }
    ct_assert_ok(ct_optimizer_step(ropt));
    ct_optimizer_zero_grad(ropt);
    ct_scope_end();
  }
  double diff = max_diff(m, ref);
  printf("test_data_parallel: mlp SGD, autocast bfloat16, cpu x 2, batch 12/2, %d steps: max abs difference from one device "
         "accumulating the two shards in the same region = %.3g\n", steps, diff);
  assert_true(diff == 0);
  assert_replicas_equal(dp);
  ct_optimizer_free(opt), ct_optimizer_free(ropt);
  ct_data_parallel_free(dp);
  ct_module_free(m), ct_module_free(ref);
}

static void test_bad_arguments(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(1);
  ct_module *m = ct_assert_nonnull(ct_linear_new(3, 2, 1, CT_DEVICE_CPU, &g));
  ct_device two[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  ct_device bad[2] = {CT_DEVICE_CPU, {CT_CPU, 5}};
  assert_null(ct_data_parallel_new(m, 0, two, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_data_parallel_new(m, 2, bad, NULL));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, 2, two, NULL));
  int64_t xs[2] = {4, 3}, ys[1] = {5}, y4[1] = {4};
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *y = ct_assert_nonnull(ct_zeros(1, ys, CT_I64, CT_DEVICE_CPU));
  assert_int_equal(ct_data_parallel_forward_backward(dp, x, y, NULL), CT_EINVAL);
  ct_assert_error_contains("same size along dim 0");
  /* an error in the replicas' threads comes back here, naming the replica: float targets */
  ct_tensor *bad_y = ct_assert_nonnull(ct_full(1, y4, 1, CT_F32, CT_DEVICE_CPU));
  ct_status s = ct_data_parallel_forward_backward(dp, x, bad_y, NULL);
  assert_true(s < 0);
  ct_assert_error_contains("ct_data_parallel_forward_backward: replica 0 on cpu: ");
  ct_clear_error();
  ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(bad_y);
  ct_data_parallel_free(dp);
  ct_module_free(m);
}

/* A batch that requires grad is read through detached views: the step works, and no gradient
 * lands on it (two replicas' threads would otherwise accumulate into its .grad at once). */
static void test_batch_requiring_grad(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_linear_new(3, 4, 1, CT_DEVICE_CPU, &g));
  ct_device two[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, 2, two, NULL));
  int64_t xs[2] = {6, 3}, ys[1] = {6};
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *y = ct_assert_nonnull(ct_randint(1, ys, 0, 4, CT_I64, CT_DEVICE_CPU, &g));
  ct_assert_ok(ct_requires_grad_(x, 1));
  double loss = NAN;
  ct_assert_ok(ct_data_parallel_forward_backward(dp, x, y, &loss));
  assert_true(isfinite(loss) && loss > 0);
  assert_null(ct_grad(x));
  ct_named_tensor p[2];
  assert_int_equal(ct_module_named_tensors(m, 0, p, 2), 2);
  assert_non_null(ct_grad(p[0].tensor)); /* m got the summed gradient */
  ct_tensor_free(x), ct_tensor_free(y);
  ct_data_parallel_free(dp);
  ct_module_free(m);
}

/* Threads drawing from one generator (Dropout in replicas draws from the default one) reserve
 * their blocks atomically: every draw gets its own offset, none is lost or repeated. A draw of
 * K = 1024 uniforms at offset o blocks is elements 4o .. 4o + K - 1 of one draw of 2 N K at offset
 * 0 (core/rng.c), so the draws' first values, sorted, must be exactly the big draw's elements 0,
 * K, 2K, ... sorted. (Draws of many elements keep each thread inside a draw long enough that a
 * generator read before its kernel and advanced after it would hand two draws one offset.) */
typedef struct {
  ct_generator *gen;
  int draws;
  float *first; /* (draws) the first value of each draw */
} draw_job;

static void *draw_many(void *p) {
  draw_job *j = p;
  int64_t k = 1024; /* 256 Philox blocks per draw */
  for (int i = 0; i < j->draws; i++) {
    ct_tensor *t = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, j->gen);
    j->first[i] = t ? ((float *)ct_tensor_data(t))[0] : NAN;
    ct_tensor_free(t);
  }
  return NULL;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void test_shared_generator_threads(void **state) {
  (void)state;
  enum { N = 500, K = 1024 };
  static float got[2 * N], want[2 * N];
  ct_generator gen = ct_generator_new(11), ref = ct_generator_new(11);
  draw_job j[2] = {{&gen, N, got}, {&gen, N, got + N}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, draw_many, &j[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  assert_int_equal(gen.offset, 2 * N * K / 4);
  int64_t all = 2 * N * K;
  ct_tensor *big = ct_assert_nonnull(ct_rand(1, &all, 0, 1, CT_F32, CT_DEVICE_CPU, &ref));
  for (int i = 0; i < 2 * N; i++) want[i] = ((float *)ct_tensor_data(big))[(int64_t)K * i];
  ct_tensor_free(big);
  qsort(got, 2 * N, sizeof *got, cmp_float);
  qsort(want, 2 * N, sizeof *want, cmp_float);
  assert_memory_equal(got, want, sizeof got);
}

/* Out of memory at every allocation, host or device (src/core/alloc.c's fault injection; its
 * counter is process-wide, so the k-th allocation may be a worker thread's): ct_data_parallel_new,
 * a step and a broadcast with the k-th allocation failing, for k = 1, 2, ... until the run no
 * longer reaches it. A failing run must report CT_ENOMEM in the caller's thread, whichever thread
 * failed, and leak nothing (the sanitizer build's leak check); m must stay usable. */
static void test_out_of_memory_everywhere(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_linear_new(3, 4, 1, CT_DEVICE_CPU, &g));
  ct_device two[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  int64_t xs[2] = {6, 3}, ys[1] = {6};
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *y = ct_assert_nonnull(ct_randint(1, ys, 0, 4, CT_I64, CT_DEVICE_CPU, &g));
  int64_t k = 1, failures = 0;
  for (;; k++) {
    ct_clear_error();
    ct__fault_inject_alloc(k);
    double loss;
    ct_data_parallel *dp = ct_data_parallel_new(m, 2, two, NULL);
    ct_status s = dp ? ct_data_parallel_forward_backward(dp, x, y, &loss) : ct_last_status();
    if (s == CT_OK) s = ct_data_parallel_broadcast(dp);
    ct_data_parallel_free(dp);
    int64_t fired = ct__fault_alloc_fired();
    ct__fault_inject_alloc(0);
    ct_named_tensor p[2];
    ct_module_named_tensors(m, 0, p, 2);
    for (int i = 0; i < 2; i++) ct_zero_grad(p[i].tensor);
    if (!fired) {
      ct_assert_ok(s);
      break;
    }
    failures++;
    if (s != CT_ENOMEM) fprintf(stderr, "allocation %lld failing gave status %d: %s\n", (long long)k, (int)s, ct_last_error());
    assert_int_equal(s, CT_ENOMEM);
  }
  printf("test_data_parallel: out of memory at each of %lld allocation points: each reported CT_ENOMEM\n", (long long)failures);
  fflush(stdout);
  assert_true(failures > 10);
  ct_tensor_free(x), ct_tensor_free(y);
  ct_module_free(m);
}

/* ---- OpenCL: two PoCL devices */

static const ct_device OCL2[2] = {{CT_OPENCL, 0}, {CT_OPENCL, 1}};

static void test_opencl_sgd(void **state) {
  (void)state;
  equivalence("SGD lr 0.05 momentum 0.9, opencl:0 + opencl:1, 12 = 6 + 6", 2, OCL2, 12, STEPS, SGD, 1e-5);
}

static void test_opencl_uneven(void **state) {
  (void)state;
  equivalence("SGD lr 0.05 momentum 0.9, opencl:0 + opencl:1, 13 = 7 + 6", 2, OCL2, 13, 20, SGD, 1e-5);
}

static void test_opencl_adam(void **state) {
  (void)state;
  equivalence("Adam lr 1e-3 eps 1e-6, opencl:0 + opencl:1", 2, OCL2, 12, STEPS,
              (ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3, .eps = 1e-6}, 1e-5);
  equivalence("Adam defaults (lr 1e-3 eps 1e-8), opencl:0 + opencl:1", 2, OCL2, 12, STEPS,
              (ct_optim_opts){.kind = CT_OPTIM_ADAM}, 1e-4);
}

/* The BatchNorm user module on the two PoCL devices: 3 steps (PoCL compiles each kernel once). */
static void test_opencl_user_module_batchnorm(void **state) {
  (void)state;
  bn_equivalence("SGD lr 0.05 momentum 0.9, opencl:0 + opencl:1, 12 = 6 + 6", 2, OCL2, 12, 3, 1e-5);
}

/* The replicas' loss functions meet at a barrier: each waits (up to 120 s) for the other before it
 * computes its loss, which a run of one replica after the other could never pass. Each also
 * records when it arrived and left, on its own thread. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int arrived, generation, timed_out;
  double at[2];
  pthread_t thread[2];
} meet;

static ct_tensor *meeting_loss(ct_tensor *out, ct_tensor *target, int replica, void *ctx) {
  meet *mt = ctx;
  pthread_mutex_lock(&mt->lock);
  mt->at[replica] = now();
  mt->thread[replica] = pthread_self();
  int gen = mt->generation;
  if (++mt->arrived == 2) {
    mt->arrived = 0, mt->generation++;
    pthread_cond_broadcast(&mt->cond);
  } else {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 120;
    while (mt->generation == gen && !mt->timed_out)
      if (pthread_cond_timedwait(&mt->cond, &mt->lock, &until) != 0) mt->timed_out = 1;
  }
  int late = mt->timed_out;
  pthread_mutex_unlock(&mt->lock);
  if (late) return NULL; /* the other replica never came: not concurrent */
  return ct_cross_entropy(out, target, CT_REDUCTION_MEAN, 0);
}

static void test_opencl_replicas_run_concurrently(void **state) {
  (void)state;
  meet mt = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", OCL2[0], &g));
  ct_data_parallel *dp =
      ct_assert_nonnull(ct_data_parallel_new(m, 2, OCL2, &(ct_data_parallel_opts){.loss = meeting_loss, .loss_ctx = &mt}));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &SGD));
  for (int s = 0; s < 3; s++) {
    double t0 = now();
    dp_step(dp, opt, s, 12);
    assert_false(mt.timed_out);
    printf("test_data_parallel: step %d: replica 0 reached its loss at +%.1f ms, replica 1 at +%.1f ms (threads %s)\n", s,
           1e3 * (mt.at[0] - t0), 1e3 * (mt.at[1] - t0), pthread_equal(mt.thread[0], mt.thread[1]) ? "the same" : "distinct");
    assert_false(pthread_equal(mt.thread[0], mt.thread[1]));
    assert_false(pthread_equal(mt.thread[0], pthread_self()));
  }
  fflush(stdout);
  ct_optimizer_free(opt);
  ct_data_parallel_free(dp);
  ct_module_free(m);
}

/* A failure on replica 1 (its device, its thread) is reported in the caller's thread. */
static ct_tensor *failing_loss(ct_tensor *out, ct_tensor *target, int replica, void *ctx) {
  (void)ctx;
  if (replica == 1) return ct_cross_entropy(out, ct_narrow(target, 0, 0, 1), CT_REDUCTION_MEAN, 0); /* wrong shape */
  return ct_cross_entropy(out, target, CT_REDUCTION_MEAN, 0);
}

static void test_opencl_replica_error(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", OCL2[0], &g));
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, 2, OCL2, &(ct_data_parallel_opts){.loss = failing_loss}));
  ct_tensor *x, *y;
  batch(0, 8, &x, &y);
  ct_status s = ct_data_parallel_forward_backward(dp, x, y, NULL);
  assert_true(s < 0);
  ct_assert_error_contains("ct_data_parallel_forward_backward: replica 1 on opencl:1: ");
  ct_assert_error_contains("cross_entropy");
  ct_clear_error();
  /* m lives on opencl:0: a list that starts elsewhere is refused */
  ct_device other[2] = {OCL2[1], OCL2[0]};
  assert_null(ct_data_parallel_new(m, 2, other, NULL));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  ct_assert_error_contains("ct_module_to");
  ct_tensor_free(x), ct_tensor_free(y);
  ct_data_parallel_free(dp);
  ct_module_free(m);
}

/* The copies are explicit and counted: per step, each replica's shard goes up, replica 1's
 * gradients come to opencl:0 through the host packed in one buffer (a d2h and an h2d), and the
 * broadcast reads m's tensors once, packed, and writes them to opencl:1 once. */
static void test_opencl_ledger(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", OCL2[0], &g));
  ct_data_parallel *dp = ct_assert_nonnull(ct_data_parallel_new(m, 2, OCL2, NULL));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &SGD));
  int np = ct_module_named_tensors(m, 0, NULL, 0), nt = ct_module_named_tensors(m, 1, NULL, 0);
  ct_tensor *x, *y;
  batch(0, 12, &x, &y);
  ct_ledger_reset();
  ct_assert_ok(ct_data_parallel_forward_backward(dp, x, y, NULL));
  ct_ledger l = ct_ledger_get();
  /* x and y shards: 4 uploads; replica 1's gradients, packed: one download and one upload */
  assert_true(np > 1);
  assert_int_equal(l.h2d_copies, 4 + 1);
  assert_int_equal(l.d2h_copies, 1);
  ct_assert_ok(ct_optimizer_step(opt));
  ct_optimizer_zero_grad(opt);
  ct_ledger_reset();
  ct_assert_ok(ct_data_parallel_broadcast(dp));
  l = ct_ledger_get();
  assert_true(nt > 1);
  assert_int_equal(l.d2h_copies, 1); /* m's tensors packed and read once */
  assert_int_equal(l.h2d_copies, 1); /* and written to opencl:1 once */
  assert_replicas_equal(dp);
  ct_tensor_free(x), ct_tensor_free(y);
  ct_optimizer_free(opt);
  ct_data_parallel_free(dp);
  ct_module_free(m);
}

int main(void) {
  int ocl = ct_test_require_opencl(2);
  const struct CMUnitTest cpu[] = {
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_cpu_three_replicas_uneven),
      cmocka_unit_test(test_cpu_batch_smaller_than_replicas),
      cmocka_unit_test(test_cpu_cnn), cmocka_unit_test(test_cpu_user_module),
      cmocka_unit_test(test_cpu_user_module_batchnorm),
      cmocka_unit_test(test_cpu_autocast_replicas),
      cmocka_unit_test(test_batch_requiring_grad),
      cmocka_unit_test(test_shared_generator_threads),
      cmocka_unit_test(test_out_of_memory_everywhere),
  };
  const struct CMUnitTest opencl[] = {
      cmocka_unit_test(test_opencl_sgd),
      cmocka_unit_test(test_opencl_replicas_run_concurrently),
      cmocka_unit_test(test_opencl_replica_error),
      cmocka_unit_test(test_opencl_ledger),
      cmocka_unit_test(test_opencl_uneven),
      cmocka_unit_test(test_opencl_adam),
      cmocka_unit_test(test_opencl_user_module_batchnorm),
  };
  int failed = cmocka_run_group_tests_name("cpu", cpu, NULL, NULL);
  if (!ocl) return 1; /* OpenCL tests must not skip (ct_test_require_opencl said why) */
  failed += cmocka_run_group_tests_name("opencl", opencl, NULL, NULL);
  return failed ? 1 : 0;
}
