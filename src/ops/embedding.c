/* src/ops/embedding.c: token embeddings, torch.nn.functional.embedding. The forward is a row lookup
 * (each backend's index_select kernel along dim 0 of the weight); the backward adds each output
 * row's gradient into the weight row it came from (each backend's index_add kernel: on the CPU one
 * pass in index order, so the sums are deterministic; on OpenCL one work-item per column walks the
 * indices in order, with the same result), accumulating in float32 for a half weight, as PyTorch's
 * embedding_dense_backward accumulates in its acc_type. padding_idx's row gets no gradient. */
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/ops_internal.h"

/* Every index in [0, V), else CT_EINVAL naming the op and the first bad index. A CPU index tensor
 * is read in place; a device's is reduced to its minimum and maximum there and the two scalars
 * read back (one synchronization: the only way a device index gives a clear error, not a read out
 * of bounds). */
static int check_rows(ct_tensor *idx, int64_t V) {
  int64_t n = ct_tensor_numel(idx);
  if (n == 0) return 1;
  if (idx->device.kind == CT_CPU) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = ((const int64_t *)ct__ptr(idx))[i];
      if (v < 0 || v >= V)
        return ct__error(CT_EINVAL, "embedding: index %lld (at position %lld of the flattened indices) is out of range for "
                         "a weight of %lld rows (num_embeddings)", (long long)v, (long long)i, (long long)V), 0;
    }
    return 1;
  }
  ct_tensor *lo = ct_min(idx, 0, 0, NULL), *hi = lo ? ct_max(idx, 0, 0, NULL) : NULL;
  double vlo = hi ? ct_item(lo) : 0, vhi = hi ? ct_item(hi) : 0;
  ct_tensor_free(lo), ct_tensor_free(hi);
  if (!hi) return ct__error_prefix("embedding"), 0;
  if (vlo < 0 || vhi >= (double)V)
    return ct__error(CT_EINVAL, "embedding: index %lld is out of range for a weight of %lld rows (num_embeddings)",
                     (long long)(vlo < 0 ? vlo : vhi), (long long)V), 0;
  return 1;
}

static ct_status bw_embedding(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *w = n->in[0], *idx = n->saved[0];
  int64_t rows = ct_tensor_numel(idx), D = w->shape[1];
  ct_dtype acc = ct__compute_dtype(g->dtype);
  ct_tensor *g2 = ct_reshape(g, 2, (int64_t[]){rows, D});
  ct_tensor *gc = g2 ? ct_cast(g2, acc) : NULL, *gcc = gc ? ct_contiguous(gc) : NULL;
  ct_tensor *gw = gcc ? ct_zeros(2, w->shape, acc, g->device) : NULL;
  ct_status s = gw ? CT_KERNEL_CALL(g->storage->backend, index_add, "embedding_backward", gcc, gw, 0, idx, gcc) : ct_last_status();
  if (s == CT_OK && n->iv[0] >= 0) {
    ct_tensor *row = ct_narrow(gw, 0, n->iv[0], 1);
    s = row ? ct_zero_(row) : ct_last_status();
    ct_tensor_free(row);
  }
  ct_tensor_free(g2), ct_tensor_free(gc), ct_tensor_free(gcc);
  if (s != CT_OK) return ct_tensor_free(gw), s;
  grads[0] = ct__cast_result(gw, g->dtype);
  return grads[0] ? CT_OK : ct_last_status();
}

ct_tensor *ct_embedding(ct_tensor *weight, ct_tensor *indices, int64_t padding_idx) {
  if (!weight || !indices) return ct__null_arg("embedding", !weight ? "weight" : "indices");
  char a[160], b[160];
  if (ct__same_device("embedding", 2, (ct_tensor *[]){weight, indices}, (const char *[]){"weight", "indices"}) != CT_OK)
    return NULL;
  if (weight->ndim != 2)
    CT_FAIL_NULL(CT_ESHAPE, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got %s",
                 ct_shape_str(weight, a, sizeof a));
  if (!ct_dtype_is_floating(weight->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "embedding: weight must be floating, got %s", ct_dtype_name(weight->dtype));
  if (indices->dtype != CT_I64 && indices->dtype != CT_I32)
    CT_FAIL_NULL(CT_EDTYPE, "embedding: indices must be int64 or int32, got %s of %s (cast them, e.g. ct_cast(indices, CT_I64))",
                 ct_dtype_name(indices->dtype), ct_shape_str(indices, b, sizeof b));
  if (indices->ndim + 1 > CT_MAX_DIMS)
    CT_FAIL_NULL(CT_ESHAPE, "embedding: indices %s have too many dims (the result adds one; at most %d)",
                 ct_shape_str(indices, b, sizeof b), CT_MAX_DIMS);
  int64_t V = weight->shape[0], D = weight->shape[1];
  int64_t pad = -1;
  if (padding_idx != CT_NO_PADDING_IDX) {
    if (padding_idx < -V || padding_idx >= V)
      CT_FAIL_NULL(CT_EINVAL, "embedding: padding_idx %lld must be within num_embeddings (in [-%lld, %lld))",
                   (long long)padding_idx, (long long)V, (long long)V);
    pad = padding_idx < 0 ? padding_idx + V : padding_idx;
  }
  int64_t rows = ct_tensor_numel(indices);
  ct_tensor *i64 = ct_cast(indices, CT_I64);
  ct_tensor *flat = i64 ? ct_reshape(i64, 1, &rows) : NULL;
  ct_tensor *idx = flat ? ct_contiguous(flat) : NULL;
  ct_tensor_free(i64), ct_tensor_free(flat);
  if (!idx || !check_rows(idx, V)) return ct_tensor_free(idx), NULL;
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)indices->ndim);
  shape[indices->ndim] = D;
  ct_tensor *out = ct__alloc(indices->ndim + 1, shape, weight->dtype, weight->device);
  ct_tensor *out2 = out ? ct__view_of(out, 2, (int64_t[]){rows, D}, (int64_t[]){D, 1}, out->offset) : NULL;
  ct_status s = out2 ? CT_KERNEL_CALL(weight->storage->backend, index_select, "embedding", weight, out2, weight, 0, idx)
                     : ct_last_status();
  ct_tensor_free(out2);
  ct_node *n = NULL;
  if (s == CT_OK) s = ct__record(out, "embedding", bw_embedding, 1, &weight, &n);
  if (s == CT_OK) s = ct__save_detached(n, 0, idx);
  ct_tensor_free(idx);
  if (s != CT_OK) return ct_tensor_free(out), NULL;
  if (n) n->iv[0] = pad;
  return out;
}
