/* tests/cuda/test_cuda_coverage.c: what the op table (test_ops_cuda.c) and the backend tests
 * (test_cuda_backend.c, test_cuda_api.c) leave out, on cuda:0 against the CPU or a float64
 * reference, through the public API only:
 *  - reductions (sum, mean, var, norm, max/min with indices, argmax) over 1M+ elements, whole and
 *    along either dim of a 1031 x 1017 matrix (and of its transpose), against float64 sums;
 *  - softmax, log_softmax and cross_entropy with more than 1024 columns (the block-per-row
 *    kernels), forward and backward, against the CPU;
 *  - 100 steps of the fused SGD (momentum, dampening, weight decay; Nesterov), Adam and AdamW
 *    against the same optimizer on the CPU fed the same gradients: parameters and state;
 *  - channels_last (NHWC) conv2d in float32, float16 and bfloat16, forward and backward, against
 *    the CPU's NCHW float32 on the same (rounded) inputs;
 *  - dropout with p = 0.3 over 1M elements: the fraction of zeros, the scale of the kept values, the
 *    backward's mask, and bit-equality with the CPU (the same Philox stream);
 *  - host <-> device copies of 256 MiB, pageable and pinned, both directions, bit-exact;
 *  - TF32 off: a 1024^3 float32 matmul and a conv2d within float32's error of a float64 reference;
 *  - the GradScaler's unscale_ through the backend's fused amp_unscale_ kernel (the profiler counts
 *    its launches) over a float32 gradient of 4M+ elements and a float64 one: bit for bit the CPU's
 *    and the formula's (a NaN as any NaN), an inf or NaN anywhere skips the step, and no
 *    synchronization until the step reads the flag.
 * Every measured error is printed ("# ..."), so the GPU log shows how close each case came.
 *
 * Exits 77 (skipped, the reason printed) without a GPU. CUTTLE_TEST_DEVICE=opencl:0 (or any device
 * name) runs the same comparisons on that device instead: how the test logic was checked on PoCL
 * where no GPU exists (the TF32 case then only checks float32, as nothing else has TF32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static ct_device D = {CT_CUDA, 0}; /* the device under test */

#define NEED_DEVICE()                                                                               \
  do {                                                                                              \
    if (!ct_device_available(D)) {                                                                  \
      printf("# skipped %s: no CUDA device\n", __func__);                                           \
      skip();                                                                                       \
    }                                                                                               \
  } while (0)

/* ---------------------------------------------------------------- helpers */

/* a copy of t on D (a copy even when D is the CPU, so that CUTTLE_TEST_DEVICE=cpu checks the harness) */
static ct_tensor *dev(ct_tensor *t) { return ct_assert_nonnull(ct_to(t, D, CT_COPY)); }

static double max_abs(const double *v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
  return m;
}

/* Every element of got within atol + rtol |ref| (same shape); prints the worst errors. */
static void check_close(const char *what, ct_tensor *got, ct_tensor *ref, double atol, double rtol) {
  ct_assert_nonnull(got);
  ct_assert_nonnull(ref);
  assert_int_equal(ct_tensor_numel(got), ct_tensor_numel(ref));
  assert_int_equal(ct_tensor_ndim(got), ct_tensor_ndim(ref));
  for (int d = 0; d < ct_tensor_ndim(ref); d++) assert_int_equal(ct_tensor_shape(got)[d], ct_tensor_shape(ref)[d]);
  int64_t n = ct_tensor_numel(ref), worst = -1;
  double *a = ct_test_values(got), *b = ct_test_values(ref);
  double max_err = 0, max_rel = 0, worst_ratio = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    if (isnan(a[i]) != isnan(b[i])) e = INFINITY;
    else if (isnan(a[i])) e = 0;
    double ratio = e == 0 ? 0 : e / (atol + rtol * fabs(b[i]));
    if (!(e <= atol + rtol * fabs(b[i])) && (worst < 0 || ratio > worst_ratio)) worst = i;
    if (!(ratio <= worst_ratio)) worst_ratio = isnan(ratio) ? INFINITY : ratio;
    max_err = fmax(max_err, e);
    if (b[i] != 0) max_rel = fmax(max_rel, e / fabs(b[i]));
  }
  printf("# %-44s max abs err %.3g (max |ref| %.3g), max rel err %.3g, worst err/tol %.3g (atol %.3g, rtol %.3g)\n", what,
         max_err, max_abs(b, n), max_rel, worst_ratio, atol, rtol);
  if (worst >= 0)
    fprintf(stderr, "%s: not close at flat index %lld: %.10g vs %.10g (atol %g, rtol %g)\n", what, (long long)worst,
            a[worst], b[worst], atol, rtol);
  free(a), free(b);
  if (worst >= 0) fail();
}

/* check_close with atol = tol * max |ref| and rtol = tol: a tolerance relative to the tensor's scale,
 * for results in which cancellation makes some elements near zero. */
static void check_scaled(const char *what, ct_tensor *got, ct_tensor *ref, double tol) {
  double *b = ct_test_values(ref);
  double m = max_abs(b, ct_tensor_numel(ref));
  free(b);
  check_close(what, got, ref, tol * (m > 0 ? m : 1), tol);
}

/* ---------------------------------------------------------------- reductions */

static void check_scalar(const char *what, double got, double ref, double tol) {
  double e = fabs(got - ref);
  printf("# %-44s %.10g vs float64 %.10g: abs err %.3g, allowed %.3g\n", what, got, ref, e, tol);
  assert_true(e <= tol);
}

static void test_reductions_1m(void **state) {
  (void)state;
  NEED_DEVICE();
  ct_scope_begin();
  ct_generator g = ct_generator_new(101);
  int64_t n = (1 << 20) + 37;
  ct_tensor *xc = ct_assert_nonnull(ct_rand(1, &n, -1.0, 3.0, CT_F32, CT_DEVICE_CPU, &g)); /* nonzero mean */
  ct_tensor *x = dev(xc);
  double *v = ct_test_values(xc);
  double sum = 0, sumabs = 0, sumsq = 0, mx = -INFINITY, mn = INFINITY;
  int64_t imx = 0, imn = 0;
  for (int64_t i = 0; i < n; i++) {
    sum += v[i], sumabs += fabs(v[i]), sumsq += v[i] * v[i];
    if (v[i] > mx) mx = v[i], imx = i;
    if (v[i] < mn) mn = v[i], imn = i;
  }
  double mean = sum / (double)n, var = 0;
  for (int64_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
  var /= (double)(n - 1);
  free(v);
  /* float32 accumulation in blocks and a tree: errors far below 1e-5 of sum |x| (a sequential
   * float32 loop over 1M elements would reach about 2e-5) */
  const double tol = 1e-5;
  check_scalar("sum of 1M+37 float32", ct_item(ct_sum(x, 0, NULL, 0)), sum, tol * sumabs);
  check_scalar("mean of 1M+37 float32", ct_item(ct_mean(x, 0, NULL, 0)), mean, tol * sumabs / (double)n);
  check_scalar("var (unbiased) of 1M+37 float32", ct_item(ct_var(x, 0, NULL, 1, 0)), var, tol * var);
  check_scalar("norm of 1M+37 float32", ct_item(ct_norm(x)), sqrt(sumsq), tol * sqrt(sumsq));
  ct_tensor *imax = NULL, *imin = NULL;
  check_scalar("max of 1M+37 float32", ct_item(ct_max(x, 0, 0, &imax)), mx, 0);
  check_scalar("min of 1M+37 float32", ct_item(ct_min(x, 0, 0, &imin)), mn, 0);
  assert_int_equal((int64_t)ct_item(imax), imx);
  assert_int_equal((int64_t)ct_item(imin), imn);
  assert_int_equal((int64_t)ct_item(ct_argmax(x, 0, 0)), imx);

  /* along each dim of a matrix, and of its transpose (a strided input) */
  int64_t s2[2] = {1031, 1017};
  ct_tensor *mc = ct_assert_nonnull(ct_rand(2, s2, -1.0, 3.0, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *m = dev(mc);
  double *mv = ct_test_values(mc);
  double *col = calloc((size_t)s2[1], sizeof *col), *colabs = calloc((size_t)s2[1], sizeof *colabs);
  double *row = calloc((size_t)s2[0], sizeof *row), *rowabs = calloc((size_t)s2[0], sizeof *rowabs);
  double *rowmax = malloc((size_t)s2[0] * sizeof *rowmax);
  int64_t *rowarg = malloc((size_t)s2[0] * sizeof *rowarg);
  for (int64_t i = 0; i < s2[0]; i++) {
    rowmax[i] = -INFINITY, rowarg[i] = 0;
    for (int64_t j = 0; j < s2[1]; j++) {
      double a = mv[i * s2[1] + j];
      col[j] += a, colabs[j] += fabs(a), row[i] += a, rowabs[i] += fabs(a);
      if (a > rowmax[i]) rowmax[i] = a, rowarg[i] = j;
    }
  }
  int d0[1] = {0}, d1[1] = {1};
  double *sc = ct_test_values(ct_sum(m, 1, d0, 0)), *sr = ct_test_values(ct_sum(m, 1, d1, 0));
  double *st = ct_test_values(ct_sum(ct_transpose(m, 0, 1), 1, d1, 0)); /* = column sums */
  double *mr = ct_test_values(ct_mean(m, 1, d1, 1));
  ct_tensor *ri = NULL;
  double *xr = ct_test_values(ct_max(m, 1, 0, &ri));
  double *xi = ct_test_values(ri);
  double wc = 0, wr = 0, wt = 0, wm = 0;
  for (int64_t j = 0; j < s2[1]; j++) {
    wc = fmax(wc, fabs(sc[j] - col[j]) / colabs[j]);
    wt = fmax(wt, fabs(st[j] - col[j]) / colabs[j]);
  }
  int max_ok = 1;
  for (int64_t i = 0; i < s2[0]; i++) {
    wr = fmax(wr, fabs(sr[i] - row[i]) / rowabs[i]);
    wm = fmax(wm, fabs(mr[i] - row[i] / (double)s2[1]) / (rowabs[i] / (double)s2[1]));
    if (xr[i] != rowmax[i] || (int64_t)xi[i] != rowarg[i]) max_ok = 0;
  }
  printf("# 1031x1017 sums, err / sum|x|: over dim 0 %.3g, dim 1 %.3g, transposed %.3g, mean dim 1 %.3g (allowed %.3g); "
         "row max and argmax %s\n", wc, wr, wt, wm, tol, max_ok ? "exact" : "DIFFER");
  assert_true(wc <= tol && wr <= tol && wt <= tol && wm <= tol);
  assert_true(max_ok);
  free(mv), free(col), free(colabs), free(row), free(rowabs), free(rowmax), free(rowarg);
  free(sc), free(sr), free(st), free(mr), free(xr), free(xi);
  ct_scope_end();
}

/* ---------------------------------------------------------------- softmax family, > 1024 columns */

static const int64_t WIDE[][2] = {{8, 3000}, {3, 5000}, {2, 1025}, {4, 1024}};

static void test_softmax_wide(void **state) {
  (void)state;
  NEED_DEVICE();
  for (size_t k = 0; k < sizeof WIDE / sizeof WIDE[0]; k++) {
    for (int log_ = 0; log_ < 2; log_++) {
      ct_scope_begin();
      ct_generator g = ct_generator_new(200 + k);
      ct_tensor *xc = ct_assert_nonnull(ct_randn(2, WIDE[k], 0.0, 3.0, CT_F32, CT_DEVICE_CPU, &g));
      ct_tensor *gy = ct_assert_nonnull(ct_randn(2, WIDE[k], 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g));
      ct_tensor *xd = dev(xc), *gyd = dev(gy);
      ct_assert_ok(ct_requires_grad_(xc, 1));
      ct_assert_ok(ct_requires_grad_(xd, 1));
      ct_tensor *yc = log_ ? ct_log_softmax(xc, -1) : ct_softmax(xc, -1);
      ct_tensor *yd = log_ ? ct_log_softmax(xd, 1) : ct_softmax(xd, 1);
      char what[96];
      snprintf(what, sizeof what, "%s (%lld, %lld) forward", log_ ? "log_softmax" : "softmax", (long long)WIDE[k][0],
               (long long)WIDE[k][1]);
      /* float32 exp on each side (CUDA's expf is within 2 ulp): 1e-5 relative per element */
      check_close(what, yd, yc, log_ ? 1e-5 : 1e-12, 1e-5);
      ct_assert_ok(ct_backward(ct_sum(ct_mul(yc, gy), 0, NULL, 0)));
      ct_assert_ok(ct_backward(ct_sum(ct_mul(yd, gyd), 0, NULL, 0)));
      snprintf(what, sizeof what, "%s (%lld, %lld) backward", log_ ? "log_softmax" : "softmax", (long long)WIDE[k][0],
               (long long)WIDE[k][1]);
      check_scaled(what, ct_grad(xd), ct_grad(xc), 1e-5);
      ct_scope_end();
    }
  }
}

static void test_cross_entropy_wide(void **state) {
  (void)state;
  NEED_DEVICE();
  for (size_t k = 0; k < 3; k++) {
    const ct_reduction reds[4] = {CT_REDUCTION_MEAN, CT_REDUCTION_SUM, CT_REDUCTION_NONE, CT_REDUCTION_MEAN};
    const double smooth[4] = {0.0, 0.0, 0.0, 0.1};
    const char *names[4] = {"mean", "sum", "none", "mean, smoothing 0.1"};
    for (int r = 0; r < 4; r++) {
      ct_scope_begin();
      ct_generator g = ct_generator_new(300 + k);
      int64_t N = WIDE[k][0], C = WIDE[k][1];
      ct_tensor *xc = ct_assert_nonnull(ct_randn(2, WIDE[k], 0.0, 2.0, CT_F32, CT_DEVICE_CPU, &g));
      ct_tensor *tc = ct_assert_nonnull(ct_randint(1, &N, 0, C, CT_I64, CT_DEVICE_CPU, &g));
      ct_tensor *xd = dev(xc), *td = dev(tc);
      ct_assert_ok(ct_requires_grad_(xc, 1));
      ct_assert_ok(ct_requires_grad_(xd, 1));
      ct_tensor *lc = ct_assert_nonnull(ct_cross_entropy(xc, tc, reds[r], smooth[r]));
      ct_tensor *ld = ct_assert_nonnull(ct_cross_entropy(xd, td, reds[r], smooth[r]));
      char what[96];
      snprintf(what, sizeof what, "cross_entropy (%lld, %lld) %s", (long long)N, (long long)C, names[r]);
      check_close(what, ld, lc, 1e-5, 1e-5);
      if (reds[r] == CT_REDUCTION_NONE) { /* a weighted sum, so every row's gradient differs */
        ct_tensor *w = ct_assert_nonnull(ct_rand(1, &N, 0.5, 1.5, CT_F32, CT_DEVICE_CPU, &g));
        lc = ct_sum(ct_mul(lc, w), 0, NULL, 0), ld = ct_sum(ct_mul(ld, dev(w)), 0, NULL, 0);
      }
      ct_assert_ok(ct_backward(lc));
      ct_assert_ok(ct_backward(ld));
      snprintf(what, sizeof what, "cross_entropy (%lld, %lld) %s backward", (long long)N, (long long)C, names[r]);
      check_scaled(what, ct_grad(xd), ct_grad(xc), 1e-5);
      ct_scope_end();
    }
  }
}

/* ---------------------------------------------------------------- fused optimizers */

#define OPT_MAX_PARAMS 8

/* 100 steps of opts on a Linear(257, 129) on the CPU and on D, from the same initial parameters
 * and with the same gradients (loss = sum_i sum(p_i * c_i) with c_i ~ N(0, 1) drawn on the CPU each
 * step, so the gradient is exactly c_i on both sides); the learning rate halves at step 50. */
static void run_optimizer(const char *name, ct_optim_opts opts) {
  ct_generator g1 = ct_generator_new(7), g2 = ct_generator_new(7);
  ct_module *mc = ct_assert_nonnull(ct_linear_new(257, 129, 1, CT_DEVICE_CPU, &g1));
  ct_module *md = ct_assert_nonnull(ct_linear_new(257, 129, 1, CT_DEVICE_CPU, &g2));
  ct_assert_ok(ct_module_to(md, D));
  ct_named_tensor pc[OPT_MAX_PARAMS], pd[OPT_MAX_PARAMS];
  int np = ct_module_named_tensors(mc, 0, pc, OPT_MAX_PARAMS);
  assert_int_equal(np, 2);
  assert_int_equal(ct_module_named_tensors(md, 0, pd, OPT_MAX_PARAMS), np);
  ct_tensor *init[OPT_MAX_PARAMS];
  for (int i = 0; i < np; i++) {
    assert_true(ct_tensor_device(pd[i].tensor).kind == D.kind);
    check_close("initial parameters", pd[i].tensor, pc[i].tensor, 0, 0);
    init[i] = ct_assert_nonnull(ct_to(pc[i].tensor, CT_DEVICE_CPU, CT_COPY));
  }
  ct_optimizer *oc = ct_assert_nonnull(ct_optimizer_new(mc, &opts));
  ct_optimizer *od = ct_assert_nonnull(ct_optimizer_new(md, &opts));
  ct_generator gg = ct_generator_new(99);
  for (int step = 0; step < 100; step++) {
    if (step == 50) {
      ct_optimizer_set_lr(oc, ct_optimizer_lr(oc) * 0.5);
      ct_optimizer_set_lr(od, ct_optimizer_lr(od) * 0.5);
    }
    ct_scope_begin();
    ct_tensor *lc = NULL, *ld = NULL;
    for (int i = 0; i < np; i++) {
      ct_tensor *c = ct_randn(ct_tensor_ndim(pc[i].tensor), ct_tensor_shape(pc[i].tensor), 0.0, 1.0, CT_F32,
                              CT_DEVICE_CPU, &gg);
      ct_tensor *tc = ct_sum(ct_mul(pc[i].tensor, c), 0, NULL, 0), *td = ct_sum(ct_mul(pd[i].tensor, dev(c)), 0, NULL, 0);
      lc = lc ? ct_add(lc, tc) : tc, ld = ld ? ct_add(ld, td) : td;
    }
    ct_assert_ok(ct_backward(ct_assert_nonnull(lc)));
    ct_assert_ok(ct_backward(ct_assert_nonnull(ld)));
    ct_assert_ok(ct_optimizer_step(oc));
    ct_assert_ok(ct_optimizer_step(od));
    ct_optimizer_zero_grad(oc);
    ct_optimizer_zero_grad(od);
    ct_scope_end();
  }
  assert_int_equal(ct_optimizer_steps(od), 100);
  char what[512];
  for (int i = 0; i < np; i++) {
    /* the run moved the parameters (the comparison is not of untouched values) */
    double *a = ct_test_values(init[i]), *b = ct_test_values(pc[i].tensor);
    double moved = 0;
    for (int64_t j = 0; j < ct_tensor_numel(init[i]); j++) moved = fmax(moved, fabs(a[j] - b[j]));
    free(a), free(b);
    printf("# %s: %s moved by up to %.3g in 100 steps\n", name, pc[i].name, moved);
    assert_true(moved > 1e-2);
    snprintf(what, sizeof what, "%.100s: %.190s after 100 steps", name, pc[i].name);
    check_scaled(what, pd[i].tensor, pc[i].tensor, 1e-5);
    ct_tensor_free(init[i]);
  }
  ct_named_tensor sc[2 * OPT_MAX_PARAMS], sd[2 * OPT_MAX_PARAMS];
  int ns = ct_optimizer_named_state(oc, sc, 2 * OPT_MAX_PARAMS);
  assert_int_equal(ct_optimizer_named_state(od, sd, 2 * OPT_MAX_PARAMS), ns);
  assert_true(ns >= (opts.kind == CT_OPTIM_SGD ? np : 2 * np));
  for (int i = 0; i < ns; i++) {
    assert_string_equal(sc[i].name, sd[i].name);
    snprintf(what, sizeof what, "%.100s: %.300s", name, sc[i].name);
    check_scaled(what, sd[i].tensor, sc[i].tensor, 1e-5);
  }
  ct_optimizer_free(oc), ct_optimizer_free(od);
  ct_module_free(mc), ct_module_free(md);
}

static void test_optimizers_100_steps(void **state) {
  (void)state;
  NEED_DEVICE();
  run_optimizer("SGD momentum 0.9 dampening 0.1 wd 1e-2",
                (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.01, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2});
  run_optimizer("SGD nesterov momentum 0.9 wd 5e-3",
                (ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.01, .momentum = 0.9, .nesterov = 1, .weight_decay = 5e-3});
  run_optimizer("Adam wd 1e-2 (L2)", (ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3, .weight_decay = 1e-2});
  run_optimizer("AdamW wd 5e-2", (ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = 1e-3, .weight_decay = 5e-2});
}

/* ---------------------------------------------------------------- channels_last conv2d */

/* conv2d on D with x and w channels_last in dtype dt, against the CPU's NCHW float32 conv2d of the
 * same values (the inputs rounded to dt first, so only the computation and the output's rounding
 * differ); forward and the gradients of x, w and b. */
static void conv_nhwc_case(ct_dtype dt, const ct_conv2d_opts *o, const char *cfg, double tol) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(400 + (uint64_t)dt);
  int64_t xs[4] = {2, 8, 13, 11}, ws[4] = {16, 8, 3, 3}, bs[1] = {16};
  /* the inputs in dt on the CPU, and their exact float32 values for the reference */
  ct_tensor *x16 = ct_cast(ct_rand(4, xs, -1, 1, CT_F32, CT_DEVICE_CPU, &g), dt);
  ct_tensor *w16 = ct_cast(ct_rand(4, ws, -0.5, 0.5, CT_F32, CT_DEVICE_CPU, &g), dt);
  ct_tensor *b16 = ct_cast(ct_rand(1, bs, -0.5, 0.5, CT_F32, CT_DEVICE_CPU, &g), dt);
  /* on the device: channels_last leaves (made before anything on the CPU requires grad) */
  ct_tensor *xd = ct_assert_nonnull(ct_contiguous_format(dev(x16), CT_CHANNELS_LAST));
  ct_tensor *wd = ct_assert_nonnull(ct_contiguous_format(dev(w16), CT_CHANNELS_LAST));
  ct_tensor *bd = dev(b16);
  /* the CPU's leaves (for float32 the same tensors as x16, w16, b16) */
  ct_tensor *xr = ct_cast(x16, CT_F32), *wr = ct_cast(w16, CT_F32), *br = ct_cast(b16, CT_F32);
  ct_assert_nonnull(xr), ct_assert_nonnull(wr), ct_assert_nonnull(br);
  ct_assert_ok(ct_requires_grad_(xr, 1));
  ct_assert_ok(ct_requires_grad_(wr, 1));
  ct_assert_ok(ct_requires_grad_(br, 1));
  ct_tensor *yr = ct_assert_nonnull(ct_conv2d(xr, wr, br, o));
  assert_true(ct_tensor_is_contiguous_format(xd, CT_CHANNELS_LAST));
  assert_true(ct_tensor_is_contiguous_format(wd, CT_CHANNELS_LAST));
  ct_assert_ok(ct_requires_grad_(xd, 1));
  ct_assert_ok(ct_requires_grad_(wd, 1));
  ct_assert_ok(ct_requires_grad_(bd, 1));
  ct_tensor *yd = ct_assert_nonnull(ct_conv2d(xd, wd, bd, o));
  assert_int_equal(ct_tensor_dtype(yd), dt);
  /* tensor.h: conv2d gives its result in the format its input suggests. float32 does (the NHWC
   * kernels ran). float16 and bfloat16 compute in float32 channels_last (src/ops/conv.c passes
   * ct__compute_dtype to ct__conv2d_channels_last) and come back through ct_cast, which makes a
   * row-major copy: said here, not failed, until the library keeps the format */
  if (ct_tensor_suggest_memory_format(yd) != CT_CHANNELS_LAST) {
    printf("# NOTE: conv2d of channels_last %s inputs gave a row-major (NCHW) result, not channels_last\n", ct_dtype_name(dt));
    assert_true(dt != CT_F32);
  }
  char what[128];
  snprintf(what, sizeof what, "conv2d NHWC %s %s forward", ct_dtype_name(dt), cfg);
  check_scaled(what, yd, yr, tol);
  /* backward from a fixed upstream gradient gy (in dt, NCHW on the device) */
  ct_tensor *gy16 = ct_cast(ct_rand(4, ct_tensor_shape(yr), -1, 1, CT_F32, CT_DEVICE_CPU, &g), dt);
  ct_tensor *gyr = ct_cast(gy16, CT_F32);
  ct_assert_ok(ct_backward(ct_sum(ct_mul(yr, gyr), 0, NULL, 0)));
  ct_assert_ok(ct_backward(ct_sum(ct_mul(yd, dev(gy16)), 0, NULL, 0)));
  const char *names[3] = {"grad x", "grad w", "grad b"};
  ct_tensor *gd[3] = {ct_grad(xd), ct_grad(wd), ct_grad(bd)}, *gr[3] = {ct_grad(xr), ct_grad(wr), ct_grad(br)};
  for (int i = 0; i < 3; i++) {
    ct_assert_nonnull(gd[i]);
    assert_int_equal(ct_tensor_dtype(gd[i]), dt);
    snprintf(what, sizeof what, "conv2d NHWC %s %s %s", ct_dtype_name(dt), cfg, names[i]);
    check_scaled(what, gd[i], gr[i], tol);
  }
  ct_scope_end();
}

static void test_conv2d_channels_last(void **state) {
  (void)state;
  NEED_DEVICE();
  const ct_conv2d_opts same = {.padding = {1, 1}}, strided = {.stride = {2, 2}, .padding = {1, 0}, .dilation = {1, 2}};
  /* float32 with TF32 off: float32 rounding; float16 / bfloat16: the output's rounding (2^-11,
   * 2^-8 relative) over a float32 accumulation, with room for cuDNN's algorithms */
  const ct_dtype dts[3] = {CT_F32, CT_F16, CT_BF16};
  const double tols[3] = {1e-5, 2e-3, 1.6e-2};
  for (int i = 0; i < 3; i++) {
    conv_nhwc_case(dts[i], &same, "3x3 pad 1", tols[i]);
    conv_nhwc_case(dts[i], &strided, "3x3 stride 2 pad (1,0) dil (1,2)", tols[i]);
  }
}

/* ---------------------------------------------------------------- dropout */

static void test_dropout(void **state) {
  (void)state;
  NEED_DEVICE();
  ct_scope_begin();
  const double p = 0.3;
  int64_t n = 1 << 20;
  ct_generator g = ct_generator_new(500);
  ct_tensor *xc = ct_assert_nonnull(ct_rand(1, &n, 0.5, 1.5, CT_F32, CT_DEVICE_CPU, &g)); /* never zero */
  ct_tensor *xd = dev(xc);
  ct_assert_ok(ct_requires_grad_(xc, 1));
  ct_assert_ok(ct_requires_grad_(xd, 1));
  ct_generator gc = ct_generator_new(501), gd = ct_generator_new(501);
  ct_tensor *yc = ct_assert_nonnull(ct_dropout(xc, p, 1, &gc));
  ct_tensor *yd = ct_assert_nonnull(ct_dropout(xd, p, 1, &gd));
  assert_true(gc.offset == gd.offset);
  ct_assert_ok(ct_backward(ct_sum(yd, 0, NULL, 0)));
  ct_assert_ok(ct_backward(ct_sum(yc, 0, NULL, 0)));
  double *x = ct_test_values(xc), *y = ct_test_values(yd), *gx = ct_test_values(ct_grad(xd));
  const double scale = (double)(float)(1.0 / (1.0 - p));
  int64_t zeros = 0, bad_scale = 0, bad_mask = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (y[i] == 0) {
      zeros++;
      if (gx[i] != 0) bad_mask++;
    } else {
      double r = fabs(y[i] / x[i] - scale) / scale;
      worst = fmax(worst, r);
      if (r > 3e-7) bad_scale++;
      if (fabs(gx[i] - scale) > 3e-7 * scale) bad_mask++;
    }
  }
  double frac = (double)zeros / (double)n, sigma = sqrt(p * (1 - p) / (double)n);
  printf("# dropout p=%.1f over %lld: zeros %.5f (%.2f sigma from p), kept/x rel err to 1/(1-p) %.3g, %lld bad scales, "
         "%lld gradients off the mask\n", p, (long long)n, frac, (frac - p) / sigma, worst, (long long)bad_scale,
         (long long)bad_mask);
  assert_true(fabs(frac - p) < 5 * sigma);
  assert_int_equal(bad_scale, 0);
  assert_int_equal(bad_mask, 0);
  free(x), free(y), free(gx);
  /* the same Philox stream as the CPU: the same mask, the same values */
  check_close("dropout vs the CPU's (same seed)", yd, yc, 0, 2.5e-7);
  check_close("dropout grad vs the CPU's", ct_grad(xd), ct_grad(xc), 0, 2.5e-7);
  /* eval mode: x itself */
  ct_tensor *e = ct_assert_nonnull(ct_dropout(xd, p, 0, &gd));
  check_close("dropout in eval mode", e, xd, 0, 0);
  ct_scope_end();
}

/* ---------------------------------------------------------------- 256 MiB copies */

static void fill_pattern(uint32_t *a, int64_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5; /* xorshift32 */
    a[i] = s ^ (uint32_t)i;
  }
}

static void test_copies_256mib(void **state) {
  (void)state;
  NEED_DEVICE();
  const int64_t n = (int64_t)64 << 20; /* 64 Mi int32: 256 MiB */
  const size_t bytes = (size_t)n * 4;
  uint32_t *src = malloc(bytes), *back = malloc(bytes);
  assert_non_null(src), assert_non_null(back);
  fill_pattern(src, n, 1);
  /* pageable: ct_from_host up, ct_to_host down */
  ct_tensor *a = ct_assert_nonnull(ct_from_host(src, 1, &n, CT_I32, D));
  memset(back, 0, bytes);
  ct_assert_ok(ct_to_host(a, back, bytes, CT_I32));
  int ok1 = memcmp(src, back, bytes) == 0;
  /* pinned and non-blocking both ways, through a device-to-device copy */
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned_for(D, 1, &n, CT_I32));
  memcpy(ct_tensor_data(p), src, bytes);
  ct_tensor *b = ct_assert_nonnull(ct_to(p, D, CT_NON_BLOCKING));
  ct_tensor *c = ct_assert_nonnull(ct_to(b, D, CT_COPY));
  ct_tensor *h = ct_assert_nonnull(ct_to(c, CT_DEVICE_CPU, CT_NON_BLOCKING));
  ct_assert_ok(ct_synchronize(D));
  int ok2 = memcmp(src, ct_tensor_data(h), bytes) == 0;
  /* the two uploads agree on the device, element by element */
  ct_tensor *ne = ct_assert_nonnull(ct_ne(a, c));
  ct_tensor *nes = ct_assert_nonnull(ct_sum(ne, 0, NULL, 0));
  double differ = ct_item(nes);
  /* the same bits as float32 (inf and NaN made finite), through CPU tensors and blocking ct_to both ways */
  for (int64_t i = 0; i < n; i++)
    if (((src[i] >> 23) & 0xffu) == 0xffu) src[i] &= 0xbfffffffu; /* inf/NaN: clear the top exponent bit */
  ct_tensor *fc = ct_assert_nonnull(ct_from_host(src, 1, &n, CT_F32, CT_DEVICE_CPU));
  ct_tensor *fd = ct_assert_nonnull(ct_to(fc, D, 0));
  ct_tensor *fh = ct_assert_nonnull(ct_to(fd, CT_DEVICE_CPU, 0));
  int ok3 = memcmp(ct_tensor_data(fc), ct_tensor_data(fh), bytes) == 0;
  printf("# 256 MiB round trips: pageable %s, pinned non-blocking via a device copy %s, float32 blocking %s; "
         "device elements differing between the uploads: %.0f\n", ok1 ? "bit-exact" : "DIFFER",
         ok2 ? "bit-exact" : "DIFFER", ok3 ? "bit-exact" : "DIFFER", differ);
  assert_true(ok1 && ok2 && ok3);
  assert_true(differ == 0);
  ct_tensor_free(a), ct_tensor_free(p), ct_tensor_free(b), ct_tensor_free(c), ct_tensor_free(h);
  ct_tensor_free(ne), ct_tensor_free(nes), ct_tensor_free(fc), ct_tensor_free(fd), ct_tensor_free(fh);
  free(src), free(back);
  /* give the cached 256 MiB blocks back (pinned and device), so that a leak check at exit
   * (compute-sanitizer --leak-check full) does not count them */
  ct_assert_ok(ct_empty_cache(D));
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
}

/* ---------------------------------------------------------------- TF32 off means float32 */

/* max |got - ref| / max |ref|: float32 with K ~ 1000 terms of scale 1 stays near 1e-6 (rounding errors
 * grow like sqrt(K) u), TF32 (10-bit mantissa, u = 2^-11) lands near 5e-4. */
static double normwise_err(ct_tensor *got, ct_tensor *ref) {
  int64_t n = ct_tensor_numel(ref);
  assert_int_equal(ct_tensor_numel(got), n);
  double *a = ct_test_values(got), *b = ct_test_values(ref);
  double e = 0, m = max_abs(b, n);
  for (int64_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
  free(a), free(b);
  return e / m;
}

static void test_tf32_off_is_float32(void **state) {
  (void)state;
  NEED_DEVICE();
  const double tol = 1e-5; /* float32 meets it with room to spare; TF32 misses it by far */
  ct_scope_begin();
  ct_generator g = ct_generator_new(600);
  int64_t s[2] = {1024, 1024};
  ct_tensor *a = ct_rand(2, s, -1, 1, CT_F32, CT_DEVICE_CPU, &g), *b = ct_rand(2, s, -1, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *ref = ct_assert_nonnull(ct_matmul(ct_cast(a, CT_F64), ct_cast(b, CT_F64)));
  ct_tensor *ad = dev(a), *bd = dev(b);
  int64_t xs[4] = {8, 64, 32, 32}, ws[4] = {64, 64, 3, 3};
  const ct_conv2d_opts o = {.padding = {1, 1}};
  ct_tensor *x = ct_rand(4, xs, -1, 1, CT_F32, CT_DEVICE_CPU, &g), *w = ct_rand(4, ws, -1, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *cref = ct_assert_nonnull(ct_conv2d(ct_cast(x, CT_F64), ct_cast(w, CT_F64), NULL, &o));
  ct_tensor *xd = dev(x), *wd = dev(w);
  int saved = ct_allow_tf32();
  ct_set_allow_tf32(0);
  double em = normwise_err(ct_matmul(ad, bd), ref), ec = normwise_err(ct_conv2d(xd, wd, NULL, &o), cref);
  /* the same with TF32 allowed, printed only: the errors the tolerance must tell apart */
  ct_set_allow_tf32(1);
  double em_tf32 = normwise_err(ct_matmul(ad, bd), ref), ec_tf32 = normwise_err(ct_conv2d(xd, wd, NULL, &o), cref);
  ct_set_allow_tf32(saved);
  printf("# TF32 off: 1024^3 float32 matmul max|err|/max|ref| = %.3g, conv2d (8,64,32,32)*(64,64,3,3) %.3g "
         "(allowed %.0e); with TF32 on: %.3g and %.3g\n", em, ec, tol, em_tf32, ec_tf32);
  assert_true(em < tol);
  assert_true(ec < tol);
  ct_scope_end();
}

/* ---------------------------------------------------------------- GradScaler unscale_ */

static ct_tensor *no_forward(ct_module *self, ct_tensor *x) {
  (void)self;
  return ct_tensor_retain(x);
}

/* One unscale_ and step of a GradScaler (init_scale 3: not a power of two, so that the products
 * round) on device d, over a float32 parameter of n32 elements and a float64 one of n64, whose
 * gradients are 3 c32 and 3 c64 (from the backward of 3 (sum(p32 c32) + sum(p64 c64))). Returns
 * the unscaled gradients as host doubles (in *g32, *g64; the caller frees them) and whether the
 * step was taken. */
static int unscale_on(ct_device d, ct_tensor *c32, ct_tensor *c64, double **g32, double **g64) {
  /* no scope open: the module takes these references */
  int64_t n32 = ct_tensor_numel(c32), n64 = ct_tensor_numel(c64);
  ct_module *m = ct_assert_nonnull(ct_module_new("TwoParams", no_forward, NULL, NULL));
  ct_tensor *p32 = ct_assert_nonnull(ct_zeros(1, &n32, CT_F32, d)), *p64 = ct_assert_nonnull(ct_zeros(1, &n64, CT_F64, d));
  ct_assert_ok(ct_module_register_parameter(m, "p32", p32));
  ct_assert_ok(ct_module_register_parameter(m, "p64", p64));
  ct_scope_begin();
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.5}));
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = 3}));
  ct_tensor *s32 = ct_sum(ct_mul(p32, ct_to(c32, d, CT_COPY)), 0, NULL, 0);
  ct_tensor *s64 = ct_sum(ct_mul(p64, ct_to(c64, d, CT_COPY)), 0, NULL, 0);
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_grad_scaler_scale(gs, ct_add(s32, s64)))));
  ct_ledger_reset();
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  ct_assert_ok(ct_grad_scaler_unscale_(gs, opt));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  assert_int_equal(ct_ledger_get().syncs, 0); /* the flag stays on the device */
  /* the backend's fused kernel ran, once a gradient (not the composed path, which gives the same
   * values with six launches of other kernels) */
  ct_profile_row rows[64];
  int nrows = ct_profiler_rows(rows, 64);
  int64_t fused = 0;
  for (int i = 0; i < nrows && i < 64; i++) fused += strcmp(rows[i].kernel, "amp_unscale_") == 0 ? rows[i].calls : 0;
  assert_int_equal(fused, 2);
  *g32 = ct_test_values(ct_grad(p32)), *g64 = ct_test_values(ct_grad(p64));
  int stepped = ct_grad_scaler_step(gs, opt);
  assert_true(stepped == 0 || stepped == 1);
  ct_scope_end();
  ct_grad_scaler_free(gs);
  ct_optimizer_free(opt);
  ct_module_free(m);
  return stepped;
}

/* v's bits equal want's, or both are NaN (a GPU gives the canonical NaN where x86 keeps the
 * input's payload) */
static int same_bits(double v, double want) { return isnan(want) ? isnan(v) != 0 : memcmp(&v, &want, sizeof v) == 0; }

static void test_grad_scaler_unscale(void **state) {
  (void)state;
  NEED_DEVICE();
  /* more float32 elements than the launch has threads on an H100 (132 SMs x 32 blocks x 256), so
   * that the grid-stride loop runs its second round */
  const int64_t n32 = (1 << 22) + 3, n64 = 65537;
  for (int poison = 0; poison < 3; poison++) { /* 0: none; 1: +inf near the end of c32; 2: NaN in c64 */
    ct_generator g = ct_generator_new(90 + (uint64_t)poison);
    ct_tensor *c32 = ct_assert_nonnull(ct_rand(1, &n32, -2, 2, CT_F32, CT_DEVICE_CPU, &g));
    ct_tensor *c64 = ct_assert_nonnull(ct_rand(1, &n64, -2, 2, CT_F64, CT_DEVICE_CPU, &g));
    if (poison == 1) ((float *)ct_tensor_data(c32))[n32 - 2] = INFINITY;
    if (poison == 2) ((double *)ct_tensor_data(c64))[40001] = NAN;
    double *h32, *h64, *d32, *d64;
    int host_stepped = unscale_on(CT_DEVICE_CPU, c32, c64, &h32, &h64);
    int dev_stepped = unscale_on(D, c32, c64, &d32, &d64);
    assert_non_null(h32), assert_non_null(h64), assert_non_null(d32), assert_non_null(d64);
    assert_int_equal(host_stepped, poison == 0);
    assert_int_equal(dev_stepped, host_stepped);
    /* each value against the CPU's and against its formula: the gradient (3 c rounded to the
     * parameter's type) times inv_scale (float32: grad_scaler.c) in that type, one rounding
     * (AmpKernels.cu) */
    const float *c32v = ct_tensor_data(c32);
    const double *c64v = ct_tensor_data(c64);
    const float inv32 = (float)(1.0 / 3.0);
    int64_t diff = 0, wrong = 0;
    for (int64_t i = 0; i < n32; i++) {
      double want = (double)((float)(3.0f * c32v[i]) * inv32);
      diff += !same_bits(d32[i], h32[i]), wrong += !same_bits(d32[i], want);
    }
    for (int64_t i = 0; i < n64; i++) {
      double want = (3.0 * c64v[i]) * (double)inv32; /* PyTorch's inv_scale: a float32 even for float64 */
      diff += !same_bits(d64[i], h64[i]), wrong += !same_bits(d64[i], want);
    }
    printf("# GradScaler unscale_ (poison %d): of %lld gradient values %lld differ from the CPU's, %lld from the "
           "formula; step %s\n", poison, (long long)(n32 + n64), (long long)diff, (long long)wrong,
           dev_stepped ? "taken" : "skipped");
    assert_int_equal(diff, 0);
    assert_int_equal(wrong, 0);
    free(h32), free(h64), free(d32), free(d64);
    ct_tensor_free(c32), ct_tensor_free(c64);
  }
}

int main(void) {
  const char *name = getenv("CUTTLE_TEST_DEVICE");
  if (name && *name) {
    if (strncmp(name, "opencl", 6) == 0) setenv("POCL_DEVICES", "pthread", 0);
    if (ct_device_parse(name, &D) != CT_OK || !ct_device_available(D)) {
      printf("CUTTLE_TEST_DEVICE=%s: no such device (%s)\n", name, ct_last_error());
      return 1;
    }
    printf("# running on %s (CUTTLE_TEST_DEVICE)\n", name);
  } else if (ct_device_count(CT_CUDA) == 0) {
#ifdef CUTTLE_WITH_CUDA
    printf("SKIP: no CUDA device (ct_device_count(CT_CUDA) == 0: the CUDA backend is built but no GPU is visible)\n");
#else
    printf("SKIP: no CUDA device (cuttle was built without the CUDA backend)\n");
#endif
    return CT_TEST_SKIP;
  }
  ct_set_allow_tf32(0); /* float32 matmul and convolution round like the CPU's */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reductions_1m),       cmocka_unit_test(test_softmax_wide),
      cmocka_unit_test(test_cross_entropy_wide),  cmocka_unit_test(test_optimizers_100_steps),
      cmocka_unit_test(test_conv2d_channels_last), cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_copies_256mib),       cmocka_unit_test(test_tf32_off_is_float32),
      cmocka_unit_test(test_grad_scaler_unscale),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
