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
 * per step) and with the default 25 MiB (one bucket), checks the collectives directly, and checks
 * that ranks holding different models all fail in ct_ddp_new rather than hang.
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
#include "cuttle.h"

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
/* The parameters of m, borrowed, in registration order; returns their count. */
static int params(ct_module *m, ct_named_tensor *out, int cap) { return ct_module_named_tensors(m, 1, out, cap); }

/* Max |a - b| over the parameters and buffers of two models of the same architecture. */
static double max_diff(ct_module *a, ct_module *b) {
  ct_named_tensor pa[32], pb[32];
  int n = params(a, pa, 32);
  CHECK(n == params(b, pb, 32), "different models");
  double worst = 0;
  for (int i = 0; i < n; i++) {
    int64_t k = ct_tensor_numel(pa[i].tensor);
    const float *x = ct_tensor_data(pa[i].tensor), *y = ct_tensor_data(pb[i].tensor);
    for (int64_t j = 0; j < k; j++) {
      double d = fabs((double)x[j] - (double)y[j]);
      if (d > worst || isnan(d)) worst = d;
    }
  }
  return worst;
}

/* Batch `step` of the fixed sequence: x (B, 1, 28, 28) float32, y (B) int64, the same on every rank. */
static void batch(int step, ct_tensor **x, ct_tensor **y) {
  ct_generator gen = ct_generator_new(1000 + (uint64_t)step);
  int64_t xs[4] = {B, 1, 28, 28}, ys[1] = {B};
  *x = ct_randn(4, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &gen);
  *y = ct_randint(1, ys, 0, 10, CT_I64, CT_DEVICE_CPU, &gen);
}

/* One training step of m on rows [lo, lo + n) of the batch; with d, the gradients are averaged. */
static void step(ct_module *m, ct_optimizer *opt, ct_ddp *d, int s, int64_t lo, int64_t n) {
  ct_scope_begin();
  ct_tensor *x, *y;
  batch(s, &x, &y);
  ct_tensor *logits = ct_module_forward(m, ct_narrow(x, 0, lo, n));
  ct_tensor *loss = ct_cross_entropy(logits, ct_narrow(y, 0, lo, n), CT_REDUCTION_MEAN, 0);
  ct_status st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "backward at step %d", s);
  if (d) {
    st = ct_ddp_sync_grads(d);
    CHECK(st == CT_OK, "ct_ddp_sync_grads at step %d", s);
  }
  st = ct_optimizer_step(opt);
  CHECK(st == CT_OK, "optimizer step %d", s);
  ct_optimizer_zero_grad(opt);
  ct_scope_end();
}

static void equivalence(const char *name, ct_optim_opts oo, double bucket_mb, int min_buckets, double tol) {
  int rank = ct_dist_rank(), world = ct_dist_world_size();
  /* Rank 0 starts from the reference's initialization, every other rank from its own. */
  ct_generator g = ct_generator_new(rank == 0 ? 7 : 100 + (uint64_t)rank);
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, &g);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = bucket_mb});
  CHECK(d != NULL, "ct_ddp_new");
  if (!d) {
    ct_module_free(m);
    return;
  }
  CHECK(ct_ddp_num_buckets(d) >= min_buckets, "%d buckets, expected at least %d", ct_ddp_num_buckets(d), min_buckets);
  ct_optimizer *opt = ct_optimizer_new(m, &oo);
  int64_t share = B / world;
  for (int s = 0; s < STEPS; s++) step(m, opt, d, s, rank * share, share);

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
    ct_module *ref = ct_model_new("mlp", CT_DEVICE_CPU, &g0);
    ct_optimizer *ropt = ct_optimizer_new(ref, &oo);
    for (int s = 0; s < STEPS; s++) step(ref, ropt, NULL, s, 0, B);
    double diff = max_diff(m, ref);
    printf("test_ddp: %s, %d ranks x batch %lld, %d buckets, %d steps: max abs difference from 1 process x batch %d = %.3g\n",
           name, world, (long long)share, ct_ddp_num_buckets(d), STEPS, B, diff);
    fflush(stdout);
    CHECK(diff <= tol, "%s: max abs difference %g > %g", name, diff, tol);
    /* The models did train: the parameters moved away from their initialization. */
    ct_generator g1 = ct_generator_new(7);
    ct_module *init = ct_model_new("mlp", CT_DEVICE_CPU, &g1);
    CHECK(max_diff(m, init) > 1e-3, "%s: the parameters did not move", name);
    ct_module_free(init);
    ct_optimizer_free(ropt);
    ct_module_free(ref);
  }
  ct_optimizer_free(opt);
  ct_ddp_free(d);
  ct_module_free(m);
}

/* Ranks whose models differ all fail in ct_ddp_new, with a message, instead of hanging later. */
static void mismatch(void) {
  ct_generator g = ct_generator_new(3);
  ct_module *m = ct_linear_new(4, ct_dist_rank() == 0 ? 3 : 5, 1, CT_DEVICE_CPU, &g);
  ct_ddp *d = ct_ddp_new(m, NULL);
  CHECK(d == NULL && ct_last_status() == CT_EINVAL, "ct_ddp_new accepted ranks with different models");
  CHECK(strstr(ct_last_error(), "different models") != NULL, "the message says the models differ");
  ct_ddp_free(d);
  ct_module_free(m);
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
  ct_tensor_free(f), ct_tensor_free(dd), ct_tensor_free(ids);
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
  collectives();
  mismatch();
  /* 0.1 MiB buckets split the mlp's 235146 floats (0.9 MiB) over several all-reduces. */
  equivalence("SGD lr 0.05 momentum 0.9", (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9}, 0.1, 4, 1e-5);
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
  CHECK(ct_dist_finalize() == CT_OK, "finalize");
  return failures ? 1 : 0;
#endif
}
