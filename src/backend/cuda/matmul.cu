/* src/backend/cuda/matmul.cu: batched matrix multiply with cublasGemmStridedBatchedEx (cublasGemmEx
 * for a batch of one).
 *
 * out (B, M, N) = a (B, M, K) @ b (B, K, N). out is contiguous; a and b may be strided in their
 * last two dims (a transposed view costs nothing: it becomes cuBLAS's op T) and their batch stride
 * may be 0 (a broadcast operand). An operand whose last two dims have no unit stride is copied to
 * a contiguous scratch tensor first.
 *
 * cuBLAS is column-major, so the row-major product is computed transposed:
 * out^T (N x M) = b^T (N x K) * a^T (K x M), where a row-major matrix is the column-major
 * matrix of its transpose with the same leading dimension.
 *
 * float32 uses CUBLAS_COMPUTE_32F (no TF32, results match the CPU to float32 rounding) unless
 * ct__cuda_set_allow_tf32(1); float64 uses CUBLAS_COMPUTE_64F; float16 and bfloat16 accumulate in
 * float32. */
#include <limits.h>

#include "backend/cuda/common.cuh"

/* One operand as cuBLAS sees it: the column-major matrix of the transpose of a row-major (R x C)
 * matrix with row stride sr and column stride sc. */
typedef struct {
  cublasOperation_t op;
  int64_t ld;
} gemm_operand;

/* 1 when (R x C) with strides (sr, sc) maps onto cuBLAS without a copy; fills g. */
static int gemm_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, gemm_operand *g) {
  /* the matrix X = M^T (C x R) column-major: X[c][r] at c * sc + r * sr */
  if (sc == 1 || C == 1) {
    int64_t ld = R == 1 ? (C > 1 ? C : 1) : sr;
    if (ld >= (C > 1 ? C : 1)) {
      g->op = CUBLAS_OP_N, g->ld = ld;
      return 1;
    }
  }
  if (sr == 1 || R == 1) {
    /* X = Y^T with Y (R x C) column-major: Y[r][c] at r + c * sc */
    int64_t ld = C == 1 ? (R > 1 ? R : 1) : sc;
    if (ld >= (R > 1 ? R : 1)) {
      g->op = CUBLAS_OP_T, g->ld = ld;
      return 1;
    }
  }
  return 0;
}

/* out: (B, M, N) contiguous; a: (B, M, K); b: (B, K, N) */
ct_status ct__cuda_matmul(ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  if (a->ndim < 2 || b->ndim < 2 || out->ndim < 2 || a->ndim > 3 || b->ndim > 3 || out->ndim > 3)
    return ct__error(CT_ESHAPE, "cuda: matmul wants 2-D or 3-D operands, got %d, %d and %d dims", out->ndim, a->ndim, b->ndim);
  int64_t B = out->ndim == 3 ? out->shape[0] : 1;
  int64_t M = out->shape[out->ndim - 2], N = out->shape[out->ndim - 1];
  int64_t K = a->shape[a->ndim - 1];
  int64_t sa_b = a->ndim == 3 ? a->stride[0] : 0, sb_b = b->ndim == 3 ? b->stride[0] : 0;
  if (B == 0 || M == 0 || N == 0) return CT_OK;
  if (K == 0) return ct__cuda_fill(out, 0.0);
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || B > INT_MAX)
    return ct__error(CT_EINVAL, "cuda: matmul: a dimension of (%lld, %lld, %lld, %lld) exceeds cuBLAS's int range",
                     (long long)B, (long long)M, (long long)N, (long long)K);

  cudaDataType_t dt;
  cublasComputeType_t ct;
  const void *alpha, *beta;
  static const float one_f = 1.0f, zero_f = 0.0f;
  static const double one_d = 1.0, zero_d = 0.0;
  switch (out->dtype) {
    case CT_F32:
      dt = CUDA_R_32F, ct = ct__cuda_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      alpha = &one_f, beta = &zero_f;
      break;
    case CT_F64: dt = CUDA_R_64F, ct = CUBLAS_COMPUTE_64F, alpha = &one_d, beta = &zero_d; break;
    case CT_F16: dt = CUDA_R_16F, ct = CUBLAS_COMPUTE_32F, alpha = &one_f, beta = &zero_f; break;
    case CT_BF16: dt = CUDA_R_16BF, ct = CUBLAS_COMPUTE_32F, alpha = &one_f, beta = &zero_f; break;
    default:
      return ct__error(CT_EDTYPE, "cuda: matmul supports float32, float64, float16 and bfloat16, not %s",
                       ct_dtype_name(out->dtype));
  }
  if (a->dtype != out->dtype || b->dtype != out->dtype)
    return ct__error(CT_EDTYPE, "cuda: matmul wants one dtype, got out %s, a %s, b %s", ct_dtype_name(out->dtype),
                     ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
  cublasHandle_t h = ct__cuda_cublas(ctx);
  if (!h) return ct_last_status();

  ct__be_tmp ta, tb;
  memset(&ta, 0, sizeof ta);
  memset(&tb, 0, sizeof tb);
  ct_tensor *A = a, *Bt = b;
  gemm_operand ga, gb;
  ct_status s = CT_OK;
  if (!gemm_layout(M, K, a->stride[a->ndim - 2], a->stride[a->ndim - 1], &ga)) {
    s = ct__be_tmp_new(&ta, a->device, a->ndim, a->shape, a->dtype);
    if (s == CT_OK) s = ct__cuda_copy(&ta.t, a);
    if (s != CT_OK) goto done;
    A = &ta.t;
    sa_b = a->ndim == 3 ? M * K : 0;
    gemm_layout(M, K, K, 1, &ga);
  }
  if (!gemm_layout(K, N, b->stride[b->ndim - 2], b->stride[b->ndim - 1], &gb)) {
    s = ct__be_tmp_new(&tb, b->device, b->ndim, b->shape, b->dtype);
    if (s == CT_OK) s = ct__cuda_copy(&tb.t, b);
    if (s != CT_OK) goto done;
    Bt = &tb.t;
    sb_b = b->ndim == 3 ? K * N : 0;
    gemm_layout(K, N, N, 1, &gb);
  }
  if (ga.ld > INT_MAX || gb.ld > INT_MAX) {
    s = ct__error(CT_EINVAL, "cuda: matmul: a leading dimension exceeds cuBLAS's int range");
    goto done;
  }
  {
    /* C' (N x M) = op(b^T) (N x K) * op(a^T) (K x M). One matrix goes to cublasGemmEx, as
     * PyTorch's mm does (at::cuda::blas::gemm), several to the strided-batched call (its bmm). */
    cublasStatus_t e =
        B == 1 ? cublasGemmEx(h, gb.op, ga.op, (int)N, (int)M, (int)K, alpha, ct__ptr(Bt), dt, (int)gb.ld, ct__ptr(A), dt,
                              (int)ga.ld, beta, ct__ptr(out), dt, (int)N, ct, CUBLAS_GEMM_DEFAULT)
               : cublasGemmStridedBatchedEx(h, gb.op, ga.op, (int)N, (int)M, (int)K, alpha, ct__ptr(Bt), dt, (int)gb.ld,
                                            (long long)sb_b, ct__ptr(A), dt, (int)ga.ld, (long long)sa_b, beta, ct__ptr(out),
                                            dt, (int)N, (long long)(M * N), (int)B, ct, CUBLAS_GEMM_DEFAULT);
    if (e != CUBLAS_STATUS_SUCCESS)
      s = ct__error(CT_EBACKEND, "cuda: %s failed for (%lld x %lld x %lld, batch %lld, %s): %s",
                    B == 1 ? "cublasGemmEx" : "cublasGemmStridedBatchedEx", (long long)M, (long long)N, (long long)K,
                    (long long)B, ct_dtype_name(out->dtype), cublasGetStatusString(e));
  }
done:
  ct__be_tmp_free(&ta);
  ct__be_tmp_free(&tb);
  return s;
}
