/* tests/cuda/test_cuda_backend.c: the CUDA backend on a real GPU: the caching allocator's
 * statistics, a clean out-of-memory error, host<->device round trips, Philox agreement with the
 * CPU, and a few ops against the CPU backend. Exits 77 (skipped, with the reason printed) when
 * cuttle was built without CUDA or no GPU is visible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#ifdef CUTTLE_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "core/internal.h"

static const ct_device GPU = {CT_CUDA, 0};

static int no_cache(void) {
  const char *e = getenv("CUTTLE_CUDA_NO_CACHE");
  return e && e[0] && strcmp(e, "0") != 0;
}

static void test_allocator_stats(void **state) {
  (void)state;
  int64_t shape[1] = {1 << 20}; /* 4 MiB of float32 */
  ct_tensor *warm = ct_assert_nonnull(ct_zeros(1, shape, CT_F32, GPU)); /* creates the context */
  ct_tensor_free(warm);
  ct_assert_ok(ct_synchronize(GPU));
  size_t al0, re0, pk0, al1, re1, pk1, al2, re2;
  uint64_t nm0, nm1, nm2;
  ct__cuda_memory_stats(0, &al0, &re0, &pk0, &nm0);
  ct_tensor *t = ct_assert_nonnull(ct_empty(1, shape, CT_F32, GPU));
  ct__cuda_memory_stats(0, &al1, &re1, &pk1, &nm1);
  assert_true(al1 >= al0 + ((size_t)4 << 20));
  assert_true(re1 >= al1);
  assert_true(pk1 >= al1);
  if (!no_cache()) assert_int_equal(nm1, nm0); /* the block freed above came back from the cache */
  ct_tensor_free(t);
  ct__cuda_memory_stats(0, &al2, &re2, NULL, &nm2);
  assert_int_equal(al2, al0);
  if (!no_cache()) assert_int_equal(re2, re1); /* kept in the cache */
  ct__cuda_empty_cache(0);
  ct__cuda_memory_stats(0, &al2, &re2, NULL, NULL);
  assert_int_equal(re2, al2); /* nothing cached any more */
}

static void test_out_of_memory(void **state) {
  (void)state;
  ct_device_props p;
  ct_assert_ok(ct_device_props_get(GPU, &p));
  int64_t shape[1] = {(int64_t)(p.total_memory / 4) * 2}; /* twice the card, in float32 */
  ct_tensor *huge = ct_empty(1, shape, CT_F32, GPU);
  assert_null(huge);
  assert_int_equal(ct_last_status(), CT_ENOMEM);
  ct_assert_error_contains("requested");
  printf("# out-of-memory message: %s\n", ct_last_error());
  ct_clear_error();
  /* an ordinary op afterwards still works */
  int64_t s2[1] = {1000};
  ct_tensor *a = ct_assert_nonnull(ct_full(1, s2, 1.5, CT_F32, GPU));
  ct_tensor *b = ct_assert_nonnull(ct_add(a, a));
  ct_tensor *s = ct_assert_nonnull(ct_sum(b, 0, NULL, 0));
  assert_true(fabs(ct_item(s) - 3000.0) < 1e-3);
  ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(s);
}

static void test_round_trip(void **state) {
  (void)state;
  enum { N = 4099 };
  float *f = malloc(N * sizeof *f), *fb = malloc(N * sizeof *fb);
  int64_t *q = malloc(N * sizeof *q), *qb = malloc(N * sizeof *qb);
  for (int i = 0; i < N; i++) f[i] = (float)sin(i * 0.37) * 1e3f, q[i] = ((int64_t)1 << 60) + i * 7919;
  int64_t shape[1] = {N};
  ct_tensor *g = ct_assert_nonnull(ct_from_host(f, 1, shape, CT_F32, GPU));
  ct_assert_ok(ct_to_host(g, fb, N * sizeof *fb, CT_F32));
  assert_memory_equal(f, fb, N * sizeof *f);
  ct_tensor *gq = ct_assert_nonnull(ct_from_host(q, 1, shape, CT_I64, GPU));
  ct_tensor *cq = ct_assert_nonnull(ct_to(gq, CT_DEVICE_CPU, 0));
  ct_assert_ok(ct_to_host(cq, qb, N * sizeof *qb, CT_I64));
  assert_memory_equal(q, qb, N * sizeof *q); /* int64 beyond 2^53 survives bit for bit */
  /* a strided view copied back through the device */
  int64_t s2[2] = {N / 3, 3};
  ct_tensor *nw = ct_assert_nonnull(ct_narrow(g, 0, 0, (N / 3) * 3));
  ct_tensor *m = ct_assert_nonnull(ct_reshape(nw, 2, s2));
  ct_tensor *tr = ct_assert_nonnull(ct_transpose(m, 0, 1));
  ct_tensor *mt = ct_assert_nonnull(ct_contiguous(tr));
  ct_assert_ok(ct_to_host(mt, fb, N * sizeof *fb, CT_F32));
  for (int i = 0; i < N / 3; i++) assert_true(fb[1 * (N / 3) + i] == f[i * 3 + 1]);
  ct_tensor_free(g), ct_tensor_free(gq), ct_tensor_free(cq), ct_tensor_free(m), ct_tensor_free(mt), ct_tensor_free(nw), ct_tensor_free(tr);
  free(f), free(fb), free(q), free(qb);
}

static void test_random_matches_cpu(void **state) {
  (void)state;
  uint32_t a[4], b[4];
  ct__philox(0, 0, 0, a);
  ct__cuda_philox_host(0, 0, 0, b);
  assert_memory_equal(a, b, sizeof a);
  assert_int_equal(a[0], 0x6627e8d5u); /* Random123's known answer */
  int64_t shape[2] = {37, 29}; /* not a multiple of 4 */
  ct_dtype dts[2] = {CT_F32, CT_F64};
  for (int k = 0; k < 2; k++) {
    ct_generator gc = ct_generator_new(20240601), gg = ct_generator_new(20240601);
    ct_tensor *uc = ct_assert_nonnull(ct_rand(2, shape, -2.0, 3.0, dts[k], CT_DEVICE_CPU, &gc));
    ct_tensor *ug = ct_assert_nonnull(ct_rand(2, shape, -2.0, 3.0, dts[k], GPU, &gg));
    ct_assert_close(ug, uc, 0.0, 0.0); /* bit-identical */
    ct_tensor *nc = ct_assert_nonnull(ct_randn(2, shape, 0.5, 2.0, dts[k], CT_DEVICE_CPU, &gc));
    ct_tensor *ng = ct_assert_nonnull(ct_randn(2, shape, 0.5, 2.0, dts[k], GPU, &gg));
    ct_assert_close(ng, nc, 1e-12, dts[k] == CT_F32 ? 2e-7 : 1e-14); /* log/cos/sin may differ in the last ulp */
    ct_tensor *ic = ct_assert_nonnull(ct_randint(2, shape, -5, 1000003, CT_I64, CT_DEVICE_CPU, &gc));
    ct_tensor *ig = ct_assert_nonnull(ct_randint(2, shape, -5, 1000003, CT_I64, GPU, &gg));
    ct_assert_close(ig, ic, 0.0, 0.0);
    assert_true(gc.offset == gg.offset);
    ct_tensor_free(uc), ct_tensor_free(ug), ct_tensor_free(nc), ct_tensor_free(ng), ct_tensor_free(ic), ct_tensor_free(ig);
  }
}

static void test_ops_match_cpu(void **state) {
  (void)state;
  ct_scope_begin(); /* the scope owns every temporary below */
  ct_generator g = ct_generator_new(7);
  int64_t sa[3] = {3, 17, 33}, sb[3] = {3, 33, 9};
  ct_tensor *ac = ct_rand(3, sa, -1, 1, CT_F32, CT_DEVICE_CPU, &g), *bc = ct_rand(3, sb, -1, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *ag = ct_to(ac, GPU, 0), *bg = ct_to(bc, GPU, 0);
  ct_assert_nonnull(ag), ct_assert_nonnull(bg);
  ct_assert_close(ct_matmul(ag, bg), ct_matmul(ac, bc), 1e-5, 1e-5);
  ct_assert_close(ct_gelu(ag), ct_gelu(ac), 1e-6, 1e-5);
  ct_assert_close(ct_mul(ag, ct_exp(ag)), ct_mul(ac, ct_exp(ac)), 1e-6, 1e-5);
  int dims[1] = {1};
  ct_assert_close(ct_sum(ag, 1, dims, 0), ct_sum(ac, 1, dims, 0), 1e-5, 1e-5);
  ct_tensor *ic = NULL, *ig = NULL;
  ct_assert_close(ct_max(ag, 2, 0, &ig), ct_max(ac, 2, 0, &ic), 0, 0);
  ct_assert_close(ig, ic, 0, 0);
  ct_assert_close(ct_log_softmax(ag, -1), ct_log_softmax(ac, -1), 1e-6, 1e-5);
  ct_scope_end();
}
#endif

int main(void) {
#ifndef CUTTLE_WITH_CUDA
  printf("SKIP: cuttle was built without the CUDA backend (no nvcc at configure time)\n");
  return CT_TEST_SKIP;
#else
  if (ct_device_count(CT_CUDA) == 0) {
    printf("SKIP: no CUDA device visible (ct_device_count(CT_CUDA) == 0: no GPU, no driver, or CUDA_VISIBLE_DEVICES empty)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allocator_stats), cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_random_matches_cpu), cmocka_unit_test(test_ops_match_cpu),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
