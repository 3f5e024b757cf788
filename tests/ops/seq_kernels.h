/* tests/ops/seq_kernels.h: the sequence models' ops on a device beyond the op table's rows, for the
 * device tests (test_opencl_ops, test_ops_cuda): set sk_dev, then run SK_TESTS. An index past the
 * embedding's rows must be a clear error on the device too (the device's indices are checked by
 * their minimum and maximum: no kernel reads out of bounds); the embedding's backward over many
 * repeats of a few rows must equal the CPU's sums (OpenCL's index_add adds in index order, as the
 * CPU does, so the bits agree; another device's order may differ by float32's rounding); and
 * multinomial's draws on the device must repeat for a seed and follow the weights. */
#ifndef CUTTLE_TESTS_SEQ_KERNELS_H
#define CUTTLE_TESTS_SEQ_KERNELS_H
#include <math.h>
#include <stdlib.h>
#include "testutil.h"

static ct_device sk_dev;

static void test_embedding_index_out_of_range_on_device(void **state) {
  (void)state;
  ct_scope_begin();
  ct_tensor *w = ct_assert_nonnull(ct_zeros(2, (int64_t[]){5, 3}, CT_F32, sk_dev));
  int64_t bad[4] = {0, 4, 5, 1}, neg[2] = {-3, 0};
  ct_tensor *ib = ct_assert_nonnull(ct_to(ct_assert_nonnull(ct_from_host(bad, 1, (int64_t[]){4}, CT_I64, CT_DEVICE_CPU)), sk_dev, 0));
  assert_null(ct_embedding(w, ib, CT_NO_PADDING_IDX));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("embedding: index 5");
  ct_tensor *in = ct_assert_nonnull(ct_to(ct_assert_nonnull(ct_from_host(neg, 1, (int64_t[]){2}, CT_I64, CT_DEVICE_CPU)), sk_dev, 0));
  assert_null(ct_embedding(w, in, CT_NO_PADDING_IDX));
  ct_assert_error_contains("index -3");
  ct_scope_end();
}

static void test_embedding_backward_repeats_on_device(void **state) {
  (void)state;
  ct_scope_begin();
  enum { V = 6, D = 4, N = 3000 };
  int64_t *iv = malloc(sizeof(int64_t) * N);
  for (int i = 0; i < N; i++) iv[i] = (i * 7 + i / 5) % V;
  ct_generator gen = ct_generator_new(4);
  ct_tensor *r = ct_assert_nonnull(ct_randn(2, (int64_t[]){N, D}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen));
  ct_tensor *ih = ct_assert_nonnull(ct_from_host(iv, 1, (int64_t[]){N}, CT_I64, CT_DEVICE_CPU));
  double *g[2];
  ct_device devs[2] = {CT_DEVICE_CPU, sk_dev};
  for (int k = 0; k < 2; k++) {
    ct_tensor *w = ct_assert_nonnull(ct_zeros(2, (int64_t[]){V, D}, CT_F32, devs[k]));
    ct_assert_ok(ct_requires_grad_(w, 1));
    ct_tensor *y = ct_assert_nonnull(ct_embedding(w, ct_assert_nonnull(ct_to(ih, devs[k], 0)), 1));
    ct_tensor *l = ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(y, ct_assert_nonnull(ct_to(r, devs[k], 0)))), 0, NULL, 0));
    ct_assert_ok(ct_backward(l));
    g[k] = ct_test_values(ct_grad(w));
  }
  for (int j = 0; j < V * D; j++) {
    if (j / D == 1) assert_true(g[1][j] == 0); /* padding_idx 1 */
    assert_float_equal(g[1][j], g[0][j], 1e-4 * (1 + fabs(g[0][j])));
  }
  free(g[0]), free(g[1]), free(iv);
  ct_scope_end();
}

static void test_multinomial_on_device(void **state) {
  (void)state;
  ct_scope_begin();
  float pv[4] = {1, 0, 3, 4};
  ct_tensor *p = ct_assert_nonnull(ct_to(ct_assert_nonnull(ct_from_host(pv, 1, (int64_t[]){4}, CT_F32, CT_DEVICE_CPU)), sk_dev, 0));
  enum { S = 8000 };
  ct_generator g1 = ct_generator_new(9), g2 = ct_generator_new(9);
  ct_tensor *a = ct_assert_nonnull(ct_multinomial(p, S, 1, &g1)), *b = ct_assert_nonnull(ct_multinomial(p, S, 1, &g2));
  assert_true(ct_device_eq(ct_tensor_device(a), sk_dev));
  int64_t *av = malloc(sizeof(int64_t) * S), *bv = malloc(sizeof(int64_t) * S), count[4] = {0};
  ct_assert_ok(ct_to_host(a, av, sizeof(int64_t) * S, CT_I64));
  ct_assert_ok(ct_to_host(b, bv, sizeof(int64_t) * S, CT_I64));
  assert_memory_equal(av, bv, sizeof(int64_t) * S);
  for (int i = 0; i < S; i++) {
    assert_true(av[i] >= 0 && av[i] < 4 && av[i] != 1);
    count[av[i]]++;
  }
  double q[4] = {0.125, 0, 0.375, 0.5};
  for (int c = 0; c < 4; c++)
    if (q[c] > 0 && fabs((double)count[c] - S * q[c]) > 5 * sqrt(S * q[c] * (1 - q[c])))
      fail_msg("class %d drawn %lld times of %d on the device, expected %.0f", c, (long long)count[c], S, S * q[c]);
  free(av), free(bv);
  ct_scope_end();
}

#define SK_TESTS                                                                                               \
  cmocka_unit_test(test_embedding_index_out_of_range_on_device), cmocka_unit_test(test_embedding_backward_repeats_on_device), \
      cmocka_unit_test(test_multinomial_on_device)
#endif
