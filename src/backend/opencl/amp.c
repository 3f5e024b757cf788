/* src/backend/opencl/amp.c: the launcher of the GradScaler's fused unscale and inf/NaN check
 * (kernels/amp.cl; the semantics are PyTorch's _amp_foreach_non_finite_check_and_unscale_, see
 * src/optim/grad_scaler.c). Only enqueues: the flag stays on the device until the scaler reads it. */
#include "backend/opencl/opencl_backend.h"

/* g: a contiguous floating tensor, multiplied in place by inv_scale; found_inf: a 1-element float32
 * tensor on g's device, set to 1.0 when an element of g is inf or NaN, else left unchanged. */
ct_status ct__ocl_amp_unscale_(ct_tensor *g, double inv_scale, ct_tensor *found_inf) {
  ct__ocl_buf gb, fb;
  CT_TRY(ct__ocl_buf_of(g, &gb));
  CT_TRY(ct__ocl_buf_of(found_inf, &fb));
  int i = g->device.index;
  ct__ocl_real r;
  ct__ocl_arg args[] = {CT_OCL_ARG(gb.mem), CT_OCL_ARG(gb.off), CT_OCL_ARG(gb.dt), ct__ocl_real_arg(i, inv_scale, &r),
                        CT_OCL_ARG(fb.mem), CT_OCL_ARG(fb.off)};
  return ct__ocl_launch(i, "amp_unscale", (size_t)ct_tensor_numel(g), 6, args);
}
