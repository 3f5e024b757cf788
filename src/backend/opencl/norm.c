/* src/backend/opencl/norm.c: the launchers of layer norm and its backward over the last D elements
 * of a contiguous x (kernels/norm.cl; the contract is core/kernels.def's). An absent w, b, gw or gb
 * is passed as x's buffer with its flag 0, a valid argument the kernels never touch. */
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_layer_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_rstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, int64_t D, double eps) {
  ct__ocl_buf yb, mb, rb, xb, wb, bb;
  CT_TRY(ct__ocl_buf_of(y, &yb));
  CT_TRY(ct__ocl_buf_of(save_mean, &mb));
  CT_TRY(ct__ocl_buf_of(save_rstd, &rb));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  wb = bb = xb;
  if (w) CT_TRY(ct__ocl_buf_of(w, &wb));
  if (b) CT_TRY(ct__ocl_buf_of(b, &bb));
  int i = x->device.index;
  cl_int hw = w != NULL, hb = b != NULL;
  cl_long Dl = D;
  ct__ocl_real re;
  ct__ocl_arg args[] = {CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(mb.mem), CT_OCL_ARG(mb.off), CT_OCL_ARG(rb.mem),
                        CT_OCL_ARG(rb.off), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(wb.mem), CT_OCL_ARG(wb.off),
                        CT_OCL_ARG(hw),     CT_OCL_ARG(bb.mem), CT_OCL_ARG(bb.off), CT_OCL_ARG(hb),     CT_OCL_ARG(xb.dt),
                        CT_OCL_ARG(Dl),     ct__ocl_real_arg(i, eps, &re)};
  size_t rows = D ? (size_t)(ct_tensor_numel(x) / D) : 0;
  return ct__ocl_launch(i, "layer_norm", rows, 17, args);
}

ct_status ct__ocl_layer_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_rstd, int64_t D) {
  ct__ocl_buf gxb, gwb, gbb, gyb, xb, wb, mb, rb;
  CT_TRY(ct__ocl_buf_of(gy, &gyb));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  CT_TRY(ct__ocl_buf_of(save_mean, &mb));
  CT_TRY(ct__ocl_buf_of(save_rstd, &rb));
  gxb = gwb = gbb = wb = xb;
  if (gx) CT_TRY(ct__ocl_buf_of(gx, &gxb));
  if (gw) CT_TRY(ct__ocl_buf_of(gw, &gwb));
  if (gb) CT_TRY(ct__ocl_buf_of(gb, &gbb));
  if (w) CT_TRY(ct__ocl_buf_of(w, &wb));
  int i = x->device.index;
  cl_long Dl = D, Rl = D ? ct_tensor_numel(x) / D : 0;
  cl_int hw = w != NULL, hgw = gw != NULL, hgb = gb != NULL;
  if (gx) {
    ct__ocl_arg args[] = {CT_OCL_ARG(gxb.mem), CT_OCL_ARG(gxb.off), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off),
                          CT_OCL_ARG(xb.mem),  CT_OCL_ARG(xb.off),  CT_OCL_ARG(wb.mem),  CT_OCL_ARG(wb.off),
                          CT_OCL_ARG(hw),      CT_OCL_ARG(mb.mem),  CT_OCL_ARG(mb.off),  CT_OCL_ARG(rb.mem),
                          CT_OCL_ARG(rb.off),  CT_OCL_ARG(xb.dt),   CT_OCL_ARG(Dl)};
    CT_TRY(ct__ocl_launch(i, "layer_norm_backward", (size_t)Rl, 15, args));
  }
  if (gw || gb) {
    ct__ocl_arg args[] = {CT_OCL_ARG(gwb.mem), CT_OCL_ARG(gwb.off), CT_OCL_ARG(hgw),    CT_OCL_ARG(gbb.mem),
                          CT_OCL_ARG(gbb.off), CT_OCL_ARG(hgb),     CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off),
                          CT_OCL_ARG(xb.mem),  CT_OCL_ARG(xb.off),  CT_OCL_ARG(mb.mem),  CT_OCL_ARG(mb.off),
                          CT_OCL_ARG(rb.mem),  CT_OCL_ARG(rb.off),  CT_OCL_ARG(xb.dt),   CT_OCL_ARG(Rl),
                          CT_OCL_ARG(Dl)};
    CT_TRY(ct__ocl_launch(i, "layer_norm_backward_params", (size_t)D, 17, args));
  }
  return CT_OK;
}
