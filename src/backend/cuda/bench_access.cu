/* src/backend/cuda/bench_access.cu: cuBLAS called directly on cuttle's buffers, for `cuttle bench
 * gemm` (bench_access.h). The handle keeps the device pointers, the cuBLAS handle and the data and
 * compute types, so the timed call is cublasGemmEx alone: the difference between it and ct_matmul
 * is what cuttle adds (validation, the output's allocation, the tape check, the backend's layout
 * checks, and cublasGemmStridedBatchedEx in place of cublasGemmEx). */
#include <limits.h>
#include <stdlib.h>
#include "backend/cuda/bench_access.h"
#include "backend/cuda/common.cuh"

struct ct__cuda_raw_gemm {
  cublasHandle_t h;
  void *a, *b, *c;
  cudaDataType_t dt;
  cublasComputeType_t ct;
  int n;
};

static int square(const ct_tensor *t, int64_t n, ct_dtype dtype, int index) {
  return t->device.kind == CT_CUDA && t->device.index == index && t->dtype == dtype && t->ndim == 2 &&
         t->shape[0] == n && t->shape[1] == n && ct_tensor_is_contiguous(t);
}

extern "C" ct__cuda_raw_gemm *ct__cuda_raw_gemm_new(ct_tensor *c, ct_tensor *a, ct_tensor *b, int tf32) {
  if (!a || !b || !c) {
    ct__error(CT_EINVAL, "ct__cuda_raw_gemm_new: NULL tensor");
    return NULL;
  }
  int64_t n = c->ndim == 2 ? c->shape[0] : -1;
  if (n < 1 || n > INT_MAX || !square(a, n, c->dtype, c->device.index) || !square(b, n, c->dtype, c->device.index) ||
      !square(c, n, c->dtype, c->device.index)) {
    ct__error(CT_EINVAL, "ct__cuda_raw_gemm_new: wants three contiguous (n, n) tensors of one dtype on one CUDA device");
    return NULL;
  }
  cudaDataType_t dt;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  switch (c->dtype) {
    case CT_F32: dt = CUDA_R_32F, ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case CT_F16: dt = CUDA_R_16F; break;
    case CT_BF16: dt = CUDA_R_16BF; break;
    default:
      ct__error(CT_EDTYPE, "ct__cuda_raw_gemm_new: float32, float16 or bfloat16, not %s", ct_dtype_name(c->dtype));
      return NULL;
  }
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(c);
  cublasHandle_t h = ctx ? ct__cuda_cublas(ctx) : NULL;
  if (!h) return NULL;
  ct__cuda_raw_gemm *g = (ct__cuda_raw_gemm *)calloc(1, sizeof *g);
  if (!g) {
    ct__error(CT_ENOMEM, "ct__cuda_raw_gemm_new: out of host memory (%zu bytes)", sizeof *g);
    return NULL;
  }
  g->h = h, g->dt = dt, g->ct = ct, g->n = (int)n;
  g->a = ct__ptr(a), g->b = ct__ptr(b), g->c = ct__ptr(c);
  return g;
}

extern "C" ct_status ct__cuda_raw_gemm_run(ct__cuda_raw_gemm *g) {
  static const float one = 1.0f, zero = 0.0f;
  /* row-major c = a b is column-major c^T = b^T a^T: the operands swapped, no transposes */
  cublasStatus_t e = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->b, g->dt, g->n, g->a,
                                  g->dt, g->n, &zero, g->c, g->dt, g->n, g->ct, CUBLAS_GEMM_DEFAULT);
  if (e != CUBLAS_STATUS_SUCCESS)
    return ct__error(CT_EBACKEND, "cuda: cublasGemmEx failed for n = %d: %s", g->n, cublasGetStatusString(e));
  return CT_OK;
}

extern "C" void ct__cuda_raw_gemm_free(ct__cuda_raw_gemm *g) { free(g); }
