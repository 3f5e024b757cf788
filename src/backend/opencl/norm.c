/* src/backend/opencl/norm.c: the launchers of layer norm over the last D elements of a contiguous x
 * and of batch norm per channel of a contiguous (N, C, *) x, and of their backwards (kernels/norm.cl;
 * the contract is core/kernels.def's). An absent operand (w, b, the running statistics, a gradient
 * not wanted) is passed as x's buffer with its flag 0, a valid argument the kernels never touch. */
#include "backend/opencl/opencl_backend.h"

/* t's buffer, or x's when t is NULL (an absent operand) */
static ct_status buf_or_x(const ct_tensor *t, const ct__ocl_buf *x, ct__ocl_buf *out) {
  if (!t) return *out = *x, CT_OK;
  return ct__ocl_buf_of(t, out);
}

/* The forward's operands: y, x, the two saved statistics, w and b (either may be absent) */
typedef struct {
  ct__ocl_buf y, x, mean, stat, w, b;
} fw_bufs;
static ct_status fw_bufs_of(fw_bufs *f, ct_tensor *y, ct_tensor *x, ct_tensor *mean, ct_tensor *stat, ct_tensor *w,
                            ct_tensor *b) {
  CT_TRY(ct__ocl_buf_of(y, &f->y));
  CT_TRY(ct__ocl_buf_of(x, &f->x));
  CT_TRY(ct__ocl_buf_of(mean, &f->mean));
  CT_TRY(ct__ocl_buf_of(stat, &f->stat));
  CT_TRY(buf_or_x(w, &f->x, &f->w));
  return buf_or_x(b, &f->x, &f->b);
}

/* The backward's operands: gy, x, the two saved statistics, and gx, gw, gb, w (each may be absent) */
typedef struct {
  ct__ocl_buf gy, x, mean, stat, gx, gw, gb, w;
} bw_bufs;
static ct_status bw_bufs_of(bw_bufs *k, ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                            ct_tensor *mean, ct_tensor *stat) {
  CT_TRY(ct__ocl_buf_of(gy, &k->gy));
  CT_TRY(ct__ocl_buf_of(x, &k->x));
  CT_TRY(ct__ocl_buf_of(mean, &k->mean));
  CT_TRY(ct__ocl_buf_of(stat, &k->stat));
  CT_TRY(buf_or_x(gx, &k->x, &k->gx));
  CT_TRY(buf_or_x(gw, &k->x, &k->gw));
  CT_TRY(buf_or_x(gb, &k->x, &k->gb));
  return buf_or_x(w, &k->x, &k->w);
}

ct_status ct__ocl_layer_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_rstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, int64_t D, double eps) {
  fw_bufs f;
  CT_TRY(fw_bufs_of(&f, y, x, save_mean, save_rstd, w, b));
  int i = x->device.index;
  cl_int hw = w != NULL, hb = b != NULL;
  cl_long Dl = D;
  ct__ocl_real re;
  ct__ocl_arg args[] = {CT_OCL_ARG(f.y.mem),    CT_OCL_ARG(f.y.off),    CT_OCL_ARG(f.mean.mem), CT_OCL_ARG(f.mean.off),
                        CT_OCL_ARG(f.stat.mem), CT_OCL_ARG(f.stat.off), CT_OCL_ARG(f.x.mem),    CT_OCL_ARG(f.x.off),
                        CT_OCL_ARG(f.w.mem),    CT_OCL_ARG(f.w.off),    CT_OCL_ARG(hw),         CT_OCL_ARG(f.b.mem),
                        CT_OCL_ARG(f.b.off),    CT_OCL_ARG(hb),         CT_OCL_ARG(f.x.dt),     CT_OCL_ARG(Dl),
                        ct__ocl_real_arg(i, eps, &re)};
  size_t rows = D ? (size_t)(ct_tensor_numel(x) / D) : 0;
  return ct__ocl_launch_groups(i, "layer_norm", rows, 17, args);
}

ct_status ct__ocl_layer_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_rstd, int64_t D) {
  bw_bufs k;
  CT_TRY(bw_bufs_of(&k, gx, gw, gb, gy, x, w, save_mean, save_rstd));
  int i = x->device.index;
  cl_long Dl = D, Rl = D ? ct_tensor_numel(x) / D : 0;
  cl_int hw = w != NULL, hgw = gw != NULL, hgb = gb != NULL;
  if (gx) {
    ct__ocl_arg args[] = {CT_OCL_ARG(k.gx.mem),   CT_OCL_ARG(k.gx.off),   CT_OCL_ARG(k.gy.mem),   CT_OCL_ARG(k.gy.off),
                          CT_OCL_ARG(k.x.mem),    CT_OCL_ARG(k.x.off),    CT_OCL_ARG(k.w.mem),    CT_OCL_ARG(k.w.off),
                          CT_OCL_ARG(hw),         CT_OCL_ARG(k.mean.mem), CT_OCL_ARG(k.mean.off), CT_OCL_ARG(k.stat.mem),
                          CT_OCL_ARG(k.stat.off), CT_OCL_ARG(k.x.dt),     CT_OCL_ARG(Dl)};
    CT_TRY(ct__ocl_launch_groups(i, "layer_norm_backward", (size_t)Rl, 15, args));
  }
  if (gw || gb) {
    ct__ocl_arg args[] = {CT_OCL_ARG(k.gw.mem),   CT_OCL_ARG(k.gw.off),   CT_OCL_ARG(hgw),        CT_OCL_ARG(k.gb.mem),
                          CT_OCL_ARG(k.gb.off),   CT_OCL_ARG(hgb),        CT_OCL_ARG(k.gy.mem),   CT_OCL_ARG(k.gy.off),
                          CT_OCL_ARG(k.x.mem),    CT_OCL_ARG(k.x.off),    CT_OCL_ARG(k.mean.mem), CT_OCL_ARG(k.mean.off),
                          CT_OCL_ARG(k.stat.mem), CT_OCL_ARG(k.stat.off), CT_OCL_ARG(k.x.dt),     CT_OCL_ARG(Rl),
                          CT_OCL_ARG(Dl)};
    CT_TRY(ct__ocl_launch(i, "layer_norm_backward_params", (size_t)D, 17, args));
  }
  return CT_OK;
}

ct_status ct__ocl_batch_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_invstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, ct_tensor *running_mean, ct_tensor *running_var, int training, double momentum,
                             double eps) {
  fw_bufs f;
  ct__ocl_buf rmb, rvb;
  cl_int has_run = running_mean && running_var;
  CT_TRY(fw_bufs_of(&f, y, x, save_mean, save_invstd, w, b));
  CT_TRY(buf_or_x(has_run ? running_mean : NULL, &f.x, &rmb));
  CT_TRY(buf_or_x(has_run ? running_var : NULL, &f.x, &rvb));
  int i = x->device.index;
  cl_int hw = w != NULL, hb = b != NULL, tr = training != 0;
  cl_long rms = has_run ? running_mean->stride[0] : 0, rvs = has_run ? running_var->stride[0] : 0;
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  ct__ocl_real rm_, re_;
  ct__ocl_arg args[] = {CT_OCL_ARG(f.y.mem),    CT_OCL_ARG(f.y.off),    CT_OCL_ARG(f.mean.mem), CT_OCL_ARG(f.mean.off),
                        CT_OCL_ARG(f.stat.mem), CT_OCL_ARG(f.stat.off), CT_OCL_ARG(f.x.mem),    CT_OCL_ARG(f.x.off),
                        CT_OCL_ARG(f.w.mem),    CT_OCL_ARG(f.w.off),    CT_OCL_ARG(hw),         CT_OCL_ARG(f.b.mem),
                        CT_OCL_ARG(f.b.off),    CT_OCL_ARG(hb),         CT_OCL_ARG(rmb.mem),    CT_OCL_ARG(rmb.off),
                        CT_OCL_ARG(rms),        CT_OCL_ARG(rvb.mem),    CT_OCL_ARG(rvb.off),    CT_OCL_ARG(rvs),
                        CT_OCL_ARG(has_run),    CT_OCL_ARG(tr),         CT_OCL_ARG(f.x.dt),     CT_OCL_ARG(N),
                        CT_OCL_ARG(C),          CT_OCL_ARG(S),          ct__ocl_real_arg(i, momentum, &rm_),
                        ct__ocl_real_arg(i, eps, &re_)};
  return ct__ocl_launch_groups(i, "batch_norm", (size_t)C, 28, args);
}

ct_status ct__ocl_batch_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_invstd, int training) {
  bw_bufs k;
  CT_TRY(bw_bufs_of(&k, gx, gw, gb, gy, x, w, save_mean, save_invstd));
  int i = x->device.index;
  cl_int hgx = gx != NULL, hgw = gw != NULL, hgb = gb != NULL, hw = w != NULL, tr = training != 0;
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  ct__ocl_arg args[] = {CT_OCL_ARG(k.gx.mem),   CT_OCL_ARG(k.gx.off),   CT_OCL_ARG(hgx),        CT_OCL_ARG(k.gw.mem),
                        CT_OCL_ARG(k.gw.off),   CT_OCL_ARG(hgw),        CT_OCL_ARG(k.gb.mem),   CT_OCL_ARG(k.gb.off),
                        CT_OCL_ARG(hgb),        CT_OCL_ARG(k.gy.mem),   CT_OCL_ARG(k.gy.off),   CT_OCL_ARG(k.x.mem),
                        CT_OCL_ARG(k.x.off),    CT_OCL_ARG(k.w.mem),    CT_OCL_ARG(k.w.off),    CT_OCL_ARG(hw),
                        CT_OCL_ARG(k.mean.mem), CT_OCL_ARG(k.mean.off), CT_OCL_ARG(k.stat.mem), CT_OCL_ARG(k.stat.off),
                        CT_OCL_ARG(tr),         CT_OCL_ARG(k.x.dt),     CT_OCL_ARG(N),          CT_OCL_ARG(C),
                        CT_OCL_ARG(S)};
  return ct__ocl_launch_groups(i, "batch_norm_backward", (size_t)C, 25, args);
}
