/* src/backend/opencl/index.c: the launchers of index_select, index_add, gather and scatter_add
 * (kernels/index.cl). Indices (int32 or int64) become contiguous int64 first; the front-ends
 * range-checked host indices, and device indices are trusted as on CUDA (a bad one reads or writes
 * out of its row: the kernels must not be given one). */
#include "backend/opencl/opencl_backend.h"

/* (outer, size along dim, inner) of a contiguous shape */
static void split(const ct_tensor *t, int dim, cl_long *outer, cl_long *inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

ct_status ct__ocl_index_select(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  ct__be_tmp xc, ic;
  CT_TRY(ct__be_tmp_contiguous(&xc, x));
  ct_status s = ct__be_tmp_cast(&ic, index, CT_I64);
  if (s != CT_OK) return ct__be_tmp_free(&xc), s;
  ct__ocl_buf ob, xb, ib;
  if ((s = ct__ocl_buf_of(out, &ob)) == CT_OK && (s = ct__ocl_buf_of(&xc.t, &xb)) == CT_OK && (s = ct__ocl_buf_of(&ic.t, &ib)) == CT_OK) {
    cl_long outer, inner, n = out->shape[dim], xs = x->shape[dim];
    split(out, dim, &outer, &inner);
    ct__ocl_arg args[] = {CT_OCL_ARG(ob.mem), CT_OCL_ARG(ob.off), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(xb.dt),
                          CT_OCL_ARG(ib.mem), CT_OCL_ARG(ib.off), CT_OCL_ARG(n),      CT_OCL_ARG(xs),     CT_OCL_ARG(inner)};
    s = ct__ocl_launch(out->device.index, "index_select", (size_t)ct_tensor_numel(out), 10, args);
  }
  ct__be_tmp_free(&xc);
  ct__be_tmp_free(&ic);
  return s;
}

ct_status ct__ocl_index_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  ct__be_tmp gc, ic;
  CT_TRY(ct__be_tmp_cast(&gc, gy, gx->dtype));
  ct_status s = ct__be_tmp_cast(&ic, index, CT_I64);
  if (s != CT_OK) return ct__be_tmp_free(&gc), s;
  ct__ocl_buf xb, yb, ib;
  if (!ct_tensor_is_contiguous(gx)) s = ct__error(CT_EINVAL, "opencl: index_add needs a contiguous gradient (a bug in the caller)");
  if (s == CT_OK && (s = ct__ocl_buf_of(gx, &xb)) == CT_OK && (s = ct__ocl_buf_of(&gc.t, &yb)) == CT_OK &&
      (s = ct__ocl_buf_of(&ic.t, &ib)) == CT_OK) {
    cl_long outer, inner, n = gy->shape[dim], gs = gx->shape[dim];
    split(gx, dim, &outer, &inner);
    ct__ocl_arg args[] = {CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(xb.dt),
                          CT_OCL_ARG(ib.mem), CT_OCL_ARG(ib.off), CT_OCL_ARG(n),      CT_OCL_ARG(gs),     CT_OCL_ARG(inner)};
    s = ct__ocl_launch(gx->device.index, "index_add", (size_t)(outer * inner), 10, args);
  }
  ct__be_tmp_free(&gc);
  ct__be_tmp_free(&ic);
  return s;
}

ct_status ct__ocl_gather(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  ct__be_tmp ic, xc;
  CT_TRY(ct__be_tmp_cast(&ic, index, CT_I64));
  ct_status s = ct__be_tmp_cast(&xc, x, out->dtype);
  if (s != CT_OK) return ct__be_tmp_free(&ic), s;
  ct__ocl_buf ob, xb, ib;
  if ((s = ct__ocl_buf_of(out, &ob)) == CT_OK && (s = ct__ocl_buf_of(&xc.t, &xb)) == CT_OK && (s = ct__ocl_buf_of(&ic.t, &ib)) == CT_OK) {
    int64_t xst[CT_MAX_DIMS];
    for (int d = 0; d < xc.t.ndim; d++) xst[d] = d == dim ? 0 : xc.t.stride[d];
    const int64_t *st[3] = {out->stride, xst, ic.t.stride};
    ct__ocl_iter it;
    ct__ocl_iter_init(&it, out->ndim, out->shape, 3, st);
    cl_long xsd = xc.t.stride[dim];
    ct__ocl_arg args[] = {CT_OCL_ARG(ob.mem), CT_OCL_ARG(ob.off), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off),
                          CT_OCL_ARG(xb.dt),  CT_OCL_ARG(ib.mem), CT_OCL_ARG(ib.off), CT_OCL_ARG(xsd), CT_OCL_ARG(it)};
    s = ct__ocl_launch(out->device.index, "gather", (size_t)ct_tensor_numel(out), 9, args);
  }
  ct__be_tmp_free(&ic);
  ct__be_tmp_free(&xc);
  return s;
}

ct_status ct__ocl_scatter_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  ct__be_tmp ic, gc;
  CT_TRY(ct__be_tmp_cast(&ic, index, CT_I64));
  ct_status s = ct__be_tmp_cast(&gc, gy, gx->dtype);
  if (s != CT_OK) return ct__be_tmp_free(&ic), s;
  ct__ocl_buf xb, yb, ib;
  if ((s = ct__ocl_buf_of(gx, &xb)) == CT_OK && (s = ct__ocl_buf_of(&gc.t, &yb)) == CT_OK && (s = ct__ocl_buf_of(&ic.t, &ib)) == CT_OK) {
    int64_t shape[CT_MAX_DIMS], xst[CT_MAX_DIMS];
    for (int d = 0; d < gy->ndim; d++) shape[d] = d == dim ? 1 : gy->shape[d], xst[d] = d == dim ? 0 : gx->stride[d];
    const int64_t *st[3] = {xst, gc.t.stride, ic.t.stride};
    ct__ocl_iter it;
    ct__ocl_iter_init(&it, gy->ndim, shape, 3, st);
    cl_long n = gy->shape[dim], gxsd = gx->stride[dim], gysd = gc.t.stride[dim], isd = ic.t.stride[dim];
    ct__ocl_arg args[] = {CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(xb.dt),
                          CT_OCL_ARG(ib.mem), CT_OCL_ARG(ib.off), CT_OCL_ARG(n),      CT_OCL_ARG(gxsd),   CT_OCL_ARG(gysd),
                          CT_OCL_ARG(isd),    CT_OCL_ARG(it)};
    s = ct__ocl_launch(gx->device.index, "scatter_add", (size_t)(ct_tensor_numel(gy) / (n ? n : 1)), 12, args);
  }
  ct__be_tmp_free(&ic);
  ct__be_tmp_free(&gc);
  return s;
}
