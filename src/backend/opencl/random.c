/* src/backend/opencl/random.c: the launcher of the Philox draws (kernels/random.cl), which give
 * the CPU's numbers for the same seed and offset (src/core/rng.c). out is contiguous. */
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_random(ct_tensor *out, ct_dist dist, double p0, double p1, uint64_t seed, uint64_t offset) {
  ct__ocl_buf o;
  CT_TRY(ct__ocl_buf_of(out, &o));
  cl_long n = ct_tensor_numel(out);
  cl_int d = (cl_int)dist;
  cl_ulong range = dist == CT_DIST_RANDINT ? (cl_ulong)(p1 - p0) : 1, sd = seed, off = offset;
  ct__ocl_real r0, r1;
  int idx = out->device.index;
  ct__ocl_arg args[] = {CT_OCL_ARG(o.mem), CT_OCL_ARG(o.off), CT_OCL_ARG(o.dt),  CT_OCL_ARG(n),  CT_OCL_ARG(d),
                        ct__ocl_real_arg(idx, p0, &r0), ct__ocl_real_arg(idx, p1, &r1), CT_OCL_ARG(range), CT_OCL_ARG(sd),
                        CT_OCL_ARG(off)};
  return ct__ocl_launch(idx, "random_", (size_t)((n + 3) / 4), 10, args);
}
