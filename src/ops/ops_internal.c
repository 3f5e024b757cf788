/* src/ops/ops_internal.c: the helpers the op families and autograd's engine share (see
 * ops_internal.h). Nothing here records a tape node, so any op file can call it and it calls no op
 * family back but the views of shape.c. */
#include <string.h>
#include "ops/ops_internal.h"

/* The broadcast shape of a and b (NumPy rules), or 0 with CT_ESHAPE naming both shapes. */
int ct__broadcast_shape(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb, int *nd, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : sa[i - (n - na)], y = i < n - nb ? 1 : sb[i - (n - nb)];
    if (x != y && x != 1 && y != 1) {
      char a[160], b[160];
      ct__error(CT_ESHAPE, "%s: shapes %s and %s cannot be broadcast together (dim %d: %lld vs %lld)", op,
                ct__shape_str(na, sa, a, sizeof a), ct__shape_str(nb, sb, b, sizeof b), i, (long long)x, (long long)y);
      return 0;
    }
    out[i] = x == 1 ? y : x;
  }
  *nd = n;
  return 1;
}

static int category(ct_dtype dt) { return dt == CT_BOOL ? 0 : ct_dtype_is_floating(dt) ? 2 : 1; }

/* torch.result_type for two tensors: a 0-dim tensor only decides the dtype when it is of a higher
 * category (bool < integer < floating) than the other operand. */
ct_dtype ct__result_type(const ct_tensor *a, const ct_tensor *b) {
  int za = a->ndim == 0, zb = b->ndim == 0;
  if (za != zb) {
    const ct_tensor *z = za ? a : b, *d = za ? b : a;
    if (category(z->dtype) > category(d->dtype))
      return category(z->dtype) == 2 && d->dtype != CT_F64 ? (z->dtype == CT_F64 ? CT_F32 : z->dtype) : z->dtype;
    return d->dtype;
  }
  return ct_promote_types(a->dtype, b->dtype);
}

/* ---- the raw sum */
ct_tensor *ct__sum_keepdim(ct_tensor *x, const int *red, ct_dtype dt) {
  int64_t ks[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) ks[d] = red[d] ? 1 : x->shape[d];
  ct_tensor *out = ct__alloc(x->ndim, ks, dt, x->device);
  ct_status s = out ? CT_KERNEL_CALL(x->storage->backend, reduce, __func__, x, CT_REDUCE_SUM, out, NULL, x) : ct_last_status();
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  return out;
}

/* ---- helpers for autograd */
ct_tensor *ct__sum_to(ct_tensor *g, int ndim, const int64_t *shape, ct_dtype dt) {
  int lead = g->ndim - ndim, dims[CT_MAX_DIMS], nd = 0;
  if (lead < 0) CT_FAIL_NULL(CT_ESHAPE, "internal: gradient has fewer dims than its input");
  for (int i = 0; i < g->ndim; i++)
    if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1)) dims[nd++] = i;
  ct_tensor *r;
  if (nd == 0 && lead == 0) {
    r = ct__retain_tracked(g);
  } else {
    int red[CT_MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++) red[dims[i]] = 1;
    ct_tensor *s = ct__sum_keepdim(g, red, ct_dtype_is_floating(g->dtype) ? g->dtype : CT_I64);
    r = s ? ct_reshape(s, ndim, shape) : NULL;
    ct_tensor_free(s);
  }
  if (r && r->dtype != dt) {
    ct_tensor *c = ct_cast(r, dt);
    ct_tensor_free(r);
    r = c;
  }
  return r;
}

ct_status ct__binary_into(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  ct_tensor *be_ = ct_expand(b, out->ndim, out->shape);
  if (!be_) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(out->storage->backend, binary, __func__, a, op, out, a, be_);
  ct_tensor_free(be_);
  return s;
}

ct_status ct__add_into(ct_tensor *acc, ct_tensor *g) { return ct__binary_into(CT_BINARY_ADD, acc, acc, g); }

/* ---- mixed precision: halves compute in float32 */
ct_dtype ct__compute_dtype(ct_dtype dt) { return dt == CT_F16 || dt == CT_BF16 ? CT_F32 : dt; }

ct_tensor *ct__cast_result(ct_tensor *y, ct_dtype dt) {
  if (!y || y->dtype == dt) return y;
  ct_tensor *r = ct_cast(y, dt);
  ct_tensor_free(y);
  return r;
}
