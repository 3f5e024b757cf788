/* src/backend/opencl/reduce.c: the launcher of sum, max and min (kernels/reduce.cl). out keeps
 * x's ndim with size 1 on the reduced dims; indices (int64, out's shape, contiguous) may be NULL. */
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_reduce(ct_reduce_op op, ct_tensor *out, ct_tensor *indices, ct_tensor *x) {
  int nd = x->ndim;
  int64_t kshape[CT_MAX_DIMS], kx[CT_MAX_DIMS], rshape[CT_MAX_DIMS], rx[CT_MAX_DIMS], rcount = 1;
  for (int d = 0; d < nd; d++) {
    int reduced = out->shape[d] == 1 && x->shape[d] != 1;
    kshape[d] = reduced ? 1 : x->shape[d];
    kx[d] = x->stride[d];
    rshape[d] = reduced ? x->shape[d] : 1;
    rx[d] = x->stride[d];
    if (reduced) rcount *= x->shape[d];
  }
  ct__ocl_buf o, xb, ib = {0};
  CT_TRY(ct__ocl_buf_of(out, &o));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  if (indices) CT_TRY(ct__ocl_buf_of(indices, &ib));
  else ib = o; /* a valid buffer; has_idx tells the kernel not to write it */
  const int64_t *kst[2] = {out->stride, kx}, *rst[1] = {rx};
  ct__ocl_iter it, rit;
  ct__ocl_iter_init(&it, nd, kshape, 2, kst);
  ct__ocl_iter_init(&rit, nd, rshape, 1, rst);
  cl_int opi = (cl_int)op, has_idx = indices != NULL;
  cl_long rc = rcount;
  ct__ocl_arg args[] = {CT_OCL_ARG(opi),    CT_OCL_ARG(o.mem),  CT_OCL_ARG(o.off), CT_OCL_ARG(o.dt),  CT_OCL_ARG(ib.mem),
                        CT_OCL_ARG(ib.off), CT_OCL_ARG(has_idx), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(xb.dt),
                        CT_OCL_ARG(it),     CT_OCL_ARG(rit),    CT_OCL_ARG(rc)};
  return ct__ocl_launch(out->device.index, "reduce", (size_t)ct_tensor_numel(out), 13, args);
}
