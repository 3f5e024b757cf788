/* src/backend/opencl/bench_access.c: CLBlast called directly on cuttle's buffers, for `cuttle bench
 * gemm` (bench_access.h). The handle keeps the cl_mem handles, element offsets and the compute
 * queue of the three tensors, so the timed call is the library call alone: the difference between
 * it and ct_matmul is what cuttle adds (validation, the output's allocation, the tape check, the
 * backend's layout checks and address resolution). */
#include <clblast_c.h>
#include <stdlib.h>
#include "backend/opencl/bench_access.h"
#include "backend/opencl/opencl_backend.h"

struct ct__ocl_raw_gemm {
  ct__ocl_ctx *ctx;
  ct__ocl_buf a, b, c;
  size_t n;
};

static int square_f32(const ct_tensor *t, int64_t n) {
  return t->device.kind == CT_OPENCL && t->dtype == CT_F32 && t->ndim == 2 && t->shape[0] == n && t->shape[1] == n &&
         ct_tensor_is_contiguous(t);
}

ct__ocl_raw_gemm *ct__ocl_raw_gemm_new(ct_tensor *c, ct_tensor *a, ct_tensor *b) {
  if (!a || !b || !c) {
    ct__error(CT_EINVAL, "ct__ocl_raw_gemm_new: NULL tensor");
    return NULL;
  }
  int64_t n = c->ndim == 2 ? c->shape[0] : -1;
  if (!square_f32(a, n) || !square_f32(b, n) || !square_f32(c, n) || a->device.index != c->device.index ||
      b->device.index != c->device.index) {
    ct__error(CT_EINVAL, "ct__ocl_raw_gemm_new: wants three contiguous float32 (n, n) tensors on one OpenCL device");
    return NULL;
  }
  ct__ocl_raw_gemm *g = calloc(1, sizeof *g);
  if (!g) {
    ct__error(CT_ENOMEM, "ct__ocl_raw_gemm_new: out of host memory (%zu bytes)", sizeof *g);
    return NULL;
  }
  g->n = (size_t)n;
  if (!(g->ctx = ct__ocl_ctx_get(c->device.index)) || ct__ocl_buf_of(a, &g->a) != CT_OK ||
      ct__ocl_buf_of(b, &g->b) != CT_OK || ct__ocl_buf_of(c, &g->c) != CT_OK) {
    free(g);
    return NULL;
  }
  return g;
}

ct_status ct__ocl_raw_gemm_run(ct__ocl_raw_gemm *g) {
  size_t n = g->n;
  /* The lock is what any caller sharing the queue with cuttle needs (matmul.c takes it too). */
  ct__ocl_blas_lock(g->ctx);
  CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f, g->a.mem,
                                      (size_t)g->a.off, n, g->b.mem, (size_t)g->b.off, n, 0.0f, g->c.mem, (size_t)g->c.off,
                                      n, &g->ctx->compute, NULL);
  ct__ocl_blas_unlock(g->ctx);
  if (st != CLBlastSuccess)
    return ct__error(CT_EBACKEND, "opencl:%d: CLBlastSgemm (%zu x %zu x %zu) failed with status %d", g->ctx->index, n, n, n,
                     (int)st);
  return CT_OK;
}

void ct__ocl_raw_gemm_free(ct__ocl_raw_gemm *g) { free(g); }
