/* src/ops/matmul.c: matmul with torch.matmul's rules (1-D operands, broadcast batch dims) and
 * linear, all reduced to one batched GEMM (bmm) whose backward is
 *   ga = g @ b^T,  gb = a^T @ g. */
#include <string.h>
#include "autograd/node.h"
#include "ops/ops_internal.h"
#include "ops/autocast.h"

static ct_tensor *bmm(ct_tensor *a, ct_tensor *b);

/* 1 when the last two dims of t are a transposed matrix (unit stride down the rows), as linear's
 * w^T is. Its gradient is then computed transposed too, so that it comes out in t's own layout and
 * reaches the parameter as a contiguous tensor (no copy when it is accumulated). */
static int transposed_layout(const ct_tensor *t) { return t->stride[1] == 1 && t->stride[2] != 1 && t->shape[1] > 1; }

/* x @ y, or (y^T @ x^T)^T when the result should have a transposed layout */
static ct_tensor *bmm_as(ct_tensor *x, ct_tensor *y, int transposed) {
  if (!transposed) return bmm(x, y);
  ct_tensor *xt = ct_transpose(x, 1, 2), *yt = ct_transpose(y, 1, 2);
  ct_tensor *p = xt && yt ? bmm(yt, xt) : NULL, *r = p ? ct_transpose(p, 1, 2) : NULL;
  ct_tensor_free(xt), ct_tensor_free(yt), ct_tensor_free(p);
  return r;
}

static ct_status bw_bmm(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  if (n->in[0]) {
    ct_tensor *bt = ct_transpose(n->saved[1], 1, 2);
    grads[0] = bmm_as(g, bt, transposed_layout(n->saved[0]));
    ct_tensor_free(bt);
    if (!grads[0]) return ct_last_status();
  }
  if (n->in[1]) {
    ct_tensor *at = ct_transpose(n->saved[0], 1, 2);
    grads[1] = bmm_as(at, g, transposed_layout(n->saved[1]));
    ct_tensor_free(at);
    if (!grads[1]) return ct_last_status();
  }
  return CT_OK;
}

/* The operand as the backend wants it: last two dims with a unit stride on one side. */
static ct_tensor *blas_ready(ct_tensor *t) {
  int ok = (t->stride[2] == 1 && t->stride[1] >= t->shape[2]) || (t->stride[1] == 1 && t->stride[2] >= t->shape[1]);
  if (ok && t->shape[0] > 1 && t->stride[0] == 0) ok = 1; /* a broadcast batch is fine: stride 0 */
  return ok ? ct__retain_tracked(t) : ct_contiguous(t);
}

/* a: (B, M, K), b: (B, K, N), same dtype (f32/f64, or a half the backend's matmul takes (ct__supports)) and device -> (B, M, N) */
static ct_tensor *bmm(ct_tensor *a, ct_tensor *b) {
  if (!a || !b) return NULL;
  ct_tensor *ar = blas_ready(a), *br = blas_ready(b);
  int64_t shape[3] = {a->shape[0], a->shape[1], b->shape[2]};
  ct_tensor *out = ar && br ? ct__alloc(3, shape, a->dtype, a->device) : NULL;
  ct_status s = out ? CT_KERNEL_CALL(a->storage->backend, matmul, "matmul", ar, out, ar, br) : ct_last_status();
  if (s != CT_OK) {
    ct_tensor_free(ar), ct_tensor_free(br), ct_tensor_free(out);
    return NULL;
  }
  ct_node *n;
  s = ct__record(out, "matmul", bw_bmm, 2, (ct_tensor *[]){a, b}, &n);
  if (s == CT_OK) s = ct__save_detached(n, 0, ar);
  if (s == CT_OK) s = ct__save_detached(n, 1, br);
  ct_tensor_free(ar), ct_tensor_free(br);
  if (s != CT_OK) return ct_tensor_free(out), NULL;
  return out;
}

ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b) {
  if (!a || !b) return ct__null_arg("matmul", !a ? "a" : "b");
  CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_matmul(a, b), &a, &b);
  char sa[160], sb[160];
  if (ct__same_device("matmul", 2, (ct_tensor *[]){a, b}, (const char *[]){"a", "b"}) != CT_OK) return NULL;
  if (a->ndim == 0 || b->ndim == 0)
    CT_FAIL_NULL(CT_ESHAPE, "matmul: both arguments need at least 1 dim, got %s and %s", ct_shape_str(a, sa, sizeof sa),
                 ct_shape_str(b, sb, sizeof sb));
  ct_dtype dt = ct_promote_types(a->dtype, b->dtype), cdt = dt == CT_F64 ? CT_F64 : dt == CT_F32 ? CT_F32 : dt;
  if (cdt != CT_F32 && cdt != CT_F64) cdt = ct_dtype_is_floating(dt) ? CT_F32 : CT_F64; /* halves in f32, ints in f64 */
  /* a half dtype goes as it is to a backend with a GEMM for it (float32 accumulation inside, no
   * casts of the operands); elsewhere it is cast to float32 and the product rounded once */
  if ((dt == CT_F16 || dt == CT_BF16) && ct__supports(a->storage->backend, CT_K_matmul, dt, CT_CONTIGUOUS_FORMAT)) cdt = dt;
  int64_t M, K, K2, N;
  ct_tensor *a2 = a->ndim == 1 ? ct_unsqueeze(a, 0) : ct__retain_tracked(a);
  ct_tensor *b2 = b->ndim == 1 ? ct_unsqueeze(b, 1) : ct__retain_tracked(b);
  if (!a2 || !b2) return ct_tensor_free(a2), ct_tensor_free(b2), NULL;
  M = a2->shape[a2->ndim - 2], K = a2->shape[a2->ndim - 1], K2 = b2->shape[b2->ndim - 2], N = b2->shape[b2->ndim - 1];
  int nbd;
  int64_t bshape[CT_MAX_DIMS];
  if (K != K2) {
    ct_tensor_free(a2), ct_tensor_free(b2);
    CT_FAIL_NULL(CT_ESHAPE, "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)", ct_shape_str(a, sa, sizeof sa),
                 ct_shape_str(b, sb, sizeof sb), (long long)K, (long long)K2);
  }
  if (!ct__broadcast_shape("matmul", a2->ndim - 2, a2->shape, b2->ndim - 2, b2->shape, &nbd, bshape) || nbd + 2 > CT_MAX_DIMS) {
    ct_tensor_free(a2), ct_tensor_free(b2);
    return NULL;
  }
  int64_t B = ct__numel(nbd, bshape), ea[CT_MAX_DIMS], eb[CT_MAX_DIMS];
  memcpy(ea, bshape, sizeof(int64_t) * nbd), memcpy(eb, bshape, sizeof(int64_t) * nbd);
  ea[nbd] = M, ea[nbd + 1] = K, eb[nbd] = K, eb[nbd + 1] = N;
  /* a transposed operand (linear's w^T) goes to BLAS as it is: ct_cast would make it contiguous */
  ct_tensor *ac = a2->dtype == cdt ? ct__retain_tracked(a2) : ct_cast(a2, cdt);
  ct_tensor *bc = b2->dtype == cdt ? ct__retain_tracked(b2) : ct_cast(b2, cdt);
  ct_tensor *ae = NULL, *be_ = NULL, *a3, *b3;
  if (nbd == 0) { /* two matrices: one view each, not an expand and a reshape (the host's cost of a small matmul) */
    a3 = ac ? ct_unsqueeze(ac, 0) : NULL;
    b3 = bc ? ct_unsqueeze(bc, 0) : NULL;
  } else {
    ae = ac ? ct_expand(ac, nbd + 2, ea) : NULL, be_ = bc ? ct_expand(bc, nbd + 2, eb) : NULL;
    a3 = ae ? ct_reshape(ae, 3, (int64_t[]){B, M, K}) : NULL;
    b3 = be_ ? ct_reshape(be_, 3, (int64_t[]){B, K, N}) : NULL;
  }
  ct_tensor *o3 = bmm(a3, b3);
  /* result shape: batch dims, then M unless a was 1-D, then N unless b was 1-D */
  int64_t os[CT_MAX_DIMS];
  int k = nbd;
  memcpy(os, bshape, sizeof(int64_t) * nbd);
  if (a->ndim > 1) os[k++] = M;
  if (b->ndim > 1) os[k++] = N;
  ct_tensor *out = o3 ? ct_reshape(o3, k, os) : NULL;
  if (out && cdt != dt) {
    ct_tensor *c = ct_cast(out, dt);
    ct_tensor_free(out);
    out = c;
  }
  ct_tensor_free(a2), ct_tensor_free(b2), ct_tensor_free(ac), ct_tensor_free(bc), ct_tensor_free(ae), ct_tensor_free(be_);
  ct_tensor_free(a3), ct_tensor_free(b3), ct_tensor_free(o3);
  return out;
}

ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *b) {
  if (!x || !w) return ct__null_arg("linear", !x ? "x" : "w");
  CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_linear(x, w, b), &x, &w, &b);
  char sx[160], sw[160];
  if (ct__same_device("linear", 3, (ct_tensor *[]){x, w, b}, (const char *[]){"input", "weight", "bias"}) != CT_OK)
    return NULL;
  if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
    CT_FAIL_NULL(CT_ESHAPE, "linear: input %s does not fit weight %s (need input (*, in) and weight (out, in))",
                 ct_shape_str(x, sx, sizeof sx), ct_shape_str(w, sw, sizeof sw));
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    CT_FAIL_NULL(CT_ESHAPE, "linear: bias %s does not match weight %s (need bias (out,) = (%lld,), or NULL for none)",
                 ct_shape_str(b, sx, sizeof sx), ct_shape_str(w, sw, sizeof sw), (long long)w->shape[0]);
  ct_tensor *wt = ct_transpose(w, 0, 1);
  ct_tensor *y = ct_matmul(x, wt);
  ct_tensor_free(wt);
  if (!b || !y) return y;
  ct_tensor *r = ct_add(y, b);
  ct_tensor_free(y);
  return r;
}
