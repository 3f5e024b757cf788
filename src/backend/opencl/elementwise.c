/* src/backend/opencl/elementwise.c: the launchers of the unary, binary, comparison and where
 * kernels (kernels/elementwise.cl). The formulas they evaluate are ops.def's, turned into OpenCL C
 * in the program's prelude (program.c). */
#include "backend/opencl/opencl_backend.h"

static const int64_t *strides_or_null(ct_tensor *t) { return t ? t->stride : NULL; }

ct_status ct__ocl_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x) {
  ct__ocl_buf o, a;
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(x, &a));
  const int64_t *st[2] = {out->stride, x->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, out->ndim, out->shape, 2, st);
  cl_int opi = (cl_int)op;
  ct__ocl_arg args[] = {CT_OCL_ARG(opi), CT_OCL_ARG(o.mem), CT_OCL_ARG(o.off), CT_OCL_ARG(o.dt),
                        CT_OCL_ARG(a.mem), CT_OCL_ARG(a.off), CT_OCL_ARG(a.dt), CT_OCL_ARG(it)};
  return ct__ocl_launch(out->device.index, "unary", (size_t)ct_tensor_numel(out), 8, args);
}

ct_status ct__ocl_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y) {
  ct__ocl_buf o, gb, xb, yb;
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(g, &gb));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  yb = xb; /* a valid buffer argument when y is absent; has_y tells the kernel */
  if (y) CT_TRY(ct__ocl_buf_of(y, &yb));
  const int64_t *st[4] = {out->stride, g->stride, x->stride, strides_or_null(y)};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, out->ndim, out->shape, 4, st);
  cl_int opi = (cl_int)op, has_y = y != NULL;
  ct__ocl_arg args[] = {CT_OCL_ARG(opi),    CT_OCL_ARG(o.mem),  CT_OCL_ARG(o.off),  CT_OCL_ARG(o.dt),  CT_OCL_ARG(gb.mem),
                        CT_OCL_ARG(gb.off), CT_OCL_ARG(gb.dt),  CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(xb.dt),
                        CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(yb.dt),  CT_OCL_ARG(has_y), CT_OCL_ARG(it)};
  return ct__ocl_launch(out->device.index, "unary_backward", (size_t)ct_tensor_numel(out), 15, args);
}

ct_status ct__ocl_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  ct__ocl_buf o, ab, bb;
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(a, &ab));
  CT_TRY(ct__ocl_buf_of(b, &bb));
  const int64_t *st[3] = {out->stride, a->stride, b->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, out->ndim, out->shape, 3, st);
  cl_int opi = (cl_int)op;
  ct__ocl_arg args[] = {CT_OCL_ARG(opi),    CT_OCL_ARG(o.mem),  CT_OCL_ARG(o.off), CT_OCL_ARG(o.dt),
                        CT_OCL_ARG(ab.mem), CT_OCL_ARG(ab.off), CT_OCL_ARG(ab.dt), CT_OCL_ARG(bb.mem),
                        CT_OCL_ARG(bb.off), CT_OCL_ARG(bb.dt),  CT_OCL_ARG(it)};
  return ct__ocl_launch(out->device.index, "binary", (size_t)ct_tensor_numel(out), 11, args);
}

ct_status ct__ocl_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b) {
  ct__ocl_buf o, gb, ab, bb;
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(g, &gb));
  CT_TRY(ct__ocl_buf_of(a, &ab));
  CT_TRY(ct__ocl_buf_of(b, &bb));
  const int64_t *st[4] = {out->stride, g->stride, a->stride, b->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, out->ndim, out->shape, 4, st);
  cl_int opi = (cl_int)op, w = wrt;
  ct__ocl_arg args[] = {CT_OCL_ARG(opi),    CT_OCL_ARG(w),      CT_OCL_ARG(o.mem),  CT_OCL_ARG(o.off),  CT_OCL_ARG(o.dt),
                        CT_OCL_ARG(gb.mem), CT_OCL_ARG(gb.off), CT_OCL_ARG(gb.dt),  CT_OCL_ARG(ab.mem), CT_OCL_ARG(ab.off),
                        CT_OCL_ARG(ab.dt),  CT_OCL_ARG(bb.mem), CT_OCL_ARG(bb.off), CT_OCL_ARG(bb.dt),  CT_OCL_ARG(it)};
  return ct__ocl_launch(out->device.index, "binary_backward", (size_t)ct_tensor_numel(out), 15, args);
}

ct_status ct__ocl_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
  ct__ocl_buf o, cb, ab, bb;
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(cond, &cb));
  CT_TRY(ct__ocl_buf_of(a, &ab));
  CT_TRY(ct__ocl_buf_of(b, &bb));
  const int64_t *st[4] = {out->stride, cond->stride, a->stride, b->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, out->ndim, out->shape, 4, st);
  ct__ocl_arg args[] = {CT_OCL_ARG(o.mem),  CT_OCL_ARG(o.off),  CT_OCL_ARG(o.dt),   CT_OCL_ARG(cb.mem), CT_OCL_ARG(cb.off),
                        CT_OCL_ARG(cb.dt),  CT_OCL_ARG(ab.mem), CT_OCL_ARG(ab.off), CT_OCL_ARG(ab.dt),  CT_OCL_ARG(bb.mem),
                        CT_OCL_ARG(bb.off), CT_OCL_ARG(bb.dt),  CT_OCL_ARG(it)};
  return ct__ocl_launch(out->device.index, "where_", (size_t)ct_tensor_numel(out), 13, args);
}
