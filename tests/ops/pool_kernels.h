/* tests/ops/pool_kernels.h: max pooling on a device's own kernels (OpenCL's, CUDA's pool.cu)
 * against the CPU's on windows with ties and NaNs, for the device tests (test_opencl_ops,
 * test_ops_cuda): set pk_dev, then run PK_TESTS. The rule is torch's (aten's max_pool2d kernels:
 * `val > max || isnan(val)` in row-major window order): the first element of a tie, the last NaN
 * of a window. The outputs (NaN where the CPU has NaN) and the gradient's placement must equal the
 * CPU's exactly, in float32 and float64, NCHW and channels_last, with and without torch's options
 * (dilation, ceil_mode). The op table's rows (op_cases.h) have no NaN and no tie. */
#ifndef CUTTLE_TESTS_POOL_KERNELS_H
#define CUTTLE_TESTS_POOL_KERNELS_H
#include <math.h>
#include <stdlib.h>
#include "testutil.h"

static ct_device pk_dev;

/* max_pool2d of v (shape sh, given in float64) on dev in dtype dt and memory format fmt; the loss
 * is sum(y * (1, 2, 3, ...)), so each output's gradient lands with its own value. *y and *g: the
 * outputs and the input's gradient on the host (the caller frees them); returns the outputs' count. */
static int64_t pk_run(const double *v, const int64_t sh[4], const ct_pool2d_opts *o, ct_dtype dt, ct_memory_format fmt,
                      ct_device dev, double **y, double **g) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 4, sh, CT_F64, CT_DEVICE_CPU));
  ct_tensor *c = ct_assert_nonnull(ct_cast(h, dt));
  ct_tensor *f = ct_assert_nonnull(ct_contiguous_format(c, fmt));
  ct_tensor *d = ct_assert_nonnull(ct_to(f, dev, 0));
  ct_tensor *x = ct_assert_nonnull(ct_detach(d)); /* a leaf on the device */
  ct_assert_ok(ct_requires_grad_(x, 1));
  ct_tensor *out = ct_assert_nonnull(ct_max_pool2d(x, o));
  int64_t n = ct_tensor_numel(out);
  ct_tensor *w = ct_assert_nonnull(ct_arange(1, (double)n + 1, 1, dt, dev));
  ct_tensor *wv = ct_assert_nonnull(ct_reshape(w, ct_tensor_ndim(out), ct_tensor_shape(out)));
  ct_tensor *p = ct_assert_nonnull(ct_mul(out, wv)), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
  ct_assert_ok(ct_backward(s));
  *y = ct_test_values(out), *g = ct_test_values(ct_grad(x));
  ct_tensor *all[] = {s, p, wv, w, out, x, d, f, c, h};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) ct_tensor_free(all[i]);
  return n;
}

/* the device's outputs and gradient against the CPU's, bit for bit (NaN for NaN) */
static void pk_compare(const double *v, const int64_t sh[4], const ct_pool2d_opts *o) {
  ct_dtype dts[2] = {CT_F32, CT_F64};
  ct_memory_format fmts[2] = {CT_CONTIGUOUS_FORMAT, CT_CHANNELS_LAST};
  int64_t nx = sh[0] * sh[1] * sh[2] * sh[3];
  for (int k = 0; k < 2; k++)
    for (int f = 0; f < 2; f++) {
      double *y[2], *g[2];
      int64_t n = pk_run(v, sh, o, dts[k], fmts[f], CT_DEVICE_CPU, &y[0], &g[0]);
      assert_int_equal(pk_run(v, sh, o, dts[k], fmts[f], pk_dev, &y[1], &g[1]), n);
      for (int64_t i = 0; i < n; i++) {
        if (isnan(y[0][i]) ? !isnan(y[1][i]) : y[0][i] != y[1][i])
          fail_msg("%s %s output %lld: cpu %g, device %g", ct_dtype_name(dts[k]), f ? "channels_last" : "NCHW",
                   (long long)i, y[0][i], y[1][i]);
      }
      for (int64_t i = 0; i < nx; i++)
        if (g[0][i] != g[1][i])
          fail_msg("%s %s gradient %lld: cpu %g, device %g", ct_dtype_name(dts[k]), f ? "channels_last" : "NCHW",
                   (long long)i, g[0][i], g[1][i]);
      for (int d = 0; d < 2; d++) free(y[d]), free(g[d]);
    }
}

/* MaxPool2d(2): nine 2x2 windows, two channels, with ties, one NaN, two NaNs, a NaN at the end */
static void test_max_pool_ties_and_nan_2x2(void **state) {
  (void)state;
  const double nan = NAN;
  double v[72];
  double c0[36] = {1, 1, 0, 5, nan, 2, 3, 3, -1, -1, 7, 7, 2, 9, nan, 4, nan, 1,
                   1, 1, 5, 0, 2, 1, 3, 3, -1, -1, 7, 7, 9, 2, 1, nan, 2, 3};
  for (int i = 0; i < 36; i++) v[i] = c0[i], v[36 + i] = -c0[35 - i]; /* the second channel: another pattern */
  int64_t sh[4] = {1, 2, 2, 18};
  ct_pool2d_opts o = {.kernel = {2, 2}};
  pk_compare(v, sh, &o);
}

/* resnet's stem pool (3x3, stride 2, padding 1): overlapping windows, a NaN two windows share */
static void test_max_pool_ties_and_nan_3x3s2(void **state) {
  (void)state;
  const double nan = NAN;
  double v[48];
  double c0[24] = {1, 1, 0, 5, nan, 2, 3, 3, -1, 7, 7, nan, 2, 9, 9, 4, 1, 1, nan, 1, 5, 0, 2, 3};
  for (int i = 0; i < 24; i++) v[i] = c0[i], v[24 + i] = c0[(i * 7) % 24] * 0.5;
  int64_t sh[4] = {1, 2, 4, 6};
  ct_pool2d_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  pk_compare(v, sh, &o);
}

/* torch's options on the device's kernels: dilation 2 with padding and ceil_mode (overlapping
 * windows, the last ones past the input), with ties and NaNs; then windows with no element inside
 * the input (kernel 2, dilation 3, padding 1 over 2 rows: rows -1 and 2), which give -inf and pass
 * no gradient, as torch's values (its index there points outside the input plane) */
static void test_max_pool_dilation_ceil(void **state) {
  (void)state;
  const double nan = NAN;
  double v[126];
  double c0[21] = {1, 1, 0, 5, nan, 2, 3, 3, -1, 7, 7, nan, 2, 9, 9, 4, 1, 1, nan, 1, 5};
  for (int i = 0; i < 126; i++) v[i] = c0[(i * 5) % 21] * (i < 63 ? 1 : -0.5);
  int64_t sh[4] = {1, 2, 7, 9};
  ct_pool2d_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .ceil_mode = 1};
  pk_compare(v, sh, &o);
  ct_pool2d_opts o2 = {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {3, 1}, .ceil_mode = 1};
  pk_compare(v, (int64_t[]){1, 2, 2, 9}, &o2);
  double *y, *g;
  int64_t n = pk_run(v, (int64_t[]){1, 2, 2, 9}, &o2, CT_F32, CT_CONTIGUOUS_FORMAT, pk_dev, &y, &g);
  assert_int_equal(n, 2 * 1 * 5);
  for (int64_t i = 0; i < n; i++) assert_true(isinf(y[i]) && y[i] < 0);
  for (int i = 0; i < 36; i++) assert_true(g[i] == 0);
  free(y), free(g);
}

#define PK_TESTS                                                                                         \
  cmocka_unit_test(test_max_pool_ties_and_nan_2x2), cmocka_unit_test(test_max_pool_ties_and_nan_3x3s2), \
      cmocka_unit_test(test_max_pool_dilation_ceil)
#endif
