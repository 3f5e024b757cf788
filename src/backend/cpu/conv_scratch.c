/* src/backend/cpu/conv_scratch.c: what every CPU convolution path (conv.c, conv_dense.c,
 * conv_nhwc.c, conv_relu_pool.c) calls: the GEMM with alpha 1 in the dtype of the tensors, and
 * the scratch memory kept per thread (conv_blocks.h). */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include "backend/cpu/conv_blocks.h"

void ct__conv_gemm(ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                 int64_t ldb, double beta, void *C, int64_t ldc) {
  if (dt == CT_F32)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                A, (int)lda, B, (int)ldb, (float)beta, C, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0,
                A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* Scratch kept per calling thread and grown only: allocating tens of MB per call cost a page
 * fault per 4 KiB in every step (docs/perf-history.md). The slots are conv_blocks.h's; the memory stays
 * reachable from thread-local storage, and a thread that ends (a worker of ct_data_parallel, say)
 * frees its own through a thread-specific key's destructor. */
typedef struct {
  void *p;
  size_t n;
} scratch;
static _Thread_local scratch workspace[CT_CONV_SCRATCH_SLOTS];
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *slots) {
  scratch *w = slots;
  for (int i = 0; i < CT_CONV_SCRATCH_SLOTS; i++) free(w[i].p), w[i].p = NULL, w[i].n = 0;
}
static void scratch_key_new(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

char *ct__conv_scratch(int slot, size_t n) {
  /* an empty convolution (no input channels) still gets a block: NULL means out of memory */
  if (n == 0) n = 1;
  if (n <= workspace[slot].n) return workspace[slot].p;
  void *p = ct__realloc(workspace[slot].p, n, "conv2d's scratch");
  if (!p) return NULL;
  workspace[slot].p = p, workspace[slot].n = n;
  pthread_once(&scratch_once, scratch_key_new);
  if (scratch_key_ok) pthread_setspecific(scratch_key, workspace); /* this thread's slots, freed when it ends */
  return p;
}
