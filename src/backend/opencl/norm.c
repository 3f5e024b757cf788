/* src/backend/opencl/norm.c: the launchers of layer norm over the last D elements of a contiguous x
 * and of batch norm per channel of a contiguous (N, C, *) x, and of their backwards (kernels/norm.cl;
 * the contract is core/kernels.def's). An absent operand (w, b, the running statistics, a gradient
 * not wanted) is passed as x's buffer with its flag 0, a valid argument the kernels never touch. */
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

/* (N, C, S) of x (N, C, *): S the product of the dims after C */
static void bn_dims(const ct_tensor *x, cl_long *N, cl_long *C, cl_long *S) {
  *N = x->shape[0], *C = x->shape[1], *S = 1;
  for (int d = 2; d < x->ndim; d++) *S *= x->shape[d];
}

ct_status ct__ocl_batch_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_invstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, ct_tensor *running_mean, ct_tensor *running_var, int training, double momentum,
                             double eps) {
  ct__ocl_buf yb, mb, ib, xb, wb, bb, rmb, rvb;
  CT_TRY(ct__ocl_buf_of(y, &yb));
  CT_TRY(ct__ocl_buf_of(save_mean, &mb));
  CT_TRY(ct__ocl_buf_of(save_invstd, &ib));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  wb = bb = rmb = rvb = xb;
  if (w) CT_TRY(ct__ocl_buf_of(w, &wb));
  if (b) CT_TRY(ct__ocl_buf_of(b, &bb));
  cl_int has_run = running_mean && running_var;
  if (has_run) {
    CT_TRY(ct__ocl_buf_of(running_mean, &rmb));
    CT_TRY(ct__ocl_buf_of(running_var, &rvb));
  }
  int i = x->device.index;
  cl_int hw = w != NULL, hb = b != NULL, tr = training != 0;
  cl_long rms = has_run ? running_mean->stride[0] : 0, rvs = has_run ? running_var->stride[0] : 0, N, C, S;
  bn_dims(x, &N, &C, &S);
  ct__ocl_real rm_, re_;
  ct__ocl_arg args[] = {CT_OCL_ARG(yb.mem),  CT_OCL_ARG(yb.off),  CT_OCL_ARG(mb.mem),  CT_OCL_ARG(mb.off),
                        CT_OCL_ARG(ib.mem),  CT_OCL_ARG(ib.off),  CT_OCL_ARG(xb.mem),  CT_OCL_ARG(xb.off),
                        CT_OCL_ARG(wb.mem),  CT_OCL_ARG(wb.off),  CT_OCL_ARG(hw),      CT_OCL_ARG(bb.mem),
                        CT_OCL_ARG(bb.off),  CT_OCL_ARG(hb),      CT_OCL_ARG(rmb.mem), CT_OCL_ARG(rmb.off),
                        CT_OCL_ARG(rms),     CT_OCL_ARG(rvb.mem), CT_OCL_ARG(rvb.off), CT_OCL_ARG(rvs),
                        CT_OCL_ARG(has_run), CT_OCL_ARG(tr),      CT_OCL_ARG(xb.dt),   CT_OCL_ARG(N),
                        CT_OCL_ARG(C),       CT_OCL_ARG(S),       ct__ocl_real_arg(i, momentum, &rm_),
                        ct__ocl_real_arg(i, eps, &re_)};
  return ct__ocl_launch(i, "batch_norm", (size_t)C, 28, args);
}

ct_status ct__ocl_batch_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_invstd, int training) {
  ct__ocl_buf gxb, gwb, gbb, gyb, xb, wb, mb, ib;
  CT_TRY(ct__ocl_buf_of(gy, &gyb));
  CT_TRY(ct__ocl_buf_of(x, &xb));
  CT_TRY(ct__ocl_buf_of(save_mean, &mb));
  CT_TRY(ct__ocl_buf_of(save_invstd, &ib));
  gxb = gwb = gbb = wb = xb;
  if (gx) CT_TRY(ct__ocl_buf_of(gx, &gxb));
  if (gw) CT_TRY(ct__ocl_buf_of(gw, &gwb));
  if (gb) CT_TRY(ct__ocl_buf_of(gb, &gbb));
  if (w) CT_TRY(ct__ocl_buf_of(w, &wb));
  int i = x->device.index;
  cl_int hgx = gx != NULL, hgw = gw != NULL, hgb = gb != NULL, hw = w != NULL, tr = training != 0;
  cl_long N, C, S;
  bn_dims(x, &N, &C, &S);
  ct__ocl_arg args[] = {CT_OCL_ARG(gxb.mem), CT_OCL_ARG(gxb.off), CT_OCL_ARG(hgx),    CT_OCL_ARG(gwb.mem),
                        CT_OCL_ARG(gwb.off), CT_OCL_ARG(hgw),     CT_OCL_ARG(gbb.mem), CT_OCL_ARG(gbb.off),
                        CT_OCL_ARG(hgb),     CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off), CT_OCL_ARG(xb.mem),
                        CT_OCL_ARG(xb.off),  CT_OCL_ARG(wb.mem),  CT_OCL_ARG(wb.off),  CT_OCL_ARG(hw),
                        CT_OCL_ARG(mb.mem),  CT_OCL_ARG(mb.off),  CT_OCL_ARG(ib.mem),  CT_OCL_ARG(ib.off),
                        CT_OCL_ARG(tr),      CT_OCL_ARG(xb.dt),   CT_OCL_ARG(N),       CT_OCL_ARG(C),
                        CT_OCL_ARG(S)};
  return ct__ocl_launch(i, "batch_norm_backward", (size_t)C, 25, args);
}
