/* tests/ops/test_attention.c: the fused scaled dot-product attention (the CPU's FlashAttention-2
 * kernels) against the composed form (matmul, softmax, dropout: torch's math reference) at sizes
 * the op table's rows do not reach: several 64-row tiles, Tq != Tk, causal, both masks, dropout
 * with the same generator state (the same elements dropped), the halves, autocast, and the memory
 * each keeps: the fused op must not hold the (T, T) scores. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ops/attention_internal.h"

typedef struct {
  int64_t B, H, Tq, Tk, D, Dv;
  int mask; /* 0 none, 1 causal, 2 bool, 3 additive */
  double p, scale;
} cfg;

/* out and the three gradients of sum(out * r) for the fused op (fused = 1) or the composed one,
 * from inputs drawn by seed, as float64 host arrays (the caller frees them) */
static void run(const cfg *c, ct_dtype dt, int fused, uint64_t seed, double *res[4]) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(seed);
  int64_t qs[4] = {c->B, c->H, c->Tq, c->D}, ks[4] = {c->B, c->H, c->Tk, c->D}, vs[4] = {c->B, c->H, c->Tk, c->Dv};
  ct_tensor *in[3];
  const int64_t *shapes[3] = {qs, ks, vs};
  for (int i = 0; i < 3; i++) {
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, shapes[i], 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    in[i] = ct_assert_nonnull(ct_cast(x, dt));
    ct_assert_ok(ct_requires_grad_(in[i], 1));
  }
  ct_tensor *mask = NULL;
  if (c->mask == 2) { /* about 60% of the keys, and key 0 in every row */
    ct_tensor *u = ct_assert_nonnull(ct_rand(2, (int64_t[]){c->Tq, c->Tk}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    ct_tensor *col = ct_assert_nonnull(ct_arange(0, (double)c->Tk, 1, CT_I64, CT_DEVICE_CPU));
    ct_tensor *zero = ct_assert_nonnull(ct_scalar(0, CT_I64, CT_DEVICE_CPU));
    ct_tensor *first = ct_assert_nonnull(ct_cast(ct_assert_nonnull(ct_eq(col, zero)), CT_I64));
    ct_tensor *keep = ct_assert_nonnull(ct_cast(ct_assert_nonnull(ct_lt(u, ct_assert_nonnull(ct_scalar(0.6, CT_F32, CT_DEVICE_CPU)))), CT_I64));
    mask = ct_assert_nonnull(ct_ne(ct_assert_nonnull(ct_add(keep, first)), zero));
  } else if (c->mask == 3) {
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){1, c->H, c->Tq, c->Tk}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    mask = ct_assert_nonnull(ct_cast(x, dt));
  }
  ct_tensor *r = ct_assert_nonnull(ct_randn(4, (int64_t[]){c->B, c->H, c->Tq, c->Dv}, 0, 1, dt, CT_DEVICE_CPU, &g));
  ct_manual_seed(seed + 1000); /* dropout's draws: the same for both forms */
  double scale = c->scale ? c->scale : 1 / sqrt((double)c->D);
  ct_tensor *out = fused ? ct_scaled_dot_product_attention(in[0], in[1], in[2], mask, c->p, c->mask == 1, c->scale)
                         : ct__sdpa_composed(in[0], in[1], in[2], mask, c->p, c->mask == 1, scale);
  ct_assert_nonnull(out);
  if (fused && (dt == CT_F32 || dt == CT_F64)) /* one node: the fused kernels (the halves end in a cast) */
    assert_string_equal(ct_grad_fn_name(out), "scaled_dot_product_attention");
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(out, r)), 0, NULL, 0))));
  res[0] = ct_test_values(out);
  for (int i = 0; i < 3; i++) res[1 + i] = ct_test_values(ct_grad(in[i]));
  ct_scope_end();
}

static void compare(const cfg *c, ct_dtype dt, double tol) {
  double *f[4], *m[4];
  run(c, dt, 1, 42, f);
  run(c, dt, 0, 42, m);
  int64_t n[4] = {c->B * c->H * c->Tq * c->Dv, c->B * c->H * c->Tq * c->D, c->B * c->H * c->Tk * c->D,
                  c->B * c->H * c->Tk * c->Dv};
  const char *what[4] = {"out", "grad q", "grad k", "grad v"};
  for (int t = 0; t < 4; t++) {
    for (int64_t i = 0; i < n[t]; i++) {
      double a = f[t][i], b = m[t][i];
      if (!(fabs(a - b) <= tol * (1 + fabs(b))))
        fail_msg("%s[%lld]: fused %.9g, composed %.9g (B %lld H %lld Tq %lld Tk %lld D %lld mask %d p %g)", what[t], (long long)i,
                 a, b, (long long)c->B, (long long)c->H, (long long)c->Tq, (long long)c->Tk, (long long)c->D, c->mask, c->p);
    }
    free(f[t]), free(m[t]);
  }
}

static void test_fused_equals_composed(void **state) {
  (void)state;
  const cfg cases[] = {
      {2, 3, 150, 130, 16, 16, 0, 0, 0},   /* three query tiles, three key tiles, ragged */
      {1, 2, 200, 200, 32, 8, 1, 0, 0},    /* causal over four tiles, Dv != D */
      {2, 1, 70, 129, 8, 8, 1, 0, 0},      /* causal with Tq < Tk (torch's top-left tril) */
      {1, 2, 100, 90, 12, 12, 2, 0, 0.2},  /* bool mask, a scale */
      {2, 2, 65, 66, 8, 4, 3, 0, 0},       /* additive mask broadcast over B */
      {1, 1, 1, 1, 4, 4, 0, 0, 0},         /* one query, one key */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    compare(&cases[i], CT_F64, 1e-10);
    compare(&cases[i], CT_F32, 2e-4);
  }
}

/* With the same generator state, the fused kernels drop the elements the composed dropout drops. */
static void test_dropout_draws_match(void **state) {
  (void)state;
  cfg c = {2, 2, 90, 70, 8, 8, 0, 0.3, 0}, cc = {1, 2, 80, 80, 8, 8, 1, 0.5, 0};
  compare(&c, CT_F64, 1e-10);
  compare(&c, CT_F32, 2e-4);
  compare(&cc, CT_F32, 2e-4);
  /* and dropout does drop: the output differs from p = 0's */
  double *a[4], *b[4];
  cfg c0 = c;
  c0.p = 0;
  run(&c, CT_F32, 1, 7, a);
  run(&c0, CT_F32, 1, 7, b);
  int differ = 0;
  for (int64_t i = 0; i < c.B * c.H * c.Tq * c.Dv; i++) differ += a[0][i] != b[0][i];
  assert_true(differ > 0);
  for (int t = 0; t < 4; t++) free(a[t]), free(b[t]);
}

/* float16 and bfloat16: float32 inside, one rounding out; against the composed op on the same
 * half inputs computed in float32 */
static void test_halves(void **state) {
  (void)state;
  cfg c = {1, 2, 80, 75, 16, 16, 1, 0, 0};
  compare(&c, CT_F16, 4e-3);
  compare(&c, CT_BF16, 3e-2);
}

/* A CPU autocast region runs the op in bfloat16 (torch's lower-precision list) */
static void test_autocast(void **state) {
  (void)state;
  ct_scope_begin();
  ct_tensor *q = ct_assert_nonnull(ct_randn(4, (int64_t[]){1, 1, 5, 4}, 0, 1, CT_F32, CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
  ct_tensor *o = ct_assert_nonnull(ct_scaled_dot_product_attention(q, q, q, NULL, 0, 1, 0));
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct_tensor_dtype(o), CT_BF16);
  ct_scope_end();
}

/* Peak bytes of a forward and backward at T = 2048 (B = H = 1, D = 32): the fused op keeps q, k, v,
 * out, the gradients and O(T) more; the composed one holds (T, T) scores and probabilities, 16 MiB
 * each in float32. */
static size_t peak_of(int fused, int64_t T) {
  ct_scope_begin();
  int64_t s[4] = {1, 1, T, 32};
  ct_tensor *q = ct_assert_nonnull(ct_randn(4, s, 0, 1, CT_F32, CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_requires_grad_(q, 1));
  ct_memory_stats m0, m1;
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m0));
  ct_assert_ok(ct_reset_peak_memory_stats(CT_DEVICE_CPU));
  ct_tensor *o = fused ? ct_scaled_dot_product_attention(q, q, q, NULL, 0, 1, 0) : ct__sdpa_composed(q, q, q, NULL, 0, 1, 1 / sqrt(32.0));
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(o), 0, NULL, 0))));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  ct_scope_end();
  return m1.peak_allocated - m0.allocated;
}

static void test_memory_is_linear_in_t(void **state) {
  (void)state;
  size_t f1 = peak_of(1, 1024), f2 = peak_of(1, 2048), c2 = peak_of(0, 2048);
  printf("# peak bytes beyond the inputs: fused %zu (T 1024), %zu (T 2048); composed %zu (T 2048)\n", f1, f2, c2);
  assert_true(f2 < (size_t)2048 * 2048 * 4 / 4); /* far below one (T, T) float32 matrix */
  assert_true(f2 <= 2 * f1 + 4096 * 64);          /* doubling T doubles it, at most (plus the tiles' rounding) */
  assert_true(c2 > (size_t)2048 * 2048 * 4);      /* the composed form holds the scores */
}

static void test_errors(void **state) {
  (void)state;
  ct_scope_begin();
  ct_tensor *q = ct_assert_nonnull(ct_zeros(4, (int64_t[]){1, 2, 3, 4}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *k5 = ct_assert_nonnull(ct_zeros(4, (int64_t[]){1, 2, 3, 5}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *q64 = ct_assert_nonnull(ct_zeros(4, (int64_t[]){1, 2, 3, 4}, CT_F64, CT_DEVICE_CPU));
  ct_tensor *m_bad = ct_assert_nonnull(ct_zeros(2, (int64_t[]){3, 4}, CT_BOOL, CT_DEVICE_CPU));
  ct_tensor *m_ok = ct_assert_nonnull(ct_ones(2, (int64_t[]){3, 3}, CT_BOOL, CT_DEVICE_CPU));
  ct_tensor *m_i64 = ct_assert_nonnull(ct_ones(2, (int64_t[]){3, 3}, CT_I64, CT_DEVICE_CPU));
#define EXPECT(call, code, needle)                                  \
  do {                                                             \
    assert_null(call);                                             \
    assert_int_equal(ct_last_status(), code);                      \
    ct_assert_error_contains("scaled_dot_product_attention: ");    \
    ct_assert_error_contains(needle);                              \
  } while (0)
  EXPECT(ct_scaled_dot_product_attention(q, k5, q, NULL, 0, 0, 0), CT_ESHAPE, "expected q (B, H, Tq, D)");
  EXPECT(ct_scaled_dot_product_attention(q, q64, q, NULL, 0, 0, 0), CT_EDTYPE, "one floating dtype");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, m_bad, 0, 0, 0), CT_ESHAPE, "does not broadcast");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, m_i64, 0, 0, 0), CT_EDTYPE, "attn_mask must be bool");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, m_ok, 0, 1, 0), CT_EINVAL, "not both");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, NULL, 1.0, 0, 0), CT_EINVAL, "dropout_p");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, NULL, 0, 0, NAN), CT_EINVAL, "scale");
  EXPECT(ct_scaled_dot_product_attention(q, q, q, NULL, 0, 2, 0), CT_EINVAL, "is_causal");
  /* a row whose keys are all masked gives NaN, as softmax does */
  ct_tensor *none = ct_assert_nonnull(ct_zeros(2, (int64_t[]){3, 3}, CT_BOOL, CT_DEVICE_CPU));
  ct_tensor *o = ct_assert_nonnull(ct_scaled_dot_product_attention(q, q, q, none, 0, 0, 0));
  float ov[24];
  ct_assert_ok(ct_to_host(o, ov, sizeof ov, CT_F32));
  assert_true(isnan(ov[0]));
  ct_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused_equals_composed), cmocka_unit_test(test_dropout_draws_match), cmocka_unit_test(test_halves),
      cmocka_unit_test(test_autocast),              cmocka_unit_test(test_memory_is_linear_in_t), cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
