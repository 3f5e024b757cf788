/* src/backend/opencl/bench_access.h: what `cuttle bench gemm` needs to call CLBlast directly on a
 * cuttle tensor's OpenCL buffers, so that ct_matmul can be compared with the raw library on the
 * same memory. The declarations name no CL type, so the bench (outside the backend's folder, which
 * alone includes CL headers) can include this file; it exists only where the OpenCL backend is
 * built (CUTTLE_WITH_OPENCL). Not a public API: nothing but the benchmarks calls it. */
#ifndef CUTTLE_OPENCL_BENCH_ACCESS_H
#define CUTTLE_OPENCL_BENCH_ACCESS_H

#include "cuttle.h"

/* One float32 GEMM c = a @ b on contiguous (n, n) OpenCL tensors of one device, with every cuttle
 * cost (address resolution, layout checks) paid once in ct__ocl_raw_gemm_new, so that each
 * ct__ocl_raw_gemm_run is CLBlastSgemm on the compute queue and nothing else. */
typedef struct ct__ocl_raw_gemm ct__ocl_raw_gemm;

/* NULL with the error set (CT_EINVAL: not float32, not contiguous, not (n, n), not one OpenCL
 * device). The tensors must outlive the handle. */
ct__ocl_raw_gemm *ct__ocl_raw_gemm_new(ct_tensor *c, ct_tensor *a, ct_tensor *b);
/* Queue CLBlastSgemm (asynchronous, like every kernel: ct_synchronize waits for it). */
ct_status ct__ocl_raw_gemm_run(ct__ocl_raw_gemm *g);
void ct__ocl_raw_gemm_free(ct__ocl_raw_gemm *g);

#endif
