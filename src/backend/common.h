/* src/backend/common.h: the helpers that every device backend shares, written once (common.c).
 *
 *  - CT_TRY: return a failed ct_status at once;
 *  - temporaries (ct__be_tmp): a contiguous device tensor whose header and storage live in the
 *    launcher's frame, its memory taken through the core's allocation point (fault injection
 *    included) and given back to the backend that made it;
 *  - chunking (ct__be_chunk): how many items of a batch fit a scratch budget;
 *  - batch norm's (N, C, S) view of its input (ct__be_channel_dims).
 *
 * What the backends share that is core's is used from the core, not repeated: the contiguity
 * check is ct_tensor_is_contiguous (cuttle/tensor.h), the strided iterator ct__strided
 * (core/internal.h, core/strided.c).
 *
 * A backend's folder may include this file; it includes core headers only, and no core file
 * includes it. It is C and C++ alike (the CUDA backend's .cu files are C++); common.c is C. */
#ifndef CUTTLE_BACKEND_COMMON_H
#define CUTTLE_BACKEND_COMMON_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the status check: evaluate expr, a ct_status, and return it unless it is CT_OK */
#define CT_TRY(expr)                     \
  do {                                   \
    ct_status ct__try_s = (expr);        \
    if (ct__try_s != CT_OK) return ct__try_s; \
  } while (0)

/* ---- temporaries: a contiguous device tensor that is no core object. Zero-initialize one (= {0}
 * in C, memset in C++) and free it in every case; freeing a zeroed or borrowed one does nothing. */
typedef struct {
  ct_tensor t;
  ct_storage s;
  int owned; /* 1 when the memory goes back to the backend's allocator */
} ct__be_tmp;
/* tmp becomes a contiguous tensor of shape and dtype dt on device dev, its memory from dev's
 * backend through ct__device_alloc (the core's fault-injection point, as every tensor's memory).
 * CT_ENOMEM (the backend's figures) when the memory is not there. */
ct_status ct__be_tmp_new(ct__be_tmp *tmp, ct_device dev, int ndim, const int64_t *shape, ct_dtype dt);
/* tmp becomes t itself (a borrowed header, nothing to free) when t is contiguous and of dtype dt,
 * else a contiguous copy of t in dtype dt on t's device, made by its backend's copy kernel. */
ct_status ct__be_tmp_cast(ct__be_tmp *tmp, ct_tensor *t, ct_dtype dt);
/* ct__be_tmp_cast in t's own dtype. */
ct_status ct__be_tmp_contiguous(ct__be_tmp *tmp, ct_tensor *t);
/* Gives the memory back when tmp owns it; tmp may be zeroed, borrowed or already freed. */
void ct__be_tmp_free(ct__be_tmp *tmp);

/* ---- batch norm's view of x (N, C, *) (core/kernels.def): N, C and S, the product of the dims
 * after C (1 for (N, C)); channel c's element (n, s) is at (n C + c) S + s of a contiguous x */
static inline void ct__be_channel_dims(const ct_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->shape[0], *C = x->shape[1], *S = 1;
  for (int d = 2; d < x->ndim; d++) *S *= x->shape[d];
}

/* ---- chunking: the most of n items whose scratch (item_bytes each) fits budget bytes, at least 1
 * and at most n (n when an item takes no scratch). */
int64_t ct__be_chunk(int64_t n, int64_t item_bytes, int64_t budget);

#ifdef __cplusplus
}
#endif
#endif
