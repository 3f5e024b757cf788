/* src/backend/cpu/matmul.c: batched GEMM through OpenBLAS (cblas_sgemm / cblas_dgemm, and
 * cblas_sbgemm for bfloat16 where the library has it: CMake's CUTTLE_HAVE_SBGEMM; other halves
 * widened to float32 a block at a time, matmul_half).
 * out (B, M, N) = a (B, M, K) @ b (B, K, N). An operand whose last two dims are a transposed
 * contiguous matrix (a view from ct_transpose, as in linear's w^T) is passed with CblasTrans
 * instead of being copied. Batch strides come from dim 0 (0 for a broadcast operand). */
#include <stdlib.h>
#include <cblas.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"

/* The BLAS layout of the last two dims of t (rows r, cols c): 1 with *ld and *trans set, 0 when
 * the operand must be made contiguous first (the front-end guarantees one of the two). */
static int blas_layout(const ct_tensor *t, int *trans, int64_t *ld) {
  int64_t rs = t->stride[1], cs = t->stride[2], r = t->shape[1], c = t->shape[2];
  if (cs == 1 && (rs >= (c > 1 ? c : 1) || r == 1)) return *trans = 0, *ld = rs > c ? rs : (c > 1 ? c : 1), 1;
  if (rs == 1 && (cs >= (r > 1 ? r : 1) || c == 1)) return *trans = 1, *ld = cs > r ? cs : (r > 1 ? r : 1), 1;
  return 0;
}

/* rows x cols elements of half dtype tag lp, row r at src + r ld, widened into dst (ld cols) */
static void widen_block(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, int lp) {
  for (int64_t r = 0; r < rows; r++) {
    const uint16_t *s = src + r * ld;
    float *d = dst + r * cols;
    if (lp == CT_LP_BF16)
      for (int64_t c = 0; c < cols; c++) d[c] = ct__bf16_to_f32(s[c]);
    else
      for (int64_t c = 0; c < cols; c++) d[c] = ct__f16_to_f32(s[c]);
  }
}

/* float16 and bfloat16 (ct__supports(CT_K_matmul) in memory.c, where sbgemm does not serve): sgemm on float32
 * copies made a block at a time, the product rounded once. b is widened whole per batch (in the
 * networks here it is a weight or a gradient as small as one), a in blocks of rows of about 1 MiB,
 * so no float32 copy of a whole activation is made: the front-end's casts to float32 were three
 * full-size float32 tensors per linear layer under autocast, two of them saved for the backward
 * (issue 11). The copies are transient host memory, not tensors. */
static ct_status matmul_half(ct_tensor *out, ct_tensor *a, ct_tensor *b, int ta, int64_t lda, int tb, int64_t ldb) {
  int lp = ct__lp_tag(out->dtype);
  int64_t B = out->shape[0], M = out->shape[1], N = out->shape[2], K = a->shape[2];
  int64_t mb = K > 0 ? ((int64_t)1 << 18) / K : M; /* rows of a per block */
  if (mb < 1) mb = 1;
  if (mb > M) mb = M;
  float *bf = ct__malloc((size_t)(K * N + mb * K + mb * N) * sizeof(float) + 1, "matmul: float32 blocks of a half GEMM");
  if (!bf) return CT_ENOMEM;
  float *af = bf + K * N, *cf = af + mb * K;
  for (int64_t i = 0; i < B; i++) {
    const uint16_t *pa = (const uint16_t *)ct__ptr(a) + i * a->stride[0];
    const uint16_t *pb = (const uint16_t *)ct__ptr(b) + i * b->stride[0];
    uint16_t *po = (uint16_t *)ct__ptr(out) + i * out->stride[0];
    /* b keeps its layout: (K, N) rows, or (N, K) rows read transposed */
    if (tb) widen_block(bf, pb, N, K, ldb, lp);
    else widen_block(bf, pb, K, N, ldb, lp);
    for (int64_t m0 = 0; m0 < M; m0 += mb) {
      int64_t rows = M - m0 < mb ? M - m0 : mb;
      if (K == 0) {
        for (int64_t j = 0; j < rows * N; j++) cf[j] = 0;
      } else {
        /* rows m0 .. m0 + rows of a: (rows, K) rows, or from a stored (K, M), its columns as (K, rows) */
        if (ta) widen_block(af, pa + m0, K, rows, lda, lp);
        else widen_block(af, pa + m0 * lda, rows, K, lda, lp);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)rows, (int)N, (int)K,
                    1.0f, af, (int)(ta ? rows : K), bf, (int)(tb ? K : N), 0.0f, cf, (int)N);
      }
      uint16_t *o = po + m0 * N;
      if (lp == CT_LP_BF16)
        for (int64_t j = 0; j < rows * N; j++) o[j] = ct__f32_to_bf16(cf[j]);
      else
        for (int64_t j = 0; j < rows * N; j++) o[j] = ct__f32_to_f16(cf[j]);
    }
  }
  free(bf);
  return CT_OK;
}

ct_status ct__cpu_matmul(ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  int ta, tb;
  int64_t lda, ldb;
  if (!blas_layout(a, &ta, &lda) || !blas_layout(b, &tb, &ldb))
    return ct__error(CT_EINVAL, "matmul: internal: operands need a BLAS layout");
  int64_t B = out->shape[0], M = out->shape[1], N = out->shape[2], K = a->shape[2];
  if (M == 0 || N == 0) return CT_OK;
#ifdef CUTTLE_HAVE_SBGEMM
  if (out->dtype == CT_BF16) { /* sbgemm accumulates in float32 into a float32 C; one rounding to bf16 after */
    float *c = ct__malloc((size_t)(M * N) * sizeof *c, "matmul: the float32 result of a bfloat16 GEMM");
    if (!c) return CT_ENOMEM;
    for (int64_t i = 0; i < B; i++) {
      const bfloat16 *pa = (const bfloat16 *)ct__ptr(a) + i * a->stride[0];
      const bfloat16 *pb = (const bfloat16 *)ct__ptr(b) + i * b->stride[0];
      uint16_t *po = (uint16_t *)ct__ptr(out) + i * out->stride[0];
      if (K == 0) {
        for (int64_t j = 0; j < M * N; j++) c[j] = 0;
      } else {
        cblas_sbgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                     pa, (int)lda, pb, (int)ldb, 0.0f, c, (int)N);
      }
      for (int64_t j = 0; j < M * N; j++) po[j] = ct_f32_to_bf16(c[j]);
    }
    free(c);
    return CT_OK;
  }
#endif
  if (out->dtype == CT_F16 || out->dtype == CT_BF16) return matmul_half(out, a, b, ta, lda, tb, ldb);
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
