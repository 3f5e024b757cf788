/* tests/ops/test_ops_cpu.c: every row of the op table (op_cases.h) on the CPU: values in float32
 * and float64 against the float64 reference, gradients by finite differences in float64, and the
 * float32 backward against the float64 backward; the same values and backward in float16 and
 * bfloat16 (mixed precision), and what the table cannot see of them (lowp_checks.h).
 * Plus the random op (dropout in training) checked by its statistics. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "op_cases.h"
#include "lowp_checks.h"
#include "cast_checks.h"
#include "core/internal.h"
#include "ops/memory_format.h"

/* f32 inputs are rounded before the reference sees them, so the only error is f32 arithmetic. */
#define F32_ATOL 1e-5
#define F32_RTOL 1e-4
/* float32 gradients against float64 gradients of the same values (sums of up to a few hundred terms) */
#define F32_GRAD_ATOL 1e-4
#define F32_GRAD_RTOL 1e-4
#define F64_ATOL 1e-12
#define F64_RTOL 1e-10
/* float16 and bfloat16 compute in float32 inside every op and round the result once, so a single
 * op is within half an ulp (u = 2^-11 for float16's 11-bit significand, 2^-8 for bfloat16's 8 bits)
 * of the reference. Ops the front-end composes from several rounded half ops (var, norm,
 * batch_norm, mse_loss, linear's bias add) round up to four times, and x - mean cancels the
 * leading bits of values of order 1: hence 4u, relative and absolute (inputs are of order 1). */
#define F16_TOL (4.0 / 2048)
#define BF16_TOL (4.0 / 256)
/* Their gradients go through twice as many roundings (the backward of each rounded op, in the
 * tensor's dtype as in PyTorch, plus the upstream gradient), and sums of a few dozen products
 * whose terms each carry u: 16u. */
#define F16_GRAD_TOL (16.0 / 2048)
#define BF16_GRAD_TOL (16.0 / 256)

static void check_values(const op_case *c, ct_dtype dt, uint64_t seed) {
  oc_arr host[5] = {{0}};
  ct_tensor *in[5] = {0};
  ct_assert_nonnull((void *)(intptr_t)oc_make_inputs(c, dt, CT_DEVICE_CPU, seed, host, in));
  oc_arr ref = {0};
  c->ref(host, &ref, c);
  ct_tensor *out = c->run(in, c);
  if (!out) fprintf(stderr, "case %s (%s) failed: %s\n", c->name, ct_dtype_name(dt), ct_last_error());
  ct_assert_nonnull(out);
  char s1[128], s2[128];
  int same = ct_tensor_ndim(out) == ref.ndim;
  for (int d = 0; same && d < ref.ndim; d++) same = ct_tensor_shape(out)[d] == ref.shape[d];
  if (!same) {
    fprintf(stderr, "case %s: shape %s, reference %s\n", c->name, ct_shape_str(out, s1, sizeof s1),
            ct__shape_str(ref.ndim, ref.shape, s2, sizeof s2));
    fail();
  }
  assert_int_equal(ct_tensor_dtype(out), oc_output_dtype(c, dt));
  ct_tensor *rt = ct_assert_nonnull(ct_from_host(ref.v, ref.ndim, ref.shape, CT_F64, CT_DEVICE_CPU));
  if (dt == CT_F32) ct_assert_close(out, rt, F32_ATOL, F32_RTOL);
  else if (dt == CT_F16) ct_assert_close(out, rt, F16_TOL, F16_TOL);
  else if (dt == CT_BF16) ct_assert_close(out, rt, BF16_TOL, BF16_TOL);
  else ct_assert_close(out, rt, F64_ATOL, F64_RTOL);
  ct_tensor_free(rt), ct_tensor_free(out), free(ref.v);
  oc_free_inputs(c, host, in);
}

static void test_case(void **state) {
  const op_case *c = *state;
  uint64_t seed = 0x5eed;
  for (const char *p = c->name; *p; p++) seed = seed * 131 + (unsigned char)*p;
  check_values(c, CT_F32, seed);
  check_values(c, CT_F64, seed + 1);
  if (c->grad) oc_check_grad(c, CT_DEVICE_CPU, seed + 2);
  if (c->grad) oc_check_grad_f32(c, CT_DEVICE_CPU, seed + 3, F32_GRAD_ATOL, F32_GRAD_RTOL);
  check_values(c, CT_F16, seed + 4);
  check_values(c, CT_BF16, seed + 5);
  if (c->grad) oc_check_grad_dtype(c, CT_DEVICE_CPU, seed + 6, CT_F16, F16_GRAD_TOL, F16_GRAD_TOL);
  if (c->grad) oc_check_grad_dtype(c, CT_DEVICE_CPU, seed + 7, CT_BF16, BF16_GRAD_TOL, BF16_GRAD_TOL);
}

static int has_row(const char *name, size_t len) {
  for (int i = 0; i < OC_NCASES; i++)
    if (strncmp(op_cases[i].name, name, len) == 0) return 1;
  return 0;
}

/* The table itself: every op that include/cuttle/ops.h declares (read from the header, so a new op
 * cannot be forgotten) and the view and copy ops of tensor.h appear in some row. */
static void test_table_covers_ops(void **state) {
  (void)state;
  const char *dir = getenv("CUTTLE_SOURCE_DIR");
  if (!dir) fail_msg("CUTTLE_SOURCE_DIR is not set (CTest sets it): cannot read include/cuttle/ops.h");
  char path[1024], line[512];
  snprintf(path, sizeof path, "%s/include/cuttle/ops.h", dir);
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot open %s", path);
  int declared = 0, missing = 0;
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "CT_API ct_tensor *ct_");
    if (p != line) continue;
    p += strlen("CT_API ct_tensor *ct_");
    size_t len = strcspn(p, "(");
    declared++;
    if (!has_row(p, len)) fprintf(stderr, "no row for op %.*s (include/cuttle/ops.h)\n", (int)len, p), missing++;
  }
  fclose(f);
  printf("# %d ops declared in ops.h, %d without a row\n", declared, missing);
  assert_true(declared >= 50);
  const char *views[] = {"reshape", "view", "permute", "transpose", "narrow", "slice", "expand", "squeeze", "unsqueeze",
                         "flatten", "contiguous", "cast"};
  for (size_t k = 0; k < sizeof views / sizeof views[0]; k++)
    if (!has_row(views[k], strlen(views[k]))) fprintf(stderr, "no row for op %s\n", views[k]), missing++;
  assert_int_equal(missing, 0);
}

/* Dropout in training: every output is 0 or x / (1 - p), the fraction of zeros is about p, the same
 * generator state gives the same mask, and the gradient is the mask scaled. */
static void test_dropout_training(void **state) {
  (void)state;
  const double p = 0.3;
  int64_t n = 100000;
  ct_tensor *x = ct_assert_nonnull(ct_full(1, &n, 2.0, CT_F32, CT_DEVICE_CPU));
  ct_assert_ok(ct_requires_grad_(x, 1));
  ct_generator g1 = ct_generator_new(7), g2 = ct_generator_new(7);
  ct_tensor *y = ct_assert_nonnull(ct_dropout(x, p, 1, &g1));
  ct_tensor *y2 = ct_assert_nonnull(ct_dropout(x, p, 1, &g2));
  double *v = ct_test_values(y), *v2 = ct_test_values(y2);
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; i++) {
    if (v[i] == 0) zeros++;
    else assert_true(fabs(v[i] - 2.0 / (1 - p)) < 1e-5);
    assert_true(v[i] == v2[i]);
  }
  double frac = (double)zeros / (double)n;
  assert_true(fabs(frac - p) < 0.01);
  ct_tensor *s = ct_assert_nonnull(ct_sum(y, 0, NULL, 0));
  ct_assert_ok(ct_backward(s));
  double *gv = ct_test_values(ct_grad(x));
  for (int64_t i = 0; i < n; i++) assert_true(fabs(gv[i] - (v[i] == 0 ? 0.0 : 1.0 / (1 - p))) < 1e-6);
  /* a different generator state gives a different mask */
  ct_tensor *y3 = ct_assert_nonnull(ct_dropout(x, p, 1, &g1));
  double *v3 = ct_test_values(y3);
  assert_true(memcmp(v, v3, (size_t)n * sizeof(double)) != 0);
  /* p = 1 drops everything */
  ct_tensor *y4 = ct_assert_nonnull(ct_dropout(x, 1.0, 1, NULL)), *n4 = ct_assert_nonnull(ct_norm(y4));
  assert_true(ct_item(n4) == 0.0);
  ct_tensor_free(y4), ct_tensor_free(n4);
  free(v), free(v2), free(v3), free(gv);
  ct_tensor_free(y), ct_tensor_free(y2), ct_tensor_free(y3), ct_tensor_free(s), ct_tensor_free(x);
}

/* MaxPool2d(2) has its own float32 kernel (four outputs at a time); ties and NaNs must pick the
 * same element as the general float64 kernel (and torch): the first of a tie, the last NaN. */
static void test_max_pool2x2_ties_and_nan(void **state) {
  (void)state;
  const double nan = NAN;
  /* nine 2x2 windows (rows 0-1) in a (1, 1, 2, 18) input: eight in the vector loop, one in the
   * padded remainder */
  double v[36] = {1, 1, 0, 5, nan, 2, 3, 3, -1, -1, 7, 7, 2, 9, nan, 4, nan, 1,
                  1, 1, 5, 0, 2, 1, 3, 3, -1, -1, 7, 7, 9, 2, 1, nan, 2, 3};
  int64_t sh[4] = {1, 1, 2, 18};
  ct_pool2d_opts o = {.kernel = {2, 2}};
  double *y[2], *g[2];
  ct_dtype dts[2] = {CT_F32, CT_F64};
  for (int k = 0; k < 2; k++) {
    ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 4, sh, CT_F64, CT_DEVICE_CPU));
    ct_tensor *x = ct_assert_nonnull(ct_cast(h, dts[k]));
    ct_assert_ok(ct_requires_grad_(x, 1));
    ct_tensor *out = ct_assert_nonnull(ct_max_pool2d(x, &o));
    ct_tensor *w = ct_assert_nonnull(ct_arange(1, 10, 1, dts[k], CT_DEVICE_CPU)); /* distinct upstream gradients */
    ct_tensor *wv = ct_assert_nonnull(ct_reshape(w, 4, (int64_t[]){1, 1, 1, 9}));
    ct_tensor *p = ct_assert_nonnull(ct_mul(out, wv)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    y[k] = ct_test_values(out), g[k] = ct_test_values(ct_grad(x));
    ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(wv), ct_tensor_free(w), ct_tensor_free(out), ct_tensor_free(x), ct_tensor_free(h);
  }
  for (int i = 0; i < 9; i++) assert_true(isnan(y[0][i]) ? isnan(y[1][i]) : y[0][i] == y[1][i]);
  for (int i = 0; i < 36; i++) assert_true(g[0][i] == g[1][i]);
  assert_true(g[1][0] == 1 && g[1][1] == 0 && g[1][18] == 0); /* a tie: the first */
  assert_true(isnan(y[1][2]) && g[1][4] == 3 && g[1][23] == 0); /* one NaN wins */
  assert_true(isnan(y[1][7]) && g[1][14] == 0 && g[1][33] == 8); /* the last NaN */
  assert_true(isnan(y[1][8]) && g[1][16] == 9); /* a NaN in the remainder */
  for (int k = 0; k < 2; k++) free(y[k]), free(g[k]);
}

/* Other windows (here resnet's stem pool, 3x3 stride 2 padding 1) take float32's general loop,
 * whose selects are masks on the bits: ties and NaNs as the float64 kernel and torch, the first
 * of a tie and the last NaN in row-major window order, windows overlapping. */
static void test_max_pool3x3_stride2_ties_and_nan(void **state) {
  (void)state;
  const double nan = NAN;
  double v[24] = {1, 1, 0, 5, nan, 2,  3, 3, -1, 7, 7, nan,  2, 9, 9, 4, 1, 1,  nan, 1, 5, 0, 2, 3};
  int64_t sh[4] = {1, 1, 4, 6};
  ct_pool2d_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  double *y[2], *g[2];
  ct_dtype dts[2] = {CT_F32, CT_F64};
  for (int k = 0; k < 2; k++) {
    ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 4, sh, CT_F64, CT_DEVICE_CPU));
    ct_tensor *x = ct_assert_nonnull(ct_cast(h, dts[k]));
    ct_assert_ok(ct_requires_grad_(x, 1));
    ct_tensor *out = ct_assert_nonnull(ct_max_pool2d(x, &o));
    assert_int_equal(ct_tensor_size(out, 2), 2), assert_int_equal(ct_tensor_size(out, 3), 3);
    ct_tensor *w = ct_assert_nonnull(ct_arange(1, 7, 1, dts[k], CT_DEVICE_CPU)); /* distinct upstream gradients */
    ct_tensor *wv = ct_assert_nonnull(ct_reshape(w, 4, (int64_t[]){1, 1, 2, 3}));
    ct_tensor *p = ct_assert_nonnull(ct_mul(out, wv)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    y[k] = ct_test_values(out), g[k] = ct_test_values(ct_grad(x));
    ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(wv), ct_tensor_free(w), ct_tensor_free(out), ct_tensor_free(x), ct_tensor_free(h);
  }
  for (int i = 0; i < 6; i++) assert_true(isnan(y[0][i]) ? isnan(y[1][i]) : y[0][i] == y[1][i]);
  for (int i = 0; i < 24; i++) assert_true(g[0][i] == g[1][i]);
  assert_true(y[0][0] == 3 && g[0][6] == 1 && g[0][7] == 0);   /* a tie: the first */
  assert_true(y[0][1] == 7 && g[0][9] == 2 && g[0][10] == 0);  /* 7 at (1, 3), not the 7 outside the window */
  assert_true(isnan(y[0][2]) && g[0][4] == 0 && g[0][11] == 9); /* the last NaN, chosen by two windows (3 + 6) */
  assert_true(isnan(y[0][3]) && g[0][18] == 4);                /* a NaN in the last row */
  assert_true(y[0][4] == 9 && g[0][13] == 5 && g[0][14] == 0); /* a tie across a row: the first */
  assert_true(isnan(y[0][5]));
  for (int k = 0; k < 2; k++) free(y[k]), free(g[k]);
}

/* relu as torch.relu: NaN in, NaN out, and the gradient passes at the NaN (threshold_backward
 * zeroes only where x <= 0); the same in the float32 fast path and the float64 path. */
static void test_relu_nan_like_torch(void **state) {
  (void)state;
  double v[4] = {NAN, -1, 0, 2};
  int64_t n = 4;
  ct_dtype dts[2] = {CT_F32, CT_F64};
  for (int k = 0; k < 2; k++) {
    ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 1, &n, CT_F64, CT_DEVICE_CPU));
    ct_tensor *x = ct_assert_nonnull(ct_cast(h, dts[k]));
    ct_assert_ok(ct_requires_grad_(x, 1));
    ct_tensor *y = ct_assert_nonnull(ct_relu(x));
    ct_tensor *w = ct_assert_nonnull(ct_full(1, &n, 3.0, dts[k], CT_DEVICE_CPU));
    ct_tensor *p = ct_assert_nonnull(ct_mul(y, w)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    double *yv = ct_test_values(y), *gv = ct_test_values(ct_grad(x));
    assert_true(isnan(yv[0]) && yv[1] == 0 && yv[2] == 0 && yv[3] == 2);
    assert_true(gv[0] == 3 && gv[1] == 0 && gv[2] == 0 && gv[3] == 3);
    free(yv), free(gv);
    ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(w), ct_tensor_free(y), ct_tensor_free(x), ct_tensor_free(h);
  }
}

/* Integer and bool inputs: promotion and values through the same ops. */
static void test_integer_inputs(void **state) {
  (void)state;
  int32_t a[4] = {1, -2, 3, 4};
  int64_t sh = 4;
  ct_tensor *x = ct_assert_nonnull(ct_from_host(a, 1, &sh, CT_I32, CT_DEVICE_CPU));
  ct_tensor *y = ct_assert_nonnull(ct_div(x, x));
  assert_int_equal(ct_tensor_dtype(y), CT_F32);
  ct_tensor *z = ct_assert_nonnull(ct_abs(x));
  assert_int_equal(ct_tensor_dtype(z), CT_I32);
  ct_tensor *e = ct_assert_nonnull(ct_exp(x));
  assert_int_equal(ct_tensor_dtype(e), CT_F32);
  ct_tensor *s = ct_assert_nonnull(ct_sum(x, 0, NULL, 0));
  assert_int_equal(ct_tensor_dtype(s), CT_I64);
  assert_true(ct_item(s) == 6.0);
  ct_tensor *h = ct_assert_nonnull(ct_mul_scalar(x, 0.5));
  assert_int_equal(ct_tensor_dtype(h), CT_F32);
  double *hv = ct_test_values(h);
  assert_true(hv[1] == -1.0 && hv[3] == 2.0);
  free(hv);
  ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(z), ct_tensor_free(e), ct_tensor_free(s), ct_tensor_free(h);
}

/* A convolution over zero input channels is the bias alone, as in torch.nn.functional.conv2d
 * (its scratch is empty, which once read as out of memory). */
static void test_conv2d_no_input_channels(void **state) {
  (void)state;
  ct_tensor *x = ct_assert_nonnull(ct_zeros(4, (int64_t[]){2, 0, 5, 5}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *w = ct_assert_nonnull(ct_zeros(4, (int64_t[]){3, 0, 3, 3}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *b = ct_assert_nonnull(ct_from_host((float[]){1.5f, -2.f, 0.25f}, 1, (int64_t[]){3}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *y = ct_assert_nonnull(ct_conv2d(x, w, b, NULL));
  assert_int_equal(ct_tensor_numel(y), 2 * 3 * 3 * 3);
  double *v = ct_test_values(y);
  for (int i = 0; i < 2 * 3 * 9; i++) assert_true(v[i] == (double)((float[]){1.5f, -2.f, 0.25f})[(i / 9) % 3]);
  free(v);
  ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(y);
}

/* conv2d + relu + MaxPool2d(2) in float16 and bfloat16 runs the fused kernel on the halves
 * (ct__supports(CT_K_conv2d_relu_pool2x2)) instead of casting to float32 and materializing the conv output:
 * the op's peak allocation stays below the size of that output in the half dtype alone (the
 * unfused path allocates it, and twice that again in float32). Its values equal the unfused
 * path's (conv2d, then relu_max_pool2d, in the same half dtype) bit for bit, since both compute
 * the conv in float32 the same way and rounding commutes with max; its gradients are the unfused
 * path's within the halves' gradient tolerance (a tie made by rounding may pick another winner). */
static void test_fused_conv_pool_halves(void **state) {
  (void)state;
  const int64_t N = 4, C = 3, O = 8, H = 12, W = 10; /* conv output (4, 8, 12, 10), pooled (4, 8, 6, 5) */
  ct_dtype dts[2] = {CT_F16, CT_BF16};
  double tols[2] = {F16_GRAD_TOL, BF16_GRAD_TOL};
  ct_conv2d_opts co = {.padding = {1, 1}};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  for (int k = 0; k < 2; k++) {
    ct_generator gen = ct_generator_new(11 + (uint64_t)k);
    ct_tensor *src[4] = {ct_randn(4, (int64_t[]){N, C, H, W}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(4, (int64_t[]){O, C, 3, 3}, 0, 0.5, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(1, (int64_t[]){O}, 0, 0.5, CT_F32, CT_DEVICE_CPU, &gen),
                         ct_randn(4, (int64_t[]){N, O, H / 2, W / 2}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen)};
    ct_tensor *y[2], *gr[2][3];
    for (int path = 0; path < 2; path++) { /* 0: the fused op, 1: conv2d then relu_max_pool2d */
      ct_tensor *in[4];
      for (int i = 0; i < 4; i++) {
        in[i] = ct_assert_nonnull(ct_cast(ct_assert_nonnull(src[i]), dts[k]));
        if (i < 3) ct_assert_ok(ct_requires_grad_(in[i], 1));
      }
      ct_memory_stats st;
      ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &st));
      ct_assert_ok(ct_reset_peak_memory_stats(CT_DEVICE_CPU));
      size_t before = st.allocated;
      if (path == 0) {
        y[0] = ct_assert_nonnull(ct_conv2d_relu_max_pool2d(in[0], in[1], in[2], &co, &po));
      } else {
        ct_tensor *c = ct_assert_nonnull(ct_conv2d(in[0], in[1], in[2], &co));
        y[1] = ct_assert_nonnull(ct_relu_max_pool2d(c, &po));
        ct_tensor_free(c);
      }
      ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &st));
      size_t conv_out = (size_t)(N * O * H * W) * ct_dtype_size(dts[k]);
      if (path == 0) assert_true(st.peak_allocated - before < conv_out);
      else assert_true(st.peak_allocated - before >= conv_out); /* the check above can fail */
      ct_tensor *p = ct_assert_nonnull(ct_mul(y[path], in[3])), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
      ct_assert_ok(ct_backward(s));
      for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_tensor_dtype(ct_grad(in[i])), dts[k]);
        gr[path][i] = ct_assert_nonnull(ct_cast(ct_grad(in[i]), CT_F64));
      }
      ct_tensor_free(s), ct_tensor_free(p);
      for (int i = 0; i < 4; i++) ct_tensor_free(in[i]);
    }
    assert_int_equal(ct_tensor_dtype(y[0]), dts[k]);
    ct_assert_close(y[0], y[1], 0, 0);
    for (int i = 0; i < 3; i++) ct_assert_close(gr[0][i], gr[1][i], tols[k], tols[k]);
    for (int path = 0; path < 2; path++) {
      ct_tensor_free(y[path]);
      for (int i = 0; i < 3; i++) ct_tensor_free(gr[path][i]);
    }
    for (int i = 0; i < 4; i++) ct_tensor_free(src[i]);
  }
}

/* The CPU's casts between float32 and the halves (their loops inline core/half.h's conversions)
 * give the public conversions' bits (a float16 NaN becomes a quiet float32 NaN with its payload),
 * over every float16, and over float32 bit patterns spread across the whole range (normals,
 * subnormals, ties, overflow, inf and NaN); where the compiler has _Float16 (GCC 12 on x86-64
 * does), its IEEE conversions are an independent oracle for float16. */
static void test_half_casts_match_ieee(void **state) {
  (void)state;
  int64_t nh = 65536;
  uint16_t *h = malloc((size_t)nh * 2);
  for (int64_t i = 0; i < nh; i++) h[i] = (uint16_t)i;
  ct_tensor *th = ct_assert_nonnull(ct_from_host(h, 1, &nh, CT_F16, CT_DEVICE_CPU));
  ct_tensor *tf = ct_assert_nonnull(ct_cast(th, CT_F32));
  float *f = malloc((size_t)nh * 4);
  ct_assert_ok(ct_to_host(tf, f, (size_t)nh * 4, CT_F32));
  for (int64_t i = 0; i < nh; i++) {
    float r = ct_f16_to_f32(h[i]);
    assert_memory_equal(&f[i], &r, 4);
    if ((h[i] & 0x7c00u) == 0x7c00u && (h[i] & 0x3ffu)) { /* a NaN comes out quiet, its payload kept (IEEE 754, PyTorch) */
      uint32_t b;
      memcpy(&b, &f[i], 4);
      assert_int_equal(b, ((uint32_t)(h[i] & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)(h[i] & 0x3ffu) << 13));
    }
#ifdef __FLT16_MAX__
    _Float16 x;
    memcpy(&x, &h[i], 2);
    float want = (float)x;
    if (want == want) assert_memory_equal(&f[i], &want, 4); /* NaN payloads may differ: both must be NaN */
    else assert_true(f[i] != f[i]);
#endif
  }
  free(f), ct_tensor_free(tf), ct_tensor_free(th), free(h);
  /* float32 -> float16 and bfloat16: a stride through the 2^32 patterns, plus the edges */
  int64_t nf = 1 << 20;
  uint32_t *u = malloc((size_t)nf * 4);
  for (int64_t i = 0; i < nf; i++) u[i] = (uint32_t)(i * 4099u);
  const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x477ff000u,
                           0x477fefffu, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x3f801000u, 0x3f803000u};
  for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++) u[k] = edge[k];
  ct_tensor *t32 = ct_assert_nonnull(ct_from_host(u, 1, &nf, CT_F32, CT_DEVICE_CPU));
  ct_dtype dts[2] = {CT_F16, CT_BF16};
  uint16_t *o = malloc((size_t)nf * 2);
  for (int k = 0; k < 2; k++) {
    ct_tensor *c = ct_assert_nonnull(ct_cast(t32, dts[k]));
    ct_assert_ok(ct_to_host(c, o, (size_t)nf * 2, dts[k]));
    for (int64_t i = 0; i < nf; i++) {
      float v;
      memcpy(&v, &u[i], 4);
      assert_int_equal(o[i], dts[k] == CT_F16 ? ct_f32_to_f16(v) : ct_f32_to_bf16(v));
#ifdef __FLT16_MAX__
      if (dts[k] == CT_F16 && v == v) { /* the IEEE conversion, rounding to nearest even */
        _Float16 x = (_Float16)v;
        uint16_t want;
        memcpy(&want, &x, 2);
        assert_int_equal(o[i], want);
      }
#endif
    }
    ct_tensor_free(c);
  }
  free(o), free(u), ct_tensor_free(t32);
}

/* The sum of n doubles in long double, one by one: the reference of test_sum_paths. */
static long double ref_sum(const double *v, int64_t n, int64_t stride) {
  long double s = 0;
  for (int64_t i = 0; i < n; i++) s += v[i * stride];
  return s;
}

/* The CPU's sums take two paths (src/backend/cpu/reduce.c): contiguous trailing dims in double
 * lanes, one long sum in fixed blocks across threads, and every other case by strides. Each against
 * a long double sum of the same values; the long sum alike on one thread and on two, bit for bit;
 * a sum over a transposed view (the strided path) equal to the same sum over a contiguous copy. */
static void test_sum_paths(void **state) {
  (void)state;
  ct_generator gen = ct_generator_new(11);
  /* one long float32 sum over 4 blocks and a tail, 1 and 2 threads */
  const int64_t n = 3 * 65536 + 12345;
  ct_tensor *x = ct_assert_nonnull(ct_randn(1, &n, 1, 1, CT_F32, CT_DEVICE_CPU, &gen));
  ct_tensor *x64 = ct_assert_nonnull(ct_cast(x, CT_F64));
  double *v = ct_test_values(x64);
  /* float64 and float32 sums of the same values, on 1 and 2 threads */
  double got[2][2];
  int threads = omp_get_max_threads();
  for (int t = 0; t < 2; t++) {
    omp_set_num_threads(t + 1);
    for (int k = 0; k < 2; k++) {
      ct_tensor *s = ct_assert_nonnull(ct_sum(k ? x : x64, 0, NULL, 0));
      assert_int_equal(ct_tensor_dtype(s), k ? CT_F32 : CT_F64);
      ct_assert_ok(ct_to_host(s, &got[t][k], sizeof got[t][k], CT_F64));
      ct_tensor_free(s);
    }
  }
  omp_set_num_threads(threads);
  assert_memory_equal(got[0], got[1], sizeof got[0]);
  long double want = ref_sum(v, n, 1);
  /* double accumulation: off by a few double roundings of the partial sums */
  assert_true(fabsl((long double)got[0][0] - want) <= 1e-12L * fabsl(want) + 1e-12L);
  /* the float32 sum is the same double sum, rounded once */
  assert_true(got[0][1] == (double)(float)got[0][0]);
  free(v), ct_tensor_free(x64), ct_tensor_free(x);

  /* row sums of (37, 1001) float64: over dim 1 (contiguous rows), over dim 0 (strided), and over
   * dim 0 of the transpose, which is dim 1's sum by strides */
  int64_t shp[2] = {37, 1001};
  ct_tensor *m = ct_assert_nonnull(ct_randn(2, shp, 0, 1, CT_F64, CT_DEVICE_CPU, &gen));
  double *mv = ct_test_values(m);
  ct_tensor *rows = ct_assert_nonnull(ct_sum(m, 1, (int[]){1}, 0)), *cols = ct_assert_nonnull(ct_sum(m, 1, (int[]){0}, 1));
  ct_tensor *mt = ct_assert_nonnull(ct_transpose(m, 0, 1)), *rows_t = ct_assert_nonnull(ct_sum(mt, 1, (int[]){0}, 0));
  double *rv = ct_test_values(rows), *cv = ct_test_values(cols), *rtv = ct_test_values(rows_t);
  assert_int_equal(ct_tensor_numel(rows), 37);
  assert_int_equal(ct_tensor_numel(cols), 1001);
  for (int64_t i = 0; i < 37; i++) {
    long double w = ref_sum(mv + i * 1001, 1001, 1);
    assert_true(fabsl((long double)rv[i] - w) <= 1e-12L);
    assert_true(fabsl((long double)rtv[i] - w) <= 1e-12L);
  }
  for (int64_t j = 0; j < 1001; j++) assert_true(fabsl((long double)cv[j] - ref_sum(mv + j, 37, 1001)) <= 1e-12L);
  free(rv), free(cv), free(rtv), free(mv);
  ct_tensor_free(rows), ct_tensor_free(cols), ct_tensor_free(rows_t), ct_tensor_free(mt), ct_tensor_free(m);

  /* a row of more than one block among several rows equals the same values summed alone (one long
   * sum), bit for bit; a row of a view with a storage offset (ct_narrow) takes the same path */
  int64_t two[2] = {3, 70000};
  ct_tensor *r = ct_assert_nonnull(ct_randn(2, two, 0, 1, CT_F32, CT_DEVICE_CPU, &gen));
  ct_tensor *rs = ct_assert_nonnull(ct_sum(r, 1, (int[]){1}, 0));
  double *rsv = ct_test_values(rs);
  for (int64_t i = 0; i < 3; i++) {
    ct_tensor *row = ct_assert_nonnull(ct_narrow(r, 0, i, 1));
    ct_tensor *alone = ct_assert_nonnull(ct_sum(row, 0, NULL, 0));
    double *av = ct_test_values(alone);
    assert_memory_equal(&av[0], &rsv[i], sizeof av[0]);
    free(av), ct_tensor_free(alone), ct_tensor_free(row);
  }
  free(rsv), ct_tensor_free(rs), ct_tensor_free(r);

  /* dims (2, 3) of (5, 1, 6, 7), after a size-1 dim, keepdim; and empty sums */
  int64_t s3[4] = {5, 1, 6, 7};
  ct_tensor *c = ct_assert_nonnull(ct_randn(4, s3, 0, 1, CT_F32, CT_DEVICE_CPU, &gen));
  ct_tensor *c64 = ct_assert_nonnull(ct_cast(c, CT_F64));
  double *c64v = ct_test_values(c64);
  ct_tensor *cs = ct_assert_nonnull(ct_sum(c, 2, (int[]){2, 3}, 1));
  assert_int_equal(ct_tensor_ndim(cs), 4);
  double *csv = ct_test_values(cs);
  for (int i = 0; i < 5; i++) assert_true(fabs(csv[i] - (double)(float)ref_sum(c64v + i * 42, 42, 1)) <= 1e-6 * fabs(csv[i]) + 1e-6);
  free(csv), free(c64v), ct_tensor_free(cs), ct_tensor_free(c64), ct_tensor_free(c);
  int64_t e1[2] = {5, 0}, e2[2] = {0, 5};
  ct_tensor *a = ct_assert_nonnull(ct_zeros(2, e1, CT_F32, CT_DEVICE_CPU)), *b = ct_assert_nonnull(ct_zeros(2, e2, CT_F32, CT_DEVICE_CPU));
  ct_tensor *as = ct_assert_nonnull(ct_sum(a, 1, (int[]){1}, 0)), *bs = ct_assert_nonnull(ct_sum(b, 1, (int[]){1}, 0));
  assert_int_equal(ct_tensor_numel(as), 5);
  assert_int_equal(ct_tensor_numel(bs), 0);
  double *asv = ct_test_values(as);
  for (int i = 0; i < 5; i++) assert_true(asv[i] == 0.0);
  free(asv), ct_tensor_free(as), ct_tensor_free(bs), ct_tensor_free(a), ct_tensor_free(b);
}

/* The CPU's half kernels take contiguous operands in blocks converted to float32 and back
 * (backend/cpu/half.h, CT_LP_BLOCK), other strides element by element; both must give the same
 * bits (a NaN as any NaN). Each op runs on non-dense views (transposed, narrowed tensors: the
 * element-wise path) and on their contiguous copies (the blocks: 1200 elements, two whole blocks
 * and a part), over values
 * with +-0, +-inf, NaN, subnormals and overflow at places that differ between the operands; the
 * backward kernel of every unary op alike (called directly, so that its saved operands are views
 * too), and the binary ops against a broadcast scalar, ordinary and special. */
typedef ct_tensor *(*unary_fn)(ct_tensor *);
typedef ct_tensor *(*binary_fn)(ct_tensor *, ct_tensor *);
/* A non-dense (rows, cols) view holding dense's values: a transposed, narrowed (cols + 7, rows)
 * tensor. */
static ct_tensor *half_view_of(ct_tensor *dense) {
  int64_t rows = dense->shape[0], cols = dense->shape[1], shape[2] = {cols + 7, rows};
  ct_tensor *full = ct_assert_nonnull(ct_zeros(2, shape, dense->dtype, CT_DEVICE_CPU));
  ct_tensor *v = ct_assert_nonnull(ct_narrow(ct_assert_nonnull(ct_transpose(full, 0, 1)), 1, 3, cols));
  ct_assert_ok(ct_copy_(v, dense));
  return v;
}
static const double half_specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-6, -1e-6, 7e4, -7e4, 1e39, 1e-40, 88.0, -90.0};
enum { N_HALF_SPECIALS = sizeof half_specials / sizeof half_specials[0] };
/* a dense (rows, cols) tensor of dt, random with the specials at places that depend on seed */
static ct_tensor *half_dense(ct_dtype dt, int64_t rows, int64_t cols, uint64_t seed, double scale) {
  int64_t shape[2] = {rows, cols};
  ct_generator g = ct_generator_new(seed);
  ct_tensor *r = ct_assert_nonnull(ct_randn(2, shape, 0, scale, CT_F64, CT_DEVICE_CPU, &g));
  double *v = ct_tensor_data(r);
  for (int k = 0; k < N_HALF_SPECIALS; k++) v[(k * 89 + (int64_t)seed * 31) % (rows * cols)] = half_specials[k];
  return ct_assert_nonnull(ct_cast(r, dt));
}
static void test_half_blocks_match_elementwise(void **state) {
  (void)state;
  const unary_fn un[] = {ct_neg, ct_abs, ct_exp, ct_log, ct_sqrt, ct_relu, ct_sigmoid, ct_tanh, ct_gelu, ct_silu, ct_gelu_tanh};
  const ct_unary_op un_ops[] = {CT_UNARY_NEG, CT_UNARY_ABS, CT_UNARY_EXP, CT_UNARY_LOG, CT_UNARY_SQRT, CT_UNARY_RELU,
                                CT_UNARY_SIGMOID, CT_UNARY_TANH, CT_UNARY_GELU, CT_UNARY_SILU, CT_UNARY_GELU_TANH};
  const char *un_names[] = {"neg", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "gelu", "silu", "gelu_tanh"};
  assert_int_equal(sizeof un_ops / sizeof un_ops[0], CT_UNARY_COUNT); /* every unary op */
  const binary_fn bin[] = {ct_add, ct_sub, ct_mul, ct_div, ct_pow, ct_maximum, ct_minimum};
  const char *bin_names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  const int64_t rows = 40, cols = 30, shape[2] = {rows, cols};
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = k ? CT_BF16 : CT_F16;
    ct_assert_ok(ct_scope_begin());
    ct_tensor *xd = half_dense(dt, rows, cols, 1, 3.0), *yd = half_dense(dt, rows, cols, 2, 2.0);
    ct_tensor *gd = half_dense(dt, rows, cols, 3, 1.0);
    ct_tensor *xv = half_view_of(xd), *yv = half_view_of(yd), *gv = half_view_of(gd);
    for (size_t u = 0; u < sizeof un / sizeof un[0]; u++) {
      ct_tensor *out = ct_assert_nonnull(un[u](xd));
      ct_assert_same_values(un[u](xv), out, un_names[u]);
      /* backward: g * f'(x, y) with y = f(x), every operand a view on one side */
      ct_tensor *outv = half_view_of(out), *gxd = ct_assert_nonnull(ct_empty(2, shape, dt, CT_DEVICE_CPU));
      ct_tensor *gxv = ct_assert_nonnull(ct_empty(2, shape, dt, CT_DEVICE_CPU));
      ct_assert_ok(ct__k_unary_backward(un_ops[u], gxd, gd, xd, out));
      ct_assert_ok(ct__k_unary_backward(un_ops[u], gxv, gv, xv, outv));
      char what[64];
      snprintf(what, sizeof what, "%s backward", un_names[u]);
      ct_assert_same_values(gxv, gxd, what);
    }
    for (size_t b = 0; b < sizeof bin / sizeof bin[0]; b++) {
      ct_assert_same_values(bin[b](xv, yv), bin[b](xd, yd), bin_names[b]);
      /* against a broadcast scalar: an ordinary value, then each special */
      for (int sp = -1; sp < N_HALF_SPECIALS; sp++) {
        double v = sp < 0 ? 1.7 : half_specials[sp];
        ct_tensor *s64 = ct_assert_nonnull(ct_from_host(&v, 1, (int64_t[]){1}, CT_F64, CT_DEVICE_CPU));
        ct_tensor *s = ct_assert_nonnull(ct_cast(s64, dt));
        ct_tensor *se = half_view_of(ct_assert_nonnull(ct_contiguous(ct_assert_nonnull(ct_expand(s, 2, shape)))));
        char what[64];
        snprintf(what, sizeof what, "%s with the broadcast scalar %g", bin_names[b], v);
        ct_assert_same_values(bin[b](xv, se), bin[b](xd, s), what);
      }
    }
    ct_scope_end();
  }
}

int main(void) {
  lp_dev = CT_DEVICE_CPU;
  cast_dev = CT_DEVICE_CPU;
  const struct CMUnitTest more[] = {cmocka_unit_test(test_table_covers_ops), cmocka_unit_test(test_dropout_training),
                                    cmocka_unit_test(test_max_pool2x2_ties_and_nan),
                                    cmocka_unit_test(test_max_pool3x3_stride2_ties_and_nan), cmocka_unit_test(test_relu_nan_like_torch),
                                    cmocka_unit_test(test_integer_inputs), cmocka_unit_test(test_conv2d_no_input_channels),
                                    cmocka_unit_test(test_half_casts_match_ieee), cmocka_unit_test(test_half_blocks_match_elementwise),
                                    cmocka_unit_test(test_fused_conv_pool_halves), cmocka_unit_test(test_sum_paths),
                                    LP_TESTS, CAST_TESTS};
  size_t nmore = sizeof more / sizeof more[0];
  struct CMUnitTest *tests = calloc((size_t)OC_NCASES + nmore, sizeof *tests);
  for (int i = 0; i < OC_NCASES; i++)
    tests[i] = (struct CMUnitTest){.name = op_cases[i].name, .test_func = test_case, .initial_state = (void *)&op_cases[i]};
  memcpy(tests + OC_NCASES, more, sizeof more);
  int r = _cmocka_run_group_tests("ops_cpu", tests, (size_t)OC_NCASES + nmore, NULL, NULL);
  free(tests);
  return r;
}
