/* tests/ops/test_batch_norm_cpu.c: batch norm on the CPU's kernels (src/backend/cpu/norm.c, one tape
 * node) against the composition of mean, var and elementwise ops that the front-end runs where a
 * backend lacks them (src/ops/norm.c): the composition runs on a copy of the CPU backend whose table
 * lacks batch_norm and batch_norm_backward (every backend has them; the composition stays for what
 * they do not take). Outputs, updated running statistics and the gradients of x, weight and bias, in
 * float32 and float64, for (N, C, H, W), (N, C) and (N, C, L) inputs (with 1x1 images, more channels
 * than a thread's block of sums, and inputs big enough for the OpenMP threads), with and without
 * weight and bias, with and without running statistics, in training and in eval. And the cases that
 * stay composed on the CPU, and out of memory at each allocation of the kernels' forward and
 * backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "composed_backend.h"

typedef struct {
  const char *name;
  int ndim;
  int64_t shape[4];
} bn_shape;

static const bn_shape shapes[] = {
    {"(N, C, H, W)", 4, {4, 3, 5, 6}},
    {"(N, C)", 2, {8, 5}},
    {"(N, C, L)", 3, {4, 3, 7}},
    {"(N, C, 1, 1): resnet18's layer4 at 28x28", 4, {6, 260, 1, 1}}, /* two blocks of channels */
    {"(N, C, H, W), 300 channels", 4, {3, 300, 2, 3}},
    {"(N, C, H, W), threads", 4, {16, 8, 16, 17}}, /* over the threshold of the OpenMP threads */
};

typedef struct {
  ct_tensor *x, *w, *b, *rm, *rv, *y;
} bn_run;

/* ct_batch_norm on fresh leaves of the given values, then backward of sum(y gy) */
static bn_run run(const bn_shape *sh, ct_dtype dt, int composed, const double *xv, const double *wv, const double *bv,
                  const double *rmv, const double *rvv, const double *gyv, int affine, int stats, int training) {
  int64_t C = sh->shape[1];
  bn_run r = {0};
  r.x = leaf(xv, sh->ndim, sh->shape, dt, composed, 1);
  if (affine) r.w = leaf(wv, 1, &C, dt, composed, 1), r.b = leaf(bv, 1, &C, dt, composed, 1);
  if (stats) r.rm = leaf(rmv, 1, &C, dt, composed, 0), r.rv = leaf(rvv, 1, &C, dt, composed, 0);
  r.y = ct_batch_norm(r.x, r.rm, r.rv, r.w, r.b, training, 0.3, 1e-5);
  node_then_backward(r.y, "batch_norm", composed, sh->name, gyv);
  return r;
}

static void run_free(bn_run *r) {
  ct_tensor *all[] = {r->x, r->w, r->b, r->rm, r->rv, r->y};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void check(const bn_shape *sh, ct_dtype dt, int affine, int stats, int training, unsigned seed) {
  if (!training && !stats) return; /* eval needs the running statistics */
  int f32 = dt == CT_F32;
  int64_t n = 1, C = sh->shape[1];
  for (int d = 0; d < sh->ndim; d++) n *= sh->shape[d];
  /* an offset mean, so that x - mean matters */
  double *xv = values(n, 1.0, 5.0, f32, &seed), *gyv = values(n, -1, 1, f32, &seed);
  double *wv = values(C, 0.5, 1.5, f32, &seed), *bv = values(C, -1, 1, f32, &seed);
  double *rmv = values(C, 2, 4, f32, &seed), *rvv = values(C, 0.5, 2, f32, &seed);
  bn_run k = run(sh, dt, 0, xv, wv, bv, rmv, rvv, gyv, affine, stats, training);
  bn_run c = run(sh, dt, 1, xv, wv, bv, rmv, rvv, gyv, affine, stats, training);
  printf("# %s %s%s%s %s\n", sh->name, training ? "train" : "eval", affine ? " affine" : "", stats ? " running stats" : "",
         ct_dtype_name(dt));
  double atol = f32 ? 1e-5 : 1e-12, rtol = f32 ? 1e-4 : 1e-10, gatol = f32 ? 1e-4 : 1e-11;
  assert_int_equal(ct_tensor_dtype(k.y), dt);
  ct_assert_close(k.y, c.y, atol, rtol);
  if (stats) ct_assert_close(k.rm, c.rm, atol, rtol), ct_assert_close(k.rv, c.rv, atol, rtol);
  ct_assert_close(ct_grad(k.x), ct_grad(c.x), gatol, rtol);
  if (affine) ct_assert_close(ct_grad(k.w), ct_grad(c.w), gatol, rtol), ct_assert_close(ct_grad(k.b), ct_grad(c.b), gatol, rtol);
  run_free(&k), run_free(&c);
  free(xv), free(gyv), free(wv), free(bv), free(rmv), free(rvv);
}

static void test_kernel_vs_composition(void **state) {
  (void)state;
  unsigned seed = 12345;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int dt = 0; dt < 2; dt++)
      for (int training = 1; training >= 0; training--)
        for (int affine = 1; affine >= 0; affine--)
          for (int stats = 1; stats >= 0; stats--) check(&shapes[s], dt ? CT_F64 : CT_F32, affine, stats, training, seed++);
}

/* In training, the running statistics move toward the batch's mean and unbiased variance; in eval
 * they stay as they are; under no-grad the kernels record nothing. */
static void test_running_statistics(void **state) {
  (void)state;
  int64_t xs[3] = {5, 2, 3}, C = 2;
  double xv[30];
  for (int i = 0; i < 30; i++) xv[i] = (double)((i * 7) % 11) - 2.5;
  ct_tensor *x = ct_assert_nonnull(ct_from_host(xv, 3, xs, CT_F64, CT_DEVICE_CPU));
  ct_tensor *rm = ct_assert_nonnull(ct_from_host((double[]){1, -1}, 1, &C, CT_F64, CT_DEVICE_CPU));
  ct_tensor *rv = ct_assert_nonnull(ct_from_host((double[]){2, 3}, 1, &C, CT_F64, CT_DEVICE_CPU));
  ct_no_grad_begin();
  ct_tensor *y = ct_assert_nonnull(ct_batch_norm(x, rm, rv, NULL, NULL, 1, 0.25, 0.0));
  ct_no_grad_end();
  assert_null(ct_grad_fn_name(y));
  double *r = ct_test_values(rm), *v = ct_test_values(rv);
  for (int c = 0; c < 2; c++) {
    double mean = 0, ss = 0;
    for (int n = 0; n < 5; n++)
      for (int l = 0; l < 3; l++) mean += xv[(n * 2 + c) * 3 + l];
    mean /= 15;
    for (int n = 0; n < 5; n++)
      for (int l = 0; l < 3; l++) ss += pow(xv[(n * 2 + c) * 3 + l] - mean, 2);
    assert_true(fabs(r[c] - (0.75 * (c ? -1 : 1) + 0.25 * mean)) < 1e-14);
    assert_true(fabs(v[c] - (0.75 * (c ? 3 : 2) + 0.25 * ss / 14)) < 1e-14);
  }
  ct_tensor *ye = ct_assert_nonnull(ct_batch_norm(x, rm, rv, NULL, NULL, 0, 0.25, 1e-5));
  double *r2 = ct_test_values(rm), *ev = ct_test_values(ye), *rs = ct_test_values(rv);
  for (int i = 0; i < 30; i++) {
    int c = (i / 3) % 2;
    assert_true(fabs(ev[i] - (xv[i] - r2[c]) / sqrt(rs[c] + 1e-5)) < 1e-12);
  }
  for (int c = 0; c < 2; c++) assert_true(r2[c] == r[c] && rs[c] == v[c]); /* eval leaves them */
  free(r), free(v), free(r2), free(ev), free(rs);
  ct_tensor_free(ye), ct_tensor_free(y), ct_tensor_free(rv), ct_tensor_free(rm), ct_tensor_free(x);
}

/* What the kernels do not take stays composed on the CPU: running statistics that need a gradient
 * in eval, parameters whose dtype would promote the output, strides neither contiguous nor
 * channels_last. A dense channels_last input runs on the kernels, as its (N H W, C) rows, with a
 * channels_last output equal to the contiguous input's. */
static void test_composed_cases(void **state) {
  (void)state;
  int64_t xs[4] = {2, 3, 2, 2}, C = 3;
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = (double)((i * 5) % 7) - 3;
  ct_tensor *x = ct_assert_nonnull(ct_from_host(xv, 4, xs, CT_F32, CT_DEVICE_CPU));
  ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, CT_DEVICE_CPU)), *rv = ct_assert_nonnull(ct_ones(1, &C, CT_F32, CT_DEVICE_CPU));
  ct_tensor *w64 = ct_assert_nonnull(ct_ones(1, &C, CT_F64, CT_DEVICE_CPU));
  ct_assert_ok(ct_requires_grad_(rm, 1));
  ct_tensor *y1 = ct_assert_nonnull(ct_batch_norm(x, rm, rv, NULL, NULL, 0, 0.1, 1e-5));
  assert_string_not_equal(ct_grad_fn_name(y1), "batch_norm");
  ct_assert_ok(ct_requires_grad_(rm, 0));
  ct_tensor *y2 = ct_assert_nonnull(ct_batch_norm(x, rm, rv, w64, NULL, 1, 0.1, 1e-5));
  assert_int_equal(ct_tensor_dtype(y2), CT_F64); /* float32 x, float64 weight: a float64 output, as before */
  ct_tensor *xcl = ct_assert_nonnull(ct_contiguous_format(x, CT_CHANNELS_LAST));
  ct_assert_ok(ct_requires_grad_(xcl, 1));
  ct_tensor *y3 = ct_assert_nonnull(ct_batch_norm(xcl, rm, rv, NULL, NULL, 1, 0.1, 1e-5));
  assert_true(ct_tensor_is_contiguous_format(y3, CT_CHANNELS_LAST));
  assert_string_equal(ct_grad_fn_name(y3), "batch_norm");
  ct_tensor *rm4 = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, CT_DEVICE_CPU)), *rv4 = ct_assert_nonnull(ct_ones(1, &C, CT_F32, CT_DEVICE_CPU));
  ct_tensor *y4 = ct_assert_nonnull(ct_batch_norm(x, rm4, rv4, NULL, NULL, 1, 0.1, 1e-5)); /* the contiguous x's */
  ct_assert_close(y3, y4, 1e-6, 1e-6);
  ct_tensor *xt = ct_assert_nonnull(ct_transpose(x, 2, 3)); /* (2, 3, 2, 2) with H and W strides swapped */
  ct_assert_ok(ct_requires_grad_(xt, 1));
  ct_tensor *y5 = ct_assert_nonnull(ct_batch_norm(xt, rm4, rv4, NULL, NULL, 1, 0.1, 1e-5));
  assert_string_not_equal(ct_grad_fn_name(y5), "batch_norm");
  ct_tensor *all[] = {x, rm, rv, w64, y1, y2, xcl, y3, rm4, rv4, y4, xt, y5};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* Out of memory at every allocation of a forward and backward on the kernels: CT_ENOMEM, nothing
 * leaked (LeakSanitizer in the sanitizer build), and a clean run afterwards as before. */
static void test_out_of_memory(void **state) {
  (void)state;
  int64_t xs[4] = {3, 4, 2, 5}, C = 4;
  unsigned seed = 99;
  double *xv = values(120, -2, 2, 0, &seed), *wv = values(4, 0.5, 1.5, 0, &seed);
  int64_t k = 1;
  for (;; k++) {
    ct_tensor *x = leaf(xv, 4, xs, CT_F64, 0, 1), *w = leaf(wv, 1, &C, CT_F64, 0, 1), *b = leaf(wv, 1, &C, CT_F64, 0, 1);
    ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C, CT_F64, CT_DEVICE_CPU)), *rv = ct_assert_nonnull(ct_ones(1, &C, CT_F64, CT_DEVICE_CPU));
    ct__fault_inject_alloc(k);
    ct_tensor *y = ct_batch_norm(x, rm, rv, w, b, 1, 0.1, 1e-5);
    ct_tensor *l = y ? ct_sum(y, 0, NULL, 0) : NULL;
    ct_status s = l ? ct_backward(l) : ct_last_status();
    int fired = ct__fault_alloc_fired() > 0;
    ct__fault_inject_alloc(0);
    if (fired) {
      if (s != CT_ENOMEM) fail_msg("allocation %lld failed: status %d, %s", (long long)k, s, ct_last_error());
    } else {
      ct_assert_ok(s);
      assert_non_null(ct_grad(x)), assert_non_null(ct_grad(w)), assert_non_null(ct_grad(b));
    }
    ct_clear_error();
    ct_tensor *all[] = {x, w, b, rm, rv, y, l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    if (!fired) break;
  }
  printf("# %lld allocation points\n", (long long)k - 1);
  assert_true(k > 4);
  free(xv), free(wv);
}

/* v's n values rounded to dt, in place (so that a float32 leaf of them holds a half's values) */
static void round_to(double *v, int64_t n, ct_dtype dt) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 1, &n, CT_F64, CT_DEVICE_CPU));
  ct_tensor *r = ct_assert_nonnull(ct_cast(h, dt));
  double *got = ct_test_values(r);
  memcpy(v, got, (size_t)n * sizeof *v);
  free(got), ct_tensor_free(r), ct_tensor_free(h);
}

/* x as a leaf of dtype dt (channels_last when cl), requiring grad */
static ct_tensor *half_leaf(const double *v, const bn_shape *sh, ct_dtype dt, int cl) {
  ct_tensor *t = leaf(v, sh->ndim, sh->shape, dt, 0, 0);
  if (cl) {
    ct_tensor *c = ct_assert_nonnull(ct_contiguous_format(t, CT_CHANNELS_LAST));
    ct_tensor_free(t);
    t = c;
  }
  ct_assert_ok(ct_requires_grad_(t, 1));
  return t;
}

/* A float16 or bfloat16 input with float32 parameters and statistics (autocast's batch norm) runs
 * on the CPU's mixed kernels, one node, no casts: its output, running statistics and gradients are
 * bit for bit those of the float32 kernels on the input's widened values with the output (and the
 * input's gradient) rounded once to the half type, which is what the front-end computed by casts
 * before (and still does where a backend lacks the mixed kernels). */
static void test_half_input_float32_parameters(void **state) {
  (void)state;
  unsigned seed = 777;
  /* the shapes above, and: three slabs of a thread's block of channels (S = 256: 16 channels a
   * slab); S above a slab's 4096 values (one channel a slab); a channels_last input */
  const bn_shape more[3] = {{"(N, C, H, W), slabs of 16 channels", 4, {2, 40, 16, 16}},
                            {"(N, C, H, W), S = 6400", 4, {2, 3, 80, 80}},
                            {"(N, C, H, W) channels_last", 4, {3, 5, 4, 3}}};
  const size_t nshapes = sizeof shapes / sizeof shapes[0];
  for (size_t s = 0; s < nshapes + 3; s++) {
    const bn_shape *sh = s < nshapes ? &shapes[s] : &more[s - nshapes];
    int cl = sh == &more[2];
    int64_t n = 1, C = sh->shape[1];
    for (int d = 0; d < sh->ndim; d++) n *= sh->shape[d];
    for (int h = 0; h < 2; h++)
      for (int training = 1; training >= 0; training--)
        for (int affine = 1; affine >= 0; affine--)
          for (int stats = 1; stats >= !training; stats--) { /* eval needs the running statistics */
            ct_dtype dt = h ? CT_BF16 : CT_F16;
            double *xv = values(n, 1.0, 5.0, 1, &seed), *gyv = values(n, -1, 1, 1, &seed);
            double *wv = values(C, 0.5, 1.5, 1, &seed), *bv = values(C, -1, 1, 1, &seed);
            double *rmv = values(C, 2, 4, 1, &seed), *rvv = values(C, 0.5, 2, 1, &seed);
            round_to(gyv, n, dt); /* the float32 reference's upstream gradient holds the half one's values */
            char what[160];
            snprintf(what, sizeof what, "%s %s %s%s%s", sh->name, ct_dtype_name(dt), training ? "train" : "eval",
                     affine ? " affine" : "", stats ? " running stats" : "");
            /* the mixed kernels */
            ct_tensor *x = half_leaf(xv, sh, dt, cl);
            ct_tensor *w = affine ? leaf(wv, 1, &C, CT_F32, 0, 1) : NULL, *b = affine ? leaf(bv, 1, &C, CT_F32, 0, 1) : NULL;
            ct_tensor *rm = stats ? leaf(rmv, 1, &C, CT_F32, 0, 0) : NULL, *rv = stats ? leaf(rvv, 1, &C, CT_F32, 0, 0) : NULL;
            ct_profiler_reset();
            ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
            ct_tensor *y = ct_batch_norm(x, rm, rv, w, b, training, 0.3, 1e-5);
            ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
            ct_profile_row rows[16];
            int nr = ct_profiler_rows(rows, 16);
            if (nr != 1 || strcmp(rows[0].kernel, "batch_norm") != 0)
              fail_msg("%s: the forward launched %d kernels (first %s), not the batch norm kernel alone", what, nr,
                       nr ? rows[0].kernel : "none");
            node_then_backward(y, "batch_norm", 0, what, gyv);
            assert_int_equal(ct_tensor_dtype(y), dt);
            assert_true(cl ? ct_tensor_is_contiguous_format(y, CT_CHANNELS_LAST) : ct_tensor_is_contiguous(y));
            assert_int_equal(ct_tensor_dtype(ct_grad(x)), dt);
            /* the float32 kernels on the widened values */
            ct_tensor *xh = half_leaf(xv, sh, dt, cl);
            ct_tensor *xf = ct_assert_nonnull(ct_cast(xh, CT_F32));
            if (cl) {
              ct_tensor *c = ct_assert_nonnull(ct_contiguous_format(xf, CT_CHANNELS_LAST));
              ct_tensor_free(xf);
              xf = c;
            }
            ct_tensor *xr = ct_assert_nonnull(ct_detach(xf));
            ct_assert_ok(ct_requires_grad_(xr, 1));
            ct_tensor *w2 = affine ? leaf(wv, 1, &C, CT_F32, 0, 1) : NULL, *b2 = affine ? leaf(bv, 1, &C, CT_F32, 0, 1) : NULL;
            ct_tensor *rm2 = stats ? leaf(rmv, 1, &C, CT_F32, 0, 0) : NULL, *rv2 = stats ? leaf(rvv, 1, &C, CT_F32, 0, 0) : NULL;
            ct_tensor *yr = ct_assert_nonnull(ct_batch_norm(xr, rm2, rv2, w2, b2, training, 0.3, 1e-5));
            node_then_backward(yr, "batch_norm", 0, what, gyv);
            ct_tensor *yr_h = ct_assert_nonnull(ct_cast(yr, dt)), *gxr_h = ct_assert_nonnull(ct_cast(ct_grad(xr), dt));
            ct_assert_same_values(y, yr_h, what);
            ct_assert_same_values(ct_grad(x), gxr_h, what);
            if (stats) ct_assert_same_values(rm, rm2, what), ct_assert_same_values(rv, rv2, what);
            if (affine) ct_assert_same_values(ct_grad(w), ct_grad(w2), what), ct_assert_same_values(ct_grad(b), ct_grad(b2), what);
            printf("# mixed batch norm %s: equal bit for bit\n", what);
            ct_tensor *all[] = {x, w, b, rm, rv, y, xh, xf, xr, w2, b2, rm2, rv2, yr, yr_h, gxr_h};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
            free(xv), free(gyv), free(wv), free(bv), free(rmv), free(rvv);
          }
  }
  /* an empty input in eval (the training check wants more than one value a channel): an empty
   * output, no crash in the kernels' slab sizes */
  int64_t es[3] = {2, 3, 0}, C = 3;
  ct_tensor *x = ct_assert_nonnull(ct_zeros(3, es, CT_BF16, CT_DEVICE_CPU));
  ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, CT_DEVICE_CPU)), *rv = ct_assert_nonnull(ct_ones(1, &C, CT_F32, CT_DEVICE_CPU));
  ct_tensor *y = ct_assert_nonnull(ct_batch_norm(x, rm, rv, NULL, NULL, 0, 0.1, 1e-5));
  assert_int_equal(ct_tensor_numel(y), 0);
  assert_int_equal(ct_tensor_dtype(y), CT_BF16);
  ct_tensor_free(y), ct_tensor_free(rv), ct_tensor_free(rm), ct_tensor_free(x);
}

int main(void) {
  COMPOSED_BACKEND_WITHOUT(batch_norm, batch_norm_backward);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_vs_composition),
      cmocka_unit_test(test_running_statistics),
      cmocka_unit_test(test_composed_cases),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_half_input_float32_parameters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
