/* src/backend/opencl/matmul.c: batched matrix products through CLBlast (GEMM on the device's
 * compute queue). out (B, M, N) = a (B, M, K) @ b (B, K, N), out contiguous; a and b may be
 * strided in their last two dims: a row-major operand goes as it is, a transposed one (stride 1
 * across rows, as linear's w^T) with CLBlast's transpose flag, anything else through a contiguous
 * copy. The batch is a loop of GEMMs with per-batch offsets (stride 0 broadcasts a batch). The
 * front-end computes in float32 or float64 only, so those are the two precisions here. The one
 * GEMM call, ct__ocl_gemm, serves conv.c and conv_relu_pool.c as well.
 *
 * CLBlast compiles its kernels for a device on the first call of each routine and precision (about
 * 20 s on PoCL) and keeps them for the process; PoCL's own kernel cache then makes later processes
 * fast. */
#include <clblast_c.h>
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_gemm(ct__ocl_ctx *c, const char *op, ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K,
                       cl_mem a, size_t aoff, size_t lda, cl_mem b, size_t boff, size_t ldb, double beta, cl_mem cm,
                       size_t coff, size_t ldc) {
  CLBlastTranspose fa = ta ? CLBlastTransposeYes : CLBlastTransposeNo, fb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastStatusCode st;
  ct__ocl_blas_lock(c); /* CLBlast enqueues on the compute queue, between cuttle's launches */
  if (dt == CT_F32)
    st = CLBlastSgemm(CLBlastLayoutRowMajor, fa, fb, (size_t)M, (size_t)N, (size_t)K, 1.0f, a, aoff, lda, b, boff, ldb,
                      (float)beta, cm, coff, ldc, &c->compute, NULL);
  else
    st = CLBlastDgemm(CLBlastLayoutRowMajor, fa, fb, (size_t)M, (size_t)N, (size_t)K, 1.0, a, aoff, lda, b, boff, ldb, beta,
                      cm, coff, ldc, &c->compute, NULL);
  ct__ocl_blas_unlock(c);
  if (st == CLBlastSuccess) {
    ct__ocl_exit_guard(c);
    return CT_OK;
  }
  char p = dt == CT_F32 ? 'S' : 'D';
  if (ct__ocl_is_oom((cl_int)st)) { /* CLBlast's codes above -1000 are OpenCL's */
    char what[96];
    snprintf(what, sizeof what, "%s: CLBlast%cgemm", op, p);
    return ct__ocl_call_error(c->index, what, (cl_int)st);
  }
  return ct__error(CT_EBACKEND, "opencl:%d: %s: CLBlast %cgemm (%lld x %lld x %lld) failed with status %d%s%s", c->index, op, p,
                   (long long)M, (long long)N, (long long)K, (int)st, st > -1000 ? ": " : "",
                   st > -1000 ? ct__ocl_errstr((cl_int)st) : "");
}

/* The layout of the (rows, cols) matrix with strides (rs, cs) for a row-major GEMM: 0 as it is
 * (ld rs), 1 transposed (ld cs), -1 neither. */
static int layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, size_t *ld) {
  if (cs == 1 || cols == 1) {
    int64_t l = rows == 1 ? cols : rs;
    if (l >= cols && l >= 1) return *ld = (size_t)l, 0;
  }
  if (rs == 1 || rows == 1) {
    int64_t l = cols == 1 ? rows : cs;
    if (l >= rows && l >= 1) return *ld = (size_t)l, 1;
  }
  return -1;
}

ct_status ct__ocl_matmul(ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  int idx = out->device.index;
  if (out->dtype != CT_F32 && out->dtype != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "opencl: matmul computes in float32 or float64, got %s", ct_dtype_name(out->dtype));
  int nd = a->ndim;
  int64_t B = nd == 3 ? a->shape[0] : 1, M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
  if (B * M * N == 0) return CT_OK;
  if (K == 0) return ct__ocl_fill(out, 0);
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__be_tmp ta = {0}, tb = {0};
  ct_tensor *ua = a, *ub = b;
  size_t lda, ldb;
  int tra = layout(M, K, a->stride[nd - 2], a->stride[nd - 1], &lda);
  int trb = layout(K, N, b->stride[nd - 2], b->stride[nd - 1], &ldb);
  ct_status s = CT_OK;
  if (tra < 0) {
    if ((s = ct__be_tmp_contiguous(&ta, a)) != CT_OK) return s;
    ua = &ta.t, tra = 0, lda = (size_t)K;
  }
  if (trb < 0) {
    if ((s = ct__be_tmp_contiguous(&tb, b)) != CT_OK) return ct__be_tmp_free(&ta), s;
    ub = &tb.t, trb = 0, ldb = (size_t)N;
  }
  ct__ocl_buf ab, bb, ob;
  if ((s = ct__ocl_buf_of(ua, &ab)) == CT_OK && (s = ct__ocl_buf_of(ub, &bb)) == CT_OK && (s = ct__ocl_buf_of(out, &ob)) == CT_OK) {
    int64_t sa = nd == 3 ? ua->stride[0] : 0, sb = nd == 3 ? ub->stride[0] : 0, so = M * N;
    for (int64_t i = 0; i < B && s == CT_OK; i++)
      s = ct__ocl_gemm(c, "matmul", out->dtype, tra, trb, M, N, K, ab.mem, (size_t)(ab.off + i * sa), lda, bb.mem,
                       (size_t)(bb.off + i * sb), ldb, 0.0, ob.mem, (size_t)(ob.off + i * so), (size_t)N);
  }
  ct__be_tmp_free(&ta);
  ct__be_tmp_free(&tb);
  return s;
}
