/* src/backend/opencl/softmax.c: the launchers of softmax / log_softmax over the last dim of a
 * contiguous (R, C) tensor and their backward (kernels/softmax.cl), one work-item per row. */
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_softmax(ct_tensor *y, ct_tensor *x, int log) {
  ct__ocl_buf yb, xb;
  CT_TRY(ct__ocl_buf_of(y, &yb));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  cl_long C = x->ndim ? x->shape[x->ndim - 1] : 1;
  cl_int lg = log;
  size_t rows = C ? (size_t)(ct_tensor_numel(x) / C) : 0;
  ct__ocl_arg args[] = {CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off),
                        CT_OCL_ARG(xb.dt),  CT_OCL_ARG(C),      CT_OCL_ARG(lg)};
  return ct__ocl_launch(y->device.index, "softmax", rows, 7, args);
}

ct_status ct__ocl_softmax_backward(ct_tensor *gx, ct_tensor *gy, ct_tensor *y, int log) {
  ct__be_tmp gyc, yc;
  CT_TRY(ct__be_tmp_contiguous(&gyc, gy));
  ct_status s = ct__be_tmp_contiguous(&yc, y);
  if (s != CT_OK) return ct__be_tmp_free(&gyc), s;
  ct__ocl_buf gxb, gyb, yb;
  if ((s = ct__ocl_buf_of(gx, &gxb)) == CT_OK && (s = ct__ocl_buf_of(&gyc.t, &gyb)) == CT_OK && (s = ct__ocl_buf_of(&yc.t, &yb)) == CT_OK) {
    cl_long C = y->ndim ? y->shape[y->ndim - 1] : 1;
    cl_int lg = log;
    size_t rows = C ? (size_t)(ct_tensor_numel(y) / C) : 0;
    ct__ocl_arg args[] = {CT_OCL_ARG(gxb.mem), CT_OCL_ARG(gxb.off), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off), CT_OCL_ARG(yb.mem),
                          CT_OCL_ARG(yb.off),  CT_OCL_ARG(yb.dt),   CT_OCL_ARG(C),       CT_OCL_ARG(lg)};
    s = ct__ocl_launch(gx->device.index, "softmax_backward", rows, 9, args);
  }
  ct__be_tmp_free(&gyc);
  ct__be_tmp_free(&yc);
  return s;
}
