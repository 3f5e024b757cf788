/* tests/ops/test_conv_groups_cpu.c: conv2d on the CPU where the output is small (Ho Wo of 1, 2 or
 * 4 pixels, up to just under the threshold), which src/backend/cpu/conv.c runs as blocks of images
 * (one GEMM over several images side by side) instead of one image at a time: values, input, weight
 * and bias gradients in float32 and float64 against a float64 direct convolution, with strides,
 * padding, dilation, conv groups, rectangular kernels and batches that are not a multiple of the
 * block (so the last block is a short one), each gradient alone and all together; kernels with
 * taps that only ever read padding too, which float32 and float64 leave out of the GEMMs (their
 * weight gradient must come out 0); and maps smaller than the kernel, which conv2d runs as one
 * dense GEMM (conv_dense.c). And the fused conv2d + relu + max_pool2d on small outputs, which
 * blocks its images as conv2d does: bit for bit conv2d then relu_max_pool2d in float32, and its
 * values bit for bit in bfloat16 and float16; where conv2d takes the dense path and the fused op
 * does not, the two agree to rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

typedef struct {
  const char *name;
  int64_t N, C, O, H, W, kh, kw;
  int sh, sw, ph, pw, dh, dw, groups, bias;
} conv_case;

static const conv_case cases[] = {
    /* resnet18's layer4 at 28x28: 3x3, padding 1, on a 1x1 input (one output pixel) */
    {"1x1 output, 3x3 padding 1", 37, 8, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    /* its first conv: stride 2 from 2x2 to 1x1; many images (several blocks per thread) */
    {"1x1 output, stride 2", 601, 6, 8, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    /* layer3: stride 2, padding 1, 4x4 to 2x2, and a batch that leaves a short last block */
    {"2x2 output, stride 2 padding 1", 200, 6, 10, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"2x2 output, 3 images", 3, 5, 7, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},
    /* the downsample: 1x1 kernel, stride 2 */
    {"1x1 kernel stride 2", 45, 12, 9, 4, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},
    {"conv groups 2", 45, 4, 6, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1},
    {"rectangular kernel, dilation 2", 29, 3, 5, 5, 4, 3, 2, 2, 2, 1, 0, 2, 1, 1, 1},
    {"1x2 output", 130, 4, 5, 1, 3, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1},
    {"9x9 output", 7, 3, 4, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    /* dead taps (only padding under them, left out of the GEMMs in f32/f64): groups on a 1x1 input */
    {"1x1 input, groups 4, 3x3 padding 1", 50, 8, 12, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1},
    /* dilation 2, padding 2 on 2x3: kernel rows 0 and 2 always fall in the padding */
    {"dead kernel rows, dilation 2", 21, 3, 5, 2, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1},
    /* every tap in the padding (stride 10, padding 5, 1x1 input): the output is the bias */
    {"every tap in the padding", 9, 3, 4, 1, 1, 1, 1, 10, 10, 5, 5, 1, 1, 1, 1},
    /* the dense path (conv_dense.c: fewer input pixels than live taps): resnet18's layer3 at 28x28,
     * 3x3 padding 1 on 2x2, with a bias; 5x5 padding 2 on 3x3; 3x3 padding 1 on 2x3 */
    {"dense: 2x2 input, 3x3 padding 1", 130, 16, 24, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"dense: 3x3 input, 5x5 padding 2", 33, 5, 7, 3, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1},
    {"dense: 2x3 input, 3x3 padding 1", 17, 6, 4, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},
};

static int64_t out_size(int64_t in, int64_t k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

/* uniform in [-scale, scale), rounded to float32 when f32 so that the reference sees the same values */
static double *random_values(int64_t n, double scale, int f32, unsigned *seed) {
  double *v = malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    double u = ((*seed >> 8) & 0xffffff) / 16777216.0 * 2 - 1;
    v[i] = f32 ? (double)(float)(u * scale) : u * scale;
  }
  return v;
}

/* The direct convolution in float64: y, and the gradients for the output gradient gy. */
static void reference(const conv_case *c, int64_t Ho, int64_t Wo, const double *x, const double *w, const double *b,
                      const double *gy, double *y, double *gx, double *gw, double *gb) {
  int64_t Cg = c->C / c->groups, Og = c->O / c->groups;
  memset(gx, 0, (size_t)(c->N * c->C * c->H * c->W) * sizeof(double));
  memset(gw, 0, (size_t)(c->O * Cg * c->kh * c->kw) * sizeof(double));
  memset(gb, 0, (size_t)c->O * sizeof(double));
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t ho = 0; ho < Ho; ho++)
        for (int64_t wo = 0; wo < Wo; wo++) {
          int64_t yi = ((n * c->O + o) * Ho + ho) * Wo + wo, g = o / Og;
          double s = c->bias ? b[o] : 0, d = gy[yi];
          gb[o] += d;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t h = ho * c->sh - c->ph + i * c->dh, v = wo * c->sw - c->pw + j * c->dw;
                if (h < 0 || h >= c->H || v < 0 || v >= c->W) continue;
                int64_t xi = ((n * c->C + g * Cg + ci) * c->H + h) * c->W + v, wi = ((o * Cg + ci) * c->kh + i) * c->kw + j;
                s += x[xi] * w[wi];
                gx[xi] += d * w[wi];
                gw[wi] += d * x[xi];
              }
          y[yi] = s;
        }
}

/* a tensor of dtype dt holding v (exactly: the f32 values were rounded already) */
static ct_tensor *tensor_of(const double *v, int ndim, const int64_t *shape, ct_dtype dt) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  if (dt == CT_F64) return ct_assert_nonnull(ct_from_host(v, ndim, shape, CT_F64, CT_DEVICE_CPU));
  float *f = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  ct_tensor *t = ct_assert_nonnull(ct_from_host(f, ndim, shape, CT_F32, CT_DEVICE_CPU));
  free(f);
  return t;
}

static void expect_close(ct_tensor *got, const double *want, double tol, const char *what, const conv_case *c) {
  ct_assert_nonnull(got);
  ct_tensor *ref = ct_assert_nonnull(ct_from_host(want, ct_tensor_ndim(got), ct_tensor_shape(got), CT_F64, CT_DEVICE_CPU));
  fprintf(stderr, "  %s: %s\n", c->name, what);
  ct_assert_close(got, ref, tol, tol);
  ct_tensor_free(ref);
}

/* grads: 1 input, 2 weight (and bias), 3 all */
static void run_case(const conv_case *c, ct_dtype dt, int grads) {
  int f32 = dt == CT_F32;
  int64_t Ho = out_size(c->H, c->kh, c->sh, c->ph, c->dh), Wo = out_size(c->W, c->kw, c->sw, c->pw, c->dw);
  int64_t Cg = c->C / c->groups, K = Cg * c->kh * c->kw;
  int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, Cg, c->kh, c->kw}, bs[1] = {c->O}, ys[4] = {c->N, c->O, Ho, Wo};
  int64_t nx = c->N * c->C * c->H * c->W, nw = c->O * K, ny = c->N * c->O * Ho * Wo;
  unsigned seed = (unsigned)(c->N * 131 + c->C * 7 + c->O);
  double *x = random_values(nx, 1, f32, &seed), *w = random_values(nw, 1 / sqrt((double)K), f32, &seed);
  double *b = random_values(c->O, 1, f32, &seed), *gy = random_values(ny, 1, f32, &seed);
  double *y = malloc((size_t)ny * sizeof(double)), *gx = malloc((size_t)nx * sizeof(double));
  double *gw = malloc((size_t)nw * sizeof(double)), *gb = malloc((size_t)c->O * sizeof(double));
  reference(c, Ho, Wo, x, w, b, gy, y, gx, gw, gb);

  ct_tensor *xt = tensor_of(x, 4, xs, dt), *wt = tensor_of(w, 4, ws, dt), *bt = tensor_of(b, 1, bs, dt);
  ct_tensor *gyt = tensor_of(gy, 4, ys, dt);
  if (grads & 1) ct_assert_ok(ct_requires_grad_(xt, 1));
  if (grads & 2) {
    ct_assert_ok(ct_requires_grad_(wt, 1));
    ct_assert_ok(ct_requires_grad_(bt, 1));
  }
  ct_conv2d_opts o = {{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->groups};
  ct_tensor *yt = ct_assert_nonnull(ct_conv2d(xt, wt, c->bias ? bt : NULL, &o));
  /* float32: sums of up to a few hundred products of order 1 (the weight gradient over N Ho Wo) */
  double tol = f32 ? 1e-4 : 1e-10;
  expect_close(yt, y, tol, "output", c);
  ct_tensor *prod = ct_assert_nonnull(ct_mul(yt, gyt)), *loss = ct_assert_nonnull(ct_sum(prod, 0, NULL, 0));
  ct_assert_ok(ct_backward(loss));
  if (grads & 1) expect_close(ct_grad(xt), gx, tol, "input gradient", c);
  if (grads & 2) {
    expect_close(ct_grad(wt), gw, tol, "weight gradient", c);
    if (c->bias) expect_close(ct_grad(bt), gb, tol, "bias gradient", c);
  }
  ct_tensor_free(loss), ct_tensor_free(prod), ct_tensor_free(yt);
  ct_tensor_free(xt), ct_tensor_free(wt), ct_tensor_free(bt), ct_tensor_free(gyt);
  free(x), free(w), free(b), free(gy), free(y), free(gx), free(gw), free(gb);
}

/* conv output 4x4, 3x5 and 2x2 (pooled 2x2, 1x2 and 1x1), 37 images: the fused op against the ops one by one */
static void test_fused_conv_pool_small_outputs(void **state) {
  (void)state;
  const int64_t shapes[3][2] = {{4, 4}, {3, 5}, {2, 2}};
  ct_dtype dts[3] = {CT_F32, CT_BF16, CT_F16};
  ct_conv2d_opts co = {.padding = {1, 1}};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  for (int sh = 0; sh < 3; sh++)
    for (int k = 0; k < 3; k++) {
      const int64_t N = 37, C = 5, O = 12, H = shapes[sh][0], W = shapes[sh][1];
      ct_generator gen = ct_generator_new(3 + (uint64_t)k);
      ct_tensor *src[4] = {ct_randn(4, (int64_t[]){N, C, H, W}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen),
                           ct_randn(4, (int64_t[]){O, C, 3, 3}, 0, 0.3, CT_F32, CT_DEVICE_CPU, &gen),
                           ct_randn(1, (int64_t[]){O}, 0, 0.3, CT_F32, CT_DEVICE_CPU, &gen),
                           ct_randn(4, (int64_t[]){N, O, H / 2, W / 2}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen)};
      ct_tensor *y[2], *gr[2][3];
      for (int path = 0; path < 2; path++) { /* 0: the fused op, 1: conv2d then relu_max_pool2d */
        ct_tensor *in[4];
        for (int i = 0; i < 4; i++) {
          /* a fresh leaf per path (a cast to float32 would hand back src itself) */
          ct_tensor *t = ct_assert_nonnull(ct_mul_scalar(ct_assert_nonnull(src[i]), 1.0));
          in[i] = ct_assert_nonnull(ct_cast(t, dts[k]));
          ct_tensor_free(t);
          if (i < 3) ct_assert_ok(ct_requires_grad_(in[i], 1));
        }
        if (path == 0) y[0] = ct_assert_nonnull(ct_conv2d_relu_max_pool2d(in[0], in[1], in[2], &co, &po));
        else {
          ct_tensor *c = ct_assert_nonnull(ct_conv2d(in[0], in[1], in[2], &co));
          y[1] = ct_assert_nonnull(ct_relu_max_pool2d(c, &po));
          ct_tensor_free(c);
        }
        ct_tensor *p = ct_assert_nonnull(ct_mul(y[path], in[3])), *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
        ct_assert_ok(ct_backward(s));
        for (int i = 0; i < 3; i++) gr[path][i] = ct_assert_nonnull(ct_cast(ct_grad(in[i]), CT_F64));
        ct_tensor_free(s), ct_tensor_free(p);
        for (int i = 0; i < 4; i++) ct_tensor_free(in[i]);
      }
      /* a 2x2 map is conv2d's dense path, which the fused op does not take: equal to rounding
       * (float32's sums in another order; a half's conv outputs rounded from them) */
      double tol = sh < 2 ? 0 : dts[k] == CT_F32 ? 1e-5 : 1e-2;
      ct_assert_close(y[0], y[1], tol, tol);
      /* the halves' gradients differ where rounding the conv output made a tie in a window (the
       * unfused pooling picks the first, the fused one the exact maximum): float32's only */
      for (int i = 0; dts[k] == CT_F32 && i < 3; i++) ct_assert_close(gr[0][i], gr[1][i], tol, tol);
      for (int path = 0; path < 2; path++) {
        ct_tensor_free(y[path]);
        for (int i = 0; i < 3; i++) ct_tensor_free(gr[path][i]);
      }
      for (int i = 0; i < 4; i++) ct_tensor_free(src[i]);
    }
}

static void run_all(ct_dtype dt) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int grads = 1; grads <= 3; grads++) run_case(&cases[i], dt, grads);
}

static void test_small_outputs_f32(void **state) {
  (void)state;
  run_all(CT_F32);
}
static void test_small_outputs_f64(void **state) {
  (void)state;
  run_all(CT_F64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_outputs_f32),
      cmocka_unit_test(test_small_outputs_f64),
      cmocka_unit_test(test_fused_conv_pool_small_outputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
