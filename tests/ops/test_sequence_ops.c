/* tests/ops/test_sequence_ops.c: what the op table (op_cases.h) cannot say about the ops that
 * sequence models use: embedding's padding row and deterministic backward, cross_entropy's
 * ignore_index default and all-ignored batch, multinomial's frequencies, topk's NaN order and
 * clip_grad_norm_'s scaling, each against values computed here on the host, and their errors. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static ct_tensor *host_f32(const float *v, int ndim, const int64_t *shape) {
  return ct_assert_nonnull(ct_from_host(v, ndim, shape, CT_F32, CT_DEVICE_CPU));
}
static ct_tensor *host_i64(const int64_t *v, int64_t n) { return ct_assert_nonnull(ct_from_host(v, 1, &n, CT_I64, CT_DEVICE_CPU)); }

/* The gradient of sum(embedding(w, idx) * r) is r's rows added into the rows idx names; the
 * padding row gets none, whichever way padding_idx names it. */
static void test_embedding_padding_row_gets_no_gradient(void **state) {
  (void)state;
  ct_scope_begin();
  enum { V = 6, D = 3, N = 7 };
  float wv[V * D], rv[N * D];
  for (int i = 0; i < V * D; i++) wv[i] = (float)(i % 5) - 1.5f;
  for (int i = 0; i < N * D; i++) rv[i] = 0.25f * (float)(i % 7) - 0.5f;
  int64_t iv[N] = {2, 0, 2, 5, 1, 2, 0};
  for (int pass = 0; pass < 2; pass++) {
    int64_t pad = pass == 0 ? 2 : 2 - V; /* 2, then -4: the same row, counted from the end */
    ct_tensor *w = host_f32(wv, 2, (int64_t[]){V, D});
    ct_assert_ok(ct_requires_grad_(w, 1));
    ct_tensor *idx = host_i64(iv, N), *r = host_f32(rv, 2, (int64_t[]){N, D});
    ct_tensor *y = ct_assert_nonnull(ct_embedding(w, idx, pad));
    assert_int_equal(ct_tensor_ndim(y), 2);
    float yv[N * D];
    ct_assert_ok(ct_to_host(y, yv, sizeof yv, CT_F32));
    for (int i = 0; i < N; i++)
      for (int d = 0; d < D; d++) assert_true(yv[i * D + d] == wv[iv[i] * D + d]); /* the padding row's values too */
    ct_tensor *loss = ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(y, r)), 0, NULL, 0));
    ct_assert_ok(ct_backward(loss));
    float gv[V * D], want[V * D] = {0};
    ct_assert_ok(ct_to_host(ct_grad(w), gv, sizeof gv, CT_F32));
    for (int i = 0; i < N; i++)
      for (int d = 0; d < D; d++)
        if (iv[i] != 2) want[iv[i] * D + d] += rv[i * D + d];
    for (int k = 0; k < V * D; k++) assert_float_equal(gv[k], want[k], 1e-6);
  }
  ct_scope_end();
}

/* Many repeats of a few rows: two backward passes give the same bits (the CPU's index_add runs in
 * index order), equal to the sums in double to float32's rounding. */
static void test_embedding_backward_is_deterministic(void **state) {
  (void)state;
  ct_scope_begin();
  enum { V = 7, D = 5, N = 4096 };
  int64_t *iv = malloc(sizeof(int64_t) * N);
  float *rv = malloc(sizeof(float) * N * D);
  uint64_t s = 12345;
  for (int i = 0; i < N; i++) s = s * 6364136223846793005ull + 1442695040888963407ull, iv[i] = (int64_t)((s >> 33) % V);
  for (int i = 0; i < N * D; i++) s = s * 6364136223846793005ull + 1442695040888963407ull, rv[i] = (float)((double)(s >> 40) / (1 << 24)) - 0.5f;
  float g[2][V * D];
  for (int pass = 0; pass < 2; pass++) {
    ct_tensor *w = ct_assert_nonnull(ct_zeros(2, (int64_t[]){V, D}, CT_F32, CT_DEVICE_CPU));
    ct_assert_ok(ct_requires_grad_(w, 1));
    ct_tensor *y = ct_assert_nonnull(ct_embedding(w, host_i64(iv, N), CT_NO_PADDING_IDX));
    ct_tensor *loss = ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(y, host_f32(rv, 2, (int64_t[]){N, D}))), 0, NULL, 0));
    ct_assert_ok(ct_backward(loss));
    ct_assert_ok(ct_to_host(ct_grad(w), g[pass], sizeof g[pass], CT_F32));
  }
  assert_memory_equal(g[0], g[1], sizeof g[0]);
  double want[V * D] = {0};
  for (int i = 0; i < N; i++)
    for (int d = 0; d < D; d++) want[iv[i] * D + d] += rv[i * D + d];
  for (int k = 0; k < V * D; k++) assert_float_equal(g[0][k], want[k], 1e-3);
  free(iv), free(rv);
  ct_scope_end();
}

/* A half weight: float32 accumulation inside, one rounding to the weight's dtype at the end. */
static void test_embedding_half_weight_gradient(void **state) {
  (void)state;
  ct_scope_begin();
  enum { N = 3000 };
  int64_t *iv = calloc(N, sizeof *iv); /* every index 0: 3000 adds of 1/3 into one bfloat16 row */
  ct_tensor *w = ct_assert_nonnull(ct_zeros(2, (int64_t[]){2, 1}, CT_BF16, CT_DEVICE_CPU));
  ct_assert_ok(ct_requires_grad_(w, 1));
  ct_tensor *y = ct_assert_nonnull(ct_embedding(w, host_i64(iv, N), CT_NO_PADDING_IDX));
  ct_tensor *l = ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul_scalar(y, 1.0 / 3)), 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  float gv[2];
  ct_assert_ok(ct_to_host(ct_grad(w), gv, sizeof gv, CT_F32));
  /* bfloat16 steps of 8 near 1000: adding 1/3 at a time in bfloat16 would stall at 64 or so */
  assert_float_equal(gv[0], 1000.0f, 4.0f);
  assert_true(gv[1] == 0.0f);
  free(iv);
  ct_scope_end();
}

static void test_embedding_errors(void **state) {
  (void)state;
  ct_scope_begin();
  ct_tensor *w = ct_assert_nonnull(ct_zeros(2, (int64_t[]){7, 2}, CT_F32, CT_DEVICE_CPU));
  int64_t bad[3] = {1, 7, 2}, neg[2] = {0, -1};
  assert_null(ct_embedding(w, host_i64(bad, 3), CT_NO_PADDING_IDX));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("embedding");
  ct_assert_error_contains("index 7");
  assert_null(ct_embedding(w, host_i64(neg, 2), CT_NO_PADDING_IDX));
  ct_assert_error_contains("index -1");
  int64_t ok[2] = {0, 6};
  assert_null(ct_embedding(w, host_i64(ok, 2), 7));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("padding_idx");
  assert_null(ct_embedding(w, host_i64(ok, 2), -8));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_tensor *w1 = ct_assert_nonnull(ct_zeros(1, (int64_t[]){7}, CT_F32, CT_DEVICE_CPU));
  assert_null(ct_embedding(w1, host_i64(ok, 2), CT_NO_PADDING_IDX));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_tensor *fi = ct_assert_nonnull(ct_zeros(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU));
  assert_null(ct_embedding(w, fi, CT_NO_PADDING_IDX));
  assert_int_equal(ct_last_status(), CT_EDTYPE);
  ct_scope_end();
}

/* ct_cross_entropy ignores torch's default ignore_index, -100: the mean is over the others. */
static void test_cross_entropy_ignores_minus_100(void **state) {
  (void)state;
  ct_scope_begin();
  float lv[12] = {0.1f, 2, -1, 0.5f, 1, 1, 0, -2, 3, 0.2f, 0.3f, -0.4f};
  ct_tensor *logits = host_f32(lv, 2, (int64_t[]){3, 4});
  int64_t t3[3] = {2, -100, 1}, t2[2] = {2, 1};
  ct_tensor *all = ct_assert_nonnull(ct_cross_entropy(logits, host_i64(t3, 3), CT_REDUCTION_MEAN, 0));
  ct_tensor *rows = ct_assert_nonnull(ct_index_select(logits, 0, host_i64((int64_t[]){0, 2}, 2)));
  ct_tensor *two = ct_assert_nonnull(ct_cross_entropy(rows, host_i64(t2, 2), CT_REDUCTION_MEAN, 0));
  assert_float_equal(ct_item(all), ct_item(two), 1e-6);
  ct_tensor *none = ct_assert_nonnull(ct_cross_entropy(logits, host_i64(t3, 3), CT_REDUCTION_NONE, 0.1));
  float nv[3];
  ct_assert_ok(ct_to_host(none, nv, sizeof nv, CT_F32));
  assert_true(nv[1] == 0.0f && nv[0] > 0 && nv[2] > 0);
  /* every target ignored: the weighted mean is 0/0, NaN, as torch */
  int64_t ig[3] = {-100, -100, -100};
  assert_true(isnan(ct_item(ct_assert_nonnull(ct_cross_entropy(logits, host_i64(ig, 3), CT_REDUCTION_MEAN, 0)))));
  assert_float_equal(ct_item(ct_assert_nonnull(ct_cross_entropy(logits, host_i64(ig, 3), CT_REDUCTION_SUM, 0))), 0, 0);
  /* an ignored target's logits get no gradient */
  ct_tensor *lg = ct_assert_nonnull(ct_detach(logits));
  ct_assert_ok(ct_requires_grad_(lg, 1));
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_cross_entropy(lg, host_i64(t3, 3), CT_REDUCTION_MEAN, 0.2))));
  float gv[12];
  ct_assert_ok(ct_to_host(ct_grad(lg), gv, sizeof gv, CT_F32));
  for (int c = 0; c < 4; c++) assert_true(gv[4 + c] == 0.0f && gv[c] != 0.0f);
  ct_scope_end();
}

static void test_cross_entropy_ex_errors(void **state) {
  (void)state;
  ct_scope_begin();
  ct_tensor *logits = ct_assert_nonnull(ct_zeros(2, (int64_t[]){2, 3}, CT_F32, CT_DEVICE_CPU));
  int64_t t[2] = {0, 5};
  ct_tensor *w2 = ct_assert_nonnull(ct_ones(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *wi = ct_assert_nonnull(ct_ones(1, (int64_t[]){3}, CT_I64, CT_DEVICE_CPU));
  int64_t t0[2] = {0, 1};
  assert_null(ct_cross_entropy_ex(logits, host_i64(t0, 2), w2, -100, CT_REDUCTION_MEAN, 0));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("weight");
  assert_null(ct_cross_entropy_ex(logits, host_i64(t0, 2), wi, -100, CT_REDUCTION_MEAN, 0));
  assert_int_equal(ct_last_status(), CT_EDTYPE);
  assert_null(ct_cross_entropy_ex(logits, host_i64(t, 2), NULL, 3, CT_REDUCTION_MEAN, 0));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("target[1] = 5");
  /* a target equal to ignore_index is not an error, even outside [0, C) */
  assert_non_null(ct_cross_entropy_ex(logits, host_i64(t, 2), NULL, 5, CT_REDUCTION_MEAN, 0));
  ct_scope_end();
}

/* Draws with replacement land on each class as often as its weight says (5 standard deviations),
 * never on a class of weight 0, and the same seed draws the same. */
static void test_multinomial_frequencies(void **state) {
  (void)state;
  ct_scope_begin();
  float pv[5] = {0.2f, 0.4f, 0.6f, 0.8f, 0}; /* not normalized: 0.1 0.2 0.3 0.4 0 */
  ct_tensor *p = host_f32(pv, 1, (int64_t[]){5});
  enum { S = 20000 };
  ct_generator g1 = ct_generator_new(7), g2 = ct_generator_new(7);
  ct_tensor *a = ct_assert_nonnull(ct_multinomial(p, S, 1, &g1)), *b = ct_assert_nonnull(ct_multinomial(p, S, 1, &g2));
  assert_int_equal(ct_tensor_ndim(a), 1);
  assert_int_equal(ct_tensor_shape(a)[0], S);
  assert_int_equal(ct_tensor_dtype(a), CT_I64);
  int64_t *av = malloc(sizeof(int64_t) * S), *bv = malloc(sizeof(int64_t) * S);
  ct_assert_ok(ct_to_host(a, av, sizeof(int64_t) * S, CT_I64));
  ct_assert_ok(ct_to_host(b, bv, sizeof(int64_t) * S, CT_I64));
  assert_memory_equal(av, bv, sizeof(int64_t) * S);
  int64_t count[5] = {0};
  for (int i = 0; i < S; i++) {
    assert_true(av[i] >= 0 && av[i] < 4);
    count[av[i]]++;
  }
  for (int c = 0; c < 4; c++) {
    double q = 0.1 * (c + 1), sd = sqrt(S * q * (1 - q));
    if (fabs((double)count[c] - S * q) > 5 * sd) fail_msg("class %d drawn %lld times of %d, expected %.0f +- %.0f", c, (long long)count[c], S, S * q, 5 * sd);
  }
  free(av), free(bv);
  ct_scope_end();
}

/* Without replacement: each row's draws are distinct, all four non-zero classes appear when four
 * are drawn, and the first draw follows the weights. */
static void test_multinomial_without_replacement(void **state) {
  (void)state;
  ct_scope_begin();
  enum { N = 4000, C = 5 };
  float *pv = malloc(sizeof(float) * N * C);
  for (int i = 0; i < N; i++) pv[i * C + 0] = 1, pv[i * C + 1] = 2, pv[i * C + 2] = 0, pv[i * C + 3] = 3, pv[i * C + 4] = 4;
  ct_generator g = ct_generator_new(3);
  ct_tensor *d = ct_assert_nonnull(ct_multinomial(host_f32(pv, 2, (int64_t[]){N, C}), 4, 0, &g));
  assert_int_equal(ct_tensor_shape(d)[0], N);
  assert_int_equal(ct_tensor_shape(d)[1], 4);
  int64_t *dv = malloc(sizeof(int64_t) * N * 4), first[C] = {0};
  ct_assert_ok(ct_to_host(d, dv, sizeof(int64_t) * N * 4, CT_I64));
  for (int i = 0; i < N; i++) {
    int seen = 0;
    for (int j = 0; j < 4; j++) {
      int64_t c = dv[i * 4 + j];
      assert_true(c >= 0 && c < C && c != 2);
      assert_false(seen & (1 << c));
      seen |= 1 << c;
    }
    first[dv[i * 4]]++;
  }
  double w[C] = {0.1, 0.2, 0, 0.3, 0.4};
  for (int c = 0; c < C; c++) {
    double sd = sqrt(N * w[c] * (1 - w[c]));
    if (fabs((double)first[c] - N * w[c]) > 5 * sd + 0.5) fail_msg("class %d drawn first %lld times of %d, expected %.0f", c, (long long)first[c], N, N * w[c]);
  }
  free(pv), free(dv);
  ct_scope_end();
}

static void test_multinomial_errors(void **state) {
  (void)state;
  ct_scope_begin();
  float neg[3] = {0.5f, -0.1f, 1}, nan_[3] = {0.5f, NAN, 1}, zero[3] = {0, 0, 0}, one[3] = {0, 1, 0};
  struct {
    const float *p;
    int64_t s;
    int repl;
    const char *needle;
  } rows[] = {{neg, 1, 1, "finite weights >= 0"}, {nan_, 1, 1, "finite weights >= 0"}, {zero, 1, 1, "sums to 0"},
              {one, 2, 0, "fewer than num_samples"}, {one, 0, 1, "num_samples"}, {one, 4, 0, "num_samples"}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    assert_null(ct_multinomial(host_f32(rows[i].p, 1, (int64_t[]){3}), rows[i].s, rows[i].repl, NULL));
    assert_int_equal(ct_last_status(), CT_EINVAL);
    ct_assert_error_contains("multinomial");
    ct_assert_error_contains(rows[i].needle);
  }
  ct_tensor *i64 = ct_assert_nonnull(ct_ones(1, (int64_t[]){3}, CT_I64, CT_DEVICE_CPU));
  assert_null(ct_multinomial(i64, 1, 1, NULL));
  assert_int_equal(ct_last_status(), CT_EDTYPE);
  ct_tensor *p3 = ct_assert_nonnull(ct_ones(3, (int64_t[]){2, 2, 2}, CT_F32, CT_DEVICE_CPU));
  assert_null(ct_multinomial(p3, 1, 1, NULL));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_scope_end();
}

/* topk ranks NaN first for the largest, as torch, and takes -inf after every number; k = 0 and
 * k past the size. */
static void test_topk_specials_and_errors(void **state) {
  (void)state;
  ct_scope_begin();
  float xv[5] = {1, NAN, -INFINITY, 3, -INFINITY};
  ct_tensor *x = host_f32(xv, 1, (int64_t[]){5}), *idx = NULL;
  ct_tensor *v = ct_assert_nonnull(ct_topk(x, 5, 0, 1, &idx));
  int64_t iv[5];
  ct_assert_ok(ct_to_host(idx, iv, sizeof iv, CT_I64));
  int64_t want[5] = {1, 3, 0, 2, 4};
  assert_memory_equal(iv, want, sizeof want);
  float vv[5];
  ct_assert_ok(ct_to_host(v, vv, sizeof vv, CT_F32));
  assert_true(isnan(vv[0]) && vv[1] == 3 && vv[2] == 1 && isinf(vv[3]) && vv[3] < 0);
  ct_tensor *e = ct_assert_nonnull(ct_topk(x, 0, 0, 1, NULL));
  assert_int_equal(ct_tensor_numel(e), 0);
  assert_null(ct_topk(x, 6, 0, 1, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("topk");
  assert_null(ct_topk(x, 1, 1, 1, NULL));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_scope_end();
}

/* clip_grad_norm_: the returned norm is the norm of all gradients together; above max_norm every
 * gradient scales by max_norm / (norm + 1e-6), below it nothing changes; p = 1 and p = inf. */
static void test_clip_grad_norm(void **state) {
  (void)state;
  ct_scope_begin();
  ct_generator gen = ct_generator_new(11);
  ct_module *m = ct_assert_nonnull(ct_linear_new(4, 3, 1, CT_DEVICE_CPU, &gen));
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, (int64_t[]){5, 4}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen));
  double norms[3] = {2, 1, INFINITY};
  for (int k = 0; k < 3; k++) {
    ct_named_tensor ps[2];
    assert_int_equal(ct_module_named_tensors(m, 0, ps, 2), 2);
    for (int i = 0; i < 2; i++) ct_zero_grad(ps[i].tensor);
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(y, y)), 0, NULL, 0))));
    float g0[12], g1[3];
    ct_assert_ok(ct_to_host(ct_grad(ps[0].tensor), g0, sizeof g0, CT_F32));
    ct_assert_ok(ct_to_host(ct_grad(ps[1].tensor), g1, sizeof g1, CT_F32));
    double p = norms[k], acc = 0;
    for (int i = 0; i < 15; i++) {
      double a = fabs(i < 12 ? g0[i] : g1[i - 12]);
      acc = isinf(p) ? fmax(acc, a) : acc + pow(a, p);
    }
    double total = isinf(p) ? acc : pow(acc, 1 / p);
    /* above the norm: nothing changes */
    ct_tensor *n1 = ct_assert_nonnull(ct_clip_grad_norm_(m, total * 2, p));
    assert_float_equal(ct_item(n1), total, 1e-5 * total);
    float h0[12];
    ct_assert_ok(ct_to_host(ct_grad(ps[0].tensor), h0, sizeof h0, CT_F32));
    assert_memory_equal(h0, g0, sizeof g0);
    /* below: scaled to max_norm */
    ct_tensor *n2 = ct_assert_nonnull(ct_clip_grad_norm_(m, total / 4, p));
    assert_float_equal(ct_item(n2), total, 1e-5 * total);
    ct_assert_ok(ct_to_host(ct_grad(ps[0].tensor), h0, sizeof h0, CT_F32));
    double c = (total / 4) / (total + 1e-6);
    for (int i = 0; i < 12; i++) assert_float_equal(h0[i], g0[i] * c, 1e-5 * fabs(g0[i]) + 1e-7);
    ct_tensor *n3 = ct_assert_nonnull(ct_clip_grad_norm_(m, 1e9, p));
    assert_float_equal(ct_item(n3), total / 4, 1e-4 * total);
  }
  assert_null(ct_clip_grad_norm_(m, 1, 0));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("ct_clip_grad_norm_");
  ct_assert_error_contains("norm_type");
  assert_null(ct_clip_grad_norm_(m, -1, 2));
  ct_assert_error_contains("max_norm");
  assert_null(ct_clip_grad_norm_(m, NAN, 2));
  assert_null(ct_clip_grad_norm_(NULL, 1, 2));
  /* no gradients: 0 */
  ct_module *fresh = ct_assert_nonnull(ct_linear_new(2, 2, 0, CT_DEVICE_CPU, &gen));
  assert_float_equal(ct_item(ct_assert_nonnull(ct_clip_grad_norm_(fresh, 1, 2))), 0, 0);
  ct_module_free(fresh);
  ct_module_free(m);
  ct_scope_end();
}

/* nn.Embedding: torch's init (N(0, 1), the padding row zeroed), repr, forward shape; nn.MultiheadAttention's
 * state_dict names and a self-attention forward of the input's shape (its values: test_interop_sequence) */
static void test_modules(void **state) {
  (void)state;
  ct_scope_begin();
  ct_generator g = ct_generator_new(2);
  ct_module *e = ct_assert_nonnull(ct_embedding_new(10, 4, -10, CT_DEVICE_CPU, &g)); /* -10: row 0 */
  ct_tensor *w = ct_assert_nonnull(ct_module_tensor(e, "weight"));
  assert_int_equal(ct_tensor_shape(w)[0], 10);
  double *wv = ct_test_values(w);
  double sq = 0;
  for (int i = 0; i < 40; i++) {
    if (i < 4) assert_true(wv[i] == 0);
    sq += wv[i] * wv[i];
  }
  assert_true(sq / 36 > 0.3 && sq / 36 < 3); /* unit variance, roughly */
  free(wv);
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  ct_module_print(e, f);
  fclose(f);
  assert_string_equal(s, "Embedding(10, 4, padding_idx=0)\n"); /* torch.nn.Embedding's repr */
  free(s);
  int64_t iv[6] = {1, 0, 9, 3, 3, 2};
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(e, host_i64(iv, 6)));
  assert_int_equal(ct_tensor_ndim(y), 2);
  assert_int_equal(ct_tensor_shape(y)[1], 4);
  ct_module_free(e);
  ct_module *m = ct_assert_nonnull(ct_multihead_attention_new(8, 2, 0.1, 0, 0, CT_DEVICE_CPU, &g));
  ct_named_tensor nt[4];
  assert_int_equal(ct_module_named_tensors(m, 1, nt, 4), 2); /* bias = 0: in_proj_weight, out_proj.weight */
  assert_string_equal(nt[0].name, "in_proj_weight");
  assert_string_equal(nt[1].name, "out_proj.weight");
  ct_tensor *x = ct_assert_nonnull(ct_randn(3, (int64_t[]){5, 3, 8}, 0, 1, CT_F32, CT_DEVICE_CPU, &g)); /* (L, N, E) */
  ct_module_train(m, 0);
  ct_tensor *o = ct_assert_nonnull(ct_module_forward(m, x));
  assert_int_equal(ct_tensor_shape(o)[0], 5);
  assert_int_equal(ct_tensor_shape(o)[1], 3);
  assert_int_equal(ct_tensor_shape(o)[2], 8);
  ct_tensor *bad = ct_assert_nonnull(ct_randn(3, (int64_t[]){5, 3, 7}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  assert_null(ct_module_forward(m, bad));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("embed_dim = 8");
  ct_module_free(m);
  ct_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding_padding_row_gets_no_gradient), cmocka_unit_test(test_embedding_backward_is_deterministic),
      cmocka_unit_test(test_embedding_half_weight_gradient),         cmocka_unit_test(test_embedding_errors),
      cmocka_unit_test(test_cross_entropy_ignores_minus_100),        cmocka_unit_test(test_cross_entropy_ex_errors),
      cmocka_unit_test(test_multinomial_frequencies),                cmocka_unit_test(test_multinomial_without_replacement),
      cmocka_unit_test(test_multinomial_errors),                     cmocka_unit_test(test_topk_specials_and_errors),
      cmocka_unit_test(test_clip_grad_norm),                         cmocka_unit_test(test_modules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
