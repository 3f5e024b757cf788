/* tests/cuda/test_nccl_one_rank.c: the NCCL path of data-parallel training on one GPU, without
 * mpirun: a communicator of one rank (ncclGetUniqueId + ncclCommInitRank with nranks 1 need no
 * MPI), as GPU nodes without MPI build cuttle (-DCUTTLE_MPI=OFF).
 *
 * What is reachable without MPI. The public DistributedDataParallel (ct_ddp_new) needs
 * ct_dist_init, which needs MPI; and DDP's NCCL buckets (src/dist/ddp_nccl.c) are compiled only
 * with both NCCL and MPI (their communicator is bootstrapped with ct_dist_broadcast). So:
 *  - where ct_dist_init works (an MPI build, run as a singleton), the test wraps a model in ct_ddp
 *    on cuda:0 and checks that ct_ddp_sync_grads leaves the gradients equal, bit for bit, to those
 *    of the same model without DDP (the mean over one rank);
 *  - otherwise it drives the same steps by hand with the internal NCCL layer that ddp_nccl.c uses
 *    (src/backend/cuda/nccl.h): the gradients packed into flat float32 buckets on the device in
 *    reverse registration order, each averaged in place by ct__nccl_all_reduce on a one-rank
 *    communicator, ct__nccl_wait, and unpacked; the result must equal the plain gradients bit for
 *    bit, and the CPU's within float32 rounding.
 * It also checks the NCCL layer itself on one rank: all-reduce (mean and sum) and broadcast of
 * float32, float64, float16 and bfloat16 leave values unchanged, a compute op queued right after a
 * collective sees its result without a host wait, and the argument errors.
 *
 * Exits 77 (skipped, the reason printed) without a GPU, or when cuttle was built without NCCL.
 * CUTTLE_WITH_NCCL is private to the library, so the test takes nccl.h being on its include path
 * (the CUDA toolkit's include folder, where CMake looks for it) as the sign that nccl.cu was
 * built: CMake builds it when it finds both nccl.h there and libnccl. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "core/internal.h"
#include "dist/dist_internal.h"

#if defined(CUTTLE_WITH_CUDA) && defined(__has_include)
#if __has_include(<nccl.h>)
#define HAVE_NCCL 1
#include "backend/cuda/nccl.h"
#endif
#endif

#ifdef HAVE_NCCL
static const ct_device GPU = {CT_CUDA, 0};

static ct__nccl_comm *one_rank_comm(void) {
  unsigned char id[CT_NCCL_ID_BYTES];
  ct_assert_ok(ct__nccl_unique_id(id));
  return ct_assert_nonnull(ct__nccl_comm_new(id, 1, 0, GPU.index));
}

/* a and b hold the same bytes (both contiguous, same dtype and numel) */
static int same_bits(ct_tensor *a, ct_tensor *b) {
  size_t n = (size_t)ct_tensor_numel(a) * ct_dtype_size(ct_tensor_dtype(a));
  assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
  assert_int_equal(ct_tensor_numel(a), ct_tensor_numel(b));
  void *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
  ct_assert_ok(ct_to_host(a, x, n, ct_tensor_dtype(a)));
  ct_assert_ok(ct_to_host(b, y, n, ct_tensor_dtype(b)));
  int same = memcmp(x, y, n) == 0;
  free(x), free(y);
  return same;
}

static void test_collectives_one_rank(void **state) {
  (void)state;
  ct__nccl_comm *c = one_rank_comm();
  const ct_dtype dts[4] = {CT_F32, CT_F64, CT_F16, CT_BF16};
  for (int k = 0; k < 4; k++) {
    ct_scope_begin();
    ct_generator g = ct_generator_new(10 + k);
    int64_t n = k == 0 ? (1 << 20) + 5 : 4099;
    ct_tensor *t = ct_assert_nonnull(ct_cast(ct_randn(1, &n, 0, 1, CT_F32, GPU, &g), dts[k]));
    ct_tensor *ref = ct_assert_nonnull(ct_to(t, CT_DEVICE_CPU, CT_COPY));
    ct_assert_ok(ct__nccl_all_reduce(c, ct__ptr(t), n, dts[k], 1)); /* the mean over one rank */
    ct_assert_ok(ct__nccl_wait(c, 60));
    int mean_same = same_bits(t, ref);
    ct_assert_ok(ct__nccl_all_reduce(c, ct__ptr(t), n, dts[k], 0)); /* the sum */
    /* no host wait: an op on the compute stream is ordered after the collective by an event */
    ct_tensor *twice = ct_assert_nonnull(ct_mul_scalar(t, 2.0));
    ct_assert_ok(ct__nccl_wait(c, 60));
    int sum_same = same_bits(t, ref);
    ct_tensor *ref2 = ct_assert_nonnull(ct_mul_scalar(ref, 2.0));
    int ordered = same_bits(twice, ref2);
    ct_assert_ok(ct__nccl_broadcast(c, ct__ptr(t), (size_t)n * ct_dtype_size(dts[k]), 0));
    ct_assert_ok(ct__nccl_wait(c, 60));
    int bcast_same = same_bits(t, ref);
    printf("# one-rank NCCL, %s x %lld: all-reduce mean %s, sum %s, compute after it %s, broadcast %s\n",
           ct_dtype_name(dts[k]), (long long)n, mean_same ? "unchanged" : "CHANGED", sum_same ? "unchanged" : "CHANGED",
           ordered ? "ordered" : "NOT ORDERED", bcast_same ? "unchanged" : "CHANGED");
    assert_true(mean_same && sum_same && ordered && bcast_same);
    ct_scope_end();
  }
  /* errors */
  int64_t n = 16;
  ct_tensor *i = ct_assert_nonnull(ct_zeros(1, &n, CT_I64, GPU));
  assert_int_equal(ct__nccl_all_reduce(c, ct__ptr(i), n, CT_I64, 1), CT_EDTYPE);
  ct_assert_error_contains("int64");
  assert_int_equal(ct__nccl_broadcast(c, ct__ptr(i), 8 * (size_t)n, 1), CT_EINVAL);
  ct_assert_error_contains("root 1");
  unsigned char id[CT_NCCL_ID_BYTES];
  ct_assert_ok(ct__nccl_unique_id(id));
  assert_null(ct__nccl_comm_new(id, 1, 1, GPU.index));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_clear_error();
  ct_tensor_free(i);
  ct__nccl_comm_free(c);
  ct__nccl_comm_free(NULL);
}

/* Sequential(Linear(20, 32), ReLU, Linear(32, 5)) with parameters drawn from seed, on dev */
static ct_module *small_model(ct_device dev, uint64_t seed) {
  ct_generator g = ct_generator_new(seed);
  ct_module *layers[3] = {ct_linear_new(20, 32, 1, CT_DEVICE_CPU, &g), ct_relu_new(), ct_linear_new(32, 5, 1, CT_DEVICE_CPU, &g)};
  ct_module *m = ct_assert_nonnull(ct_sequential_new(3, layers));
  ct_assert_ok(ct_module_to(m, dev));
  return m;
}

/* forward and backward of a mean cross-entropy over a fixed batch of 16 on m's device */
static void backward_step(ct_module *m, ct_device dev) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(77);
  int64_t xs[2] = {16, 20}, N = 16;
  ct_tensor *x = ct_to(ct_randn(2, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &g), dev, 0);
  ct_tensor *t = ct_to(ct_randint(1, &N, 0, 5, CT_I64, CT_DEVICE_CPU, &g), dev, 0);
  ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(ct_module_forward(m, x), t, CT_REDUCTION_MEAN, 0));
  ct_assert_ok(ct_backward(loss));
  ct_scope_end();
}

#define MAXP 8

/* The steps of ddp_nccl.c by hand: buckets of the parameters in reverse registration order (bucket
 * 0: the last Linear's bias and weight; bucket 1: the first's), packed, averaged over one rank,
 * unpacked. */
static void nccl_buckets_by_hand(ct_named_tensor *p, int np) {
  ct__nccl_comm *c = one_rank_comm();
  int nb = 2, first[3] = {np - 1, 1, -1}; /* bucket k holds params first[k] down to first[k+1] + 1 */
  ct_tensor *flat[2];
  for (int k = 0; k < nb; k++) {
    int64_t numel = 0;
    for (int i = first[k]; i > first[k + 1]; i--) numel += ct_tensor_numel(p[i].tensor);
    flat[k] = ct_assert_nonnull(ct_zeros(1, &numel, CT_F32, GPU));
    int64_t off = 0;
    ct_no_grad_begin();
    for (int i = first[k]; i > first[k + 1]; i--) { /* pack (device to device, compute stream) */
      int64_t m = ct_tensor_numel(p[i].tensor);
      ct_tensor *part = ct_assert_nonnull(ct_narrow(flat[k], 0, off, m));
      ct_tensor *gf = ct_assert_nonnull(ct_reshape(ct_grad(p[i].tensor), 1, &m));
      ct_assert_ok(ct_copy_(part, gf));
      ct_tensor_free(part), ct_tensor_free(gf);
      off += m;
    }
    ct_no_grad_end();
    ct_assert_ok(ct__nccl_all_reduce(c, ct__ptr(flat[k]), numel, CT_F32, 1));
  }
  ct_assert_ok(ct__nccl_wait(c, 60));
  for (int k = 0; k < nb; k++) {
    int64_t off = 0;
    ct_no_grad_begin();
    for (int i = first[k]; i > first[k + 1]; i--) { /* unpack */
      int64_t m = ct_tensor_numel(p[i].tensor);
      ct_tensor *part = ct_assert_nonnull(ct_narrow(flat[k], 0, off, m));
      ct_tensor *gf = ct_assert_nonnull(ct_reshape(ct_grad(p[i].tensor), 1, &m));
      ct_assert_ok(ct_copy_(gf, part)); /* gf is a view of the contiguous gradient */
      ct_tensor_free(part), ct_tensor_free(gf);
      off += m;
    }
    ct_no_grad_end();
    ct_tensor_free(flat[k]);
  }
  ct__nccl_comm_free(c);
}

static void test_ddp_buckets_one_rank(void **state) {
  (void)state;
  ct_module *md = small_model(GPU, 5), *mp = small_model(GPU, 5), *mc = small_model(CT_DEVICE_CPU, 5);
  ct_named_tensor pd[MAXP], pp[MAXP], pc[MAXP];
  int np = ct_module_named_tensors(md, 0, pd, MAXP);
  assert_int_equal(np, 4);
  assert_int_equal(ct_module_named_tensors(mp, 0, pp, MAXP), np);
  assert_int_equal(ct_module_named_tensors(mc, 0, pc, MAXP), np);

  /* the public path, where this build and machine allow a world of one */
  ct_ddp *ddp = NULL;
  ct_status si = ct_dist_init();
  if (si == CT_OK) {
    ddp = ct_ddp_new(md, &(ct_ddp_opts){.bucket_mb = 0.002}); /* 2 KiB: several buckets */
    if (!ddp) printf("# ct_ddp_new with a world of %d failed: %s\n", ct_dist_world_size(), ct_last_error());
  } else {
    printf("# the public DDP path needs ct_dist_init, which says: %s\n", ct_last_error());
  }
  ct_clear_error();

  backward_step(md, GPU);
  backward_step(mp, GPU);
  backward_step(mc, CT_DEVICE_CPU);
  if (ddp) {
    printf("# ct_ddp on cuda:0 with a world of one, %d buckets\n", ct_ddp_num_buckets(ddp));
    ct_assert_ok(ct_ddp_sync_grads(ddp));
  } else {
    /* DDP's own NCCL buckets: compiled only with MPI, and bootstrapped over it */
    ct_tensor *params[MAXP];
    for (int i = 0; i < np; i++) params[i] = pd[i].tensor;
    int64_t numel[1] = {0};
    for (int i = 0; i < np; i++) numel[0] += ct_tensor_numel(params[i]);
    ct__ddp_nccl *h = NULL;
    ct_status s = ct__ddp_nccl_new(params, np, numel, 1, &h);
    printf("# ct__ddp_nccl_new without ct_dist_init: %s%s\n",
           s != CT_OK ? ct_last_error() : h ? "a handle" : "no handle (built without MPI: DDP's NCCL buckets are not compiled)",
           "; driving the NCCL layer by hand");
    ct__ddp_nccl_free(h);
    ct_clear_error();
    nccl_buckets_by_hand(pd, np);
  }
  for (int i = 0; i < np; i++) {
    ct_tensor *gd = ct_grad(pd[i].tensor), *gp = ct_grad(pp[i].tensor), *gc = ct_grad(pc[i].tensor);
    ct_assert_nonnull(gd), ct_assert_nonnull(gp), ct_assert_nonnull(gc);
    int same = same_bits(gd, gp);
    double *a = ct_test_values(gd), *b = ct_test_values(gc);
    double e = 0, m = 0;
    for (int64_t j = 0; j < ct_tensor_numel(gc); j++) e = fmax(e, fabs(a[j] - b[j])), m = fmax(m, fabs(b[j]));
    free(a), free(b);
    printf("# %-10s gradient after the one-rank all-reduce: %s the plain model's; max |err| vs the CPU %.3g (max |ref| %.3g)\n",
           pd[i].name, same ? "bit-identical to" : "DIFFERS from", e, m);
    assert_true(same);
    assert_true(m > 0 && e <= 1e-5 * m + 1e-7);
  }
  ct_ddp_free(ddp);
  if (si == CT_OK) ct_assert_ok(ct_dist_finalize());
  ct_module_free(md), ct_module_free(mp), ct_module_free(mc);
}
#endif

int main(void) {
  if (ct_device_count(CT_CUDA) == 0) {
#ifdef CUTTLE_WITH_CUDA
    printf("SKIP: no CUDA device (ct_device_count(CT_CUDA) == 0: the CUDA backend is built but no GPU is visible)\n");
#else
    printf("SKIP: no CUDA device (cuttle was built without the CUDA backend)\n");
#endif
    return CT_TEST_SKIP;
  }
#ifndef HAVE_NCCL
  printf("SKIP: cuttle was built without NCCL (no nccl.h next to the CUDA toolkit), so there is no NCCL path to test\n");
  return CT_TEST_SKIP;
#else
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_one_rank),
      cmocka_unit_test(test_ddp_buckets_one_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
