/* src/backend/cuda/bench_access.h: what `cuttle bench gemm` needs to call cuBLAS directly on a
 * cuttle tensor's CUDA buffers, so that ct_matmul can be compared with the raw library on the same
 * memory. The declarations name no CUDA type, so the bench (outside the backend's folder) can
 * include this file; it exists only where the CUDA backend is built (CUTTLE_WITH_CUDA). Not a
 * public API: nothing but the benchmarks calls it. */
#ifndef CUTTLE_CUDA_BENCH_ACCESS_H
#define CUTTLE_CUDA_BENCH_ACCESS_H

#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One GEMM c = a @ b on contiguous (n, n) CUDA tensors of one device and one dtype, as
 * cublasGemmEx on the device's cuBLAS handle (its compute stream), with the compute type chosen per
 * dtype: float32 CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 when tf32 is nonzero; float16
 * and bfloat16 CUBLAS_COMPUTE_32F (float32 accumulation, like cuttle's kernel). Everything but the
 * library call (checks, address resolution) is paid once in ct__cuda_raw_gemm_new. */
typedef struct ct__cuda_raw_gemm ct__cuda_raw_gemm;

/* NULL with the error set (CT_EINVAL: not contiguous, not (n, n), mixed dtypes or devices; CT_EDTYPE:
 * not float32/float16/bfloat16). The tensors must outlive the handle. */
ct__cuda_raw_gemm *ct__cuda_raw_gemm_new(ct_tensor *c, ct_tensor *a, ct_tensor *b, int tf32);
/* Queue cublasGemmEx (asynchronous: ct_synchronize waits for it). */
ct_status ct__cuda_raw_gemm_run(ct__cuda_raw_gemm *g);
void ct__cuda_raw_gemm_free(ct__cuda_raw_gemm *g);

#ifdef __cplusplus
}
#endif

#endif
