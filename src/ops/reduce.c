/* src/ops/reduce.c: sum, mean, var, max, min, argmax and the Frobenius norm over dims, with
 * keepdim, and their backward rules. */
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "ops/ops_internal.h"
#include "ops/autocast.h"

/* Mark reduced dims in keep[] and build out's keepdim shape. 0 with CT_ESHAPE on a bad dim. */
static int reduce_dims(const char *op, ct_tensor *x, int ndims, const int *dims, int *red, int64_t *kshape) {
  char a[160];
  memset(red, 0, CT_MAX_DIMS * sizeof(int));
  if (ndims < 0 || ndims > CT_MAX_DIMS || (ndims > 0 && !dims))
    return ct__error(CT_EINVAL, "%s: need 0 <= ndims <= %d and dims with ndims entries, got ndims %d and dims %s", op,
                     CT_MAX_DIMS, ndims, dims ? "set" : "NULL"), 0;
  for (int i = 0; i < ndims; i++) {
    int d = ct__dim(dims[i], x->ndim);
    if (d < 0 || x->ndim == 0 || red[d]) {
      ct__error(CT_ESHAPE, "%s: dim %d %s for shape %s", op, dims[i], d >= 0 && red[d] ? "given twice" : "out of range",
                ct_shape_str(x, a, sizeof a));
      return 0;
    }
    red[d] = 1;
  }
  for (int d = 0; d < x->ndim; d++) {
    if (ndims == 0) red[d] = 1;
    kshape[d] = red[d] ? 1 : x->shape[d];
  }
  return 1;
}

/* The result shape without the reduced dims (keepdim = 0). */
static int squeeze_shape(ct_tensor *x, const int *red, int64_t *out) {
  int k = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!red[d]) out[k++] = x->shape[d];
  return k;
}

static ct_tensor *finish(ct_tensor *kept, ct_tensor *x, const int *red, int keepdim) {
  if (!kept || keepdim) return kept;
  int64_t s[CT_MAX_DIMS];
  int k = squeeze_shape(x, red, s);
  ct_tensor *r = ct_reshape(kept, k, s);
  ct_tensor_free(kept);
  return r;
}

/* g reshaped to x's keepdim shape and expanded over x (a view). */
static ct_tensor *expand_back(ct_tensor *g, ct_node *n) {
  ct_tensor *x = n->in[0];
  int64_t ks[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) ks[d] = n->iv[d] ? 1 : x->shape[d];
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gk = gc ? ct_reshape(gc, x->ndim, ks) : NULL;
  ct_tensor *e = gk ? ct_expand(gk, x->ndim, x->shape) : NULL;
  ct_tensor_free(gc);
  ct_tensor_free(gk);
  return e;
}

static ct_status bw_sum(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *e = expand_back(g, n);
  if (!e) return ct_last_status();
  grads[0] = n->dv[0] == 1.0 ? ct_contiguous(e) : ct_mul_scalar(e, n->dv[0]);
  ct_tensor_free(e);
  return grads[0] ? CT_OK : ct_last_status();
}

/* sum (scale 1) and mean (scale 1/count) share their kernel and rule. */
static ct_tensor *sum_scaled(const char *op, ct_tensor *x, int ndims, const int *dims, int keepdim, int mean) {
  if (!x) return ct__null_arg(op, "x");
  /* torch's CUDA list sums in float32 (sum's fp32_set_opt_dtype); mean is in no list */
  if (!mean) CT__AUTOCAST(CT__AUTOCAST_F32_GPU, sum_scaled(op, x, ndims, dims, keepdim, mean), &x);
  int red[CT_MAX_DIMS];
  int64_t ks[CT_MAX_DIMS];
  if (!reduce_dims(op, x, ndims, dims, red, ks)) return NULL;
  ct_dtype dt = x->dtype;
  if (mean && !ct_dtype_is_floating(dt)) CT_FAIL_NULL(CT_EDTYPE, "mean: needs a floating input, got %s", ct_dtype_name(dt));
  if (!ct_dtype_is_floating(dt)) dt = CT_I64; /* torch.sum of integers and bools gives int64 */
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++)
    if (red[d]) count *= x->shape[d];
  /* Every backend accumulates a half sum in float32 or wider. A half mean also stays in float32
   * until it is scaled, so that it rounds once and a sum past half's range (65504) does not make
   * it inf. */
  ct_dtype adt = mean ? ct__compute_dtype(dt) : dt;
  ct_tensor *out = ct__sum_keepdim(x, red, adt);
  ct_status s = out ? CT_OK : ct_last_status();
  if (s == CT_OK && mean) {
    ct_tensor *c = ct_scalar(count ? 1.0 / (double)count : NAN, adt, x->device);
    s = c ? ct__binary_into(CT_BINARY_MUL, out, out, c) : ct_last_status();
    ct_tensor_free(c);
  }
  if (s == CT_OK && adt != dt) {
    ct_tensor *h = ct__alloc(out->ndim, out->shape, dt, out->device);
    s = h ? CT_KERNEL_CALL(out->storage->backend, copy, __func__, out, h, out) : ct_last_status();
    ct_tensor_free(out);
    out = h;
  }
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  ct_node *n;
  if (ct__record(out, op, bw_sum, 1, &x, &n) != CT_OK) return ct_tensor_free(out), NULL;
  if (n) {
    for (int d = 0; d < x->ndim; d++) n->iv[d] = red[d];
    n->dv[0] = mean ? 1.0 / (double)count : 1.0;
  }
  return finish(out, x, red, keepdim);
}

ct_tensor *ct_sum(ct_tensor *x, int ndims, const int *dims, int keepdim) { return sum_scaled("sum", x, ndims, dims, keepdim, 0); }
ct_tensor *ct_mean(ct_tensor *x, int ndims, const int *dims, int keepdim) {
  return sum_scaled("mean", x, ndims, dims, keepdim, 1);
}

/* var = sum((x - mean)^2) / (count - correction), composed of differentiable ops. */
ct_tensor *ct_var(ct_tensor *x, int ndims, const int *dims, int correction, int keepdim) {
  if (!x) return ct__null_arg("var", "x");
  if (!ct_dtype_is_floating(x->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "var: needs a floating input, got %s (cast it first, e.g. ct_cast(x, CT_F32))",
                 ct_dtype_name(x->dtype));
  if (correction < 0) CT_FAIL_NULL(CT_EINVAL, "var: correction must be >= 0 (1 for the unbiased variance), got %d", correction);
  int red[CT_MAX_DIMS];
  int64_t ks[CT_MAX_DIMS];
  if (!reduce_dims("var", x, ndims, dims, red, ks)) return NULL;
  if (x->dtype == CT_F16 || x->dtype == CT_BF16) { /* float32 inside, one rounding (as torch.var) */
    ct_tensor *xf = ct_cast(x, CT_F32), *vf = xf ? ct_var(xf, ndims, dims, correction, keepdim) : NULL;
    ct_tensor_free(xf);
    return ct__cast_result(vf, x->dtype);
  }
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++)
    if (red[d]) count *= x->shape[d];
  ct_tensor *m = ct_mean(x, ndims, dims, 1);
  ct_tensor *c = ct_sub(x, m);
  ct_tensor *sq = ct_mul(c, c);
  ct_tensor *s = ct_sum(sq, ndims, dims, keepdim);
  double denom = (double)(count - correction);
  ct_tensor *v = ct_mul_scalar(s, denom > 0 ? 1.0 / denom : NAN);
  ct_tensor_free(m), ct_tensor_free(c), ct_tensor_free(sq), ct_tensor_free(s);
  return v;
}

/* max/min over one dim: the gradient goes to the chosen element (scatter by the indices). */
static ct_status bw_maxmin(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->in[0];
  int dim = (int)n->iv[0];
  int64_t ks[CT_MAX_DIMS];
  memcpy(ks, x->shape, sizeof ks);
  ks[dim] = 1;
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gk = gc ? ct_reshape(gc, x->ndim, ks) : NULL;
  ct_tensor *gx = gk ? ct_zeros(x->ndim, x->shape, g->dtype, g->device) : NULL;
  ct_status s = gx ? CT_KERNEL_CALL(x->storage->backend, scatter_add, __func__, gk, gx, dim, n->saved[0], gk) : ct_last_status();
  ct_tensor_free(gc), ct_tensor_free(gk);
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

static ct_tensor *maxmin(const char *op, ct_reduce_op rop, ct_tensor *x, int dim, int keepdim, ct_tensor **indices) {
  if (indices) *indices = NULL;
  if (!x) return ct__null_arg(op, "x");
  int red[CT_MAX_DIMS];
  int64_t ks[CT_MAX_DIMS];
  char a[160];
  if (!reduce_dims(op, x, 1, &dim, red, ks)) return NULL;
  int d = ct__dim(dim, x->ndim);
  if (x->shape[d] == 0) CT_FAIL_NULL(CT_ESHAPE, "%s: cannot reduce an empty dim of shape %s", op, ct_shape_str(x, a, sizeof a));
  ct_tensor *out = ct__alloc(x->ndim, ks, x->dtype, x->device);
  ct_tensor *idx = out ? ct__alloc(x->ndim, ks, CT_I64, x->device) : NULL;
  ct_status s = idx ? CT_KERNEL_CALL(x->storage->backend, reduce, __func__, x, rop, out, idx, x) : ct_last_status();
  if (s != CT_OK) {
    ct_tensor_free(out), ct_tensor_free(idx);
    return NULL;
  }
  ct_node *n = NULL;
  if (ct_dtype_is_floating(x->dtype) && (ct__record(out, op, bw_maxmin, 1, &x, &n) != CT_OK || ct__save_detached(n, 0, idx) != CT_OK)) {
    ct_tensor_free(out), ct_tensor_free(idx);
    return NULL;
  }
  if (n) n->iv[0] = d;
  if (indices) *indices = finish(idx, x, red, keepdim);
  else ct_tensor_free(idx);
  return finish(out, x, red, keepdim);
}

ct_tensor *ct_max(ct_tensor *x, int dim, int keepdim, ct_tensor **indices) {
  return maxmin("max", CT_REDUCE_MAX, x, dim, keepdim, indices);
}
ct_tensor *ct_min(ct_tensor *x, int dim, int keepdim, ct_tensor **indices) {
  return maxmin("min", CT_REDUCE_MIN, x, dim, keepdim, indices);
}

ct_tensor *ct_argmax(ct_tensor *x, int dim, int keepdim) {
  ct_tensor *idx = NULL;
  ct_no_grad_begin();
  ct_tensor *v = maxmin("argmax", CT_REDUCE_MAX, x, dim, keepdim, &idx);
  ct_no_grad_end();
  ct_tensor_free(v);
  return idx;
}

ct_tensor *ct_norm(ct_tensor *x) {
  if (!x) return ct__null_arg("norm", "x");
  CT__AUTOCAST(CT__AUTOCAST_F32_GPU, ct_norm(x), &x);
  if (!ct_dtype_is_floating(x->dtype)) CT_FAIL_NULL(CT_EDTYPE, "norm: needs a floating input, got %s", ct_dtype_name(x->dtype));
  if (x->dtype == CT_F16 || x->dtype == CT_BF16) { /* squares summed in float32: half's would overflow past 255.9^2 */
    ct_tensor *xf = ct_cast(x, CT_F32), *nf = xf ? ct_norm(xf) : NULL;
    ct_tensor_free(xf);
    return ct__cast_result(nf, x->dtype);
  }
  ct_tensor *sq = ct_mul(x, x);
  ct_tensor *s = ct_sum(sq, 0, NULL, 0);
  ct_tensor *r = ct_sqrt(s);
  ct_tensor_free(sq), ct_tensor_free(s);
  return r;
}
