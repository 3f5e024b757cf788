/* tests/ops/attention_kernels.h: the fused scaled dot-product attention on a device against the
 * CPU's fused kernels (FlashAttention-2, Dao 2023), both through ct_scaled_dot_product_attention,
 * for the device tests (test_opencl_ops, test_ops_cuda): set ak_dev, then run AK_TESTS. The op
 * table's rows (op_cases.h) are a few rows wide; here the sizes span several key and query blocks,
 * Tq != Tk, causal with Tq < Tk, a bool mask, an additive one broadcast over the batch (and one read
 * through a transpose), Dv != D: the outputs and the three gradients, float32 (1e-4 relative: sums
 * in another order) and float64 (1e-10). Dropout with the same ct_manual_seed must drop the CPU's
 * elements (kernels.def's Philox mapping), so the results agree to rounding too. Where the device
 * has the fused kernels (OpenCL's; CUDA's, unproven until a GPU runs this), the result must be their one tape node, and a
 * forward and backward at T = 2048 must stay far below one (T, T) float32 matrix of device memory. */
#ifndef CUTTLE_TESTS_ATTENTION_KERNELS_H
#define CUTTLE_TESTS_ATTENTION_KERNELS_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "core/backend.h" /* whether ak_dev's backend has the fused kernels (ak_fused) */

static ct_device ak_dev;

typedef struct {
  int64_t B, H, Tq, Tk, D, Dv;
  int mask; /* 0 none, 1 causal, 2 bool (Tq, Tk), 3 additive (1, H, Tq, Tk), 4 additive read through a transpose */
  double p, scale;
} ak_cfg;

/* 1 when ak_dev runs the fused kernels (else the front-end composes them) */
static int ak_fused(void) {
  const ct_backend *be = ct__backend(ak_dev.kind);
  return ct__has_kernel(be, CT_K_attention) && ct__has_kernel(be, CT_K_attention_backward);
}

/* A host tensor moved to dev (the caller's scope frees both). */
static ct_tensor *ak_on(ct_tensor *host, ct_device dev) { return ct_assert_nonnull(ct_to(ct_assert_nonnull(host), dev, 0)); }

/* out and the gradients of q, k and v of sum(out * r) on dev, in dtype dt, from inputs drawn on the
 * host by seed (the same values on every device), dropout's generator seeded alike before the op:
 * float64 host arrays the caller frees. */
static void ak_run(const ak_cfg *c, ct_dtype dt, ct_device dev, uint64_t seed, double *res[4]) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(seed);
  int64_t qs[4] = {c->B, c->H, c->Tq, c->D}, ks[4] = {c->B, c->H, c->Tk, c->D}, vs[4] = {c->B, c->H, c->Tk, c->Dv};
  const int64_t *shapes[3] = {qs, ks, vs};
  ct_tensor *in[3];
  for (int i = 0; i < 3; i++) {
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, shapes[i], 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    in[i] = ak_on(ct_cast(x, dt), dev);
    ct_assert_ok(ct_requires_grad_(in[i], 1));
  }
  ct_tensor *mask = NULL;
  if (c->mask == 2) { /* about 60% of the keys, and key 0 in every row, so no row is empty */
    ct_tensor *u = ct_assert_nonnull(ct_rand(2, (int64_t[]){c->Tq, c->Tk}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    ct_tensor *col = ct_assert_nonnull(ct_arange(0, (double)c->Tk, 1, CT_I64, CT_DEVICE_CPU));
    ct_tensor *zero = ct_assert_nonnull(ct_scalar(0, CT_I64, CT_DEVICE_CPU));
    ct_tensor *first = ct_assert_nonnull(ct_cast(ct_assert_nonnull(ct_eq(col, zero)), CT_I64));
    ct_tensor *some = ct_assert_nonnull(ct_cast(ct_assert_nonnull(ct_lt(u, ct_assert_nonnull(ct_scalar(0.6, CT_F32, CT_DEVICE_CPU)))), CT_I64));
    mask = ak_on(ct_ne(ct_assert_nonnull(ct_add(some, first)), zero), dev);
  } else if (c->mask == 3) { /* broadcast over the batch: stride 0 */
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){1, c->H, c->Tq, c->Tk}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    mask = ak_on(ct_cast(x, dt), dev);
  } else if (c->mask == 4) { /* (1, H, Tk, Tq) on the device, transposed: strides (.., 1, Tq) */
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){1, c->H, c->Tk, c->Tq}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    mask = ct_assert_nonnull(ct_transpose(ak_on(ct_cast(x, dt), dev), -2, -1));
  }
  ct_tensor *r = ak_on(ct_randn(4, (int64_t[]){c->B, c->H, c->Tq, c->Dv}, 0, 1, dt, CT_DEVICE_CPU, &g), dev);
  ct_manual_seed(seed + 1000); /* dropout's draws: the same on both devices */
  ct_tensor *out = ct_assert_nonnull(ct_scaled_dot_product_attention(in[0], in[1], in[2], mask, c->p, c->mask == 1, c->scale));
  if (dev.kind == CT_CPU || ak_fused()) /* one tape node: the fused kernels ran */
    assert_string_equal(ct_grad_fn_name(out), "scaled_dot_product_attention");
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(out, r)), 0, NULL, 0))));
  res[0] = ct_test_values(out);
  for (int i = 0; i < 3; i++) res[1 + i] = ct_test_values(ct_grad(in[i]));
  ct_scope_end();
}

/* ak_dev's results against the CPU's, |a - b| <= tol (1 + |b|) for every element */
static void ak_compare(const ak_cfg *c, ct_dtype dt, double tol) {
  double *d[4], *h[4];
  ak_run(c, dt, ak_dev, 42, d);
  ak_run(c, dt, CT_DEVICE_CPU, 42, h);
  int64_t n[4] = {c->B * c->H * c->Tq * c->Dv, c->B * c->H * c->Tq * c->D, c->B * c->H * c->Tk * c->D,
                  c->B * c->H * c->Tk * c->Dv};
  const char *what[4] = {"out", "grad q", "grad k", "grad v"};
  for (int t = 0; t < 4; t++) {
    for (int64_t i = 0; i < n[t]; i++)
      if (!(fabs(d[t][i] - h[t][i]) <= tol * (1 + fabs(h[t][i]))))
        fail_msg("%s %s[%lld]: device %.12g, CPU %.12g (B %lld H %lld Tq %lld Tk %lld D %lld Dv %lld mask %d p %g)",
                 ct_dtype_name(dt), what[t], (long long)i, d[t][i], h[t][i], (long long)c->B, (long long)c->H,
                 (long long)c->Tq, (long long)c->Tk, (long long)c->D, (long long)c->Dv, c->mask, c->p);
    free(d[t]), free(h[t]);
  }
}

static void test_attention_device_equals_cpu(void **state) {
  (void)state;
  const ak_cfg cases[] = {
      {2, 3, 150, 130, 16, 16, 0, 0, 0},  /* several blocks of queries and keys, ragged */
      {1, 2, 100, 100, 24, 8, 1, 0, 0},   /* causal, Dv != D */
      {2, 1, 70, 129, 8, 8, 1, 0, 0},     /* causal with Tq < Tk (torch's top-left tril) */
      {1, 2, 90, 80, 12, 12, 2, 0, 0.2},  /* bool mask, a scale */
      {2, 2, 65, 66, 8, 4, 3, 0, 0},      /* additive mask broadcast over B */
      {1, 2, 40, 70, 8, 8, 4, 0, 0},      /* additive mask with transposed strides */
      {1, 1, 1, 1, 4, 4, 0, 0, 0},        /* one query, one key */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ak_compare(&cases[i], CT_F64, 1e-10);
    ak_compare(&cases[i], CT_F32, 1e-4);
  }
}

/* Dropout p = 0.3 with the same seed before each run: the device drops the CPU's elements (else
 * the outputs would differ by whole terms, far beyond rounding); and dropout does drop. */
static void test_attention_dropout_on_device(void **state) {
  (void)state;
  ak_cfg c = {2, 2, 90, 70, 8, 8, 0, 0.3, 0}, cc = {1, 2, 80, 80, 8, 8, 1, 0.3, 0};
  ak_compare(&c, CT_F64, 1e-10);
  ak_compare(&c, CT_F32, 1e-4);
  ak_compare(&cc, CT_F32, 1e-4);
  double *a[4], *b[4];
  ak_cfg c0 = c;
  c0.p = 0;
  ak_run(&c, CT_F32, ak_dev, 7, a);
  ak_run(&c0, CT_F32, ak_dev, 7, b);
  int differ = 0;
  for (int64_t i = 0; i < c.B * c.H * c.Tq * c.Dv; i++) differ += a[0][i] != b[0][i];
  assert_true(differ > 0);
  for (int t = 0; t < 4; t++) free(a[t]), free(b[t]);
}

/* The device's peak bytes beyond what it held before, for a causal forward and backward at
 * T = 2048 (B = H = 1, D = 16, float32): the fused kernels keep q, out, the (T) log-sum-exps and the
 * gradients, O(T) (about 1 MB on PoCL); one (T, T) float32 matrix would be 16 MiB. Where the device
 * composes, it only prints the figure. */
static void test_attention_memory_on_device(void **state) {
  (void)state;
  ct_scope_begin();
  const int64_t T = 2048;
  ct_tensor *q = ak_on(ct_randn(4, (int64_t[]){1, 1, T, 16}, 0, 1, CT_F32, CT_DEVICE_CPU, NULL), ak_dev);
  ct_assert_ok(ct_requires_grad_(q, 1));
  ct_memory_stats m0, m1;
  ct_assert_ok(ct_synchronize(ak_dev));
  ct_assert_ok(ct_memory_stats_get(ak_dev, &m0));
  ct_assert_ok(ct_reset_peak_memory_stats(ak_dev));
  ct_tensor *o = ct_assert_nonnull(ct_scaled_dot_product_attention(q, q, q, NULL, 0, 1, 0));
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(o, 0, NULL, 0))));
  ct_assert_ok(ct_synchronize(ak_dev));
  ct_assert_ok(ct_memory_stats_get(ak_dev, &m1));
  size_t peak = m1.peak_allocated - m0.allocated;
  printf("# attention at T %lld on the device: %zu bytes beyond the inputs at the peak\n", (long long)T, peak);
  if (ak_fused()) assert_true(peak < (size_t)(T * T * 4 / 4)); /* a quarter of the (T, T) float32 scores */
  ct_scope_end();
}

#define AK_TESTS                                                                                              \
  cmocka_unit_test(test_attention_device_equals_cpu), cmocka_unit_test(test_attention_dropout_on_device), \
      cmocka_unit_test(test_attention_memory_on_device)
#endif
