/* src/backend/opencl/optim.c: the launchers of the fused Adam/AdamW and SGD updates
 * (kernels/optim.cl) over contiguous p, g and state of one floating dtype. */
#include <math.h>
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a) {
  ct__ocl_buf pb, gb, mb, vb;
  CT_TRY(ct__ocl_buf_of(p, &pb));
  CT_TRY(ct__ocl_buf_of(g, &gb));
  CT_TRY(ct__ocl_buf_of(m, &mb));
  CT_TRY(ct__ocl_buf_of(v, &vb));
  ct__ocl_buf tb = pb; /* a valid buffer argument when the count is the host's */
  if (a->step) CT_TRY(ct__ocl_buf_of(a->step, &tb));
  cl_int has_t = a->step != NULL;
  int i = p->device.index;
  /* the CPU's constants (src/backend/cpu/optim.c), in double before the one rounding to REAL */
  double c[9] = {a->beta1,
                 1.0 - a->beta1,
                 a->beta2,
                 1.0 - a->beta2,
                 a->eps,
                 a->lr / a->bias_correction1,
                 sqrt(a->bias_correction2),
                 a->decoupled ? 1.0 - a->lr * a->weight_decay : 1.0,
                 a->decoupled ? 0.0 : a->weight_decay};
  ct__ocl_real r[10];
  ct__ocl_arg args[] = {CT_OCL_ARG(pb.mem), CT_OCL_ARG(pb.off), CT_OCL_ARG(gb.mem), CT_OCL_ARG(gb.off), CT_OCL_ARG(mb.mem),
                        CT_OCL_ARG(mb.off), CT_OCL_ARG(vb.mem), CT_OCL_ARG(vb.off), CT_OCL_ARG(pb.dt),
                        ct__ocl_real_arg(i, c[0], &r[0]), ct__ocl_real_arg(i, c[1], &r[1]), ct__ocl_real_arg(i, c[2], &r[2]),
                        ct__ocl_real_arg(i, c[3], &r[3]), ct__ocl_real_arg(i, c[4], &r[4]), ct__ocl_real_arg(i, c[5], &r[5]),
                        ct__ocl_real_arg(i, c[6], &r[6]), ct__ocl_real_arg(i, c[7], &r[7]), ct__ocl_real_arg(i, c[8], &r[8]),
                        CT_OCL_ARG(tb.mem), CT_OCL_ARG(tb.off), CT_OCL_ARG(has_t), ct__ocl_real_arg(i, a->lr, &r[9])};
  return ct__ocl_launch(i, "adam_step", (size_t)ct_tensor_numel(p), 22, args);
}

ct_status ct__ocl_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a) {
  ct__ocl_buf pb, gb, bb;
  CT_TRY(ct__ocl_buf_of(p, &pb));
  CT_TRY(ct__ocl_buf_of(g, &gb));
  bb = pb; /* a valid buffer argument when there is no momentum buffer */
  if (buf) CT_TRY(ct__ocl_buf_of(buf, &bb));
  ct__ocl_buf tb = pb;
  if (a->step) CT_TRY(ct__ocl_buf_of(a->step, &tb));
  cl_int has_t = a->step != NULL;
  int i = p->device.index;
  ct__ocl_real r[4];
  cl_int has = buf != NULL, nest = a->nesterov, first = a->first_step;
  ct__ocl_arg args[] = {CT_OCL_ARG(pb.mem), CT_OCL_ARG(pb.off), CT_OCL_ARG(gb.mem), CT_OCL_ARG(gb.off), CT_OCL_ARG(bb.mem),
                        CT_OCL_ARG(bb.off), CT_OCL_ARG(has), CT_OCL_ARG(pb.dt), ct__ocl_real_arg(i, a->lr, &r[0]),
                        ct__ocl_real_arg(i, a->momentum, &r[1]), ct__ocl_real_arg(i, a->dampening, &r[2]),
                        ct__ocl_real_arg(i, a->weight_decay, &r[3]), CT_OCL_ARG(nest), CT_OCL_ARG(first),
                        CT_OCL_ARG(tb.mem), CT_OCL_ARG(tb.off), CT_OCL_ARG(has_t)};
  return ct__ocl_launch(i, "sgd_step", (size_t)ct_tensor_numel(p), 17, args);
}
