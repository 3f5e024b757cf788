/* tests/ops/norm_kernels.h: batch norm and layer norm on a device's own kernels (OpenCL's
 * kernels/norm.cl, CUDA's norm.cu) against the CPU's, for the device tests (test_opencl_ops,
 * test_ops_cuda): set nk_dev, then run NK_TESTS. The op table (op_cases.h) checks the same ops
 * against float64 references on tiny inputs; these take the sizes of a resnet block's BatchNorm2d
 * and a transformer's LayerNorm, channels_last and the running statistics. */
#ifndef CUTTLE_TESTS_NORM_KERNELS_H
#define CUTTLE_TESTS_NORM_KERNELS_H
#include <math.h>
#include <stdlib.h>
#include "testutil.h"

static ct_device nk_dev;

/* layer norm runs on nk_dev's kernels (one node, named layer_norm) and matches the CPU's kernels on
 * a LayerNorm(100) over 64 rows with weight and bias (100: not a multiple of a warp's 32 columns):
 * y and the three gradients, float32 sums of 100 terms in another order on each side. */
static void test_layer_norm_kernels(void **state) {
  (void)state;
  int64_t xs[2] = {64, 100}, D = 100;
  ct_generator g = ct_generator_new(11);
  ct_tensor *src[4] = {ct_randn(2, xs, 1.0, 2.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(1, &D, 1.0, 0.3, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &D, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(2, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g)};
  ct_tensor *y[2], *gr[2][3];
  ct_device devs[2] = {CT_DEVICE_CPU, nk_dev};
  for (int d = 0; d < 2; d++) {
    ct_tensor *in[4];
    for (int k = 0; k < 4; k++) {
      ct_tensor *t = ct_assert_nonnull(ct_to(ct_assert_nonnull(src[k]), devs[d], 0));
      in[k] = ct_assert_nonnull(ct_detach(t)); /* a leaf on the device */
      ct_tensor_free(t);
      if (k < 3) ct_assert_ok(ct_requires_grad_(in[k], 1));
    }
    y[d] = ct_assert_nonnull(ct_layer_norm(in[0], 1, in[1], in[2], 1e-5));
    assert_string_equal(ct_grad_fn_name(y[d]), "layer_norm");
    ct_tensor *p = ct_assert_nonnull(ct_mul(y[d], in[3])), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
    ct_assert_ok(ct_backward(l));
    for (int k = 0; k < 3; k++) gr[d][k] = ct_assert_nonnull(ct_to(ct_grad(in[k]), CT_DEVICE_CPU, 0));
    ct_tensor *yc = ct_assert_nonnull(ct_to(y[d], CT_DEVICE_CPU, 0));
    ct_tensor_free(y[d]), y[d] = yc;
    ct_tensor_free(p), ct_tensor_free(l);
    for (int k = 0; k < 4; k++) ct_tensor_free(in[k]);
  }
  ct_assert_close(y[1], y[0], 1e-5, 1e-4);
  for (int k = 0; k < 3; k++) ct_assert_close(gr[1][k], gr[0][k], 1e-4, 1e-4);
  for (int d = 0; d < 2; d++) {
    ct_tensor_free(y[d]);
    for (int k = 0; k < 3; k++) ct_tensor_free(gr[d][k]);
  }
  for (int k = 0; k < 4; k++) ct_tensor_free(src[k]);
}

/* batch norm runs on nk_dev's kernels (one node, named batch_norm) and matches the CPU's kernels on
 * a BatchNorm2d(40) over (12, 40, 6, 6) (40 channels: a block of 32 and a part block where the
 * kernels take 32 channels a block), in three cases:
 * training with running statistics (both updated in place), training on a channels_last input
 * (the kernels see its (N H W, C) rows; y and gx stay channels_last), and eval from the running
 * statistics. y, the running statistics and the three gradients, float32 sums of 432 terms in
 * another order on each side. */
static void test_batch_norm_kernels(void **state) {
  (void)state;
  int64_t xs[4] = {12, 40, 6, 6}, C = 40;
  ct_generator g = ct_generator_new(13);
  ct_tensor *src[6] = {ct_randn(4, xs, 0.5, 2.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(1, &C, 1.0, 0.3, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &C, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(4, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &C, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_rand(1, &C, 0.5, 2.0, CT_F32, CT_DEVICE_CPU, &g)};
  static const char *const cases[3] = {"training", "training, channels_last", "eval"};
  for (int k = 0; k < 3; k++) {
    ct_tensor *y[2], *gr[2][3], *run[2][2];
    ct_device devs[2] = {CT_DEVICE_CPU, nk_dev};
    for (int d = 0; d < 2; d++) {
      ct_tensor *in[6];
      for (int i = 0; i < 6; i++) {
        /* a copy on the CPU too: the running statistics are updated in place */
        ct_tensor *t = ct_assert_nonnull(ct_to(ct_assert_nonnull(src[i]), devs[d], CT_COPY));
        if (i == 0 && k == 1) {
          ct_tensor *cl = ct_assert_nonnull(ct_contiguous_format(t, CT_CHANNELS_LAST));
          ct_tensor_free(t), t = cl;
        }
        in[i] = ct_assert_nonnull(ct_detach(t)); /* a leaf on the device */
        ct_tensor_free(t);
        if (i < 3) ct_assert_ok(ct_requires_grad_(in[i], 1));
      }
      y[d] = ct_assert_nonnull(ct_batch_norm(in[0], in[4], in[5], in[1], in[2], k != 2, 0.1, 1e-5));
      print_message("batch_norm %s on %s\n", cases[k], d ? "the device" : "cpu");
      assert_string_equal(ct_grad_fn_name(y[d]), "batch_norm");
      assert_int_equal(ct_tensor_is_contiguous_format(y[d], CT_CHANNELS_LAST), k == 1);
      ct_tensor *p = ct_assert_nonnull(ct_mul(y[d], in[3])), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
      ct_assert_ok(ct_backward(l));
      for (int i = 0; i < 3; i++) gr[d][i] = ct_assert_nonnull(ct_to(ct_grad(in[i]), CT_DEVICE_CPU, 0));
      for (int i = 0; i < 2; i++) run[d][i] = ct_assert_nonnull(ct_to(in[4 + i], CT_DEVICE_CPU, 0));
      ct_tensor *yc = ct_assert_nonnull(ct_to(y[d], CT_DEVICE_CPU, 0));
      ct_tensor_free(y[d]), y[d] = yc;
      ct_tensor_free(p), ct_tensor_free(l);
      for (int i = 0; i < 6; i++) ct_tensor_free(in[i]);
    }
    ct_assert_close(y[1], y[0], 1e-5, 1e-4);
    for (int i = 0; i < 2; i++) ct_assert_close(run[1][i], run[0][i], 1e-6, 1e-5);
    for (int i = 0; i < 3; i++) ct_assert_close(gr[1][i], gr[0][i], 1e-4, 1e-4);
    /* the update moved the statistics in training (a kernel that skipped it would match the eval case) */
    for (int i = 0; i < 2; i++) {
      double *a = ct_test_values(run[0][i]), *b = ct_test_values(src[4 + i]);
      if (k != 2) assert_true(fabs(a[0] - b[0]) > 1e-3);
      else assert_true(a[0] == b[0]);
      free(a), free(b);
    }
    for (int d = 0; d < 2; d++) {
      ct_tensor_free(y[d]);
      for (int i = 0; i < 3; i++) ct_tensor_free(gr[d][i]);
      for (int i = 0; i < 2; i++) ct_tensor_free(run[d][i]);
    }
  }
  for (int i = 0; i < 6; i++) ct_tensor_free(src[i]);
}

/* The edges, on nk_dev against the CPU:
 * - a long channel: BatchNorm2d(2) training over (16, 2, 128, 128), 262144 values a channel around
 *   1000, contiguous and channels_last (the statistics are summed in double on every backend,
 *   kernels.def; float32 sums, 8 or 256 partial sums of 32768 or 1024 values as CUDA's blocks
 *   take them, put the mean off by 1.4e-4 and 2.3e-4 there (numpy, the same data shape), which
 *   moves every y by that: over the tolerance, 1e-4 + 1e-4 |y|, wherever |y| < 0.4);
 * - empty inputs: batch norm in eval on a batch of 0 images, and layer norm on 0 rows, still give
 *   weight and bias gradients of zeros (the kernels write them; uninitialized memory would not be
 *   reliably zero, and NaN * 0 is NaN). */
static void test_norm_kernels_edges(void **state) {
  (void)state;
  ct_device devs[2] = {CT_DEVICE_CPU, nk_dev};
  int64_t xs[4] = {16, 2, 128, 128}, C = 2;
  ct_generator g = ct_generator_new(17);
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, xs, 1000.0, 1.0, CT_F32, CT_DEVICE_CPU, &g)), *y[2], *rv[2];
  for (int k = 0; k < 4; k++) {
    int d = k % 2, cl = k / 2;
    ct_tensor *xc = ct_assert_nonnull(ct_contiguous_format(x, cl ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT));
    ct_tensor *xd = ct_assert_nonnull(ct_to(xc, devs[d], 0));
    ct_tensor_free(xc);
    ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, devs[d])), *v = ct_assert_nonnull(ct_ones(1, &C, CT_F32, devs[d]));
    ct_tensor *yd = ct_assert_nonnull(ct_batch_norm(xd, rm, v, NULL, NULL, 1, 0.1, 1e-5));
    y[d] = ct_assert_nonnull(ct_to(yd, CT_DEVICE_CPU, 0)), rv[d] = ct_assert_nonnull(ct_to(v, CT_DEVICE_CPU, 0));
    ct_tensor_free(yd), ct_tensor_free(xd), ct_tensor_free(rm), ct_tensor_free(v);
    if (d == 0) continue;
    print_message("batch norm over 262144 values a channel%s\n", cl ? ", channels_last" : "");
    ct_assert_close(y[1], y[0], 1e-4, 1e-4);
    ct_assert_close(rv[1], rv[0], 1e-6, 1e-5);
    for (int i = 0; i < 2; i++) ct_tensor_free(y[i]), ct_tensor_free(rv[i]);
  }
  ct_tensor_free(x);

  for (int d = 0; d < 2; d++) {
    print_message("empty batch norm (eval) and layer norm on %s\n", d ? "the device" : "cpu");
    int64_t es[4] = {0, 3, 2, 2}, ls[2] = {0, 5}, C3 = 3, D = 5;
    ct_tensor *xe = ct_assert_nonnull(ct_zeros(4, es, CT_F32, devs[d]));
    ct_tensor *w = ct_assert_nonnull(ct_ones(1, &C3, CT_F32, devs[d])), *b = ct_assert_nonnull(ct_zeros(1, &C3, CT_F32, devs[d]));
    ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, &C3, CT_F32, devs[d])), *v = ct_assert_nonnull(ct_ones(1, &C3, CT_F32, devs[d]));
    ct_tensor *xl = ct_assert_nonnull(ct_zeros(2, ls, CT_F32, devs[d]));
    ct_tensor *lw = ct_assert_nonnull(ct_ones(1, &D, CT_F32, devs[d])), *lb = ct_assert_nonnull(ct_zeros(1, &D, CT_F32, devs[d]));
    ct_tensor *leaves[4] = {w, b, lw, lb};
    for (int i = 0; i < 4; i++) ct_assert_ok(ct_requires_grad_(leaves[i], 1));
    ct_tensor *yb = ct_assert_nonnull(ct_batch_norm(xe, rm, v, w, b, 0, 0.1, 1e-5));
    ct_tensor *yl = ct_assert_nonnull(ct_layer_norm(xl, 1, lw, lb, 1e-5));
    ct_tensor *sb = ct_assert_nonnull(ct_sum(yb, 0, NULL, 0)), *sl = ct_assert_nonnull(ct_sum(yl, 0, NULL, 0));
    ct_tensor *l = ct_assert_nonnull(ct_add(sb, sl));
    ct_assert_ok(ct_backward(l));
    for (int i = 0; i < 4; i++) {
      ct_tensor *gi = ct_grad(leaves[i]);
      assert_non_null(gi);
      double *gv = ct_test_values(gi);
      for (int64_t j = 0; j < ct_tensor_numel(gi); j++) assert_true(gv[j] == 0);
      free(gv);
    }
    ct_tensor *all[] = {xe, w, b, rm, v, xl, lw, lb, yb, yl, sb, sl, l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
  }
}

#define NK_TESTS                                                                                             \
  cmocka_unit_test(test_layer_norm_kernels), cmocka_unit_test(test_batch_norm_kernels),                     \
      cmocka_unit_test(test_norm_kernels_edges)
#endif
