/* src/ops/index.c: cat, stack, index_select and gather, with their backward rules. */
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/autocast.h"

static ct_status bw_cat(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  int dim = (int)n->iv[0];
  int64_t start = 0;
  for (int i = 0; i < n->n_in; i++) {
    int64_t len = n->iv[1 + i];
    if (n->in[i]) {
      ct_tensor *v = ct_narrow(g, dim, start, len);
      grads[i] = v ? ct_contiguous(v) : NULL;
      ct_tensor_free(v);
      if (!grads[i]) return ct_last_status();
    }
    start += len;
  }
  return CT_OK;
}

static ct_tensor *cat_small(int n, ct_tensor *const *ts, int dim) {
  char a[160], b[160];
  ct_tensor *x0 = ts[0];
  int d = ct__dim(dim, x0->ndim);
  if (x0->ndim == 0 || d < 0) CT_FAIL_NULL(CT_ESHAPE, "cat: dim %d out of range for shape %s", dim, ct_shape_str(x0, a, sizeof a));
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, x0->shape, sizeof shape);
  shape[d] = 0;
  ct_dtype dt = x0->dtype;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return NULL;
    if (!ct_device_eq(ts[i]->device, x0->device)) {
      ct_tensor *pair[2] = {x0, ts[i]};
      ct__same_device("cat", 2, pair, (const char *[]){"tensors[0]", "tensors[i]"});
      return NULL;
    }
    int ok = ts[i]->ndim == x0->ndim;
    for (int k = 0; ok && k < x0->ndim; k++) ok = k == d || ts[i]->shape[k] == x0->shape[k];
    if (!ok)
      CT_FAIL_NULL(CT_ESHAPE, "cat: tensor %d has shape %s, which does not match %s outside dim %d", i,
                   ct_shape_str(ts[i], a, sizeof a), ct_shape_str(x0, b, sizeof b), d);
    shape[d] += ts[i]->shape[d];
    dt = ct_promote_types(dt, ts[i]->dtype);
  }
  ct_tensor *out = ct__alloc(x0->ndim, shape, dt, x0->device);
  if (!out) return NULL;
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    ct_tensor *v = ct_narrow(out, d, start, ts[i]->shape[d]);
    ct_status s = v ? ct_copy_(v, ts[i]) : ct_last_status();
    ct_tensor_free(v);
    if (s != CT_OK) return ct_tensor_free(out), NULL;
    start += ts[i]->shape[d];
  }
  ct_node *nd = NULL;
  if (ct_dtype_is_floating(dt) && ct__record(out, "cat", bw_cat, n, ts, &nd) != CT_OK) return ct_tensor_free(out), NULL;
  if (nd) {
    nd->iv[0] = d;
    for (int i = 0; i < n; i++) nd->iv[1 + i] = ts[i]->shape[d];
  }
  return out;
}

ct_tensor *ct_cat(int n, ct_tensor *const *ts, int dim) {
  if (n < 1 || !ts) CT_FAIL_NULL(CT_EINVAL, "cat: needs at least one tensor (got n = %d%s)", n, ts ? "" : ", ts NULL");
  for (int i = 0; i < n; i++)
    if (!ts[i]) return ct__null_arg("cat", "an element of ts");
  CT__AUTOCAST_LIST(CT__AUTOCAST_PROMOTE, ct_cat(n, ts, dim), n, &ts);
  if (n <= CT_NODE_MAX_IN) return cat_small(n, ts, dim);
  /* more inputs than a node holds: concatenate in groups, then the groups */
  int groups = (n + CT_NODE_MAX_IN - 1) / CT_NODE_MAX_IN;
  ct_tensor **parts = ct__calloc((size_t)groups, sizeof *parts, "cat's list of groups");
  if (!parts) return NULL;
  ct_tensor *out = NULL;
  int ok = 1;
  for (int g = 0; g < groups && ok; g++) {
    int k = n - g * CT_NODE_MAX_IN < CT_NODE_MAX_IN ? n - g * CT_NODE_MAX_IN : CT_NODE_MAX_IN;
    parts[g] = cat_small(k, ts + g * CT_NODE_MAX_IN, dim);
    ok = parts[g] != NULL;
  }
  if (ok) out = ct_cat(groups, parts, dim);
  for (int g = 0; g < groups; g++) ct_tensor_free(parts[g]);
  free(parts);
  return out;
}

ct_tensor *ct_stack(int n, ct_tensor *const *ts, int dim) {
  if (n < 1 || !ts) CT_FAIL_NULL(CT_EINVAL, "stack: needs at least one tensor (got n = %d%s)", n, ts ? "" : ", ts NULL");
  for (int i = 0; i < n; i++)
    if (!ts[i]) return ct__null_arg("stack", "an element of ts");
  char a[160], b[160];
  /* Everything checked up front, so that a bad argument is stack's error, not unsqueeze's or cat's. */
  for (int i = 1; i < n; i++) {
    if (!ct_device_eq(ts[i]->device, ts[0]->device)) {
      snprintf(b, sizeof b, "tensors[%d]", i);
      ct__same_device("stack", 2, (ct_tensor *[]){ts[0], ts[i]}, (const char *[]){"tensors[0]", b});
      return NULL;
    }
    if (ts[i]->ndim != ts[0]->ndim || memcmp(ts[i]->shape, ts[0]->shape, sizeof(int64_t) * ts[0]->ndim) != 0)
      CT_FAIL_NULL(CT_ESHAPE, "stack: tensor %d has shape %s, tensor 0 has %s; stack needs equal shapes", i,
                   ct_shape_str(ts[i], a, sizeof a), ct_shape_str(ts[0], b, sizeof b));
  }
  int d = ct__dim(dim, ts[0]->ndim + 1);
  if (d < 0)
    CT_FAIL_NULL(CT_ESHAPE, "stack: dim %d out of range for tensors of shape %s (the result has %d dims: use -%d to %d)", dim,
                 ct_shape_str(ts[0], a, sizeof a), ts[0]->ndim + 1, ts[0]->ndim + 1, ts[0]->ndim);
  ct_tensor **u = ct__calloc((size_t)n, sizeof *u, "stack's list of inputs");
  if (!u) return NULL;
  ct_tensor *out = NULL;
  int ok = 1;
  for (int i = 0; i < n && ok; i++) ok = (u[i] = ct_unsqueeze(ts[i], d)) != NULL;
  if (ok) out = ct_cat(n, u, d);
  for (int i = 0; i < n; i++) ct_tensor_free(u[i]);
  free(u);
  if (!out) ct__error_prefix("stack");
  return out;
}

/* Range-check an index tensor against size (host-side; on a GPU it would synchronize, so only
 * CPU indices are checked here and device kernels must not read out of bounds). */
static int check_index(const char *op, ct_tensor *index, int64_t size) {
  if (index->device.kind != CT_CPU) return 1;
  int64_t idx[CT_MAX_DIMS] = {0};
  if (ct_tensor_numel(index) == 0) return 1;
  do {
    int64_t off = 0;
    for (int d = 0; d < index->ndim; d++) off += idx[d] * index->stride[d];
    int64_t v = (int64_t)ct__load((char *)ct__ptr(index) + off * (int64_t)ct_dtype_size(index->dtype), index->dtype);
    if (v < 0 || v >= size) {
      ct__error(CT_EINVAL, "%s: index %lld is out of range for a dim of size %lld", op, (long long)v, (long long)size);
      return 0;
    }
    int d = index->ndim - 1;
    for (; d >= 0; d--) {
      if (++idx[d] < index->shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  } while (1);
  return 1;
}

static ct_status bw_index_select(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->in[0];
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gx = gc ? ct_zeros(x->ndim, x->shape, g->dtype, g->device) : NULL;
  ct_status s = gx ? (n->iv[1] ? CT_KERNEL_CALL(g->storage->backend, scatter_add, __func__, gc, gx, (int)n->iv[0], n->saved[0], gc)
                               : CT_KERNEL_CALL(g->storage->backend, index_add, __func__, gc, gx, (int)n->iv[0], n->saved[0], gc))
                   : ct_last_status();
  ct_tensor_free(gc);
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

ct_tensor *ct_index_select(ct_tensor *x, int dim, ct_tensor *index) {
  if (!x || !index) return ct__null_arg("index_select", !x ? "x" : "index");
  char a[160], b[160];
  if (ct__same_device("index_select", 2, (ct_tensor *[]){x, index}, (const char *[]){"input", "index"}) != CT_OK) return NULL;
  if (index->dtype != CT_I64 && index->dtype != CT_I32)
    CT_FAIL_NULL(CT_EDTYPE, "index_select: expected dtype int32 or int64 for index, got %s (cast it, e.g. ct_cast(index, CT_I64))",
                 ct_dtype_name(index->dtype));
  int d = ct__dim(dim, x->ndim);
  if (x->ndim == 0 || d < 0 || index->ndim != 1 || (index->dtype != CT_I64 && index->dtype != CT_I32))
    CT_FAIL_NULL(CT_ESHAPE, "index_select: need dim in range for input %s and a 1-D int32/int64 index, got index %s of %s",
                 ct_shape_str(x, a, sizeof a), ct_shape_str(index, b, sizeof b), ct_dtype_name(index->dtype));
  if (!check_index("index_select", index, x->shape[d])) return NULL;
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = index->shape[0];
  ct_tensor *out = ct__alloc(x->ndim, shape, x->dtype, x->device);
  ct_status s = out ? CT_KERNEL_CALL(x->storage->backend, index_select, __func__, x, out, x, d, index) : ct_last_status();
  if (s != CT_OK) return ct_tensor_free(out), NULL;
  ct_node *n;
  if (ct__record(out, "index_select", bw_index_select, 1, &x, &n) != CT_OK || ct__save_detached(n, 0, index) != CT_OK)
    return ct_tensor_free(out), NULL;
  if (n) n->iv[0] = d, n->iv[1] = 0;
  return out;
}

ct_tensor *ct_gather(ct_tensor *x, int dim, ct_tensor *index) {
  if (!x || !index) return ct__null_arg("gather", !x ? "x" : "index");
  char a[160], b[160];
  if (ct__same_device("gather", 2, (ct_tensor *[]){x, index}, (const char *[]){"input", "index"}) != CT_OK) return NULL;
  if (index->dtype != CT_I64)
    CT_FAIL_NULL(CT_EDTYPE, "gather: expected dtype int64 for index, got %s (cast it, e.g. ct_cast(index, CT_I64))",
                 ct_dtype_name(index->dtype));
  int d = ct__dim(dim, x->ndim);
  int ok = x->ndim > 0 && d >= 0 && index->ndim == x->ndim && index->dtype == CT_I64;
  for (int k = 0; ok && k < x->ndim; k++) ok = k == d || index->shape[k] <= x->shape[k];
  if (!ok)
    CT_FAIL_NULL(CT_ESHAPE, "gather: index %s (%s) does not fit input %s at dim %d (need int64, same ndim, sizes <= input "
                 "outside dim)", ct_shape_str(index, b, sizeof b), ct_dtype_name(index->dtype), ct_shape_str(x, a, sizeof a), dim);
  if (!check_index("gather", index, x->shape[d])) return NULL;
  ct_tensor *out = ct__alloc(index->ndim, index->shape, x->dtype, x->device);
  ct_status s = out ? CT_KERNEL_CALL(x->storage->backend, gather, __func__, x, out, x, d, index) : ct_last_status();
  if (s != CT_OK) return ct_tensor_free(out), NULL;
  ct_node *n;
  if (ct__record(out, "gather", bw_index_select, 1, &x, &n) != CT_OK || ct__save_detached(n, 0, index) != CT_OK)
    return ct_tensor_free(out), NULL;
  if (n) n->iv[0] = d, n->iv[1] = 1;
  return out;
}
