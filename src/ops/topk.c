/* src/ops/topk.c: torch.topk, the k largest (or smallest) elements along a dim, for sampling. It
 * is composed of argmax, eq and where, so it runs on every backend with the kernels they have: k
 * rounds, each taking the first maximum of what is left along the dim and then masking it out.
 * O(k n) work for n elements along the dim; sampling asks for small k. */
#include <math.h>
#include <float.h>
#include "autograd/node.h"
#include "core/backend.h"

/* w with -inf replaced by the dtype's lowest finite value, so that a masked element (-inf) ranks
 * below every element of x, a -inf among them. A NaN stays for the largest (argmax takes the first
 * NaN, as torch's topk ranks NaN above every number); for the smallest (w = -x) it takes the
 * lowest value too, ranking with +inf of x, where torch ranks it after +inf. */
static ct_tensor *lift_neg_inf(ct_tensor *w, int largest) {
  double lowest = w->dtype == CT_F64 ? -DBL_MAX : w->dtype == CT_F16 ? -65504.0 : w->dtype == CT_BF16 ? -0x1.fep127 : -FLT_MAX;
  ct_tensor *ninf = ct_scalar(-INFINITY, w->dtype, w->device), *low = ct_scalar(lowest, w->dtype, w->device);
  ct_tensor *is = ninf ? ct_eq(w, ninf) : NULL;
  ct_tensor *r = is && low ? ct_where(is, low, w) : NULL;
  if (r && !largest) {
    ct_tensor *nan = ct_ne(w, w), *r2 = nan ? ct_where(nan, low, r) : NULL;
    ct_tensor_free(nan), ct_tensor_free(r);
    r = r2;
  }
  ct_tensor_free(ninf), ct_tensor_free(low), ct_tensor_free(is);
  return r;
}

ct_tensor *ct_topk(ct_tensor *x, int64_t k, int dim, int largest, ct_tensor **indices) {
  if (indices) *indices = NULL;
  if (!x) return ct__null_arg("topk", "x");
  char a[160];
  if (!ct_dtype_is_floating(x->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "topk: x must be floating, got %s (cast it, e.g. ct_cast(x, CT_F32))", ct_dtype_name(x->dtype));
  int d = x->ndim == 0 ? (dim == 0 || dim == -1 ? 0 : -1) : ct__dim(dim, x->ndim);
  if (d < 0) CT_FAIL_NULL(CT_ESHAPE, "topk: dim %d out of range for x of shape %s", dim, ct_shape_str(x, a, sizeof a));
  if (x->ndim == 0) { /* torch treats a 0-dim tensor as one element along dim 0 */
    ct_tensor *x1 = ct_reshape(x, 1, (int64_t[]){1});
    ct_tensor *v = x1 ? ct_topk(x1, k, 0, largest, indices) : NULL;
    ct_tensor *r = v ? ct_reshape(v, 0, NULL) : NULL;
    ct_tensor_free(x1), ct_tensor_free(v);
    if (indices && *indices) {
      ct_tensor *i0 = r ? ct_reshape(*indices, 0, NULL) : NULL;
      ct_tensor_free(*indices);
      *indices = i0;
    }
    return r;
  }
  int64_t n = x->shape[d];
  if (k < 0 || k > n)
    CT_FAIL_NULL(CT_EINVAL, "topk: k = %lld is out of range for dim %d of size %lld (need 0 <= k <= %lld)", (long long)k, dim,
                 (long long)n, (long long)n);
  int64_t shape[CT_MAX_DIMS], ishape[CT_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i], ishape[i] = i == d ? n : 1;
  shape[d] = k;
  ct_tensor *idx = NULL;
  ct_no_grad_begin();
  if (k == 0) {
    idx = ct_empty(x->ndim, shape, CT_I64, x->device);
  } else {
    ct_tensor *sx = ct_mul_scalar(x, largest ? 1.0 : -1.0); /* a fresh copy: the largest of -x are the smallest of x */
    ct_tensor *w = sx ? lift_neg_inf(sx, largest) : NULL;
    ct_tensor *iota = ct_arange(0, (double)n, 1, CT_I64, x->device), *pos = iota ? ct_reshape(iota, x->ndim, ishape) : NULL;
    ct_tensor *ninf = ct_scalar(-INFINITY, x->dtype, x->device);
    ct_tensor **picks = ct__calloc((size_t)k, sizeof *picks, "topk's list of picks");
    int ok = w && pos && ninf && picks;
    for (int64_t j = 0; ok && j < k; j++) {
      picks[j] = ct_argmax(w, d, 1);
      ct_tensor *hit = picks[j] && j + 1 < k ? ct_eq(pos, picks[j]) : NULL;
      ct_tensor *next = hit ? ct_where(hit, ninf, w) : NULL;
      ok = picks[j] && (j + 1 == k || next);
      ct_tensor_free(hit);
      if (next) ct_tensor_free(w), w = next;
    }
    if (ok) idx = k <= INT32_MAX ? ct_cat((int)k, picks, d) : NULL;
    for (int64_t j = 0; picks && j < k; j++) ct_tensor_free(picks[j]);
    free(picks);
    ct_tensor_free(sx), ct_tensor_free(w), ct_tensor_free(iota), ct_tensor_free(pos), ct_tensor_free(ninf);
  }
  ct_no_grad_end();
  ct_tensor *v = idx ? ct_gather(x, d, idx) : NULL; /* on the tape: the gradient goes to the picked elements */
  if (!v) return ct_tensor_free(idx), ct__error_prefix("topk"), NULL;
  if (indices) *indices = idx;
  else ct_tensor_free(idx);
  return v;
}
