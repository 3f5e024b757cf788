/* src/backend/cpu/index.c: index_select, gather and their backward scatters (index_add,
 * scatter_add). Indices were range-checked by the front-ends. Reference loops over multi-indices:
 * these ops are a small share of a training step. */
#include <string.h>
#include "backend/cpu/cpu.h"

static int64_t load_index(ct_tensor *index, int64_t flat_off) {
  const char *p = (const char *)ct__ptr(index);
  return index->dtype == CT_I64 ? ((const int64_t *)p)[flat_off] : (int64_t)((const int32_t *)p)[flat_off];
}

/* out[..., i, ...] = x[..., index[i], ...] along dim */
ct_status ct__cpu_index_select(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  int64_t idx[CT_MAX_DIMS] = {0}, src[CT_MAX_DIMS];
  size_t es = ct_dtype_size(x->dtype);
  if (ct_tensor_numel(out) == 0) return CT_OK;
  do {
    memcpy(src, idx, sizeof src);
    src[dim] = load_index(index, idx[dim] * index->stride[0]);
    memcpy((char *)ct__ptr(out) + ct__cpu_offset(out, idx) * (int64_t)es,
           (char *)ct__ptr(x) + ct__cpu_offset(x, src) * (int64_t)es, es);
  } while (ct__cpu_next(out->ndim, out->shape, idx));
  return CT_OK;
}

/* gx[..., index[i], ...] += gy[..., i, ...] */
ct_status ct__cpu_index_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  int64_t idx[CT_MAX_DIMS] = {0}, dst[CT_MAX_DIMS];
  size_t es = ct_dtype_size(gx->dtype), ges = ct_dtype_size(gy->dtype);
  if (ct_tensor_numel(gy) == 0) return CT_OK;
  do {
    memcpy(dst, idx, sizeof dst);
    dst[dim] = load_index(index, idx[dim] * index->stride[0]);
    char *p = (char *)ct__ptr(gx) + ct__cpu_offset(gx, dst) * (int64_t)es;
    double v = ct__load((char *)ct__ptr(gy) + ct__cpu_offset(gy, idx) * (int64_t)ges, gy->dtype);
    ct__store(p, gx->dtype, ct__load(p, gx->dtype) + v);
  } while (ct__cpu_next(gy->ndim, gy->shape, idx));
  return CT_OK;
}

/* out[i][j] = x[index[i][j]][j] for dim 0 (torch.gather) */
ct_status ct__cpu_gather(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  int64_t idx[CT_MAX_DIMS] = {0}, src[CT_MAX_DIMS];
  size_t es = ct_dtype_size(x->dtype);
  if (ct_tensor_numel(out) == 0) return CT_OK;
  do {
    memcpy(src, idx, sizeof src);
    src[dim] = load_index(index, ct__cpu_offset(index, idx));
    memcpy((char *)ct__ptr(out) + ct__cpu_offset(out, idx) * (int64_t)es,
           (char *)ct__ptr(x) + ct__cpu_offset(x, src) * (int64_t)es, es);
  } while (ct__cpu_next(out->ndim, out->shape, idx));
  return CT_OK;
}

/* gx[index[i][j]][j] += gy[i][j] for dim 0 */
ct_status ct__cpu_scatter_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  int64_t idx[CT_MAX_DIMS] = {0}, dst[CT_MAX_DIMS];
  size_t es = ct_dtype_size(gx->dtype), ges = ct_dtype_size(gy->dtype);
  if (ct_tensor_numel(gy) == 0) return CT_OK;
  do {
    memcpy(dst, idx, sizeof dst);
    dst[dim] = load_index(index, ct__cpu_offset(index, idx));
    char *p = (char *)ct__ptr(gx) + ct__cpu_offset(gx, dst) * (int64_t)es;
    double v = ct__load((char *)ct__ptr(gy) + ct__cpu_offset(gy, idx) * (int64_t)ges, gy->dtype);
    ct__store(p, gx->dtype, ct__load(p, gx->dtype) + v);
  } while (ct__cpu_next(gy->ndim, gy->shape, idx));
  return CT_OK;
}
