/* tests/ops/conv_kernels.h: conv2d forward and backward on a device (cuDNN on CUDA, its own
 * kernels on OpenCL) against the CPU at a size the op table (op_cases.h, tiny inputs) does not
 * reach, for the device tests (test_opencl_ops, test_ops_cuda): set ck_dev, then run CK_TESTS.
 * 16 images of 3 x 28 x 28 and 8 filters of 5 x 5 with a bias: each bias gradient is a sum of
 * 12544 values, which CUDA's bias gradient splits over several blocks a channel (conv.cu), and a
 * grouped convolution (groups = 2); NCHW and channels_last, float32. The sums are float32 in
 * another order on each side, so the tolerances are float32's for sums of that length. */
#ifndef CUTTLE_TESTS_CONV_KERNELS_H
#define CUTTLE_TESTS_CONV_KERNELS_H
#include <stdlib.h>
#include "testutil.h"

static ct_device ck_dev;

/* y = conv2d(x, w, b) and the gradients of sum(y * r) for x, w and b, on dev in format fmt; the
 * four results come back on the CPU (NCHW). */
static void ck_run(ct_tensor *const src[4], const ct_conv2d_opts *o, ct_memory_format fmt, ct_device dev, ct_tensor *out[4]) {
  ct_tensor *in[4];
  for (int k = 0; k < 4; k++) {
    ct_tensor *f = ct_assert_nonnull(ct_contiguous_format(src[k], k == 0 || k == 1 || k == 3 ? fmt : CT_CONTIGUOUS_FORMAT));
    ct_tensor *t = ct_assert_nonnull(ct_to(f, dev, 0));
    in[k] = ct_assert_nonnull(ct_detach(t)); /* a leaf on the device */
    ct_tensor_free(t), ct_tensor_free(f);
    if (k < 3) ct_assert_ok(ct_requires_grad_(in[k], 1));
  }
  ct_tensor *y = ct_assert_nonnull(ct_conv2d(in[0], in[1], in[2], o));
  ct_tensor *p = ct_assert_nonnull(ct_mul(y, in[3])), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  ct_tensor *res[4] = {y, ct_grad(in[0]), ct_grad(in[1]), ct_grad(in[2])};
  for (int k = 0; k < 4; k++) {
    ct_tensor *c = ct_assert_nonnull(ct_to(ct_assert_nonnull(res[k]), CT_DEVICE_CPU, 0));
    out[k] = ct_assert_nonnull(ct_contiguous(c));
    ct_tensor_free(c);
  }
  ct_tensor_free(l), ct_tensor_free(p), ct_tensor_free(y);
  for (int k = 0; k < 4; k++) ct_tensor_free(in[k]);
}

static void ck_case(int groups) {
  int64_t xs[4] = {16, 4, 28, 28}, ws[4] = {8, 4 / groups, 5, 5}, bs = 8, ys[4] = {16, 8, 28, 28};
  ct_generator g = ct_generator_new(5);
  ct_tensor *src[4] = {ct_randn(4, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(4, ws, 0.0, 0.2, CT_F32, CT_DEVICE_CPU, &g),
                       ct_randn(1, &bs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g), ct_randn(4, ys, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g)};
  ct_conv2d_opts o = {.padding = {2, 2}, .groups = groups};
  ct_memory_format fmts[2] = {CT_CONTIGUOUS_FORMAT, CT_CHANNELS_LAST};
  for (int f = 0; f < 2; f++) {
    ct_tensor *cpu[4], *dev[4];
    ck_run(src, &o, fmts[f], CT_DEVICE_CPU, cpu);
    ck_run(src, &o, fmts[f], ck_dev, dev);
    printf("conv2d %s, groups %d: y, gx, gw, gb\n", f ? "channels_last" : "NCHW", groups);
    ct_assert_close(dev[0], cpu[0], 1e-4, 1e-4); /* 100-term dot products */
    ct_assert_close(dev[1], cpu[1], 1e-4, 1e-4);
    ct_assert_close(dev[2], cpu[2], 2e-3, 1e-4); /* sums of 12544 products */
    ct_assert_close(dev[3], cpu[3], 2e-3, 1e-4); /* sums of 12544 values */
    for (int k = 0; k < 4; k++) ct_tensor_free(cpu[k]), ct_tensor_free(dev[k]);
  }
  for (int k = 0; k < 4; k++) ct_tensor_free(src[k]);
}

static void test_conv_kernels_large(void **state) {
  (void)state;
  ck_case(1);
}

static void test_conv_kernels_grouped(void **state) {
  (void)state;
  ck_case(2);
}

#define CK_TESTS cmocka_unit_test(test_conv_kernels_large), cmocka_unit_test(test_conv_kernels_grouped)
#endif
