/* tests/ops/channels_last_cases.h: the channels_last (NHWC) tests, run on one device (cl_dev) by
 * tests/ops/test_channels_last.c (the CPU, whose NHWC kernels are its own) and
 * tests/opencl/test_opencl_channels_last.c (OpenCL, through the front-end's NCHW copies).
 *
 * Every op runs twice on the same values: once on row-major (NCHW) tensors, once on channels_last
 * ones. The channels_last result must be channels_last (ct_tensor_suggest_memory_format and dense
 * in that format) and equal the NCHW result within tolerance (float32: 1e-5 relative, plus an
 * absolute term for the rounding of sums of a few hundred products; float64: 1e-10), in the
 * forward and in every gradient, and each gradient must come back in its input's format. */
#ifndef CUTTLE_TEST_CHANNELS_LAST_CASES_H
#define CUTTLE_TEST_CHANNELS_LAST_CASES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h" /* ct_tensor.refs, for the scope test */

static ct_device cl_dev;

typedef struct {
  double atol, rtol, gatol; /* gatol: for gradients, sums over a whole batch */
} cl_tol;

static cl_tol cl_tol_of(ct_dtype dt) { return dt == CT_F64 ? (cl_tol){1e-10, 1e-10, 1e-9} : (cl_tol){1e-4, 1e-5, 1e-3}; }

static ct_tensor *cl_randn(int nd, const int64_t *shape, ct_dtype dt, uint64_t seed) {
  ct_generator g = ct_generator_new(seed);
  return ct_assert_nonnull(ct_randn(nd, shape, 0, 1, dt, cl_dev, &g));
}

/* A leaf that requires grad: a copy of t in format fmt. */
static ct_tensor *cl_leaf(ct_tensor *t, ct_memory_format fmt) {
  ct_tensor *c = ct_assert_nonnull(ct_contiguous_format(t, fmt));
  ct_tensor *l = ct_assert_nonnull(ct_detach(c));
  ct_tensor_free(c);
  /* a fresh copy, so that the two leaves never share storage */
  ct_tensor *own = ct_assert_nonnull(ct_empty(4, ct_tensor_shape(l), ct_tensor_dtype(l), cl_dev));
  ct_tensor *f = ct_assert_nonnull(ct_contiguous_format(own, fmt));
  ct_tensor_free(own);
  ct_assert_ok(ct_copy_(f, l));
  ct_tensor_free(l);
  ct_assert_ok(ct_requires_grad_(f, 1));
  return f;
}

#define cl_assert_format(t, fmt) cl_assert_format_at((t), (fmt), __LINE__)
static void cl_assert_format_at(ct_tensor *t, ct_memory_format fmt, int line) {
  if (ct_tensor_suggest_memory_format(t) != fmt || !ct_tensor_is_contiguous_format(t, fmt)) {
    const int64_t *s = ct_tensor_strides(t);
    fprintf(stderr, "channels_last_cases.h:%d: expected %s, got strides (%lld, %lld, %lld, %lld)\n", line,
            fmt == CT_CHANNELS_LAST ? "channels_last" : "contiguous_format", (long long)s[0], (long long)s[1], (long long)s[2],
            (long long)s[3]);
    fail();
  }
}

/* sum(y * gup): backpropagates gup into y's graph */
static void cl_backward(ct_tensor *y, ct_tensor *gup) {
  ct_tensor *p = ct_assert_nonnull(ct_mul(y, gup)), *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  ct_tensor_free(p), ct_tensor_free(l);
}

/* ---- the format API */
static void cl_test_api(void **state) {
  (void)state;
  int64_t s[4] = {2, 3, 4, 5};
  ct_tensor *x = cl_randn(4, s, CT_F32, 1);
  assert_int_equal(ct_tensor_suggest_memory_format(x), CT_CONTIGUOUS_FORMAT);
  assert_true(ct_tensor_is_contiguous_format(x, CT_CONTIGUOUS_FORMAT));
  assert_false(ct_tensor_is_contiguous_format(x, CT_CHANNELS_LAST));
  ct_tensor *c = ct_assert_nonnull(ct_contiguous_format(x, CT_CHANNELS_LAST));
  const int64_t *st = ct_tensor_strides(c);
  assert_int_equal(st[0], 60), assert_int_equal(st[1], 1), assert_int_equal(st[2], 15), assert_int_equal(st[3], 3);
  assert_int_equal(ct_tensor_shape(c)[1], 3); /* the logical shape stays NCHW */
  cl_assert_format(c, CT_CHANNELS_LAST);
  assert_false(ct_tensor_is_contiguous(c));
  ct_assert_close(c, x, 0, 0); /* same values, element for element */
  ct_tensor *again = ct_assert_nonnull(ct_contiguous_format(c, CT_CHANNELS_LAST));
  assert_ptr_equal(again, c); /* already there: the same tensor, one more reference */
  ct_tensor_free(again);
  ct_tensor *back = ct_assert_nonnull(ct_contiguous_format(c, CT_CONTIGUOUS_FORMAT));
  cl_assert_format(back, CT_CONTIGUOUS_FORMAT);
  assert_true(ct_tensor_is_contiguous(back));
  ct_assert_close(back, x, 0, 0);
  ct_tensor *plain = ct_assert_nonnull(ct_contiguous(c)); /* Tensor.contiguous(): row-major */
  assert_true(ct_tensor_is_contiguous(plain));
  ct_tensor_free(plain), ct_tensor_free(back);

  /* one channel: dense in both formats; the strides decide, and the conversion gives channels_last's own */
  int64_t s1[4] = {2, 1, 4, 4};
  ct_tensor *g = cl_randn(4, s1, CT_F32, 2);
  assert_true(ct_tensor_is_contiguous_format(g, CT_CHANNELS_LAST));
  assert_int_equal(ct_tensor_suggest_memory_format(g), CT_CONTIGUOUS_FORMAT);
  ct_tensor *gc = ct_assert_nonnull(ct_contiguous_format(g, CT_CHANNELS_LAST));
  assert_ptr_not_equal(gc, g);
  assert_int_equal(ct_tensor_strides(gc)[1], 1), assert_int_equal(ct_tensor_strides(gc)[3], 1);
  cl_assert_format(gc, CT_CHANNELS_LAST);
  ct_tensor *gb = ct_assert_nonnull(ct_contiguous_format(gc, CT_CONTIGUOUS_FORMAT));
  assert_int_equal(ct_tensor_suggest_memory_format(gb), CT_CONTIGUOUS_FORMAT);
  ct_assert_close(gb, g, 0, 0);
  ct_tensor_free(gb), ct_tensor_free(gc), ct_tensor_free(g);

  /* the gradient through the conversion is the identity, in the leaf's format */
  ct_tensor *leaf = cl_leaf(x, CT_CONTIGUOUS_FORMAT);
  ct_tensor *lc = ct_assert_nonnull(ct_contiguous_format(leaf, CT_CHANNELS_LAST));
  ct_tensor *gup = cl_randn(4, s, CT_F32, 3);
  cl_backward(lc, gup);
  ct_assert_close(ct_grad(leaf), gup, 0, 0);
  ct_tensor_free(lc), ct_tensor_free(gup), ct_tensor_free(leaf);

  /* errors */
  int64_t s3[3] = {2, 3, 4};
  ct_tensor *t3 = cl_randn(3, s3, CT_F32, 4);
  assert_null(ct_contiguous_format(t3, CT_CHANNELS_LAST));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("rank 4");
  assert_false(ct_tensor_is_contiguous_format(t3, CT_CHANNELS_LAST));
  assert_null(ct_contiguous_format(x, (ct_memory_format)7));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_tensor *same3 = ct_assert_nonnull(ct_contiguous_format(t3, CT_CONTIGUOUS_FORMAT));
  assert_ptr_equal(same3, t3);
  ct_tensor_free(same3), ct_tensor_free(t3), ct_tensor_free(c), ct_tensor_free(x);
}

/* ---- elementwise ops keep the format of their first full-size input */
static void cl_test_elementwise(void **state) {
  (void)state;
  int64_t s[4] = {2, 5, 3, 4}, sc[4] = {1, 5, 1, 1};
  ct_tensor *x = cl_randn(4, s, CT_F32, 10), *y = cl_randn(4, s, CT_F32, 11), *bias = cl_randn(4, sc, CT_F32, 12);
  ct_tensor *xl = ct_assert_nonnull(ct_contiguous_format(x, CT_CHANNELS_LAST));
  ct_tensor *yl = ct_assert_nonnull(ct_contiguous_format(y, CT_CHANNELS_LAST));
  ct_tensor *r0 = ct_assert_nonnull(ct_relu(x)), *r1 = ct_assert_nonnull(ct_relu(xl));
  cl_assert_format(r1, CT_CHANNELS_LAST);
  ct_assert_close(r1, r0, 0, 0);
  ct_tensor *a0 = ct_assert_nonnull(ct_add(x, y)), *a1 = ct_assert_nonnull(ct_add(xl, yl));
  cl_assert_format(a1, CT_CHANNELS_LAST);
  ct_assert_close(a1, a0, 0, 0);
  ct_tensor *b0 = ct_assert_nonnull(ct_sub(x, bias)), *b1 = ct_assert_nonnull(ct_sub(xl, bias)); /* broadcast (1, C, 1, 1) */
  cl_assert_format(b1, CT_CHANNELS_LAST);
  ct_assert_close(b1, b0, 0, 0);
  ct_tensor *m1 = ct_assert_nonnull(ct_mul(x, yl)); /* the first full-size input decides: NCHW */
  cl_assert_format(m1, CT_CONTIGUOUS_FORMAT);
  ct_tensor *m2 = ct_assert_nonnull(ct_mul(yl, x));
  cl_assert_format(m2, CT_CHANNELS_LAST);
  ct_assert_close(m2, m1, 0, 0);
  ct_tensor *s1 = ct_assert_nonnull(ct_mul_scalar(xl, 2.0)); /* with a scalar */
  cl_assert_format(s1, CT_CHANNELS_LAST);
  ct_tensor *e0 = ct_assert_nonnull(ct_exp(x)), *e1 = ct_assert_nonnull(ct_exp(xl));
  cl_assert_format(e1, CT_CHANNELS_LAST);
  ct_assert_close(e1, e0, 0, 0);
  ct_tensor *zero = ct_assert_nonnull(ct_scalar(0, CT_F32, cl_dev));
  ct_tensor *pos = ct_assert_nonnull(ct_gt(xl, zero));
  cl_assert_format(pos, CT_CHANNELS_LAST);
  ct_tensor *w1 = ct_assert_nonnull(ct_where(pos, xl, yl)), *w0 = ct_assert_nonnull(ct_where(pos, x, y));
  cl_assert_format(w1, CT_CHANNELS_LAST);
  ct_assert_close(w1, w0, 0, 0);

  /* the backward: relu then a product, gradients in the leaves' format */
  ct_tensor *lx0 = cl_leaf(x, CT_CONTIGUOUS_FORMAT), *lx1 = cl_leaf(x, CT_CHANNELS_LAST);
  ct_tensor *gup = cl_randn(4, s, CT_F32, 13);
  ct_tensor *q0 = ct_assert_nonnull(ct_relu(lx0)), *q1 = ct_assert_nonnull(ct_relu(lx1));
  ct_tensor *p0 = ct_assert_nonnull(ct_mul(q0, lx0)), *p1 = ct_assert_nonnull(ct_mul(q1, lx1));
  cl_assert_format(p1, CT_CHANNELS_LAST);
  cl_backward(p0, gup), cl_backward(p1, gup);
  ct_assert_close(ct_grad(lx1), ct_grad(lx0), 1e-6, 1e-6);
  cl_assert_format(ct_grad(lx1), CT_CHANNELS_LAST);
  ct_tensor *all[] = {x, y, bias, xl, yl, r0, r1, a0, a1, b0, b1, m1, m2, s1, e0, e1, zero, pos, w1, w0, lx0, lx1, gup, q0, q1, p0, p1};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* ---- conv2d: y in channels_last when x or w is; gx in x's format, gw in w's */
static void cl_conv_case(const char *name, ct_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k,
                         ct_conv2d_opts o, int bias, ct_memory_format xf, ct_memory_format wf) {
  cl_tol tol = cl_tol_of(dt);
  int G = o.groups ? o.groups : 1;
  int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C / G, k, k};
  ct_tensor *x = cl_randn(4, xs, dt, 100), *w = cl_randn(4, ws, dt, 101), *b = bias ? cl_randn(1, &O, dt, 102) : NULL;
  ct_tensor *x0 = cl_leaf(x, CT_CONTIGUOUS_FORMAT), *w0 = cl_leaf(w, CT_CONTIGUOUS_FORMAT);
  ct_tensor *x1 = cl_leaf(x, xf), *w1 = cl_leaf(w, wf);
  ct_tensor *b0 = NULL, *b1 = NULL;
  if (b) {
    b0 = ct_assert_nonnull(ct_detach(b)), b1 = ct_assert_nonnull(ct_add_scalar(b, 0.0));
    ct_assert_ok(ct_requires_grad_(b0, 1)), ct_assert_ok(ct_requires_grad_(b1, 1));
  }
  ct_tensor *y0 = ct_assert_nonnull(ct_conv2d(x0, w0, b0, &o)), *y1 = ct_conv2d(x1, w1, b1, &o);
  if (!y1) fprintf(stderr, "%s: %s\n", name, ct_last_error());
  ct_assert_nonnull(y1);
  cl_assert_format(y1, xf == CT_CHANNELS_LAST || wf == CT_CHANNELS_LAST ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT);
  ct_assert_close(y1, y0, tol.atol, tol.rtol);
  ct_tensor *gup = cl_randn(4, ct_tensor_shape(y0), dt, 103);
  cl_backward(y0, gup), cl_backward(y1, gup);
  ct_assert_close(ct_grad(x1), ct_grad(x0), tol.gatol, tol.rtol);
  ct_assert_close(ct_grad(w1), ct_grad(w0), tol.gatol, tol.rtol);
  cl_assert_format(ct_grad(x1), xf);
  cl_assert_format(ct_grad(w1), wf);
  if (b) ct_assert_close(ct_grad(b1), ct_grad(b0), tol.gatol, tol.rtol);
  ct_tensor *all[] = {x, w, b, x0, w0, x1, w1, b0, b1, y0, y1, gup};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void cl_test_conv2d(void **state) {
  (void)state;
  const ct_memory_format L = CT_CHANNELS_LAST, R = CT_CONTIGUOUS_FORMAT;
  for (int d = 0; d < 2; d++) {
    ct_dtype dt = d ? CT_F64 : CT_F32;
    /* the cnn's two layers (a smaller batch) */
    cl_conv_case("cnn conv1", dt, 4, 1, 28, 28, 32, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, L);
    cl_conv_case("cnn conv2", dt, 4, 32, 14, 14, 64, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, L);
    cl_conv_case("stride 2, no padding", dt, 3, 5, 9, 8, 6, 3, (ct_conv2d_opts){.stride = {2, 2}}, 1, L, L);
    cl_conv_case("stride (1, 2), padding (2, 1)", dt, 2, 4, 7, 9, 3, 3, (ct_conv2d_opts){.stride = {1, 2}, .padding = {2, 1}}, 0,
                 L, L);
    cl_conv_case("dilation 2", dt, 2, 3, 10, 10, 4, 3, (ct_conv2d_opts){.dilation = {2, 2}, .padding = {2, 2}}, 1, L, L);
    cl_conv_case("groups 2", dt, 2, 6, 8, 8, 4, 3, (ct_conv2d_opts){.groups = 2, .padding = {1, 1}}, 1, L, L);
    cl_conv_case("groups 3, stride 2", dt, 2, 6, 9, 9, 6, 3, (ct_conv2d_opts){.groups = 3, .stride = {2, 2}, .padding = {1, 1}}, 1,
                 L, L);
    cl_conv_case("one channel, stride 2, dilation 2", dt, 3, 1, 11, 10, 5, 3,
                 (ct_conv2d_opts){.stride = {2, 2}, .dilation = {2, 2}, .padding = {1, 2}}, 1, L, L);
    cl_conv_case("one channel, input gradient", dt, 2, 1, 7, 6, 4, 3, (ct_conv2d_opts){.stride = {1, 2}, .padding = {1, 1}}, 1, L,
                 L);
    cl_conv_case("1x1", dt, 2, 8, 5, 5, 3, 1, (ct_conv2d_opts){0}, 1, L, L);
    cl_conv_case("padding wider than the kernel", dt, 1, 2, 4, 4, 2, 2, (ct_conv2d_opts){.padding = {3, 3}}, 1, L, L);
    cl_conv_case("x channels_last, w NCHW", dt, 2, 4, 6, 6, 5, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, R);
    cl_conv_case("x NCHW, w channels_last", dt, 2, 4, 6, 6, 5, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, R, L);
    cl_conv_case("both NCHW (the plain path)", dt, 2, 4, 6, 6, 5, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, R, R);
    /* small outputs, many images: the CPU runs blocks of images per GEMM, a short last one too */
    cl_conv_case("4x4 maps, 37 images", dt, 37, 16, 4, 4, 12, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, L);
    cl_conv_case("2x2 to 1x1, stride 2, groups 2, 41 images", dt, 41, 8, 2, 2, 6, 3,
                 (ct_conv2d_opts){.groups = 2, .stride = {2, 2}, .padding = {1, 1}}, 0, L, L);
    /* maps no bigger than the kernel's live taps: the CPU's dense path (conv_dense.c) in both
     * formats, resnet18's layer3 and layer4 on 28 x 28 images */
    cl_conv_case("2x2 maps (dense)", dt, 5, 16, 2, 2, 12, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, L);
    cl_conv_case("1x1 maps (dense in channels_last)", dt, 6, 16, 1, 1, 8, 3, (ct_conv2d_opts){.padding = {1, 1}}, 1, L, L);
    cl_conv_case("2x2 to 1x1, stride 2 (dense in channels_last)", dt, 7, 8, 2, 2, 10, 3,
                 (ct_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}}, 0, L, L);
  }
}

/* ---- pooling */
static void cl_pool_case(const char *name, ct_dtype dt, int kind, ct_pool2d_opts o, int64_t N, int64_t C, int64_t H, int64_t W) {
  cl_tol tol = cl_tol_of(dt);
  int64_t xs[4] = {N, C, H, W};
  ct_tensor *x = cl_randn(4, xs, dt, 200);
  ct_tensor *x0 = cl_leaf(x, CT_CONTIGUOUS_FORMAT), *x1 = cl_leaf(x, CT_CHANNELS_LAST);
  ct_tensor *(*fn)(ct_tensor *, const ct_pool2d_opts *) = kind == 0 ? ct_max_pool2d : kind == 1 ? ct_avg_pool2d : ct_relu_max_pool2d;
  ct_tensor *y0 = ct_assert_nonnull(fn(x0, &o)), *y1 = fn(x1, &o);
  if (!y1) fprintf(stderr, "%s: %s\n", name, ct_last_error());
  ct_assert_nonnull(y1);
  cl_assert_format(y1, CT_CHANNELS_LAST);
  ct_assert_close(y1, y0, tol.atol, tol.rtol);
  ct_tensor *gup = cl_randn(4, ct_tensor_shape(y0), dt, 201);
  cl_backward(y0, gup), cl_backward(y1, gup);
  ct_assert_close(ct_grad(x1), ct_grad(x0), tol.atol, tol.rtol);
  cl_assert_format(ct_grad(x1), CT_CHANNELS_LAST);
  ct_tensor *all[] = {x, x0, x1, y0, y1, gup};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void cl_test_pool(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++) {
    ct_dtype dt = d ? CT_F64 : CT_F32;
    for (int kind = 0; kind < 3; kind++) {
      cl_pool_case("2x2", dt, kind, (ct_pool2d_opts){.kernel = {2, 2}}, 3, 32, 28, 28);
      cl_pool_case("2x2, odd size", dt, kind, (ct_pool2d_opts){.kernel = {2, 2}}, 2, 5, 7, 9);
      cl_pool_case("3x3 stride 2 padding 1", dt, kind, (ct_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, 2, 6,
                   9, 8);
      cl_pool_case("(3, 2) stride 1", dt, kind, (ct_pool2d_opts){.kernel = {3, 2}, .stride = {1, 1}}, 2, 3, 6, 5);
    }
  }
}

/* ---- conv2d + relu + max pooling as one op, and batch norm */
static void cl_test_fused_and_batch_norm(void **state) {
  (void)state;
  cl_tol tol = cl_tol_of(CT_F32);
  int64_t xs[4] = {4, 8, 12, 12}, ws[4] = {16, 8, 3, 3}, O = 16;
  ct_tensor *x = cl_randn(4, xs, CT_F32, 300), *w = cl_randn(4, ws, CT_F32, 301), *b = cl_randn(1, &O, CT_F32, 302);
  ct_tensor *x0 = cl_leaf(x, CT_CONTIGUOUS_FORMAT), *x1 = cl_leaf(x, CT_CHANNELS_LAST);
  ct_tensor *w0 = cl_leaf(w, CT_CONTIGUOUS_FORMAT), *w1 = cl_leaf(w, CT_CHANNELS_LAST);
  ct_conv2d_opts co = {.padding = {1, 1}};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  ct_tensor *y0 = ct_assert_nonnull(ct_conv2d_relu_max_pool2d(x0, w0, b, &co, &po));
  ct_tensor *y1 = ct_assert_nonnull(ct_conv2d_relu_max_pool2d(x1, w1, b, &co, &po));
  cl_assert_format(y1, CT_CHANNELS_LAST);
  ct_assert_close(y1, y0, tol.atol, tol.rtol);
  ct_tensor *gup = cl_randn(4, ct_tensor_shape(y0), CT_F32, 303);
  cl_backward(y0, gup), cl_backward(y1, gup);
  ct_assert_close(ct_grad(x1), ct_grad(x0), tol.gatol, tol.rtol);
  ct_assert_close(ct_grad(w1), ct_grad(w0), tol.gatol, tol.rtol);
  cl_assert_format(ct_grad(x1), CT_CHANNELS_LAST), cl_assert_format(ct_grad(w1), CT_CHANNELS_LAST);

  /* batch norm in training: normalized output, gradients and running statistics */
  int64_t C = 8;
  ct_tensor *rm0 = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, cl_dev)), *rv0 = ct_assert_nonnull(ct_ones(1, &C, CT_F32, cl_dev));
  ct_tensor *rm1 = ct_assert_nonnull(ct_zeros(1, &C, CT_F32, cl_dev)), *rv1 = ct_assert_nonnull(ct_ones(1, &C, CT_F32, cl_dev));
  ct_tensor *gw = cl_randn(1, &C, CT_F32, 304), *gb = cl_randn(1, &C, CT_F32, 305);
  ct_tensor *g0 = ct_assert_nonnull(ct_detach(gw)), *g1 = ct_assert_nonnull(ct_add_scalar(gw, 0.0));
  ct_tensor *h0 = ct_assert_nonnull(ct_detach(gb)), *h1 = ct_assert_nonnull(ct_add_scalar(gb, 0.0));
  ct_assert_ok(ct_requires_grad_(g0, 1)), ct_assert_ok(ct_requires_grad_(g1, 1));
  ct_assert_ok(ct_requires_grad_(h0, 1)), ct_assert_ok(ct_requires_grad_(h1, 1));
  ct_tensor *n0 = ct_assert_nonnull(ct_batch_norm(x0, rm0, rv0, g0, h0, 1, 0.1, 1e-5));
  ct_tensor *n1 = ct_assert_nonnull(ct_batch_norm(x1, rm1, rv1, g1, h1, 1, 0.1, 1e-5));
  cl_assert_format(n1, CT_CHANNELS_LAST);
  ct_assert_close(n1, n0, tol.atol, tol.rtol);
  ct_assert_close(rm1, rm0, 1e-6, 1e-5), ct_assert_close(rv1, rv0, 1e-6, 1e-5);
  ct_tensor *r1 = ct_assert_nonnull(ct_relu(n1)); /* the block conv, batch norm, relu stays channels_last */
  cl_assert_format(r1, CT_CHANNELS_LAST);
  ct_tensor *gn = cl_randn(4, xs, CT_F32, 306);
  ct_zero_grad(x0), ct_zero_grad(x1);
  cl_backward(n0, gn), cl_backward(n1, gn);
  ct_assert_close(ct_grad(x1), ct_grad(x0), tol.atol, 1e-4);
  cl_assert_format(ct_grad(x1), CT_CHANNELS_LAST);
  ct_assert_close(ct_grad(g1), ct_grad(g0), tol.gatol, tol.rtol);
  ct_assert_close(ct_grad(h1), ct_grad(h0), tol.gatol, tol.rtol);
  /* eval mode on the running statistics */
  ct_tensor *e0 = ct_assert_nonnull(ct_batch_norm(x0, rm0, rv0, g0, h0, 0, 0.1, 1e-5));
  ct_tensor *e1 = ct_assert_nonnull(ct_batch_norm(x1, rm1, rv1, g1, h1, 0, 0.1, 1e-5));
  cl_assert_format(e1, CT_CHANNELS_LAST);
  ct_assert_close(e1, e0, tol.atol, tol.rtol);
  ct_tensor *all[] = {x, w, b, x0, x1, w0, w1, y0, y1, gup, rm0, rv0, rm1, rv1, gw, gb, g0, g1, h0, h1, n0, n1, r1, gn, e0, e1};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* ---- a module converted to channels_last gives the NCHW module's output and gradients */
static void cl_test_module(void **state) {
  (void)state;
  ct_generator g0 = ct_generator_new(7), g1 = ct_generator_new(7);
  ct_module *m0 = ct_assert_nonnull(ct_model_new("cnn", cl_dev, &g0)), *m1 = ct_assert_nonnull(ct_model_new("cnn", cl_dev, &g1));
  ct_assert_ok(ct_module_to_memory_format(m1, CT_CHANNELS_LAST));
  ct_named_tensor p0[16], p1[16];
  int n = ct_module_named_tensors(m0, 0, p0, 16);
  assert_int_equal(ct_module_named_tensors(m1, 0, p1, 16), n);
  int converted = 0;
  for (int i = 0; i < n; i++) {
    if (ct_tensor_ndim(p1[i].tensor) != 4) {
      assert_true(ct_tensor_is_contiguous(p1[i].tensor)); /* biases and linear weights stay */
      continue;
    }
    cl_assert_format(p1[i].tensor, CT_CHANNELS_LAST);
    assert_true(ct_requires_grad(p1[i].tensor));
    ct_assert_close(p1[i].tensor, p0[i].tensor, 0, 0);
    converted++;
  }
  assert_int_equal(converted, 2); /* the cnn's two conv weights */
  int64_t xs[4] = {6, 1, 28, 28};
  ct_tensor *x = cl_randn(4, xs, CT_F32, 400), *xl = ct_assert_nonnull(ct_contiguous_format(x, CT_CHANNELS_LAST));
  ct_tensor *y0 = ct_assert_nonnull(ct_module_forward(m0, x)), *y1 = ct_assert_nonnull(ct_module_forward(m1, xl));
  ct_assert_close(y1, y0, 1e-4, 1e-5);
  ct_tensor *gup = cl_randn(2, ct_tensor_shape(y0), CT_F32, 401);
  cl_backward(y0, gup), cl_backward(y1, gup);
  for (int i = 0; i < n; i++) {
    ct_assert_close(ct_grad(p1[i].tensor), ct_grad(p0[i].tensor), 1e-3, 1e-5);
    if (ct_tensor_ndim(p1[i].tensor) == 4) cl_assert_format(ct_grad(p1[i].tensor), CT_CHANNELS_LAST);
  }
  /* two optimizers of three SGD steps with momentum each: the channels_last weights keep their
   * format, and the values the NCHW model gets (both through the fused update, whose state takes
   * the parameter's layout). SGD, not Adam: Adam's normalized step turns the rounding differences
   * of near-zero gradients into differences of the order of lr. */
  for (int k = 0; k < 2; k++) {
    ct_optimizer *o0 = ct_assert_nonnull(ct_optimizer_new(m0, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9}));
    ct_optimizer *o1 = ct_assert_nonnull(ct_optimizer_new(m1, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9}));
    for (int step = 0; step < 3; step++) {
      if (step > 0) { /* a fresh backward for the later steps */
        ct_optimizer_zero_grad(o0), ct_optimizer_zero_grad(o1);
        ct_tensor *z0 = ct_assert_nonnull(ct_module_forward(m0, x)), *z1 = ct_assert_nonnull(ct_module_forward(m1, xl));
        cl_backward(z0, gup), cl_backward(z1, gup);
        ct_tensor_free(z0), ct_tensor_free(z1);
      }
      ct_assert_ok(ct_optimizer_step(o0)), ct_assert_ok(ct_optimizer_step(o1));
    }
    for (int i = 0; i < n; i++) {
      ct_assert_close(p1[i].tensor, p0[i].tensor, 1e-4, 1e-4);
      if (ct_tensor_ndim(p1[i].tensor) == 4) cl_assert_format(p1[i].tensor, CT_CHANNELS_LAST);
    }
    ct_optimizer_free(o0), ct_optimizer_free(o1);
    if (k == 0) { /* the second round with new gradients of the updated weights */
      for (int i = 0; i < n; i++) ct_zero_grad(p0[i].tensor), ct_zero_grad(p1[i].tensor);
      ct_tensor *z0 = ct_assert_nonnull(ct_module_forward(m0, x)), *z1 = ct_assert_nonnull(ct_module_forward(m1, xl));
      ct_assert_close(z1, z0, 1e-4, 1e-4);
      cl_backward(z0, gup), cl_backward(z1, gup);
      ct_tensor_free(z0), ct_tensor_free(z1);
    }
  }

  /* and back to row-major */
  ct_assert_ok(ct_module_to_memory_format(m1, CT_CONTIGUOUS_FORMAT));
  for (int i = 0; i < n; i++) {
    assert_true(ct_tensor_is_contiguous(p1[i].tensor));
    if (ct_tensor_ndim(p1[i].tensor) == 4) assert_int_equal(ct_tensor_suggest_memory_format(p1[i].tensor), CT_CONTIGUOUS_FORMAT);
    ct_assert_close(p1[i].tensor, p0[i].tensor, 1e-4, 1e-4);
  }
  assert_int_equal(ct_module_to_memory_format(m1, (ct_memory_format)5), CT_EINVAL);
  assert_int_equal(ct_module_to_memory_format(NULL, CT_CHANNELS_LAST), CT_EINVAL);
  /* Adam on a channels_last model runs the fused kernels for every parameter: once the first step
   * has made the state, a step allocates nothing (the composed update of a channels_last weight
   * allocates a dozen temporaries), and the weights stay channels_last */
  ct_generator g2 = ct_generator_new(8);
  ct_module *m2 = ct_assert_nonnull(ct_model_new("cnn", cl_dev, &g2));
  ct_assert_ok(ct_module_to_memory_format(m2, CT_CHANNELS_LAST));
  ct_named_tensor p2[16];
  assert_int_equal(ct_module_named_tensors(m2, 0, p2, 16), n);
  ct_tensor *z2 = ct_assert_nonnull(ct_module_forward(m2, xl));
  cl_backward(z2, gup);
  ct_tensor_free(z2);
  ct_optimizer *oa = ct_assert_nonnull(ct_optimizer_new(m2, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3}));
  ct_assert_ok(ct_optimizer_step(oa));
  ct__fault_inject_alloc(INT64_MAX); /* counts the allocation points, fails none */
  ct_assert_ok(ct_optimizer_step(oa));
  int64_t allocs = ct__fault_alloc_count();
  ct__fault_inject_alloc(0);
  assert_int_equal(allocs, 0);
  for (int i = 0; i < n; i++)
    if (ct_tensor_ndim(p2[i].tensor) == 4) cl_assert_format(p2[i].tensor, CT_CHANNELS_LAST);
  ct_optimizer_free(oa);
  ct_module_free(m2);
  ct_tensor_free(x), ct_tensor_free(xl), ct_tensor_free(y0), ct_tensor_free(y1), ct_tensor_free(gup);
  ct_module_free(m0), ct_module_free(m1);
}

/* A training step in a scope, as `cuttle train` runs one: at the scope's end the channels_last
 * batch holds no reference beyond the caller's. (The conv front-end once handed a retained input
 * back to ct_tensor_free, which released the scope's hold on it instead: every batch leaked.) */
static void cl_test_scope_releases_inputs(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(5);
  ct_module *m = ct_model_new("cnn", cl_dev, &g);
  assert_non_null(m);
  assert_int_equal(ct_module_to_memory_format(m, CT_CHANNELS_LAST), CT_OK);
  ct_tensor *x0 = ct_randn(4, (int64_t[]){4, 1, 28, 28}, 0, 1, CT_F32, cl_dev, &g);
  ct_tensor *y = ct_randint(1, (int64_t[]){4}, 0, 10, CT_I64, cl_dev, &g);
  ct_assert_ok(ct_scope_begin());
  ct_tensor *x = ct_contiguous_format(x0, CT_CHANNELS_LAST);
  assert_non_null(x);
  ct_tensor *mine = ct_tensor_retain(x); /* not tracked: the test's own reference */
  ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, x), y, CT_REDUCTION_MEAN, 0);
  assert_non_null(loss);
  ct_assert_ok(ct_backward(loss));
  ct_scope_end();
  assert_int_equal(__atomic_load_n(&mine->refs, __ATOMIC_ACQUIRE), 1);
  ct_tensor_free(mine), ct_tensor_free(x0), ct_tensor_free(y);
  ct_module_free(m);
  ct_assert_ok(ct_synchronize(cl_dev)); /* the queued backward ends before the process does */
}

#define CL_TESTS                                                                                     \
  cmocka_unit_test(cl_test_api), cmocka_unit_test(cl_test_elementwise), cmocka_unit_test(cl_test_conv2d), \
      cmocka_unit_test(cl_test_pool), cmocka_unit_test(cl_test_fused_and_batch_norm), cmocka_unit_test(cl_test_module), \
      cmocka_unit_test(cl_test_scope_releases_inputs)

#endif
