/* src/ops/norm.c: batch_norm, layer_norm, dropout, softmax and log_softmax.
 * dropout is composed of differentiable ops, so its gradient comes from the rules of those ops;
 * softmax has a fused kernel and its own rule; batch_norm and layer_norm have kernels of their own
 * (batch_norm, batch_norm_backward, layer_norm, layer_norm_backward) and one tape node where the
 * backend has them and they take its tensors, else they are composed of mean, var and elementwise
 * ops. */
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/autocast.h"
#include "ops/memory_format.h"
#include "ops/ops_internal.h"

/* r = (1 - m) r + m s, in place, under no-grad (torch's running-statistics update). */
static ct_status running_update(ct_tensor *r, ct_tensor *s, double m) {
  ct_tensor *rs = ct_mul_scalar(r, 1.0 - m), *ss = ct_mul_scalar(s, m);
  ct_tensor *sum = rs && ss ? ct_add(rs, ss) : NULL;
  ct_status st = sum ? ct_copy_(r, sum) : ct_last_status();
  ct_tensor_free(rs), ct_tensor_free(ss), ct_tensor_free(sum);
  return st;
}

/* The kernels take a contiguous x (N, C, *). A dense channels_last x (N, C, H, W), stored (N, H, W,
 * C), is passed as its (N H W, C) view: the same per-channel statistics, with the channels as the
 * inner dim (the kernels' S = 1 case). Composing channels_last batch norm of elementwise ops instead
 * made channels_last resnet18 7x slower than NCHW on the CPU (docs/perf-history.md). */
static int bn_channels_last(const ct_tensor *x) { return !ct_tensor_is_contiguous(x); }

/* t's (N H W, C) view for the kernels, freed by bn_rows_free; t itself when not channels_last. NULL
 * with the error set. */
static ct_tensor *bn_rows(ct_tensor *t, int channels_last) {
  if (!channels_last || !t) return t;
  int64_t shape[2] = {t->shape[0] * t->shape[2] * t->shape[3], t->shape[1]}, stride[2] = {t->shape[1], 1};
  return ct__view_of(t, 2, shape, stride, t->offset);
}
static void bn_rows_free(ct_tensor *v, int channels_last) {
  if (channels_last) ct_tensor_free(v);
}

/* The batch norm kernels' backward: saved are x, save_mean, save_invstd and w (NULL without weight),
 * all of x's dtype, or, for a half x, float32 but x (bn_kernel's pdt); iv[0] is training, iv[1] 1 for
 * a channels_last x (gx channels_last too). gw and gb come in the statistics' dtype. */
static ct_status bw_batch_norm(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->saved[0], *mean = n->saved[1], *invstd = n->saved[2], *w = n->saved[3];
  int cl = (int)n->iv[1];
  ct_tensor *gc = cl ? ct__to_format(g, x->dtype, CT_CHANNELS_LAST) : ct_contiguous(g);
  if (!gc) return ct_last_status();
  if (n->in[0]) grads[0] = ct__alloc_format(x->ndim, x->shape, x->dtype, x->device, cl ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT);
  if (n->in[1]) grads[1] = ct__alloc(1, &x->shape[1], mean->dtype, x->device);
  if (n->in[2]) grads[2] = ct__alloc(1, &x->shape[1], mean->dtype, x->device);
  ct_tensor *xk = bn_rows(x, cl), *gk = bn_rows(gc, cl), *gxk = bn_rows(grads[0], cl);
  ct_status s = (n->in[0] && !grads[0]) || (n->in[1] && !grads[1]) || (n->in[2] && !grads[2]) || !xk || !gk ||
                        (grads[0] && !gxk)
                    ? ct_last_status()
                    : CT_KERNEL_CALL(g->storage->backend, batch_norm_backward, "batch_norm backward", xk, gxk, grads[1],
                                     grads[2], gk, xk, w, mean, invstd, (int)n->iv[0]);
  bn_rows_free(xk, cl), bn_rows_free(gk, cl), bn_rows_free(gxk, cl);
  ct_tensor_free(gc);
  return s;
}

/* 1 when batch_norm runs on its kernels (the checks of ct_batch_norm passed): the backend has both,
 * x is contiguous or dense channels_last, and either x is float32 or float64, weight and bias keep
 * x's dtype (promote to it) and the running statistics have x's dtype, or x is float16 or bfloat16,
 * the backend takes that (its supports, CT_K_batch_norm: the mixed kernels) and weight, bias and the
 * running statistics are float32 (autocast's case: half activations, float32 parameters); the
 * running statistics, in training, come both or neither
 * (the composition's behaviour for one of them stays its own), and, in eval, need no gradient (the
 * kernels give none). Else the front-end composes (other strides, mixed dtypes, other backends), as
 * before the kernels came. */
static int bn_kernel_takes(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b, int training) {
  const ct_backend *be = x->storage->backend;
  if (!ct__has_kernel(be, CT_K_batch_norm) || !ct__has_kernel(be, CT_K_batch_norm_backward)) return 0;
  int cl = ct_tensor_is_contiguous_format(x, CT_CHANNELS_LAST);
  if (!ct_tensor_is_contiguous(x) && !cl) return 0;
  if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
    /* the mixed kernels: float32 parameters and statistics, where the backend has them */
    if (!ct__supports(be, CT_K_batch_norm, x->dtype, cl ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT)) return 0;
    const ct_tensor *ps[4] = {w, b, rm, rv};
    for (int i = 0; i < 4; i++)
      if (ps[i] && ps[i]->dtype != CT_F32) return 0;
  } else {
    if (x->dtype != CT_F32 && x->dtype != CT_F64) return 0;
    if ((w && ct_promote_types(x->dtype, w->dtype) != x->dtype) || (b && ct_promote_types(x->dtype, b->dtype) != x->dtype))
      return 0;
    if ((rm && rm->dtype != x->dtype) || (rv && rv->dtype != x->dtype)) return 0;
  }
  if (training) return !rm == !rv;
  return !(ct_grad_enabled() && (rm->requires_grad || rv->requires_grad));
}

/* The tail both norm kernels' front-ends share, after the forward kernel ran with status s: y
 * recorded as one node named name (rule bw) on in[3] = (x, weight, bias), keeping x, the two
 * per-channel or per-row statistics and w (NULL: none) and the two integer parameters iv0 and iv1;
 * then w, b and the statistics released. y, or NULL (y freed) with the error set. */
static ct_tensor *norm_record(ct_status s, ct_tensor *y, const char *name, ct_backward_fn bw, ct_tensor *const in[3],
                              ct_tensor *x, ct_tensor *stat0, ct_tensor *stat1, ct_tensor *w, ct_tensor *b, int64_t iv0,
                              int64_t iv1) {
  ct_node *n = NULL;
  if (s == CT_OK) s = ct__record(y, name, bw, 3, in, &n);
  if (s == CT_OK && n) {
    n->iv[0] = iv0, n->iv[1] = iv1;
    s = ct__save_detached(n, 0, x);
    if (s == CT_OK) s = ct__save_detached(n, 1, stat0);
    if (s == CT_OK) s = ct__save_detached(n, 2, stat1);
    if (s == CT_OK && w) s = ct__save_detached(n, 3, w);
  }
  ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(stat0), ct_tensor_free(stat1);
  if (s != CT_OK) {
    ct_tensor_free(y);
    return NULL;
  }
  return y;
}

/* batch_norm on its kernels, recorded as one node on (x, weight, bias) */
static ct_tensor *bn_kernel(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *weight, ct_tensor *bias, int training,
                            double momentum, double eps) {
  const ct_backend *be = x->storage->backend;
  int64_t C = x->shape[1];
  int cl = bn_channels_last(x);
  /* the parameters' and statistics' dtype: x's, or float32 for a half x (the mixed kernels) */
  ct_dtype pdt = x->dtype == CT_F16 || x->dtype == CT_BF16 ? CT_F32 : x->dtype;
  ct_tensor *w = weight ? ct_cast(weight, pdt) : NULL, *b = bias ? ct_cast(bias, pdt) : NULL;
  ct_tensor *y = (!weight || w) && (!bias || b)
                     ? ct__alloc_format(x->ndim, x->shape, x->dtype, x->device, cl ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT)
                     : NULL;
  ct_tensor *mean = y ? ct__alloc(1, &C, pdt, x->device) : NULL;
  ct_tensor *invstd = mean ? ct__alloc(1, &C, pdt, x->device) : NULL;
  ct_tensor *xk = invstd ? bn_rows(x, cl) : NULL, *yk = xk ? bn_rows(y, cl) : NULL;
  ct_status s = yk ? CT_KERNEL_CALL(be, batch_norm, "batch_norm", xk, yk, mean, invstd, xk, w, b, rm, rv, training, momentum, eps)
                   : ct_last_status();
  if (s == CT_OK && training) ct__bump_version(rm), ct__bump_version(rv); /* updated in place */
  bn_rows_free(xk, cl), bn_rows_free(yk, cl);
  return norm_record(s, y, "batch_norm", bw_batch_norm, (ct_tensor *[]){x, w, b}, x, mean, invstd, w, b, training != 0, cl);
}

ct_tensor *ct_batch_norm(ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var, ct_tensor *weight,
                         ct_tensor *bias, int training, double momentum, double eps) {
  if (!x) return ct__null_arg("batch_norm", "x");
  /* No autocast policy: batch_norm is in none of torch's lists, so a half input stays half; the
   * mixed path below computes in float32 with the float32 parameters and running statistics, as
   * cuDNN's and ATen's mixed-type batch norms do. */
  char sx[160], sp[160];
  ct_tensor *all[5] = {x, running_mean, running_var, weight, bias};
  if (ct__same_device("batch_norm", 5, all, (const char *[]){"input", "running_mean", "running_var", "weight", "bias"}) != CT_OK)
    return NULL;
  if (x->ndim < 2) CT_FAIL_NULL(CT_ESHAPE, "batch_norm: expected input (N, C, *), got %s", ct_shape_str(x, sx, sizeof sx));
  for (int i = 0; i < 5; i++)
    if (all[i] && !ct_dtype_is_floating(all[i]->dtype))
      CT_FAIL_NULL(CT_EDTYPE, "batch_norm: needs floating tensors, got %s of %s (cast it first, e.g. ct_cast(x, CT_F32))",
                   (const char *[]){"input", "running_mean", "running_var", "weight", "bias"}[i], ct_dtype_name(all[i]->dtype));
  if (!(eps >= 0)) CT_FAIL_NULL(CT_EINVAL, "batch_norm: eps must be >= 0, got %g (PyTorch's default is 1e-5)", eps);
  int64_t C = x->shape[1];
  for (int i = 1; i < 5; i++)
    if (all[i] && (all[i]->ndim != 1 || all[i]->shape[0] != C))
      CT_FAIL_NULL(CT_ESHAPE, "batch_norm: parameter %s does not match %lld channels of input %s",
                   ct_shape_str(all[i], sp, sizeof sp), (long long)C, ct_shape_str(x, sx, sizeof sx));
  if (!training && (!running_mean || !running_var))
    CT_FAIL_NULL(CT_EINVAL, "batch_norm: eval mode needs running_mean and running_var");
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++)
    if (d != 1) count *= x->shape[d];
  if (training && count <= 1)
    CT_FAIL_NULL(CT_ESHAPE, "batch_norm: expected more than 1 value per channel when training, got input %s",
                 ct_shape_str(x, sx, sizeof sx));
  if (bn_kernel_takes(x, running_mean, running_var, weight, bias, training))
    return bn_kernel(x, running_mean, running_var, weight, bias, training, momentum, eps);
  if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
    /* float32 statistics and normalization for a half input (as cuDNN's mixed batch norm): mean
     * and variance of half values rounded to half would lose the variance's low bits, and the
     * running statistics (float32 buffers) must not be updated from rounded ones. One rounding at
     * the end; the output keeps x's dtype whatever the parameters' dtype. */
    ct_tensor *xf = ct_cast(x, CT_F32);
    ct_tensor *yf = xf ? ct_batch_norm(xf, running_mean, running_var, weight, bias, training, momentum, eps) : NULL;
    ct_tensor_free(xf);
    return ct__cast_result(yf, x->dtype);
  }
  int dims[CT_MAX_DIMS], nd = 0;
  int64_t cshape[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    cshape[d] = d == 1 ? C : 1;
    if (d != 1) dims[nd++] = d;
  }
  ct_tensor *mean, *var;
  if (training) {
    mean = ct_mean(x, nd, dims, 1);
    var = ct_var(x, nd, dims, 0, 1); /* biased variance normalizes, as torch */
    if (mean && var && running_mean) {
      ct_no_grad_begin();
      ct_tensor *m1 = ct_reshape(mean, 1, &C), *v1 = ct_reshape(var, 1, &C);
      ct_tensor *vu = v1 ? ct_mul_scalar(v1, (double)count / (double)(count - 1)) : NULL; /* unbiased for the record */
      ct_status s = m1 && vu ? running_update(running_mean, m1, momentum) : ct_last_status();
      if (s == CT_OK) s = running_update(running_var, vu, momentum);
      ct_tensor_free(m1), ct_tensor_free(v1), ct_tensor_free(vu);
      ct_no_grad_end();
      if (s != CT_OK) {
        ct_tensor_free(mean), ct_tensor_free(var);
        return NULL;
      }
    }
  } else {
    mean = ct_reshape(running_mean, x->ndim, cshape);
    var = ct_reshape(running_var, x->ndim, cshape);
  }
  ct_tensor *xc = ct_sub(x, mean);
  ct_tensor *ve = ct_add_scalar(var, eps);
  ct_tensor *sd = ct_sqrt(ve);
  ct_tensor *y = ct_div(xc, sd);
  ct_tensor_free(mean), ct_tensor_free(var), ct_tensor_free(xc), ct_tensor_free(ve), ct_tensor_free(sd);
  if (y && weight) {
    ct_tensor *w = ct_reshape(weight, x->ndim, cshape), *t = ct_mul(y, w);
    ct_tensor_free(w), ct_tensor_free(y);
    y = t;
  }
  if (y && bias) {
    ct_tensor *b = ct_reshape(bias, x->ndim, cshape), *t = ct_add(y, b);
    ct_tensor_free(b), ct_tensor_free(y);
    y = t;
  }
  return y;
}

/* The layer norm kernels' backward: saved are x, save_mean, save_rstd and w (NULL without weight);
 * iv[0] is D, the normalized elements of a row. */
static ct_status bw_layer_norm(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->saved[0], *mean = n->saved[1], *rstd = n->saved[2], *w = n->saved[3];
  ct_tensor *gc = ct_contiguous(g);
  if (!gc) return ct_last_status();
  if (n->in[0]) grads[0] = ct__alloc(x->ndim, x->shape, x->dtype, x->device);
  if (n->in[1]) grads[1] = ct__alloc(n->in[1]->ndim, n->in[1]->shape, x->dtype, x->device);
  if (n->in[2]) grads[2] = ct__alloc(n->in[2]->ndim, n->in[2]->shape, x->dtype, x->device);
  ct_status s = (n->in[0] && !grads[0]) || (n->in[1] && !grads[1]) || (n->in[2] && !grads[2])
                    ? ct_last_status()
                    : CT_KERNEL_CALL(g->storage->backend, layer_norm_backward, "layer_norm backward", x, grads[0], grads[1],
                                     grads[2], gc, x, w, mean, rstd, n->iv[0]);
  ct_tensor_free(gc);
  return s;
}

/* 1 when layer_norm runs on its kernels (the checks of ct_layer_norm passed): the backend has both,
 * x is float32 or float64 and contiguous, and weight and bias have x's dtype. Else the front-end
 * composes (other strides, mixed dtypes, other backends). */
static int ln_kernel_takes(ct_tensor *x, ct_tensor *w, ct_tensor *b) {
  const ct_backend *be = x->storage->backend;
  if (!ct__has_kernel(be, CT_K_layer_norm) || !ct__has_kernel(be, CT_K_layer_norm_backward)) return 0;
  if ((x->dtype != CT_F32 && x->dtype != CT_F64) || !ct_tensor_is_contiguous(x)) return 0;
  return (!w || w->dtype == x->dtype) && (!b || b->dtype == x->dtype);
}

/* layer_norm on its kernels over the last D elements, recorded as one node on (x, weight, bias) */
static ct_tensor *ln_kernel(ct_tensor *x, ct_tensor *weight, ct_tensor *bias, int64_t D, double eps) {
  const ct_backend *be = x->storage->backend;
  int64_t R = D > 0 ? ct_tensor_numel(x) / D : 0;
  ct_tensor *w = weight ? ct_contiguous(weight) : NULL, *b = bias ? ct_contiguous(bias) : NULL;
  ct_tensor *y = (!weight || w) && (!bias || b) ? ct__alloc(x->ndim, x->shape, x->dtype, x->device) : NULL;
  ct_tensor *mean = y ? ct__alloc(1, &R, x->dtype, x->device) : NULL;
  ct_tensor *rstd = mean ? ct__alloc(1, &R, x->dtype, x->device) : NULL;
  ct_status s = rstd ? CT_KERNEL_CALL(be, layer_norm, "layer_norm", x, y, mean, rstd, x, w, b, D, eps) : ct_last_status();
  return norm_record(s, y, "layer_norm", bw_layer_norm, (ct_tensor *[]){x, weight, bias}, x, mean, rstd, w, b, D, 0);
}

ct_tensor *ct_layer_norm(ct_tensor *x, int normalized_ndim, ct_tensor *weight, ct_tensor *bias, double eps) {
  if (!x) return ct__null_arg("layer_norm", "x");
  CT__AUTOCAST(CT__AUTOCAST_F32_GPU, ct_layer_norm(x, normalized_ndim, weight, bias, eps), &x, &weight, &bias);
  static const char *const names[3] = {"input", "weight", "bias"};
  char sx[160], sp[160];
  ct_tensor *all[3] = {x, weight, bias};
  if (ct__same_device("layer_norm", 3, all, names) != CT_OK) return NULL;
  const int k = normalized_ndim;
  if (k < 1 || k > x->ndim)
    CT_FAIL_NULL(CT_EINVAL, "layer_norm: normalized_ndim must be in [1, %d] for input %s (the number of trailing dims to "
                 "normalize over), got %d", x->ndim, ct_shape_str(x, sx, sizeof sx), normalized_ndim);
  for (int i = 0; i < 3; i++)
    if (all[i] && !ct_dtype_is_floating(all[i]->dtype))
      CT_FAIL_NULL(CT_EDTYPE, "layer_norm: needs floating tensors, got %s of %s (cast it first, e.g. ct_cast(x, CT_F32))",
                   names[i], ct_dtype_name(all[i]->dtype));
  if (!(eps >= 0)) CT_FAIL_NULL(CT_EINVAL, "layer_norm: eps must be >= 0, got %g (PyTorch's default is 1e-5)", eps);
  const int64_t *ns = x->shape + (x->ndim - k); /* the normalized shape */
  for (int i = 1; i < 3; i++) {
    if (!all[i]) continue;
    int fits = all[i]->ndim == k;
    for (int d = 0; fits && d < k; d++) fits = all[i]->shape[d] == ns[d];
    if (!fits) {
      char se[160];
      CT_FAIL_NULL(CT_ESHAPE, "layer_norm: %s %s does not match the last %d dim%s of input %s (normalized_ndim %d): expected %s",
                   names[i], ct_shape_str(all[i], sp, sizeof sp), k, k == 1 ? "" : "s", ct_shape_str(x, sx, sizeof sx), k,
                   ct__shape_str(k, ns, se, sizeof se));
    }
  }
  if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
    /* float32 statistics and normalization for a half input, as torch's kernels accumulate in
     * float: the variance of half values rounded to half would lose its low bits. One rounding at
     * the end; the output keeps x's dtype whatever the parameters' dtype. */
    ct_tensor *xf = ct_cast(x, CT_F32);
    ct_tensor *yf = xf ? ct_layer_norm(xf, k, weight, bias, eps) : NULL;
    ct_tensor_free(xf);
    return ct__cast_result(yf, x->dtype);
  }
  int64_t D = 1;
  for (int d = 0; d < k; d++) D *= ns[d];
  if (ln_kernel_takes(x, weight, bias)) return ln_kernel(x, weight, bias, D, eps);
  int dims[CT_MAX_DIMS];
  for (int d = 0; d < k; d++) dims[d] = x->ndim - k + d;
  ct_tensor *mean = ct_mean(x, k, dims, 1);
  ct_tensor *var = mean ? ct_var(x, k, dims, 0, 1) : NULL; /* biased, as torch */
  ct_tensor *xc = var ? ct_sub(x, mean) : NULL;
  ct_tensor *ve = xc ? ct_add_scalar(var, eps) : NULL;
  ct_tensor *sd = ve ? ct_sqrt(ve) : NULL;
  ct_tensor *y = sd ? ct_div(xc, sd) : NULL;
  ct_tensor_free(mean), ct_tensor_free(var), ct_tensor_free(xc), ct_tensor_free(ve), ct_tensor_free(sd);
  if (y && weight) { /* (D1..Dk) broadcasts against x's trailing dims */
    ct_tensor *t = ct_mul(y, weight);
    ct_tensor_free(y);
    y = t;
  }
  if (y && bias) {
    ct_tensor *t = ct_add(y, bias);
    ct_tensor_free(y);
    y = t;
  }
  return y;
}

ct_tensor *ct_dropout(ct_tensor *x, double p, int training, ct_generator *gen) {
  if (!x) return ct__null_arg("dropout", "x");
  if (!(p >= 0 && p <= 1)) CT_FAIL_NULL(CT_EINVAL, "dropout: probability must be in [0, 1], got %g", p);
  if (!training || p == 0) return ct__retain_tracked(x);
  if (p == 1) return ct_mul_scalar(x, 0.0);
  ct_tensor *u = ct_rand(x->ndim, x->shape, 0, 1, ct_dtype_is_floating(x->dtype) ? x->dtype : CT_F32, x->device, gen);
  ct_tensor *keep = u ? ct_scalar(1.0 - p, u->dtype, x->device) : NULL;
  ct_tensor *mask = keep ? ct_lt(u, keep) : NULL;
  ct_tensor *kept = mask ? ct_mul(x, mask) : NULL;
  ct_tensor *y = kept ? ct_mul_scalar(kept, 1.0 / (1.0 - p)) : NULL;
  ct_tensor_free(u), ct_tensor_free(keep), ct_tensor_free(mask), ct_tensor_free(kept);
  return y;
}

static ct_status bw_softmax(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gx = gc ? ct__alloc(g->ndim, g->shape, g->dtype, g->device) : NULL;
  ct_status s = gx ? CT_KERNEL_CALL(g->storage->backend, softmax_backward, __func__, gc, gx, gc, n->saved[0], (int)n->iv[0]) : ct_last_status();
  ct_tensor_free(gc);
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

/* softmax over the last dim of a contiguous tensor, recorded */
static ct_tensor *softmax_last(ct_tensor *x, int log_) {
  ct_tensor *y = ct__alloc(x->ndim, x->shape, x->dtype, x->device);
  ct_status s = y ? CT_KERNEL_CALL(x->storage->backend, softmax, log_ ? "log_softmax" : "softmax", x, y, x, log_) : ct_last_status();
  if (s != CT_OK) return ct_tensor_free(y), NULL;
  ct_node *n;
  if (ct__record(y, log_ ? "log_softmax" : "softmax", bw_softmax, 1, &x, &n) != CT_OK || ct__save_detached(n, 0, y) != CT_OK)
    return ct_tensor_free(y), NULL;
  if (n) n->iv[0] = log_;
  return y;
}

static ct_tensor *softmax_dim(const char *op, ct_tensor *x, int dim, int log_) {
  if (!x) return ct__null_arg(op, "x");
  CT__AUTOCAST(CT__AUTOCAST_F32_GPU, softmax_dim(op, x, dim, log_), &x);
  char sx[160];
  int d = ct__dim(dim, x->ndim);
  if (x->ndim == 0 || d < 0) CT_FAIL_NULL(CT_ESHAPE, "%s: dim %d out of range for shape %s", op, dim, ct_shape_str(x, sx, sizeof sx));
  /* As torch, which has no integer softmax kernel: an integer input is a dtype error, not a cast. */
  if (!ct_dtype_is_floating(x->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "%s: needs a floating input, got %s of %s (cast it first, e.g. ct_cast(x, CT_F32))", op,
                 ct_dtype_name(x->dtype), ct_shape_str(x, sx, sizeof sx));
  ct_tensor *xf = ct__retain_tracked(x);
  ct_tensor *xt = xf ? ct_transpose(xf, d, -1) : NULL;
  ct_tensor *xc = xt ? ct_contiguous(xt) : NULL;
  ct_tensor *yc = xc ? softmax_last(xc, log_) : NULL;
  ct_tensor *y = yc ? ct_transpose(yc, d, -1) : NULL;
  ct_tensor_free(xf), ct_tensor_free(xt), ct_tensor_free(xc), ct_tensor_free(yc);
  return y;
}

ct_tensor *ct_softmax(ct_tensor *x, int dim) { return softmax_dim("softmax", x, dim, 0); }
ct_tensor *ct_log_softmax(ct_tensor *x, int dim) { return softmax_dim("log_softmax", x, dim, 1); }
