/* src/ops/shape.c: views (reshape, view, permute, transpose, narrow, slice, expand, squeeze,
 * unsqueeze, flatten), contiguous, cast and the copy within one device (ct__copy_within, which
 * ct_copy_ in to.c builds on), with their backward rules. Views share storage. Calls nothing in
 * to.c: the moves between devices build on this file, not the other way round. */
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/ops_internal.h"

/* ---- backward rules */
static ct_status bw_reshape(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *in = n->in[0];
  grads[0] = ct_reshape(g, in->ndim, in->shape); /* a view when g's strides allow, else a copy */
  return grads[0] ? CT_OK : ct_last_status();
}

static ct_status bw_permute(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  int inv[CT_MAX_DIMS];
  for (int i = 0; i < g->ndim; i++) inv[n->iv[i]] = i;
  grads[0] = ct_permute(g, inv);
  return grads[0] ? CT_OK : ct_last_status();
}

/* slice: zeros of the input's shape with g copied into the sliced window. */
static ct_status bw_slice(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *in = n->in[0];
  ct_tensor *z = ct_zeros(in->ndim, in->shape, g->dtype, g->device);
  ct_tensor *win = z ? ct_slice(z, (int)n->iv[0], n->iv[1], n->iv[2], n->iv[3]) : NULL;
  ct_status s = win ? ct__copy_within(win, g) : ct_last_status(); /* z is on g's device */
  ct_tensor_free(win);
  if (s != CT_OK) {
    ct_tensor_free(z);
    return s;
  }
  grads[0] = z;
  return CT_OK;
}

/* expand, contiguous, cast: the engine's fitting (sum over broadcast dims, cast back) is the rule. */
static ct_status bw_identity(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  grads[0] = ct_tensor_retain(g);
  return CT_OK;
}

/* ---- views */
static ct_tensor *record_view(ct_tensor *v, ct_tensor *t, const char *name, ct_backward_fn fn) {
  ct_node *n;
  if (ct__record(v, name, fn, 1, &t, &n) != CT_OK) return ct_tensor_free(v), NULL;
  return v;
}

/* Strides for viewing t (shape, stride) as new_shape without a copy, or 0 when impossible.
 * Follows PyTorch's computeStride: contiguous chunks of the old shape map onto the new one. */
static int view_strides(const ct_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
  int64_t numel = ct_tensor_numel(t);
  if (numel <= 1 || t->ndim == 0) { /* any strides describe an empty or one-element tensor */
    ct__contiguous_strides(ndim, shape, out);
    return 1;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->ndim ? t->stride[t->ndim - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) {
        chunk_base_stride = t->stride[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

/* Resolve a -1 entry and check the element count. */
static int infer_shape(const char *op, ct_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
  char a[160], b[160];
  if (ndim < 0 || ndim > CT_MAX_DIMS) return ct__error(CT_EINVAL, "%s: at most %d dims, got %d", op, CT_MAX_DIMS, ndim), 0;
  if (ndim > 0 && !shape) return ct__error(CT_EINVAL, "%s: shape is NULL with ndim %d (pass ndim sizes)", op, ndim), 0;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    out[i] = shape[i];
    if (shape[i] == -1) {
      if (infer >= 0) return ct__error(CT_ESHAPE, "%s: only one dimension can be -1", op), 0;
      infer = i;
    } else if (shape[i] < 0) {
      return ct__error(CT_ESHAPE, "%s: invalid shape %s", op, ct__shape_str(ndim, shape, a, sizeof a)), 0;
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return ct__error(CT_ESHAPE, "%s: shape %s has more than 2^63 elements; input of shape %s has %lld", op,
                       ct__shape_str(ndim, shape, a, sizeof a), ct_shape_str(t, b, sizeof b), (long long)ct_tensor_numel(t)), 0;
    }
  }
  int64_t numel = ct_tensor_numel(t);
  if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
  if (ct__numel(ndim, out) != numel || (infer >= 0 && known == 0))
    return ct__error(CT_ESHAPE, "%s: shape %s is invalid for input of shape %s (%lld elements)", op,
                     ct__shape_str(ndim, shape, a, sizeof a), ct_shape_str(t, b, sizeof b), (long long)numel), 0;
  return 1;
}

ct_tensor *ct_view(ct_tensor *t, int ndim, const int64_t *shape) {
  if (!t) return ct__null_arg("view", "t");
  int64_t s[CT_MAX_DIMS], st[CT_MAX_DIMS];
  char a[160];
  if (!infer_shape("view", t, ndim, shape, s)) return NULL;
  if (!view_strides(t, ndim, s, st))
    CT_FAIL_NULL(CT_ESHAPE, "view: the strides of a tensor of shape %s do not allow this view; use ct_reshape, which "
                 "copies", ct_shape_str(t, a, sizeof a));
  return record_view(ct__view_of(t, ndim, s, st, t->offset), t, "view", bw_reshape);
}

ct_tensor *ct_reshape(ct_tensor *t, int ndim, const int64_t *shape) {
  if (!t) return ct__null_arg("reshape", "t");
  int64_t s[CT_MAX_DIMS], st[CT_MAX_DIMS];
  if (!infer_shape("reshape", t, ndim, shape, s)) return NULL;
  if (view_strides(t, ndim, s, st)) return record_view(ct__view_of(t, ndim, s, st, t->offset), t, "reshape", bw_reshape);
  ct_tensor *c = ct_contiguous(t);
  ct_tensor *v = c ? ct_view(c, ndim, s) : NULL;
  ct_tensor_free(c);
  return v;
}

ct_tensor *ct_permute(ct_tensor *t, const int *dims) {
  if (!t) return ct__null_arg("permute", "t");
  if (!dims && t->ndim > 0) CT_FAIL_NULL(CT_EINVAL, "permute: dims is NULL (pass %d dims)", t->ndim);
  int64_t s[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int seen[CT_MAX_DIMS] = {0};
  char a[160];
  for (int i = 0; i < t->ndim; i++) {
    int d = ct__dim(dims[i], t->ndim);
    if (d < 0 || seen[d])
      CT_FAIL_NULL(CT_ESHAPE, "permute: dims must be a permutation of 0..%d for shape %s", t->ndim - 1,
                   ct_shape_str(t, a, sizeof a));
    seen[d] = 1;
    s[i] = t->shape[d];
    st[i] = t->stride[d];
  }
  ct_tensor *v = ct__view_of(t, t->ndim, s, st, t->offset);
  ct_node *n;
  if (ct__record(v, "permute", bw_permute, 1, &t, &n) != CT_OK) return ct_tensor_free(v), NULL;
  if (n)
    for (int i = 0; i < t->ndim; i++) n->iv[i] = ct__dim(dims[i], t->ndim);
  return v;
}

ct_tensor *ct_transpose(ct_tensor *t, int d0, int d1) {
  if (!t) return ct__null_arg("transpose", "t");
  int a = ct__dim(d0, t->ndim), b = ct__dim(d1, t->ndim), p[CT_MAX_DIMS];
  char s[160];
  if (a < 0 || b < 0)
    CT_FAIL_NULL(CT_ESHAPE, "transpose: dims %d, %d out of range for shape %s", d0, d1, ct_shape_str(t, s, sizeof s));
  for (int i = 0; i < t->ndim; i++) p[i] = i;
  p[a] = b, p[b] = a;
  return ct_permute(t, p);
}

ct_tensor *ct_slice(ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  if (!t) return ct__null_arg("slice", "t");
  char a[160];
  int d = ct__dim(dim, t->ndim);
  if (d < 0 || t->ndim == 0) CT_FAIL_NULL(CT_ESHAPE, "slice: dim %d out of range for shape %s", dim, ct_shape_str(t, a, sizeof a));
  if (step < 1) CT_FAIL_NULL(CT_EINVAL, "slice: step must be >= 1, got %lld", (long long)step);
  int64_t n = t->shape[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (start < 0) start = 0;
  if (end > n) end = n;
  if (start > n) start = n;
  if (end < start) end = start;
  int64_t s[CT_MAX_DIMS], st[CT_MAX_DIMS];
  memcpy(s, t->shape, sizeof s);
  memcpy(st, t->stride, sizeof st);
  s[d] = (end - start) / step + ((end - start) % step != 0); /* ceil without overflow for a huge step */
  st[d] = t->stride[d] * step;
  ct_tensor *v = ct__view_of(t, t->ndim, s, st, t->offset + start * t->stride[d]);
  ct_node *nd;
  if (ct__record(v, "slice", bw_slice, 1, &t, &nd) != CT_OK) return ct_tensor_free(v), NULL;
  if (nd) nd->iv[0] = d, nd->iv[1] = start, nd->iv[2] = end, nd->iv[3] = step;
  return v;
}

ct_tensor *ct_narrow(ct_tensor *t, int dim, int64_t start, int64_t length) {
  if (!t) return ct__null_arg("narrow", "t");
  char a[160];
  int d = ct__dim(dim, t->ndim);
  if (d < 0 || t->ndim == 0 || start < 0 || length < 0 || start > t->shape[d] || length > t->shape[d] - start)
    CT_FAIL_NULL(CT_ESHAPE, "narrow: start %lld and length %lld of dim %d are outside shape %s", (long long)start,
                 (long long)length, dim, ct_shape_str(t, a, sizeof a));
  return ct_slice(t, d, start, start + length, 1);
}

ct_tensor *ct_expand(ct_tensor *t, int ndim, const int64_t *shape) {
  if (!t) return ct__null_arg("expand", "t");
  char a[160], b[160];
  if (ndim > 0 && !shape) CT_FAIL_NULL(CT_EINVAL, "expand: shape is NULL with ndim %d (pass ndim sizes)", ndim);
  if (ndim < t->ndim || ndim > CT_MAX_DIMS)
    CT_FAIL_NULL(CT_ESHAPE, "expand: cannot expand shape %s to %d dims (need %d to %d)", ct_shape_str(t, a, sizeof a), ndim,
                 t->ndim, CT_MAX_DIMS);
  int64_t s[CT_MAX_DIMS], st[CT_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t want = shape[i];
    if (i < lead) {
      if (want < 0) CT_FAIL_NULL(CT_ESHAPE, "expand: new leading dim %d has size %lld (it must be >= 0; -1 only keeps an existing size)", i, (long long)want);
      s[i] = want, st[i] = 0;
      continue;
    }
    int64_t have = t->shape[i - lead];
    if (want == -1 || want == have) s[i] = have, st[i] = t->stride[i - lead];
    else if (have == 1 && want >= 0) s[i] = want, st[i] = 0;
    else
      CT_FAIL_NULL(CT_ESHAPE, "expand: cannot expand shape %s to %s (dim %d: %lld vs %lld)", ct_shape_str(t, a, sizeof a),
                   ct__shape_str(ndim, shape, b, sizeof b), i, (long long)have, (long long)want);
  }
  if (!ct__checked_numel("expand", ndim, s, NULL)) {
    ct__error(CT_ESHAPE, "expand: cannot expand shape %s to %s: %s", ct_shape_str(t, a, sizeof a),
              ct__shape_str(ndim, shape, b, sizeof b), "the result would have more than 2^63 elements");
    return NULL;
  }
  return record_view(ct__view_of(t, ndim, s, st, t->offset), t, "expand", bw_identity);
}

ct_tensor *ct_unsqueeze(ct_tensor *t, int dim) {
  if (!t) return ct__null_arg("unsqueeze", "t");
  int d = dim < 0 ? dim + t->ndim + 1 : dim;
  if (d < 0 || d > t->ndim || t->ndim >= CT_MAX_DIMS)
    CT_FAIL_NULL(CT_ESHAPE, "unsqueeze: dim %d out of range for %d dims", dim, t->ndim);
  int64_t s[CT_MAX_DIMS];
  for (int i = 0, j = 0; i <= t->ndim; i++) s[i] = i == d ? 1 : t->shape[j++];
  return ct_reshape(t, t->ndim + 1, s);
}

ct_tensor *ct_squeeze(ct_tensor *t, int dim) {
  if (!t) return ct__null_arg("squeeze", "t");
  char a[160];
  int d = ct__dim(dim, t->ndim);
  if (d < 0 || t->ndim == 0) CT_FAIL_NULL(CT_ESHAPE, "squeeze: dim %d out of range for shape %s", dim, ct_shape_str(t, a, sizeof a));
  if (t->shape[d] != 1) return ct_reshape(t, t->ndim, t->shape); /* torch: a no-op when the size is not 1 */
  int64_t s[CT_MAX_DIMS];
  for (int i = 0, j = 0; i < t->ndim; i++)
    if (i != d) s[j++] = t->shape[i];
  return ct_reshape(t, t->ndim - 1, s);
}

ct_tensor *ct_flatten(ct_tensor *t, int start_dim, int end_dim) {
  if (!t) return ct__null_arg("flatten", "t");
  char a[160];
  if (t->ndim == 0) return ct_reshape(t, 1, (int64_t[]){1});
  int a0 = ct__dim(start_dim, t->ndim), a1 = ct__dim(end_dim, t->ndim);
  if (a0 < 0 || a1 < 0 || a0 > a1)
    CT_FAIL_NULL(CT_ESHAPE, "flatten: dims %d..%d out of range for shape %s", start_dim, end_dim, ct_shape_str(t, a, sizeof a));
  int64_t s[CT_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < a0; i++) s[k++] = t->shape[i];
  s[k] = 1;
  for (int i = a0; i <= a1; i++) s[k] *= t->shape[i];
  k++;
  for (int i = a1 + 1; i < t->ndim; i++) s[k++] = t->shape[i];
  return ct_reshape(t, k, s);
}

/* ---- copies within a device */
ct_status ct__copy_within(ct_tensor *dst, ct_tensor *src) {
  char a[160], b[160];
  /* Equal shapes need no broadcast view, so the copy allocates nothing: ct_checkpoint_load relies
   * on that to apply a loaded state without a failure half way through. */
  int same = src->ndim == dst->ndim && memcmp(src->shape, dst->shape, (size_t)dst->ndim * sizeof(int64_t)) == 0;
  ct_tensor *e = same ? NULL : ct_expand(src, dst->ndim, dst->shape);
  ct_status s;
  if (same) s = CT_KERNEL_CALL(dst->storage->backend, copy, "ct_copy_", src, dst, src);
  else if (!e && ct_last_status() == CT_ENOMEM) s = CT_ENOMEM;
  else if (!e)
    s = ct__error(CT_ESHAPE, "ct_copy_: source of shape %s does not broadcast to destination %s", ct_shape_str(src, a, sizeof a),
                  ct_shape_str(dst, b, sizeof b));
  else s = CT_KERNEL_CALL(dst->storage->backend, copy, "ct_copy_", e, dst, e);
  ct_tensor_free(e);
  if (s == CT_OK) ct__bump_version(dst);
  return s;
}

ct_tensor *ct_contiguous(ct_tensor *t) {
  if (!t) return ct__null_arg("contiguous", "t");
  if (ct_tensor_is_contiguous(t)) return ct__retain_tracked(t);
  ct_tensor *c = ct__alloc(t->ndim, t->shape, t->dtype, t->device);
  if (!c) return NULL;
  ct_status s = CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t);
  if (s != CT_OK) {
    ct_tensor_free(c);
    return NULL;
  }
  return record_view(c, t, "contiguous", bw_identity);
}

ct_tensor *ct_cast(ct_tensor *t, ct_dtype dt) {
  if (!t) return ct__null_arg("cast", "t");
  if ((unsigned)dt >= CT_DTYPE_COUNT) CT_FAIL_NULL(CT_EDTYPE, "cast: invalid dtype %d", (int)dt);
  if (t->dtype == dt) return ct_contiguous(t);
  ct_tensor *c = ct__alloc(t->ndim, t->shape, dt, t->device);
  if (!c) return NULL;
  ct_status s = CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t);
  if (s != CT_OK) {
    ct_tensor_free(c);
    return NULL;
  }
  if (ct_dtype_is_floating(dt)) return record_view(c, t, "to", bw_identity); /* NULL (c freed) when the node cannot be made */
  return c;
}
