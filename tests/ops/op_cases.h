/* tests/ops/op_cases.h: ONE table of op cases, shared by the CPU tests (test_ops_cpu.c: values
 * against the float64 references of op_refs.h in f32 and f64, and gradcheck) and by the
 * cross-backend tests (a device compared with the CPU). A row names the op, its inputs (shape and
 * how they are drawn), a function that runs the cuttle op on tensors of any device, and the
 * reference. Adding an op is adding one row.
 *
 * Inputs are random and never zero: OC_ANY is uniform in +-[0.1, 2], OC_POS in [0.5, 2] (log,
 * sqrt, pow bases, variances), OC_DISCRETE in {-2, -1, 1, 2} (ties for comparisons), OC_INDEX an
 * int64 in [0, hi), OC_BOOL a bool. */
#ifndef CUTTLE_TESTS_OP_CASES_H
#define CUTTLE_TESTS_OP_CASES_H

#include "cuttle.h"
#include "op_refs.h"
#include "core/backend.h" /* which conv + relu + max-pool runs fused (oc_conv_pool_fused) */

enum { OC_ANY = 0, OC_POS, OC_DISCRETE, OC_INDEX, OC_BOOL };
/* The output dtype: the input's floating dtype, or a fixed one. */
enum { OC_OUT_SAME = 0, OC_OUT_BOOL, OC_OUT_I64, OC_OUT_F64, OC_OUT_I32 };

typedef struct {
  int kind;
  int ndim;
  int64_t shape[6];
  int64_t hi; /* OC_INDEX: exclusive upper bound */
} oc_input;

typedef struct op_case op_case;
/* Run the cuttle op on the inputs (any device); returns a new tensor or NULL. */
typedef ct_tensor *(*oc_run_fn)(ct_tensor *const *in, const op_case *c);
/* Compute the float64 reference of the op on host arrays; allocates out (oc_alloc). */
typedef void (*oc_ref_fn)(const oc_arr *in, oc_arr *out, const op_case *c);

struct op_case {
  const char *name;
  int n_in;
  oc_input in[5];
  oc_run_fn run;
  oc_ref_fn ref;
  unsigned grad; /* bit i: gradcheck input i (0: no gradient) */
  int out;       /* OC_OUT_* */
  ct_tensor *(*f2)(ct_tensor *, ct_tensor *);
  double (*r2)(double, double);
  ct_tensor *(*f1)(ct_tensor *);
  double (*r1)(double);
  int i[8];
  double d[4];
};

/* ---- host scalar functions for the references */
static double oc_add(double a, double b) { return a + b; }
static double oc_sub(double a, double b) { return a - b; }
static double oc_mul(double a, double b) { return a * b; }
static double oc_div(double a, double b) { return a / b; }
static double oc_max2(double a, double b) { return a > b ? a : b; }
static double oc_min2(double a, double b) { return a < b ? a : b; }
static double oc_eq(double a, double b) { return a == b; }
static double oc_ne(double a, double b) { return a != b; }
static double oc_lt(double a, double b) { return a < b; }
static double oc_le(double a, double b) { return a <= b; }
static double oc_gt(double a, double b) { return a > b; }
static double oc_ge(double a, double b) { return a >= b; }
static double oc_neg(double x) { return -x; }
static double oc_relu(double x) { return !(x <= 0) ? x : 0; } /* NaN passes, as in torch */
static double oc_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double oc_gelu(double x) { return x * 0.5 * erfc(-x / sqrt(2.0)); }
static double oc_silu(double x) { return x / (1 + exp(-x)); }
static double oc_gelu_tanh(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* ---- runners and references, by family */
static ct_tensor *run_binary(ct_tensor *const *in, const op_case *c) { return c->f2(in[0], in[1]); }
static void ref_binary(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_binary(&in[0], &in[1], out, c->r2); }
static ct_tensor *run_unary(ct_tensor *const *in, const op_case *c) { return c->f1(in[0]); }
static void ref_unary(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_unary(&in[0], out, c->r1); }

/* scalar ops: i[0] = 0 add, 1 mul, 2 pow; d[0] the scalar */
static ct_tensor *run_scalar(ct_tensor *const *in, const op_case *c) {
  return c->i[0] == 0 ? ct_add_scalar(in[0], c->d[0]) : c->i[0] == 1 ? ct_mul_scalar(in[0], c->d[0]) : ct_pow_scalar(in[0], c->d[0]);
}
static void ref_scalar(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_alloc(out, in[0].ndim, in[0].shape);
  for (int64_t k = 0; k < out->numel; k++) {
    double x = in[0].v[k], s = c->d[0];
    out->v[k] = c->i[0] == 0 ? x + s : c->i[0] == 1 ? x * s : pow(x, s);
  }
}

static ct_tensor *run_where(ct_tensor *const *in, const op_case *c) { (void)c; return ct_where(in[0], in[1], in[2]); }
static void ref_where(const oc_arr *in, oc_arr *out, const op_case *c) { (void)c; oc_ref_where(&in[0], &in[1], &in[2], out); }

static ct_tensor *run_clamp(ct_tensor *const *in, const op_case *c) { return ct_clamp(in[0], c->d[0], c->d[1]); }
static void ref_clamp(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_alloc(out, in[0].ndim, in[0].shape);
  for (int64_t k = 0; k < out->numel; k++) out->v[k] = fmin(fmax(in[0].v[k], c->d[0]), c->d[1]);
}

/* reductions: i[0] = 0 sum, 1 mean, 2 var; i[1] = ndims, i[2..3] dims, i[4] keepdim, i[5] correction */
static ct_tensor *run_reduce(ct_tensor *const *in, const op_case *c) {
  const int *dims = &c->i[2];
  if (c->i[0] == 0) return ct_sum(in[0], c->i[1], dims, c->i[4]);
  if (c->i[0] == 1) return ct_mean(in[0], c->i[1], dims, c->i[4]);
  return ct_var(in[0], c->i[1], dims, c->i[5], c->i[4]);
}
static void ref_reduce(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_ref_reduce(&in[0], c->i[1], &c->i[2], c->i[4], c->i[0], c->i[5], out);
}

/* max/min: i[0] = which (0 max values, 1 max indices, 2 min values, 3 min indices, 4 argmax),
 * i[1] dim, i[2] keepdim */
static ct_tensor *run_maxmin(ct_tensor *const *in, const op_case *c) {
  int w = c->i[0];
  if (w == 4) return ct_argmax(in[0], c->i[1], c->i[2]);
  ct_tensor *idx = NULL;
  ct_tensor *v = w < 2 ? ct_max(in[0], c->i[1], c->i[2], &idx) : ct_min(in[0], c->i[1], c->i[2], &idx);
  if (w == 1 || w == 3) {
    ct_tensor_free(v);
    return idx;
  }
  ct_tensor_free(idx);
  return v;
}
static void ref_maxmin(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_ref_maxmin(&in[0], c->i[1], c->i[2], c->i[0] == 4 ? 1 : c->i[0], out);
}

static ct_tensor *run_norm(ct_tensor *const *in, const op_case *c) { (void)c; return ct_norm(in[0]); }
static void ref_norm(const oc_arr *in, oc_arr *out, const op_case *c) {
  (void)c;
  oc_alloc(out, 0, NULL);
  for (int64_t k = 0; k < in[0].numel; k++) out->v[0] += in[0].v[k] * in[0].v[k];
  out->v[0] = sqrt(out->v[0]);
}

static ct_tensor *run_matmul(ct_tensor *const *in, const op_case *c) { (void)c; return ct_matmul(in[0], in[1]); }
static void ref_matmul(const oc_arr *in, oc_arr *out, const op_case *c) { (void)c; oc_ref_matmul(&in[0], &in[1], out); }

/* linear: x, w[, b] */
static ct_tensor *run_linear(ct_tensor *const *in, const op_case *c) { return ct_linear(in[0], in[1], c->n_in > 2 ? in[2] : NULL); }
static void ref_linear(const oc_arr *in, oc_arr *out, const op_case *c) {
  const oc_arr *x = &in[0], *w = &in[1];
  int64_t O = w->shape[0], I = w->shape[1], rows = x->numel / I, shape[OC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->ndim - 1] = O;
  oc_alloc(out, x->ndim, shape);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < O; o++) {
      double s = c->n_in > 2 ? in[2].v[o] : 0;
      for (int64_t k = 0; k < I; k++) s += x->v[r * I + k] * w->v[o * I + k];
      out->v[r * O + o] = s;
    }
}

/* conv2d: x, w[, b]; i[0..1] stride, i[2..3] padding, i[4..5] dilation, i[6] groups */
static ct_tensor *run_conv(ct_tensor *const *in, const op_case *c) {
  ct_conv2d_opts o = {.stride = {c->i[0], c->i[1]}, .padding = {c->i[2], c->i[3]}, .dilation = {c->i[4], c->i[5]}, .groups = c->i[6]};
  return ct_conv2d(in[0], in[1], c->n_in > 2 ? in[2] : NULL, &o);
}
static void ref_conv(const oc_arr *in, oc_arr *out, const op_case *c) {
  int st[2] = {c->i[0] ? c->i[0] : 1, c->i[1] ? c->i[1] : 1}, dil[2] = {c->i[4] ? c->i[4] : 1, c->i[5] ? c->i[5] : 1};
  oc_ref_conv2d(&in[0], &in[1], c->n_in > 2 ? &in[2] : NULL, st, &c->i[2], dil, c->i[6] ? c->i[6] : 1, out);
}

/* ---- pooling with torch's options (dilation, ceil_mode, count_include_pad, divisor_override): a
 * reference written from torch's code, not from cuttle's kernels. The output size is
 * aten/src/ATen/native/Pool.h's pooling_output_shape_pad_lr; max pooling is cpu_max_pool
 * (aten/src/ATen/native/cpu/MaxPoolKernel.cpp), average pooling cpu_avg_pool
 * (aten/src/ATen/native/cpu/AvgPoolKernel.cpp), loop for loop. Options square: k, s, p, d. */
static int64_t oc_torch_pool_out(int64_t in, int k, int s, int p, int d, int ceil_mode) {
  int64_t num = in + p + p - (int64_t)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t q = num / s;
  if (num % s != 0 && num < 0) q--; /* div_rtn: toward -inf */
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out; /* the last pooling starts inside the image */
  return out;
}
static void oc_ref_pool_torch(const oc_arr *x, int is_max, int k, int s, int p, int d, int ceil_mode, int count_include_pad,
                              int divisor_override, oc_arr *out) {
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Ho = oc_torch_pool_out(H, k, s, p, d, ceil_mode), Wo = oc_torch_pool_out(W, k, s, p, d, ceil_mode);
  oc_alloc(out, 4, (int64_t[]){N, C, Ho, Wo});
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        const double *xp = x->v + nc * H * W;
        double *o = &out->v[(nc * Ho + oh) * Wo + ow];
        if (is_max) {
          int64_t ih0 = oh * s - p, iw0 = ow * s - p;
          int64_t ih1 = ih0 + (int64_t)(k - 1) * d + 1 < H ? ih0 + (int64_t)(k - 1) * d + 1 : H;
          int64_t iw1 = iw0 + (int64_t)(k - 1) * d + 1 < W ? iw0 + (int64_t)(k - 1) * d + 1 : W;
          while (ih0 < 0) ih0 += d;
          while (iw0 < 0) iw0 += d;
          double maxval = -INFINITY;
          for (int64_t ih = ih0; ih < ih1; ih += d)
            for (int64_t iw = iw0; iw < iw1; iw += d) {
              double val = xp[ih * W + iw];
              if (val > maxval || isnan(val)) maxval = val;
            }
          *o = maxval;
          continue;
        }
        int64_t ih0 = oh * s - p, iw0 = ow * s - p;
        int64_t ih1 = ih0 + k < H + p ? ih0 + k : H + p, iw1 = iw0 + k < W + p ? iw0 + k : W + p;
        int64_t pool_size = (ih1 - ih0) * (iw1 - iw0);
        if (ih0 < 0) ih0 = 0;
        if (iw0 < 0) iw0 = 0;
        if (ih1 > H) ih1 = H;
        if (iw1 > W) iw1 = W;
        if (ih0 >= ih1 || iw0 >= iw1) {
          *o = 0;
          continue;
        }
        double sum = 0;
        for (int64_t ih = ih0; ih < ih1; ih++)
          for (int64_t iw = iw0; iw < iw1; iw++) sum += xp[ih * W + iw];
        int64_t divide_factor = divisor_override ? divisor_override : count_include_pad ? pool_size : (ih1 - ih0) * (iw1 - iw0);
        *o = sum / (double)divide_factor;
      }
}

/* conv2d, relu and max_pool2d fused: x, w[, b]; i[0..1] conv stride, i[2..3] conv padding,
 * i[4] pool kernel (square, stride = kernel), i[5] the pooling's ceil_mode (not the fused kernels') */
static ct_tensor *run_conv_pool(ct_tensor *const *in, const op_case *c) {
  ct_conv2d_opts co = {.stride = {c->i[0], c->i[1]}, .padding = {c->i[2], c->i[3]}};
  ct_pool2d_opts po = {.kernel = {c->i[4], c->i[4]}, .ceil_mode = c->i[5]};
  return ct_conv2d_relu_max_pool2d(in[0], in[1], c->n_in > 2 ? in[2] : NULL, &co, &po);
}
static void ref_conv_pool(const oc_arr *in, oc_arr *out, const op_case *c) {
  int st[2] = {c->i[0] ? c->i[0] : 1, c->i[1] ? c->i[1] : 1}, dil[2] = {1, 1}, k[2] = {c->i[4], c->i[4]}, pad[2] = {0, 0};
  oc_arr y = {0};
  oc_ref_conv2d(&in[0], &in[1], c->n_in > 2 ? &in[2] : NULL, st, &c->i[2], dil, 1, &y);
  for (int64_t j = 0; j < y.numel; j++) y.v[j] = oc_relu(y.v[j]);
  if (c->i[5]) oc_ref_pool_torch(&y, 1, k[0], k[0], 0, 1, 1, 1, 0, out);
  else oc_ref_pool(&y, k, k, pad, 1, out);
  free(y.v);
}

/* pooling with options: i[0] 0 = avg, 1 = max, 2 = max of relu (ct_relu_max_pool2d), + 4: the input
 * in channels_last first; i[1] kernel, i[2] stride (0 = kernel), i[3] padding, i[4] dilation (0 =
 * 1), i[5] ceil_mode, i[6] exclude_pad (count_include_pad=False), i[7] divisor_override */
static ct_tensor *run_pool_opts(ct_tensor *const *in, const op_case *c) {
  int kind = c->i[0] & 3;
  ct_pool2d_opts o = {.kernel = {c->i[1], c->i[1]}, .stride = {c->i[2], c->i[2]}, .padding = {c->i[3], c->i[3]},
                      .dilation = {c->i[4], c->i[4]}, .ceil_mode = c->i[5], .exclude_pad = c->i[6], .divisor_override = c->i[7]};
  ct_tensor *x = in[0], *xc = NULL;
  if (c->i[0] & 4) { /* channels_last: the CPU's NHWC kernels, elsewhere the NCHW ones around copies */
    xc = ct_contiguous_format(in[0], CT_CHANNELS_LAST);
    if (!xc) return NULL;
    x = xc;
  }
  ct_tensor *y = kind == 2 ? ct_relu_max_pool2d(x, &o) : kind == 1 ? ct_max_pool2d(x, &o) : ct_avg_pool2d(x, &o);
  ct_tensor_free(xc);
  return y;
}
static void ref_pool_opts(const oc_arr *in, oc_arr *out, const op_case *c) {
  int kind = c->i[0] & 3, k = c->i[1], s = c->i[2] ? c->i[2] : k, d = c->i[4] ? c->i[4] : 1;
  oc_arr r = in[0];
  if (kind == 2) { /* max_pool2d(relu(x)) */
    r.v = malloc((size_t)r.numel * sizeof *r.v);
    for (int64_t j = 0; j < r.numel; j++) r.v[j] = oc_relu(in[0].v[j]);
  }
  oc_ref_pool_torch(&r, kind != 0, k, s, c->i[3], d, c->i[5], !c->i[6], c->i[7], out);
  if (kind == 2) free(r.v);
}

/* adaptive average pooling to the output size (i[0], i[1]), windows as ATen's
 * (aten/src/ATen/native/AdaptiveAveragePooling.cpp): rows [floor(o H / O), ceil((o + 1) H / O)) */
static ct_tensor *run_adaptive(ct_tensor *const *in, const op_case *c) { return ct_adaptive_avg_pool2d(in[0], c->i[0], c->i[1]); }
static void ref_adaptive(const oc_arr *in, oc_arr *out, const op_case *c) {
  const oc_arr *x = &in[0];
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], OH = c->i[0], OW = c->i[1];
  oc_alloc(out, 4, (int64_t[]){x->shape[0], x->shape[1], OH, OW});
  for (int64_t p = 0; p < NC; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH, w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        double s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) s += x->v[(p * H + h) * W + w];
        out->v[(p * OH + oh) * OW + ow] = s / (double)((h1 - h0) * (w1 - w0));
      }
}

/* pooling: i[0] 0 = avg, 1 = max, 2 = max of relu (the fused op), i[1..2] kernel, i[3..4] stride
 * (0 = kernel), i[5..6] padding */
static ct_tensor *run_pool(ct_tensor *const *in, const op_case *c) {
  ct_pool2d_opts o = {.kernel = {c->i[1], c->i[2]}, .stride = {c->i[3], c->i[4]}, .padding = {c->i[5], c->i[6]}};
  if (c->i[0] == 2) return ct_relu_max_pool2d(in[0], &o);
  return c->i[0] ? ct_max_pool2d(in[0], &o) : ct_avg_pool2d(in[0], &o);
}
static void ref_pool(const oc_arr *in, oc_arr *out, const op_case *c) {
  int st[2] = {c->i[3] ? c->i[3] : c->i[1], c->i[4] ? c->i[4] : c->i[2]};
  if (c->i[0] != 2) {
    oc_ref_pool(&in[0], &c->i[1], st, &c->i[5], c->i[0], out);
    return;
  }
  oc_arr r = in[0];
  r.v = malloc((size_t)r.numel * sizeof *r.v);
  for (int64_t j = 0; j < r.numel; j++) r.v[j] = oc_relu(in[0].v[j]);
  oc_ref_pool(&r, &c->i[1], st, &c->i[5], 1, out);
  free(r.v);
}

/* A copy of t outside autograd (for running statistics the op updates in place). */
static ct_tensor *oc_copy(ct_tensor *t) {
  ct_no_grad_begin();
  ct_tensor *r = ct_mul_scalar(t, 1.0);
  ct_no_grad_end();
  return r;
}

/* batch_norm. i[0]: 0 = train (x, w, b; fresh running stats 0 and 1), 1 = train returning the
 * updated running stats cat(rm, rv) (x, rm, rv), 2 = eval (x, rm, rv, w, b), 3 = train without
 * affine or running stats (x). d[0] momentum, d[1] eps. */
static ct_tensor *run_bn(ct_tensor *const *in, const op_case *c) {
  ct_tensor *x = in[0];
  int64_t C = ct_tensor_size(x, 1);
  double m = c->d[0], eps = c->d[1];
  if (c->i[0] == 0) {
    ct_tensor *rm = ct_zeros(1, &C, ct_tensor_dtype(x), ct_tensor_device(x)), *rv = ct_ones(1, &C, ct_tensor_dtype(x), ct_tensor_device(x));
    ct_tensor *y = ct_batch_norm(x, rm, rv, in[1], in[2], 1, m, eps);
    ct_tensor_free(rm), ct_tensor_free(rv);
    return y;
  }
  if (c->i[0] == 1) {
    ct_tensor *rm = oc_copy(in[1]), *rv = oc_copy(in[2]);
    ct_tensor *y = ct_batch_norm(x, rm, rv, NULL, NULL, 1, m, eps);
    ct_tensor *r = y ? ct_cat(2, (ct_tensor *[]){rm, rv}, 0) : NULL;
    ct_tensor_free(y), ct_tensor_free(rm), ct_tensor_free(rv);
    return r;
  }
  if (c->i[0] == 2) return ct_batch_norm(x, in[1], in[2], in[3], in[4], 0, m, eps);
  return ct_batch_norm(x, NULL, NULL, NULL, NULL, 1, m, eps);
}
static void ref_bn(const oc_arr *in, oc_arr *out, const op_case *c) {
  int64_t C = in[0].shape[1];
  double m = c->d[0], eps = c->d[1];
  if (c->i[0] == 0) oc_ref_batch_norm(&in[0], NULL, NULL, &in[1], &in[2], 1, m, eps, out, NULL, NULL);
  else if (c->i[0] == 2) oc_ref_batch_norm(&in[0], &in[1], &in[2], &in[3], &in[4], 0, m, eps, out, NULL, NULL);
  else if (c->i[0] == 3) oc_ref_batch_norm(&in[0], NULL, NULL, NULL, NULL, 1, m, eps, out, NULL, NULL);
  else {
    oc_arr y;
    int64_t n2 = 2 * C;
    oc_alloc(out, 1, &n2);
    oc_ref_batch_norm(&in[0], &in[1], &in[2], NULL, NULL, 1, m, eps, &y, out->v, out->v + C);
    free(y.v);
  }
}

/* layer_norm: x, then weight and bias when n_in says so (n_in 2: weight only). i[0] normalized_ndim,
 * d[0] eps. */
static ct_tensor *run_ln(ct_tensor *const *in, const op_case *c) {
  return ct_layer_norm(in[0], c->i[0], c->n_in > 1 ? in[1] : NULL, c->n_in > 2 ? in[2] : NULL, c->d[0]);
}
static void ref_ln(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_ref_layer_norm(&in[0], c->i[0], c->n_in > 1 ? &in[1] : NULL, c->n_in > 2 ? &in[2] : NULL, c->d[0], out);
}

/* dropout in its deterministic regimes (p = 0, or eval): the identity. d[0] p, i[0] training */
static ct_tensor *run_dropout(ct_tensor *const *in, const op_case *c) { return ct_dropout(in[0], c->d[0], c->i[0], NULL); }
static void ref_identity(const oc_arr *in, oc_arr *out, const op_case *c) {
  (void)c;
  oc_alloc(out, in[0].ndim, in[0].shape);
  memcpy(out->v, in[0].v, (size_t)in[0].numel * sizeof(double));
}

/* softmax: i[0] dim, i[1] log */
static ct_tensor *run_softmax(ct_tensor *const *in, const op_case *c) {
  return c->i[1] ? ct_log_softmax(in[0], c->i[0]) : ct_softmax(in[0], c->i[0]);
}
static void ref_softmax(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_softmax(&in[0], c->i[0], c->i[1], out); }

/* losses: i[0] reduction (0 mean, 1 sum, 2 none), d[0] label smoothing */
static ct_tensor *run_ce(ct_tensor *const *in, const op_case *c) { return ct_cross_entropy(in[0], in[1], (ct_reduction)c->i[0], c->d[0]); }
static void ref_ce(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_cross_entropy(&in[0], &in[1], c->i[0], c->d[0], out); }
static ct_tensor *run_mse(ct_tensor *const *in, const op_case *c) { return ct_mse_loss(in[0], in[1], (ct_reduction)c->i[0]); }
static void ref_mse(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_mse(&in[0], &in[1], c->i[0], out); }

/* cross_entropy_ex: i[0] reduction, i[1] ignore_index, i[2] 1 = class weights in[2]; d[0] smoothing */
static ct_tensor *run_ce_ex(ct_tensor *const *in, const op_case *c) {
  return ct_cross_entropy_ex(in[0], in[1], c->i[2] ? in[2] : NULL, c->i[1], (ct_reduction)c->i[0], c->d[0]);
}
static void ref_ce_ex(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_ref_cross_entropy_ex(&in[0], &in[1], c->i[2] ? &in[2] : NULL, c->i[1], c->i[0], c->d[0], out);
}

/* embedding: i[0] 1 = padding_idx i[1] */
static ct_tensor *run_embedding(ct_tensor *const *in, const op_case *c) {
  return ct_embedding(in[0], in[1], c->i[0] ? c->i[1] : CT_NO_PADDING_IDX);
}
static void ref_embedding(const oc_arr *in, oc_arr *out, const op_case *c) { (void)c; oc_ref_embedding(&in[0], &in[1], out); }

/* topk: i[0] k, i[1] dim, i[2] largest, i[3] 1 = the indices */
static ct_tensor *run_topk(ct_tensor *const *in, const op_case *c) {
  ct_tensor *idx = NULL, *v = ct_topk(in[0], c->i[0], c->i[1], c->i[2], &idx);
  if (!c->i[3]) return ct_tensor_free(idx), v;
  return ct_tensor_free(v), idx;
}
static void ref_topk(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_topk(&in[0], c->i[0], c->i[1], c->i[2], c->i[3], out); }

/* multinomial on one-hot rows (1 at each row's maximum of x, 0 elsewhere): every draw must be that
 * class, whatever the noise; i[0] num_samples (with replacement) */
static ct_tensor *run_multinomial(ct_tensor *const *in, const op_case *c) {
  ct_tensor *m = ct_max(in[0], 1, 1, NULL), *hot = m ? ct_eq(in[0], m) : NULL, *p = hot ? ct_cast(hot, ct_tensor_dtype(in[0])) : NULL;
  ct_tensor *r = p ? ct_multinomial(p, c->i[0], 1, NULL) : NULL;
  ct_tensor_free(m), ct_tensor_free(hot), ct_tensor_free(p);
  return r;
}
static void ref_multinomial(const oc_arr *in, oc_arr *out, const op_case *c) {
  int64_t N = in[0].shape[0], C = in[0].shape[1];
  oc_alloc(out, 2, (int64_t[]){N, c->i[0]});
  for (int64_t i = 0; i < N; i++) {
    int64_t best = 0;
    for (int64_t k = 1; k < C; k++)
      if (in[0].v[i * C + k] > in[0].v[i * C + best]) best = k;
    for (int64_t j = 0; j < c->i[0]; j++) out->v[i * c->i[0] + j] = (double)best;
  }
}

/* scaled_dot_product_attention: i[0] 0 no mask, 1 is_causal, 2 bool mask in[3] (with key 0 always
 * attended, so that no row is all masked), 3 additive mask in[3]; d[0] scale (0: 1/sqrt(D)) */
static ct_tensor *run_sdpa(ct_tensor *const *in, const op_case *c) {
  ct_tensor *mask = NULL;
  if (c->i[0] == 2) {
    int64_t Tk = ct_tensor_shape(in[1])[2];
    ct_tensor *col = ct_arange(0, (double)Tk, 1, CT_I64, ct_tensor_device(in[0])), *zero = ct_scalar(0, CT_I64, ct_tensor_device(in[0]));
    ct_tensor *first = col && zero ? ct_eq(col, zero) : NULL, *no = ct_scalar(0, CT_BOOL, ct_tensor_device(in[0]));
    ct_tensor *m1 = first && no ? ct_ne(in[3], no) : NULL; /* in[3] bool */
    ct_tensor *fi = first ? ct_cast(first, CT_I64) : NULL, *mi = m1 ? ct_cast(m1, CT_I64) : NULL;
    ct_tensor *sum = fi && mi ? ct_add(fi, mi) : NULL;
    mask = sum ? ct_ne(sum, zero) : NULL;
    ct_tensor_free(col), ct_tensor_free(zero), ct_tensor_free(first), ct_tensor_free(no), ct_tensor_free(m1);
    ct_tensor_free(fi), ct_tensor_free(mi), ct_tensor_free(sum);
    if (!mask) return NULL;
  } else if (c->i[0] == 3) {
    mask = ct_tensor_retain(in[3]);
  }
  ct_tensor *r = ct_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, c->i[0] == 1, c->d[0]);
  ct_tensor_free(mask);
  return r;
}
static void ref_sdpa(const oc_arr *in, oc_arr *out, const op_case *c) {
  oc_ref_sdpa(&in[0], &in[1], &in[2], c->i[0], c->i[0] >= 2 ? &in[3] : NULL, c->d[0], out);
}

/* joining: i[0] dim, i[1] 1 = stack */
static ct_tensor *run_join(ct_tensor *const *in, const op_case *c) {
  return c->i[1] ? ct_stack(c->n_in, in, c->i[0]) : ct_cat(c->n_in, in, c->i[0]);
}
static void ref_join(const oc_arr *in, oc_arr *out, const op_case *c) {
  const oc_arr *p[4] = {&in[0], &in[1], &in[2], &in[3]};
  if (c->i[1]) oc_ref_stack(c->n_in, p, c->i[0], out);
  else oc_ref_cat(c->n_in, p, c->i[0], out);
}

/* indexing: i[0] dim, i[1] 1 = gather */
static ct_tensor *run_index(ct_tensor *const *in, const op_case *c) {
  return c->i[1] ? ct_gather(in[0], c->i[0], in[1]) : ct_index_select(in[0], c->i[0], in[1]);
}
static void ref_index(const oc_arr *in, oc_arr *out, const op_case *c) { oc_ref_index(&in[0], c->i[0], &in[1], c->i[1], out); }

/* ---- views. Each runner applies the view; the reference reads x's row-major data through the
 * shape, strides and offset the view must have (i[] and d[] unused for the reference's layout,
 * which is written out in the row as i[0] = ndim, then shape i[1..], strides in d[] would not fit:
 * so each view has its own small reference below). */
enum { V_RESHAPE, V_RESHAPE_NC, V_VIEW, V_PERMUTE, V_TRANSPOSE, V_NARROW, V_SLICE, V_EXPAND, V_SQUEEZE, V_UNSQUEEZE,
       V_FLATTEN, V_CONTIGUOUS, V_CAST_F64, V_CAST_I32 };
static ct_tensor *run_view(ct_tensor *const *in, const op_case *c) {
  ct_tensor *x = in[0], *t, *r;
  switch (c->i[0]) {
    case V_RESHAPE: return ct_reshape(x, 2, (int64_t[]){4, -1});
    case V_RESHAPE_NC:
      t = ct_transpose(x, 0, 1), r = ct_reshape(t, 1, (int64_t[]){-1});
      return ct_tensor_free(t), r;
    case V_VIEW: return ct_view(x, 2, (int64_t[]){6, 4});
    case V_PERMUTE: return ct_permute(x, (int[]){2, 0, 1});
    case V_TRANSPOSE: return ct_transpose(x, 0, -1);
    case V_NARROW: return ct_narrow(x, 1, 1, 3);
    case V_SLICE: return ct_slice(x, 1, 1, 100, 2);
    case V_EXPAND: return ct_expand(x, 3, (int64_t[]){2, -1, 4});
    case V_SQUEEZE: return ct_squeeze(x, 1);
    case V_UNSQUEEZE: return ct_unsqueeze(x, -1);
    case V_FLATTEN: return ct_flatten(x, 1, 2);
    case V_CONTIGUOUS:
      t = ct_permute(x, (int[]){2, 0, 1}), r = ct_contiguous(t);
      return ct_tensor_free(t), r;
    case V_CAST_F64: return ct_cast(x, CT_F64);
    default: return ct_cast(x, CT_I32);
  }
}
static void ref_view(const oc_arr *in, oc_arr *out, const op_case *c) {
  const oc_arr *x = &in[0];
  int64_t st[OC_MAX_DIMS];
  oc_rowmajor_strides(x->ndim, x->shape, st);
  const int64_t *s = x->shape;
  switch (c->i[0]) {
    case V_RESHAPE: oc_ref_strided(x, 2, (int64_t[]){4, x->numel / 4}, (int64_t[]){x->numel / 4, 1}, 0, out); break;
    case V_RESHAPE_NC: { /* (a, b) transposed, then flattened */
      oc_arr t;
      oc_ref_strided(x, 2, (int64_t[]){s[1], s[0]}, (int64_t[]){1, s[1]}, 0, &t);
      oc_ref_strided(&t, 1, &t.numel, (int64_t[]){1}, 0, out);
      free(t.v);
      break;
    }
    case V_VIEW: oc_ref_strided(x, 2, (int64_t[]){6, 4}, (int64_t[]){4, 1}, 0, out); break;
    case V_PERMUTE:
    case V_CONTIGUOUS: oc_ref_strided(x, 3, (int64_t[]){s[2], s[0], s[1]}, (int64_t[]){st[2], st[0], st[1]}, 0, out); break;
    case V_TRANSPOSE: oc_ref_strided(x, 3, (int64_t[]){s[2], s[1], s[0]}, (int64_t[]){st[2], st[1], st[0]}, 0, out); break;
    case V_NARROW: oc_ref_strided(x, 2, (int64_t[]){s[0], 3}, st, st[1], out); break;
    case V_SLICE: oc_ref_strided(x, 2, (int64_t[]){s[0], (s[1] - 1 + 1) / 2}, (int64_t[]){st[0], 2}, 1, out); break;
    case V_EXPAND: oc_ref_strided(x, 3, (int64_t[]){2, s[0], 4}, (int64_t[]){0, 1, 0}, 0, out); break;
    case V_SQUEEZE: oc_ref_strided(x, 2, (int64_t[]){s[0], s[2]}, (int64_t[]){st[0], st[2]}, 0, out); break;
    case V_UNSQUEEZE: oc_ref_strided(x, 3, (int64_t[]){s[0], s[1], 1}, (int64_t[]){st[0], 1, 1}, 0, out); break;
    case V_FLATTEN: oc_ref_strided(x, 3, (int64_t[]){s[0], s[1] * s[2], s[3]}, (int64_t[]){st[0], st[2], 1}, 0, out); break;
    case V_CAST_F64: ref_identity(in, out, c); break;
    default:
      ref_identity(in, out, c);
      for (int64_t k = 0; k < out->numel; k++) out->v[k] = trunc(out->v[k]);
  }
}

/* ---- the table */
#define IN(k, ...) {k, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}, 0}
#define IN0(k) {k, 0, {0}, 0}
#define IDX(hi, ...) {OC_INDEX, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}, hi}
#define BIN(nm, fn, rf, a, b, g) {nm, 2, {a, b}, run_binary, ref_binary, g, .f2 = fn, .r2 = rf}
#define CMP(nm, fn, rf) {nm, 2, {IN(OC_DISCRETE, 3, 4), IN(OC_DISCRETE, 4)}, run_binary, ref_binary, 0, OC_OUT_BOOL, .f2 = fn, .r2 = rf}
#define UN(nm, fn, rf, k) {nm, 1, {IN(k, 3, 5)}, run_unary, ref_unary, 1, .f1 = fn, .r1 = rf}
#define RED(nm, kind, nd, d0, d1, keep, corr) {nm, 1, {IN(OC_ANY, 2, 3, 4)}, run_reduce, ref_reduce, 1, .i = {kind, nd, d0, d1, keep, corr}}
#define MM(nm, which, dim, keep, g, out) {nm, 1, {IN(OC_ANY, 3, 4, 5)}, run_maxmin, ref_maxmin, g, out, .i = {which, dim, keep}}
#define MATMUL(nm, a, b) {nm, 2, {a, b}, run_matmul, ref_matmul, 3, .out = OC_OUT_SAME}
#define CONV(nm, x, w, b, nin, ...) {nm, nin, {x, w, b}, run_conv, ref_conv, (1u << nin) - 1, .i = {__VA_ARGS__}}
#define CONV_POOL(nm, x, w, b, nin, ...) {nm, nin, {x, w, b}, run_conv_pool, ref_conv_pool, (1u << nin) - 1, .i = {__VA_ARGS__}}
#define POOL(nm, x, ...) {nm, 1, {x}, run_pool, ref_pool, 1, .i = {__VA_ARGS__}}
#define POOLX(nm, x, ...) {nm, 1, {x}, run_pool_opts, ref_pool_opts, 1, .i = {__VA_ARGS__}}
#define ADAPTIVE(nm, x, oh, ow) {nm, 1, {x}, run_adaptive, ref_adaptive, 1, .i = {oh, ow}}
#define VIEW(nm, v, x, g, out) {nm, 1, {x}, run_view, ref_view, g, out, .i = {v}}

static const op_case op_cases[] = {
    BIN("add", ct_add, oc_add, IN(OC_ANY, 3, 4), IN(OC_ANY, 3, 4), 3),
    BIN("add_broadcast", ct_add, oc_add, IN(OC_ANY, 3, 1, 4), IN(OC_ANY, 2, 4), 3),
    BIN("add_0dim", ct_add, oc_add, IN(OC_ANY, 2, 3), IN0(OC_ANY), 3),
    BIN("sub", ct_sub, oc_sub, IN(OC_ANY, 2, 3, 1), IN(OC_ANY, 4), 3),
    BIN("sub_0dim_first", ct_sub, oc_sub, IN0(OC_ANY), IN(OC_ANY, 2, 3), 3),
    BIN("mul", ct_mul, oc_mul, IN(OC_ANY, 3, 4), IN(OC_ANY, 1, 4), 3),
    BIN("div", ct_div, oc_div, IN(OC_ANY, 2, 3), IN(OC_POS, 2, 3), 3),
    BIN("div_broadcast", ct_div, oc_div, IN(OC_ANY, 4, 1), IN(OC_ANY, 3), 3),
    BIN("pow", ct_pow, pow, IN(OC_POS, 2, 3), IN(OC_ANY, 2, 3), 3),
    BIN("pow_broadcast", ct_pow, pow, IN(OC_POS, 3, 1), IN(OC_ANY, 1, 4), 3),
    BIN("maximum", ct_maximum, oc_max2, IN(OC_ANY, 3, 4), IN(OC_ANY, 4), 3),
    BIN("minimum", ct_minimum, oc_min2, IN(OC_ANY, 2, 3), IN(OC_ANY, 2, 3), 3),
    {"add_scalar", 1, {IN(OC_ANY, 3, 4)}, run_scalar, ref_scalar, 1, .i = {0}, .d = {1.5}},
    {"mul_scalar", 1, {IN(OC_ANY, 3, 4)}, run_scalar, ref_scalar, 1, .i = {1}, .d = {-2.5}},
    {"pow_scalar", 1, {IN(OC_POS, 3, 4)}, run_scalar, ref_scalar, 1, .i = {2}, .d = {2.5}},
    {"pow_scalar_square", 1, {IN(OC_ANY, 3, 4)}, run_scalar, ref_scalar, 1, .i = {2}, .d = {2.0}},
    CMP("eq", ct_eq, oc_eq), CMP("ne", ct_ne, oc_ne), CMP("lt", ct_lt, oc_lt),
    CMP("le", ct_le, oc_le), CMP("gt", ct_gt, oc_gt), CMP("ge", ct_ge, oc_ge),
    {"where", 3, {IN(OC_BOOL, 3, 1), IN(OC_ANY, 3, 4), IN(OC_ANY, 4)}, run_where, ref_where, 6, .out = OC_OUT_SAME},
    {"clamp", 1, {IN(OC_ANY, 4, 5)}, run_clamp, ref_clamp, 1, .d = {-0.5, 0.7}},
    {"clamp_lower_only", 1, {IN(OC_ANY, 4, 5)}, run_clamp, ref_clamp, 1, .d = {-0.5, INFINITY}},
    /* min above max: torch gives max everywhere (and a zero gradient) */
    {"clamp_min_above_max", 1, {IN(OC_ANY, 4, 5)}, run_clamp, ref_clamp, 1, .d = {0.7, -0.5}},
    UN("neg", ct_neg, oc_neg, OC_ANY), UN("abs", ct_abs, fabs, OC_ANY), UN("exp", ct_exp, exp, OC_ANY),
    UN("log", ct_log, log, OC_POS), UN("sqrt", ct_sqrt, sqrt, OC_POS), UN("relu", ct_relu, oc_relu, OC_ANY),
    UN("sigmoid", ct_sigmoid, oc_sigmoid, OC_ANY), UN("tanh", ct_tanh, tanh, OC_ANY), UN("gelu", ct_gelu, oc_gelu, OC_ANY),
    UN("silu", ct_silu, oc_silu, OC_ANY), UN("gelu_tanh", ct_gelu_tanh, oc_gelu_tanh, OC_ANY),
    RED("sum_all", 0, 0, 0, 0, 0, 0), RED("sum_dim1", 0, 1, 1, 0, 0, 0), RED("sum_dims02_keepdim", 0, 2, 0, 2, 1, 0),
    RED("sum_dim_neg1", 0, 1, -1, 0, 0, 0), RED("mean_all", 1, 0, 0, 0, 0, 0), RED("mean_dim1_keepdim", 1, 1, 1, 0, 1, 0),
    RED("mean_dims02", 1, 2, 0, 2, 0, 0), RED("var_all", 2, 0, 0, 0, 0, 1), RED("var_dim1_corr0_keepdim", 2, 1, 1, 0, 1, 0),
    RED("var_dims02_corr1", 2, 2, 0, 2, 0, 1), RED("var_dim_neg1_corr1_keepdim", 2, 1, -1, 0, 1, 1),
    MM("max_values", 0, 1, 0, 1, 0), MM("max_values_keepdim", 0, 0, 1, 1, 0), MM("max_indices", 1, 1, 0, 0, OC_OUT_I64),
    MM("max_indices_keepdim", 1, -1, 1, 0, OC_OUT_I64), MM("min_values", 2, -1, 0, 1, 0), MM("min_indices", 3, 2, 0, 0, OC_OUT_I64),
    MM("argmax", 4, 1, 0, 0, OC_OUT_I64), MM("argmax_keepdim", 4, 2, 1, 0, OC_OUT_I64),
    {"norm", 1, {IN(OC_ANY, 3, 4)}, run_norm, ref_norm, 1, .out = OC_OUT_SAME},
    MATMUL("matmul_dot", IN(OC_ANY, 5), IN(OC_ANY, 5)),
    MATMUL("matmul_2d", IN(OC_ANY, 3, 4), IN(OC_ANY, 4, 5)),
    MATMUL("matmul_1d_2d", IN(OC_ANY, 4), IN(OC_ANY, 4, 3)),
    MATMUL("matmul_2d_1d", IN(OC_ANY, 3, 4), IN(OC_ANY, 4)),
    MATMUL("matmul_batched_broadcast", IN(OC_ANY, 2, 1, 3, 4), IN(OC_ANY, 3, 4, 2)),
    MATMUL("matmul_3d_2d", IN(OC_ANY, 2, 3, 4), IN(OC_ANY, 4, 5)),
    MATMUL("matmul_1d_3d", IN(OC_ANY, 4), IN(OC_ANY, 2, 4, 3)),
    {"linear_bias", 3, {IN(OC_ANY, 2, 3, 4), IN(OC_ANY, 5, 4), IN(OC_ANY, 5)}, run_linear, ref_linear, 7, .out = OC_OUT_SAME},
    {"linear_nobias", 2, {IN(OC_ANY, 3, 4), IN(OC_ANY, 2, 4)}, run_linear, ref_linear, 3, .out = OC_OUT_SAME},
    CONV("conv2d_basic", IN(OC_ANY, 2, 3, 5, 5), IN(OC_ANY, 4, 3, 3, 3), IN(OC_ANY, 4), 3, 0),
    CONV("conv2d_stride2_pad1", IN(OC_ANY, 1, 2, 6, 5), IN(OC_ANY, 3, 2, 3, 3), IN(OC_ANY, 3), 3, 2, 2, 1, 1),
    CONV("conv2d_dilation2_pad2", IN(OC_ANY, 1, 2, 6, 6), IN(OC_ANY, 2, 2, 3, 3), IN(OC_ANY, 2), 3, 1, 1, 2, 2, 2, 2),
    /* stride 1 with the output as wide as the input: the CPU's whole-row im2col */
    CONV("conv2d_same_width_pad01", IN(OC_ANY, 2, 2, 5, 7), IN(OC_ANY, 3, 2, 3, 3), IN(OC_ANY, 3), 3, 1, 1, 0, 1),
    /* several images per thread: the input-gradient scratch is reused from image to image */
    CONV("conv2d_batch5_pad1", IN(OC_ANY, 5, 2, 4, 5), IN(OC_ANY, 3, 2, 3, 3), IN(OC_ANY, 3), 3, 1, 1, 1, 1),
    CONV("conv2d_k5_pad2", IN(OC_ANY, 1, 1, 6, 6), IN(OC_ANY, 2, 1, 5, 5), IN0(OC_ANY), 2, 1, 1, 2, 2),
    /* fused on the CPU in float32 (odd conv output: the last row and column are dropped; a strided
     * conv without bias), and a 3x3 window, which runs the ops one by one */
    CONV_POOL("conv2d_relu_max_pool2d", IN(OC_ANY, 2, 3, 7, 9), IN(OC_ANY, 4, 3, 3, 3), IN(OC_ANY, 4), 3, 1, 1, 1, 1, 2),
    /* several images (one per thread), pooled rows of 11: four SSE windows twice and a tail of
     * three, in float32 and in the halves' fused kernel (ct__supports(CT_K_conv2d_relu_pool2x2)) */
    CONV_POOL("conv2d_relu_max_pool2d_batch4", IN(OC_ANY, 4, 3, 10, 22), IN(OC_ANY, 8, 3, 3, 3), IN(OC_ANY, 8), 3, 1, 1, 1, 1, 2),
    CONV_POOL("conv2d_relu_max_pool2d_k3", IN(OC_ANY, 1, 2, 6, 6), IN(OC_ANY, 3, 2, 3, 3), IN(OC_ANY, 3), 3, 1, 1, 1, 1, 3),
    CONV_POOL("conv2d_relu_max_pool2d_s2_nobias", IN(OC_ANY, 1, 2, 9, 9), IN(OC_ANY, 3, 2, 3, 3), IN0(OC_ANY), 2, 2, 2, 0, 0, 2),
    /* ceil_mode on a 7 x 9 conv output: 4 x 5 windows, the last ones partial, so never the fused kernels */
    CONV_POOL("conv2d_relu_max_pool2d_ceil", IN(OC_ANY, 1, 2, 7, 9), IN(OC_ANY, 3, 2, 3, 3), IN(OC_ANY, 3), 3, 1, 1, 1, 1, 2, 1),
    CONV("conv2d_groups2", IN(OC_ANY, 2, 4, 4, 4), IN(OC_ANY, 6, 2, 3, 3), IN(OC_ANY, 6), 3, 1, 1, 1, 1, 1, 1, 2),
    CONV("conv2d_depthwise_nobias", IN(OC_ANY, 1, 3, 5, 5), IN(OC_ANY, 3, 1, 3, 3), IN0(OC_ANY), 2, 1, 1, 0, 0, 1, 1, 3),
    CONV("conv2d_rect_stride21_nobias", IN(OC_ANY, 2, 2, 5, 6), IN(OC_ANY, 3, 2, 2, 3), IN0(OC_ANY), 2, 2, 1, 1, 0),
    POOL("max_pool2d_k2", IN(OC_ANY, 2, 3, 6, 6), 1, 2, 2),
    /* MaxPool2d(2) in float32 runs four outputs at a time, plus a remainder, on the CPU */
    POOL("max_pool2d_k2_wide", IN(OC_ANY, 1, 2, 4, 20), 1, 2, 2),
    POOL("max_pool2d_k2_odd", IN(OC_ANY, 1, 2, 7, 11), 1, 2, 2),
    POOL("relu_max_pool2d_k2", IN(OC_ANY, 2, 3, 6, 18), 2, 2, 2),
    POOL("relu_max_pool2d_k3_s2_pad1", IN(OC_ANY, 1, 2, 7, 7), 2, 3, 3, 2, 2, 1, 1),
    POOL("max_pool2d_k3_s2_pad1", IN(OC_ANY, 1, 2, 7, 7), 1, 3, 3, 2, 2, 1, 1),
    POOL("avg_pool2d_k2", IN(OC_ANY, 2, 3, 6, 6), 0, 2, 2),
    /* global (ResNet's), divisible (avg_pool2d where a backend has no kernel), overlapping windows */
    ADAPTIVE("adaptive_avg_pool2d_1x1", IN(OC_ANY, 2, 3, 5, 7), 1, 1),
    ADAPTIVE("adaptive_avg_pool2d_6x6_to_3x2", IN(OC_ANY, 1, 2, 6, 6), 3, 2),
    ADAPTIVE("adaptive_avg_pool2d_5x7_to_3x4", IN(OC_ANY, 2, 2, 5, 7), 3, 4),
    /* non-divisible: 10 -> 3 (windows of 4 overlapping by 1), 7 -> 4 (windows of 2 and 3) and 5 -> 2 */
    ADAPTIVE("adaptive_avg_pool2d_10x10_to_3x3", IN(OC_ANY, 1, 2, 10, 10), 3, 3),
    ADAPTIVE("adaptive_avg_pool2d_7x5_to_4x2", IN(OC_ANY, 2, 1, 7, 5), 4, 2),
    POOL("avg_pool2d_k3_s2_pad1", IN(OC_ANY, 1, 2, 7, 6), 0, 3, 3, 2, 2, 1, 1),
    /* torch's options (ref_pool_opts: i = kind (+4 channels_last), k, s, p, dilation, ceil_mode,
     * exclude_pad, divisor_override). ceil_mode with k 2, s 3, p 1: along H (5) the extra window
     * would start in the right padding and the rule drops it; along W (6) it is kept, one element
     * of input and one of padding (avg's divisor: 2 along W, count_include_pad) */
    POOLX("max_pool2d_ceil_drop_and_keep", IN(OC_ANY, 1, 2, 5, 6), 1, 2, 3, 1, 0, 1),
    POOLX("avg_pool2d_ceil_drop_and_keep", IN(OC_ANY, 1, 2, 5, 6), 0, 2, 3, 1, 0, 1),
    /* k 3, s 2, no padding: the last window runs past the input (pool_size 2 x 3, not 9) */
    POOLX("avg_pool2d_ceil_k3_s2", IN(OC_ANY, 2, 2, 6, 7), 0, 3, 2, 0, 0, 1),
    POOLX("max_pool2d_ceil_k3_s2", IN(OC_ANY, 2, 2, 6, 7), 1, 3, 2, 0, 0, 1),
    /* count_include_pad=False: the border windows divide by their elements inside the input */
    POOLX("avg_pool2d_exclude_pad", IN(OC_ANY, 1, 2, 7, 6), 0, 3, 2, 1, 0, 0, 1),
    POOLX("avg_pool2d_exclude_pad_ceil", IN(OC_ANY, 1, 2, 6, 6), 0, 3, 2, 1, 0, 1, 1),
    POOLX("avg_pool2d_divisor_override", IN(OC_ANY, 1, 2, 7, 6), 0, 3, 2, 1, 0, 0, 0, 5),
    POOLX("avg_pool2d_divisor_override_ceil", IN(OC_ANY, 1, 2, 6, 6), 0, 3, 2, 1, 0, 1, 0, 4),
    /* dilation 2 with padding: windows of 5 spanning 3 elements, overlapping */
    POOLX("max_pool2d_dilation2_pad1", IN(OC_ANY, 1, 2, 7, 8), 1, 3, 1, 1, 2),
    POOLX("max_pool2d_dilation2_s2_ceil", IN(OC_ANY, 2, 2, 8, 9), 1, 3, 2, 1, 2, 1),
    POOLX("relu_max_pool2d_dilation2_ceil", IN(OC_ANY, 1, 2, 8, 9), 2, 3, 2, 1, 2, 1),
    /* MaxPool2d(2) with ceil_mode on odd sizes: not the CPU's 2x2 fast path (it has no partial window) */
    POOLX("max_pool2d_k2_ceil_odd", IN(OC_ANY, 1, 2, 7, 11), 1, 2, 0, 0, 0, 1),
    /* channels_last inputs (the CPU's NHWC kernels; elsewhere NCHW kernels around copies) */
    POOLX("max_pool2d_dilation2_ceil_channels_last", IN(OC_ANY, 2, 3, 8, 9), 5, 3, 2, 1, 2, 1),
    POOLX("relu_max_pool2d_dilation2_channels_last", IN(OC_ANY, 1, 3, 7, 8), 6, 3, 1, 1, 2),
    POOLX("avg_pool2d_exclude_pad_ceil_channels_last", IN(OC_ANY, 2, 3, 6, 7), 4, 3, 2, 1, 0, 1, 1),
    POOLX("avg_pool2d_divisor_override_channels_last", IN(OC_ANY, 1, 3, 7, 6), 4, 3, 2, 1, 0, 1, 0, 7),
    POOLX("avg_pool2d_ceil_drop_and_keep_channels_last", IN(OC_ANY, 1, 3, 5, 6), 4, 2, 3, 1, 0, 1),
    {"batch_norm_train", 3, {IN(OC_ANY, 4, 3, 2, 2), IN(OC_ANY, 3), IN(OC_ANY, 3)}, run_bn, ref_bn, 7, .i = {0}, .d = {0.1, 1e-5}},
    {"batch_norm_train_running_stats", 3, {IN(OC_ANY, 4, 3, 5), IN(OC_ANY, 3), IN(OC_POS, 3)}, run_bn, ref_bn, 0, .i = {1}, .d = {0.2, 1e-5}},
    {"batch_norm_eval", 5, {IN(OC_ANY, 2, 3, 4), IN(OC_ANY, 3), IN(OC_POS, 3), IN(OC_ANY, 3), IN(OC_ANY, 3)}, run_bn, ref_bn, 31,
     .i = {2}, .d = {0.1, 1e-5}},
    {"batch_norm_train_noaffine", 1, {IN(OC_ANY, 3, 2, 4)}, run_bn, ref_bn, 1, .i = {3}, .d = {0.1, 1e-3}},
    /* BatchNorm1d's two inputs in training: (N, C), statistics over N, and (N, C, L), over N and L */
    {"batch_norm_train_nc", 3, {IN(OC_ANY, 8, 3), IN(OC_ANY, 3), IN(OC_ANY, 3)}, run_bn, ref_bn, 7, .i = {0}, .d = {0.1, 1e-5}},
    {"batch_norm_train_ncl", 3, {IN(OC_ANY, 4, 3, 5), IN(OC_ANY, 3), IN(OC_ANY, 3)}, run_bn, ref_bn, 7, .i = {0}, .d = {0.1, 1e-5}},
    /* layer_norm over the last dim (a transformer's LayerNorm(d)) and over the last two, with and
     * without weight and bias */
    {"layer_norm_last_dim", 3, {IN(OC_ANY, 4, 6), IN(OC_ANY, 6), IN(OC_ANY, 6)}, run_ln, ref_ln, 7, .i = {1}, .d = {1e-5}},
    {"layer_norm_last_dim_3d", 3, {IN(OC_ANY, 2, 3, 5), IN(OC_ANY, 5), IN(OC_ANY, 5)}, run_ln, ref_ln, 7, .i = {1}, .d = {1e-5}},
    {"layer_norm_2dims", 3, {IN(OC_ANY, 3, 4, 5), IN(OC_ANY, 4, 5), IN(OC_ANY, 4, 5)}, run_ln, ref_ln, 7, .i = {2}, .d = {1e-5}},
    {"layer_norm_weight_only", 2, {IN(OC_ANY, 5, 4), IN(OC_ANY, 4)}, run_ln, ref_ln, 3, .i = {1}, .d = {1e-5}},
    {"layer_norm_noaffine", 1, {IN(OC_ANY, 3, 8)}, run_ln, ref_ln, 1, .i = {1}, .d = {1e-5}},
    {"layer_norm_2dims_noaffine_eps", 1, {IN(OC_ANY, 2, 3, 4)}, run_ln, ref_ln, 1, .i = {2}, .d = {1e-2}},
    {"dropout_p0_train", 1, {IN(OC_ANY, 3, 4)}, run_dropout, ref_identity, 1, .i = {1}, .d = {0.0}},
    {"dropout_eval", 1, {IN(OC_ANY, 3, 4)}, run_dropout, ref_identity, 1, .i = {0}, .d = {0.5}},
    {"softmax_dim1", 1, {IN(OC_ANY, 3, 4, 2)}, run_softmax, ref_softmax, 1, .i = {1, 0}},
    {"softmax_dim0", 1, {IN(OC_ANY, 3, 4)}, run_softmax, ref_softmax, 1, .i = {0, 0}},
    {"log_softmax_dim_neg1", 1, {IN(OC_ANY, 3, 5)}, run_softmax, ref_softmax, 1, .i = {-1, 1}},
    {"log_softmax_dim1", 1, {IN(OC_ANY, 2, 4, 3)}, run_softmax, ref_softmax, 1, .i = {1, 1}},
    {"cross_entropy_mean", 2, {IN(OC_ANY, 5, 4), IDX(4, 5)}, run_ce, ref_ce, 1, .i = {0}},
    {"cross_entropy_sum", 2, {IN(OC_ANY, 5, 4), IDX(4, 5)}, run_ce, ref_ce, 1, .i = {1}},
    {"cross_entropy_none", 2, {IN(OC_ANY, 5, 4), IDX(4, 5)}, run_ce, ref_ce, 1, .i = {2}},
    {"cross_entropy_smoothing", 2, {IN(OC_ANY, 5, 4), IDX(4, 5)}, run_ce, ref_ce, 1, .i = {0}, .d = {0.1}},
    {"cross_entropy_smoothing_none", 2, {IN(OC_ANY, 3, 6), IDX(6, 3)}, run_ce, ref_ce, 1, .i = {2}, .d = {0.25}},
    /* class weights and ignore_index (class 1, which the drawn targets hit), torch's mean over the weights */
    {"cross_entropy_ex_weight_ignore_mean", 3, {IN(OC_ANY, 9, 4), IDX(4, 9), IN(OC_POS, 4)}, run_ce_ex, ref_ce_ex, 1, .i = {0, 1, 1}},
    {"cross_entropy_ex_weight_ignore_sum", 3, {IN(OC_ANY, 9, 4), IDX(4, 9), IN(OC_POS, 4)}, run_ce_ex, ref_ce_ex, 1, .i = {1, 1, 1}},
    {"cross_entropy_ex_weight_ignore_none", 3, {IN(OC_ANY, 9, 4), IDX(4, 9), IN(OC_POS, 4)}, run_ce_ex, ref_ce_ex, 1, .i = {2, 1, 1}},
    {"cross_entropy_ex_weight_smoothing", 3, {IN(OC_ANY, 7, 5), IDX(5, 7), IN(OC_POS, 5)}, run_ce_ex, ref_ce_ex, 1,
     .i = {0, -100, 1}, .d = {0.2}},
    {"cross_entropy_ex_ignore_smoothing", 2, {IN(OC_ANY, 8, 3), IDX(3, 8)}, run_ce_ex, ref_ce_ex, 1, .i = {0, 2, 0}, .d = {0.1}},
    {"cross_entropy_ex_ignore_mean", 2, {IN(OC_ANY, 8, 3), IDX(3, 8)}, run_ce_ex, ref_ce_ex, 1, .i = {0, 0, 0}},
    {"scaled_dot_product_attention", 3, {IN(OC_ANY, 2, 2, 5, 3), IN(OC_ANY, 2, 2, 6, 3), IN(OC_ANY, 2, 2, 6, 4)}, run_sdpa,
     ref_sdpa, 7, .i = {0}},
    {"scaled_dot_product_attention_causal", 3, {IN(OC_ANY, 1, 3, 7, 4), IN(OC_ANY, 1, 3, 7, 4), IN(OC_ANY, 1, 3, 7, 2)},
     run_sdpa, ref_sdpa, 7, .i = {1}},
    {"scaled_dot_product_attention_bool_mask", 4,
     {IN(OC_ANY, 2, 1, 4, 3), IN(OC_ANY, 2, 1, 5, 3), IN(OC_ANY, 2, 1, 5, 3), IN(OC_BOOL, 4, 5)}, run_sdpa, ref_sdpa, 7, .i = {2}},
    {"scaled_dot_product_attention_float_mask_scale", 4,
     {IN(OC_ANY, 2, 2, 3, 4), IN(OC_ANY, 2, 2, 5, 4), IN(OC_ANY, 2, 2, 5, 2), IN(OC_ANY, 1, 2, 3, 5)}, run_sdpa, ref_sdpa, 7,
     .i = {3}, .d = {0.3}},
    {"mse_loss_mean", 2, {IN(OC_ANY, 3, 4), IN(OC_ANY, 3, 4)}, run_mse, ref_mse, 3, .i = {0}},
    {"mse_loss_sum", 2, {IN(OC_ANY, 3, 4), IN(OC_ANY, 3, 4)}, run_mse, ref_mse, 3, .i = {1}},
    {"mse_loss_none", 2, {IN(OC_ANY, 3, 4), IN(OC_ANY, 3, 4)}, run_mse, ref_mse, 3, .i = {2}},
    {"cat_dim1", 3, {IN(OC_ANY, 2, 3), IN(OC_ANY, 2, 1), IN(OC_ANY, 2, 2)}, run_join, ref_join, 7, .i = {1, 0}},
    {"cat_dim0", 2, {IN(OC_ANY, 1, 3), IN(OC_ANY, 2, 3)}, run_join, ref_join, 3, .i = {0, 0}},
    {"stack_dim0", 2, {IN(OC_ANY, 2, 3), IN(OC_ANY, 2, 3)}, run_join, ref_join, 3, .i = {0, 1}},
    {"stack_dim_neg1", 3, {IN(OC_ANY, 2, 3), IN(OC_ANY, 2, 3), IN(OC_ANY, 2, 3)}, run_join, ref_join, 7, .i = {-1, 1}},
    {"index_select_dim0", 2, {IN(OC_ANY, 5, 3), IDX(5, 4)}, run_index, ref_index, 1, .i = {0, 0}},
    {"index_select_dim1", 2, {IN(OC_ANY, 2, 5, 3), IDX(5, 7)}, run_index, ref_index, 1, .i = {1, 0}},
    {"embedding", 2, {IN(OC_ANY, 7, 3), IDX(7, 2, 5)}, run_embedding, ref_embedding, 1, .i = {0}},
    {"embedding_1d_indices", 2, {IN(OC_ANY, 5, 4), IDX(5, 9)}, run_embedding, ref_embedding, 1, .i = {0}},
    /* padding_idx changes the gradient only (its row gets none: test_ops_cpu checks it), not the values */
    {"embedding_padding_idx", 2, {IN(OC_ANY, 4, 3), IDX(4, 3, 4)}, run_embedding, ref_embedding, 0, .i = {1, -2}},
    {"multinomial_one_hot_rows", 1, {IN(OC_ANY, 4, 9)}, run_multinomial, ref_multinomial, 0, .out = OC_OUT_I64, .i = {5}},
    {"topk_largest_dim1", 1, {IN(OC_ANY, 3, 7)}, run_topk, ref_topk, 1, .i = {3, 1, 1, 0}},
    {"topk_largest_dim1_indices", 1, {IN(OC_ANY, 3, 7)}, run_topk, ref_topk, 0, .out = OC_OUT_I64, .i = {3, 1, 1, 1}},
    {"topk_smallest_dim0", 1, {IN(OC_ANY, 5, 2, 3)}, run_topk, ref_topk, 1, .i = {2, 0, 0, 0}},
    {"topk_smallest_dim0_indices", 1, {IN(OC_ANY, 5, 2, 3)}, run_topk, ref_topk, 0, .out = OC_OUT_I64, .i = {2, 0, 0, 1}},
    {"topk_all_sorted", 1, {IN(OC_ANY, 2, 6)}, run_topk, ref_topk, 1, .i = {6, -1, 1, 0}},
    {"gather_dim1", 2, {IN(OC_ANY, 3, 4), IDX(4, 3, 5)}, run_index, ref_index, 1, .i = {1, 1}},
    {"gather_dim0", 2, {IN(OC_ANY, 3, 4), IDX(3, 2, 4)}, run_index, ref_index, 1, .i = {0, 1}},
    VIEW("reshape", V_RESHAPE, IN(OC_ANY, 2, 3, 4), 1, 0),
    VIEW("reshape_noncontiguous", V_RESHAPE_NC, IN(OC_ANY, 3, 4), 1, 0),
    VIEW("view", V_VIEW, IN(OC_ANY, 2, 3, 4), 1, 0),
    VIEW("permute", V_PERMUTE, IN(OC_ANY, 2, 3, 4), 1, 0),
    VIEW("transpose", V_TRANSPOSE, IN(OC_ANY, 2, 3, 4), 1, 0),
    VIEW("narrow", V_NARROW, IN(OC_ANY, 4, 5), 1, 0),
    VIEW("slice_step2", V_SLICE, IN(OC_ANY, 5, 6), 1, 0),
    VIEW("expand", V_EXPAND, IN(OC_ANY, 3, 1), 1, 0),
    VIEW("squeeze", V_SQUEEZE, IN(OC_ANY, 3, 1, 4), 1, 0),
    VIEW("unsqueeze", V_UNSQUEEZE, IN(OC_ANY, 3, 4), 1, 0),
    VIEW("flatten", V_FLATTEN, IN(OC_ANY, 2, 3, 4, 5), 1, 0),
    VIEW("contiguous", V_CONTIGUOUS, IN(OC_ANY, 2, 3, 4), 1, 0),
    VIEW("cast_f64", V_CAST_F64, IN(OC_ANY, 3, 4), 1, OC_OUT_F64),
    VIEW("cast_i32", V_CAST_I32, IN(OC_ANY, 3, 4), 0, OC_OUT_I32),
};
#define OC_NCASES ((int)(sizeof op_cases / sizeof op_cases[0]))

/* ---- inputs */
static uint64_t oc_rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double oc_rng_unif(uint64_t *s) { return (double)(oc_rng_next(s) >> 11) * 0x1.0p-53; }

/* The dtype input k of case c takes when the case runs in floating dtype dt. */
static ct_dtype oc_input_dtype(const op_case *c, int k, ct_dtype dt) {
  return c->in[k].kind == OC_INDEX ? CT_I64 : c->in[k].kind == OC_BOOL ? CT_BOOL : dt;
}

/* Draw the inputs of c on the host (rounded to dt's precision) into host[], and make them tensors of
 * dtype dt (indices int64, conditions bool) on dev into ts[]. Returns 0 on failure. */
static int oc_make_inputs(const op_case *c, ct_dtype dt, ct_device dev, uint64_t seed, oc_arr *host, ct_tensor **ts) {
  uint64_t s = seed;
  for (int k = 0; k < c->n_in; k++) {
    const oc_input *in = &c->in[k];
    oc_alloc(&host[k], in->ndim, in->shape);
    for (int64_t j = 0; j < host[k].numel; j++) {
      double u = oc_rng_unif(&s), v;
      switch (in->kind) {
        case OC_POS: v = 0.5 + 1.5 * u; break;
        case OC_DISCRETE: v = (double[]){-2, -1, 1, 2}[oc_rng_next(&s) % 4]; break;
        case OC_INDEX: v = (double)(oc_rng_next(&s) % (uint64_t)in->hi); break;
        case OC_BOOL: v = (double)(oc_rng_next(&s) & 1); break;
        default: v = (0.1 + 1.9 * u) * (oc_rng_next(&s) & 1 ? 1 : -1);
      }
      /* the reference sees the values the tensor holds: rounded to dt's precision */
      if (in->kind != OC_INDEX && in->kind != OC_BOOL) {
        if (dt == CT_F32) v = (double)(float)v;
        else if (dt == CT_F16) v = (double)ct_f16_to_f32(ct_f32_to_f16((float)v));
        else if (dt == CT_BF16) v = (double)ct_bf16_to_f32(ct_f32_to_bf16((float)v));
      }
      host[k].v[j] = v;
    }
    ct_tensor *h = ct_from_host(host[k].v, in->ndim, in->shape, CT_F64, CT_DEVICE_CPU);
    ct_tensor *t = h ? ct_cast(h, oc_input_dtype(c, k, dt)) : NULL;
    ts[k] = t ? ct_to(t, dev, 0) : NULL;
    ct_tensor_free(h), ct_tensor_free(t);
    if (!ts[k]) return 0;
  }
  return 1;
}

static void oc_free_inputs(const op_case *c, oc_arr *host, ct_tensor **ts) {
  for (int k = 0; k < c->n_in; k++) free(host[k].v), host[k].v = NULL, ct_tensor_free(ts[k]), ts[k] = NULL;
}

/* The dtype the output of c must have when its floating inputs have dtype dt. */
static ct_dtype oc_output_dtype(const op_case *c, ct_dtype dt) {
  switch (c->out) {
    case OC_OUT_BOOL: return CT_BOOL;
    case OC_OUT_I64: return CT_I64;
    case OC_OUT_F64: return CT_F64;
    case OC_OUT_I32: return CT_I32;
    default: return dt;
  }
}

/* Gradcheck adapter: ct_gradcheck wants every input to be a float64 leaf that requires grad, so it
 * sees only the differentiable inputs and this fills in the others. */
typedef struct {
  const op_case *c;
  ct_tensor *all[5];
} oc_grad_ctx;

static ct_tensor *oc_grad_fn(ct_tensor *const *inputs, void *ctx) {
  oc_grad_ctx *g = ctx;
  ct_tensor *all[5];
  for (int k = 0, j = 0; k < g->c->n_in; k++) all[k] = g->c->grad & (1u << k) ? inputs[j++] : g->all[k];
  return g->c->run(all, g->c);
}

/* gradcheck in float64 of the inputs of case c marked in c->grad, on dev (the CPU suite and the
 * CUDA suite share it). Needs testutil.h (cmocka) included before this header. */
static void oc_check_grad(const op_case *c, ct_device dev, uint64_t seed) {
  oc_arr host[5] = {{0}};
  oc_grad_ctx g = {.c = c};
  ct_assert_nonnull((void *)(intptr_t)oc_make_inputs(c, CT_F64, dev, seed, host, g.all));
  ct_tensor *leaves[5];
  int n = 0;
  for (int k = 0; k < c->n_in; k++)
    if (c->grad & (1u << k)) {
      ct_assert_ok(ct_requires_grad_(g.all[k], 1));
      leaves[n++] = g.all[k];
    }
  ct_status s = ct_gradcheck(oc_grad_fn, &g, n, leaves, 1e-6, 1e-5, 1e-3);
  char name[32];
  if (s != CT_OK) fprintf(stderr, "gradcheck of %s on %s: %s\n", c->name, ct_device_str(dev, name, sizeof name), ct_last_error());
  ct_assert_ok(s);
  oc_free_inputs(c, host, g.all);
}

/* The backward in float32 (the training dtype, with its own fast paths) against the backward in
 * float64 of the same values: both get the upstream gradient r (fixed random weights of the
 * output's shape, so that no symmetric cancellation hides an error) through loss = sum(out * r). */
static ct_tensor **oc_backward_grads(const op_case *c, ct_tensor **in, ct_tensor *r) {
  for (int k = 0; k < c->n_in; k++)
    if (c->grad & (1u << k)) ct_assert_ok(ct_requires_grad_(in[k], 1));
  ct_tensor *out = ct_assert_nonnull(c->run(in, c));
  ct_tensor *rc = ct_assert_nonnull(ct_cast(r, ct_tensor_dtype(out)));
  ct_tensor *prod = ct_assert_nonnull(ct_mul(out, rc)), *loss = ct_assert_nonnull(ct_sum(prod, 0, NULL, 0));
  ct_assert_ok(ct_backward(loss));
  ct_tensor_free(loss), ct_tensor_free(prod), ct_tensor_free(rc), ct_tensor_free(out);
  return in;
}

/* The float64 reference of conv + relu + max-pool in float16/bfloat16 where the op runs unfused
 * (src/ops/conv.c: a backend without a fused kernel for dt, or another pooling than 2x2): ct_conv2d
 * in dt, then ct_relu_max_pool2d on its rounded output, as PyTorch's float16/bfloat16 conv2d then
 * max_pool2d. The pooling's argmax is taken over that rounded output, and the backend's convolution
 * need not round like float64 does: cuDNN's bfloat16 conv2d differs from the correctly rounded
 * result by an ulp here and there (seen on an H200). Where that changes a window's winner, the
 * gradient goes to another element, a whole term away from a float64 reference: not a wrong
 * backward, the discontinuity of max. So the reference pools the device's own dt conv output
 * (oc_conv_pool_c, widened to float64) while its gradient flows through the float64 convolution:
 * z + (c - detach(z)) has c's values (exactly: c and z agree to dt's precision, so the difference
 * is exact) and z's gradient. A fused kernel pools the float32 conv output instead
 * (src/backend/cpu/conv_relu_pool.c), which the plain float64 reference matches. */
static int oc_conv_pool_fused(const op_case *c, ct_device dev, ct_dtype dt) {
  const ct_backend *be = ct__backend(dev.kind);
  const oc_input *x = &c->in[0], *w = &c->in[1];
  int64_t Ho = (x->shape[2] + 2 * c->i[2] - w->shape[2]) / (c->i[0] ? c->i[0] : 1) + 1;
  int64_t Wo = (x->shape[3] + 2 * c->i[3] - w->shape[3]) / (c->i[1] ? c->i[1] : 1) + 1;
  return ct__supports(be, CT_K_conv2d_relu_pool2x2, dt, CT_CONTIGUOUS_FORMAT) && c->i[4] == 2 && !c->i[5] && Ho >= 2 && Wo >= 2;
}
static ct_tensor *oc_conv_pool_c; /* the device's conv output in dt, as float64 */
static ct_tensor *run_conv_pool_pooling_c(ct_tensor *const *in, const op_case *c) {
  ct_conv2d_opts co = {.stride = {c->i[0], c->i[1]}, .padding = {c->i[2], c->i[3]}};
  ct_pool2d_opts po = {.kernel = {c->i[4], c->i[4]}, .ceil_mode = c->i[5]};
  ct_tensor *z = ct_conv2d(in[0], in[1], c->n_in > 2 ? in[2] : NULL, &co);
  ct_tensor *zd = z ? ct_detach(z) : NULL, *d = zd ? ct_sub(oc_conv_pool_c, zd) : NULL;
  ct_tensor *zc = d ? ct_add(z, d) : NULL, *out = zc ? ct_relu_max_pool2d(zc, &po) : NULL;
  ct_tensor_free(z), ct_tensor_free(zd), ct_tensor_free(d), ct_tensor_free(zc);
  return out;
}
/* oc_conv_pool_c for inputs inl (dt, on the device), computed without recording a tape */
static void oc_conv_pool_set_c(const op_case *c, ct_tensor **inl) {
  ct_conv2d_opts co = {.stride = {c->i[0], c->i[1]}, .padding = {c->i[2], c->i[3]}};
  ct_no_grad_begin();
  ct_tensor *y = ct_conv2d(inl[0], inl[1], c->n_in > 2 ? inl[2] : NULL, &co);
  oc_conv_pool_c = y ? ct_cast(y, CT_F64) : NULL;
  ct_no_grad_end();
  ct_tensor_free(y);
  ct_assert_nonnull(oc_conv_pool_c);
}

/* The backward in a low dtype dt (float32, the training dtype with its own fast paths, or float16
 * and bfloat16, mixed precision's) against the backward in float64 of the same values. Gradients
 * must come back in dt, as in PyTorch. */
static void oc_check_grad_dtype(const op_case *c, ct_device dev, uint64_t seed, ct_dtype dt, double atol, double rtol) {
  oc_arr host[5] = {{0}};
  ct_tensor *inl[5] = {0}, *in64[5] = {0};
  ct_assert_nonnull((void *)(intptr_t)oc_make_inputs(c, dt, dev, seed, host, inl));
  for (int k = 0; k < c->n_in; k++)
    in64[k] = ct_assert_nonnull(ct_tensor_dtype(inl[k]) == dt ? ct_cast(inl[k], CT_F64) : ct_tensor_retain(inl[k]));
  /* the output's shape, from a run without grad */
  ct_tensor *probe = ct_assert_nonnull(c->run(in64, c));
  int64_t n = ct_tensor_numel(probe);
  double *rv = malloc((size_t)(n ? n : 1) * sizeof *rv);
  uint64_t s = seed ^ 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < n; i++) rv[i] = 2.0 * oc_rng_unif(&s) - 1.0;
  ct_tensor *rh = ct_assert_nonnull(ct_from_host(rv, ct_tensor_ndim(probe), ct_tensor_shape(probe), CT_F64, CT_DEVICE_CPU));
  /* r rounded to dt, so that both sides get the same upstream gradient */
  ct_tensor *rl = ct_assert_nonnull(ct_cast(rh, dt)), *r64 = ct_assert_nonnull(ct_cast(rl, CT_F64));
  ct_tensor *r = ct_assert_nonnull(ct_to(r64, dev, 0));
  oc_backward_grads(c, inl, r);
  op_case c64 = *c; /* unfused conv + relu + max-pool in float16/bfloat16: pooled as the device pooled */
  if (c->run == run_conv_pool && (dt == CT_F16 || dt == CT_BF16) && !oc_conv_pool_fused(c, dev, dt))
    c64.run = run_conv_pool_pooling_c, oc_conv_pool_set_c(c, inl);
  oc_backward_grads(&c64, in64, r);
  ct_tensor_free(oc_conv_pool_c), oc_conv_pool_c = NULL;
  for (int k = 0; k < c->n_in; k++)
    if (c->grad & (1u << k)) {
      ct_tensor *gl = ct_grad(inl[k]), *g64 = ct_grad(in64[k]);
      if (!gl || !g64) fprintf(stderr, "case %s: input %d has no %s or float64 gradient\n", c->name, k, ct_dtype_name(dt));
      ct_assert_nonnull(gl), ct_assert_nonnull(g64);
      assert_int_equal(ct_tensor_dtype(gl), dt);
      ct_tensor *g64h = ct_assert_nonnull(ct_to(g64, CT_DEVICE_CPU, 0)), *glh = ct_assert_nonnull(ct_to(gl, CT_DEVICE_CPU, 0));
      ct_assert_close(glh, g64h, atol, rtol);
      ct_tensor_free(g64h), ct_tensor_free(glh);
    }
  free(rv);
  ct_tensor_free(probe), ct_tensor_free(rh), ct_tensor_free(rl), ct_tensor_free(r64), ct_tensor_free(r);
  for (int k = 0; k < c->n_in; k++) ct_tensor_free(in64[k]);
  oc_free_inputs(c, host, inl);
}

static void oc_check_grad_f32(const op_case *c, ct_device dev, uint64_t seed, double atol, double rtol) {
  oc_check_grad_dtype(c, dev, seed, CT_F32, atol, rtol);
}

#endif
