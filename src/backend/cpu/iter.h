/* src/backend/cpu/iter.h: the strided N-d iterator of the CPU kernels.
 *
 * Up to four tensors of one shape are walked together. Dims of size 1 are dropped and adjacent
 * dims that are contiguous in every operand are merged, so most calls end up as one long 1-D
 * loop. The body is called once per run along the innermost dim with byte strides, and rows are
 * spread over OpenMP threads when the tensor is large. */
#ifndef CUTTLE_CPU_ITER_H
#define CUTTLE_CPU_ITER_H

#include "core/internal.h"

#define CT_ITER_MAX 4

typedef struct {
  int n;                                /* operands */
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t stride[CT_ITER_MAX][CT_MAX_DIMS]; /* bytes */
  char *base[CT_ITER_MAX];
} ct_iter;

/* Build an iterator over shape (ndim) for n tensors (their strides apply; they must have that
 * shape, possibly with stride-0 broadcast dims). */
static inline void ct_iter_init(ct_iter *it, int n, ct_tensor *const *ts, int ndim, const int64_t *shape) {
  const int64_t *strides[CT_ITER_MAX];
  for (int i = 0; i < n; i++) strides[i] = ts[i]->stride;
  ct__strided m;
  ct__strided_init(&m, ndim, shape, n, strides);
  it->n = n;
  for (int d = 0; d < m.ndim; d++) {
    it->shape[d] = m.size[d];
    for (int i = 0; i < n; i++) it->stride[i][d] = m.stride[i][d] * (int64_t)ct_dtype_size(ts[i]->dtype); /* bytes */
  }
  if (m.ndim == 0) { /* a single element */
    it->shape[0] = 1;
    for (int i = 0; i < n; i++) it->stride[i][0] = 0;
  }
  it->ndim = m.ndim > 0 ? m.ndim : 1;
  for (int i = 0; i < n; i++) it->base[i] = (char *)ct__ptr(ts[i]);
}

typedef void (*ct_iter_body)(void *ctx, int64_t len, char **p, const int64_t *stride);

/* Row r of it: body over its innermost run. */
static inline void ct_iter_row(const ct_iter *it, int64_t r, int64_t len, const int64_t *inner, ct_iter_body body, void *ctx) {
  int last = it->ndim - 1;
  char *p[CT_ITER_MAX];
  for (int i = 0; i < it->n; i++) p[i] = it->base[i];
  int64_t rem = r;
  for (int d = last - 1; d >= 0; d--) {
    int64_t idx = rem % it->shape[d];
    rem /= it->shape[d];
    for (int i = 0; i < it->n; i++) p[i] += idx * it->stride[i][d];
  }
  body(ctx, len, p, inner);
}

/* Call body for every innermost run. Parallel over rows when numel >= 32768. A small loop does not
 * enter an OpenMP region at all: even one whose if clause is false cost libgomp's team setup, and
 * a syscall, on every small op (perf of a 2 x 2 ct_add: 5% of its host time). */
static inline void ct_iter_run(const ct_iter *it, ct_iter_body body, void *ctx) {
  int last = it->ndim - 1;
  int64_t len = it->shape[last], rows = 1;
  for (int d = 0; d < last; d++) rows *= it->shape[d];
  if (len == 0 || rows == 0) return;
  int64_t inner[CT_ITER_MAX];
  for (int i = 0; i < it->n; i++) inner[i] = it->stride[i][last];
  if (rows * len < 32768 || rows == 1) {
    for (int64_t r = 0; r < rows; r++) ct_iter_row(it, r, len, inner, body, ctx);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) ct_iter_row(it, r, len, inner, body, ctx);
}

/* Like ct_iter_run, but a single long run (the common all-contiguous case) is split into chunks
 * over threads too. */
static inline void ct_iter_run_split(const ct_iter *it, ct_iter_body body, void *ctx) {
  if (it->ndim > 1) {
    ct_iter_run(it, body, ctx);
    return;
  }
  int64_t len = it->shape[0], inner[CT_ITER_MAX];
  if (len == 0) return;
  for (int i = 0; i < it->n; i++) inner[i] = it->stride[i][0];
  const int64_t chunk = 16384;
  int64_t nchunks = (len + chunk - 1) / chunk;
  if (nchunks <= 2) { /* no OpenMP region, as in ct_iter_run */
    char *p[CT_ITER_MAX];
    for (int i = 0; i < it->n; i++) p[i] = it->base[i];
    body(ctx, len, p, inner);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; c++) {
    char *p[CT_ITER_MAX];
    int64_t start = c * chunk, n = len - start < chunk ? len - start : chunk;
    for (int i = 0; i < it->n; i++) p[i] = it->base[i] + start * inner[i];
    body(ctx, n, p, inner);
  }
}

#endif
