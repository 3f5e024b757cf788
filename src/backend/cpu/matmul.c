/* src/backend/cpu/matmul.c: batched GEMM through OpenBLAS (cblas_sgemm / cblas_dgemm).
 * out (B, M, N) = a (B, M, K) @ b (B, K, N). An operand whose last two dims are a transposed
 * contiguous matrix (a view from ct_transpose, as in linear's w^T) is passed with CblasTrans
 * instead of being copied. Batch strides come from dim 0 (0 for a broadcast operand). */
#include <cblas.h>
#include "backend/cpu/cpu.h"

/* The BLAS layout of the last two dims of t (rows r, cols c): 1 with *ld and *trans set, 0 when
 * the operand must be made contiguous first (the front-end guarantees one of the two). */
static int blas_layout(const ct_tensor *t, int *trans, int64_t *ld) {
  int64_t rs = t->stride[1], cs = t->stride[2], r = t->shape[1], c = t->shape[2];
  if (cs == 1 && (rs >= (c > 1 ? c : 1) || r == 1)) return *trans = 0, *ld = rs > c ? rs : (c > 1 ? c : 1), 1;
  if (rs == 1 && (cs >= (r > 1 ? r : 1) || c == 1)) return *trans = 1, *ld = cs > r ? cs : (r > 1 ? r : 1), 1;
  return 0;
}

ct_status ct__cpu_matmul(ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  int ta, tb;
  int64_t lda, ldb;
  if (!blas_layout(a, &ta, &lda) || !blas_layout(b, &tb, &ldb))
    return ct__error(CT_EINVAL, "matmul: internal: operands need a BLAS layout");
  int64_t B = out->shape[0], M = out->shape[1], N = out->shape[2], K = a->shape[2];
  if (M == 0 || N == 0) return CT_OK;
  for (int64_t i = 0; i < B; i++) {
    if (out->dtype == CT_F32) {
      const float *pa = (const float *)ct__ptr(a) + i * a->stride[0];
      const float *pb = (const float *)ct__ptr(b) + i * b->stride[0];
      float *po = (float *)ct__ptr(out) + i * out->stride[0];
      if (K == 0) {
        for (int64_t j = 0; j < M * N; j++) po[j] = 0;
        continue;
      }
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                  1.0f, pa, (int)lda, pb, (int)ldb, 0.0f, po, (int)N);
    } else {
      const double *pa = (const double *)ct__ptr(a) + i * a->stride[0];
      const double *pb = (const double *)ct__ptr(b) + i * b->stride[0];
      double *po = (double *)ct__ptr(out) + i * out->stride[0];
      if (K == 0) {
        for (int64_t j = 0; j < M * N; j++) po[j] = 0;
        continue;
      }
      cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                  1.0, pa, (int)lda, pb, (int)ldb, 0.0, po, (int)N);
    }
  }
  return CT_OK;
}
