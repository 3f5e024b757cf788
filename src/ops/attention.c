/* src/ops/attention.c: scaled dot-product attention, torch.nn.functional.scaled_dot_product_attention.
 * Where the backend has the fused kernels (kernels.def's attention: FlashAttention-2's tiles with an
 * online softmax, the log-sum-exp saved for the backward), the op is one tape node that keeps q, k,
 * v, the output and (B, H, Tq) log-sum-exps: memory O(B H T), never the (Tq, Tk) scores (the CPU's
 * kernels: src/backend/cpu/attention.c; OpenCL's: src/backend/opencl/attention.c). Elsewhere
 * it is composed of matmul, where, softmax and dropout, torch's math reference, which stays here as
 * the tests' and the benchmark's reference (ct__sdpa_composed). */
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/attention_internal.h"
#include "ops/autocast.h"
#include "ops/ops_internal.h"

/* torch's math reference (aten/src/ATen/native/transformers/attention.cpp, _scaled_dot_product_attention_math):
 * softmax(q k^T scale + mask) with is_causal's top-left tril, dropout, then v. */
ct_tensor *ct__sdpa_composed(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, double dropout_p, int is_causal,
                             double scale) {
  ct_device dev = q->device;
  int64_t Tq = q->shape[q->ndim - 2], Tk = k->shape[k->ndim - 2];
  ct_tensor *kt = ct_transpose(k, -2, -1), *qk = kt ? ct_matmul(q, kt) : NULL, *s = qk ? ct_mul_scalar(qk, scale) : NULL;
  ct_tensor *ninf = s ? ct_scalar(-INFINITY, s->dtype, dev) : NULL;
  ct_tensor_free(kt), ct_tensor_free(qk);
  if (ninf && is_causal) {
    ct_tensor *ar = ct_arange(0, (double)Tq, 1, CT_I64, dev), *ac = ct_arange(0, (double)Tk, 1, CT_I64, dev);
    ct_tensor *rows = ar ? ct_reshape(ar, 2, (int64_t[]){Tq, 1}) : NULL, *cols = ac ? ct_reshape(ac, 2, (int64_t[]){1, Tk}) : NULL;
    ct_tensor *keep = rows && cols ? ct_ge(rows, cols) : NULL, *m = keep ? ct_where(keep, s, ninf) : NULL;
    ct_tensor_free(ar), ct_tensor_free(ac), ct_tensor_free(rows), ct_tensor_free(cols), ct_tensor_free(keep), ct_tensor_free(s);
    s = m;
  }
  if (s && mask) {
    ct_tensor *m = mask->dtype == CT_BOOL ? ct_where(mask, s, ninf) : ct_add(s, mask);
    ct_tensor_free(s);
    s = m;
  }
  ct_tensor *p = s ? ct_softmax(s, -1) : NULL, *pd = p && dropout_p > 0 ? ct_dropout(p, dropout_p, 1, NULL) : NULL;
  ct_tensor *out = p ? ct_matmul(pd ? pd : p, v) : NULL;
  ct_tensor_free(s), ct_tensor_free(ninf), ct_tensor_free(p), ct_tensor_free(pd);
  return out;
}

static ct_status bw_attention(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *q = n->saved[0], *k = n->saved[1], *v = n->saved[2], *out = n->saved[3], *lse = n->saved[4], *mask = n->saved[5];
  ct_attention_args a = {n->dv[0], (int)n->iv[0], n->dv[1], (uint64_t)n->iv[1], (uint64_t)n->iv[2]};
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gq = gc ? ct__alloc(4, q->shape, q->dtype, q->device) : NULL;
  ct_tensor *gk = gq ? ct__alloc(4, k->shape, k->dtype, k->device) : NULL;
  ct_tensor *gv = gk ? ct__alloc(4, v->shape, v->dtype, v->device) : NULL;
  ct_status s = gv ? CT_KERNEL_CALL(q->storage->backend, attention_backward, "scaled_dot_product_attention", q, gq, gk, gv, gc,
                                    q, k, v, out, lse, mask, &a)
                   : ct_last_status();
  ct_tensor_free(gc);
  if (s != CT_OK) return ct_tensor_free(gq), ct_tensor_free(gk), ct_tensor_free(gv), s;
  ct_tensor *gs[3] = {gq, gk, gv};
  for (int i = 0; i < 3; i++) {
    if (n->in[i]) grads[i] = gs[i];
    else ct_tensor_free(gs[i]);
  }
  return CT_OK;
}

/* The fused kernels on contiguous q, k, v of one dtype the backend takes, mask NULL or additive of
 * that dtype broadcast to (B, H, Tq, Tk). */
static ct_tensor *sdpa_fused(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, double dropout_p, int is_causal,
                             double scale) {
  int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], Tk = k->shape[2], Dv = v->shape[3];
  ct_attention_args a = {scale, is_causal, dropout_p, 0, 0};
  if (dropout_p > 0) { /* the blocks ct_rand would take for the (B, H, Tq, Tk) probabilities: the composed op's draws */
    ct_generator *gen = ct_default_generator();
    a.seed = gen->seed;
    a.offset = __atomic_fetch_add(&gen->offset, (uint64_t)(B * H * Tq * Tk + 3) / 4, __ATOMIC_RELAXED);
  }
  ct_tensor *qc = ct_contiguous(q), *kc = qc ? ct_contiguous(k) : NULL, *vc = kc ? ct_contiguous(v) : NULL;
  ct_tensor *out = vc ? ct__alloc(4, (int64_t[]){B, H, Tq, Dv}, q->dtype, q->device) : NULL;
  ct_tensor *lse = out ? ct__alloc(3, (int64_t[]){B, H, Tq}, q->dtype, q->device) : NULL;
  ct_status s = lse ? CT_KERNEL_CALL(q->storage->backend, attention, "scaled_dot_product_attention", q, out, lse, qc, kc, vc, mask, &a)
                    : ct_last_status();
  ct_node *n = NULL;
  if (s == CT_OK) s = ct__record(out, "scaled_dot_product_attention", bw_attention, 3, (ct_tensor *[]){q, k, v}, &n);
  ct_tensor *keep[6] = {qc, kc, vc, out, lse, mask};
  for (int i = 0; i < 6 && s == CT_OK && n; i++)
    if (keep[i]) s = ct__save_detached(n, i, keep[i]);
  if (n) n->dv[0] = scale, n->dv[1] = dropout_p, n->iv[0] = is_causal, n->iv[1] = (int64_t)a.seed, n->iv[2] = (int64_t)a.offset;
  ct_tensor_free(qc), ct_tensor_free(kc), ct_tensor_free(vc), ct_tensor_free(lse);
  if (s != CT_OK) return ct_tensor_free(out), NULL;
  return out;
}

/* The mask as the fused kernels read it: additive, of dtype dt, viewed as (B, H, Tq, Tk). */
static ct_tensor *additive_mask(ct_tensor *mask, ct_dtype dt, const int64_t shape[4]) {
  ct_tensor *add = NULL;
  if (mask->dtype == CT_BOOL) {
    ct_tensor *z = ct_scalar(0, dt, mask->device), *ninf = ct_scalar(-INFINITY, dt, mask->device);
    add = z && ninf ? ct_where(mask, z, ninf) : NULL;
    ct_tensor_free(z), ct_tensor_free(ninf);
  } else {
    add = ct_cast(mask, dt);
  }
  ct_tensor *e = add ? ct_expand(add, 4, shape) : NULL;
  ct_tensor_free(add);
  return e;
}

ct_tensor *ct_scaled_dot_product_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *attn_mask, double dropout_p,
                                           int is_causal, double scale) {
  const char *op = "scaled_dot_product_attention";
  if (!q || !k || !v) return ct__null_arg(op, !q ? "q" : !k ? "k" : "v");
  CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale), &q, &k, &v,
               &attn_mask);
  char a[160], b[160], c[160];
  ct_tensor *all[4] = {q, k, v, attn_mask};
  if (ct__same_device(op, attn_mask ? 4 : 3, all, (const char *[]){"q", "k", "v", "attn_mask"}) != CT_OK) return NULL;
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] ||
      k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1] || k->shape[3] != q->shape[3] || v->shape[2] != k->shape[2])
    CT_FAIL_NULL(CT_ESHAPE, "%s: expected q (B, H, Tq, D), k (B, H, Tk, D) and v (B, H, Tk, Dv), got %s, %s and %s", op,
                 ct_shape_str(q, a, sizeof a), ct_shape_str(k, b, sizeof b), ct_shape_str(v, c, sizeof c));
  if (!ct_dtype_is_floating(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
    CT_FAIL_NULL(CT_EDTYPE, "%s: q, k and v must share one floating dtype, got %s, %s and %s", op, ct_dtype_name(q->dtype),
                 ct_dtype_name(k->dtype), ct_dtype_name(v->dtype));
  int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], Tk = k->shape[2], D = q->shape[3];
  int64_t sshape[4] = {B, H, Tq, Tk};
  if (attn_mask) {
    if (attn_mask->dtype != CT_BOOL && attn_mask->dtype != q->dtype)
      CT_FAIL_NULL(CT_EDTYPE, "%s: attn_mask must be bool or of q's dtype (%s), got %s", op, ct_dtype_name(q->dtype),
                   ct_dtype_name(attn_mask->dtype));
    int ok = attn_mask->ndim <= 4;
    for (int d = 0; ok && d < attn_mask->ndim; d++) {
      int64_t m = attn_mask->shape[attn_mask->ndim - 1 - d];
      ok = m == 1 || m == sshape[3 - d];
    }
    if (!ok)
      CT_FAIL_NULL(CT_ESHAPE, "%s: attn_mask %s does not broadcast to the scores (B, H, Tq, Tk) = %s", op,
                   ct_shape_str(attn_mask, a, sizeof a), ct__shape_str(4, sshape, b, sizeof b));
    if (is_causal)
      CT_FAIL_NULL(CT_EINVAL, "%s: give attn_mask or is_causal, not both (torch refuses an explicit mask with is_causal)", op);
  }
  if (is_causal != 0 && is_causal != 1) CT_FAIL_NULL(CT_EINVAL, "%s: is_causal must be 0 or 1, got %d", op, is_causal);
  if (!(dropout_p >= 0 && dropout_p < 1)) CT_FAIL_NULL(CT_EINVAL, "%s: dropout_p must be in [0, 1), got %g", op, dropout_p);
  if (!isfinite(scale)) CT_FAIL_NULL(CT_EINVAL, "%s: scale must be finite (0 for the default 1/sqrt(D)), got %g", op, scale);
  if (scale == 0) scale = D > 0 ? 1.0 / sqrt((double)D) : 1.0;
  const ct_backend *be = q->storage->backend;
  int fused = ct__has_kernel(be, CT_K_attention) && ct__has_kernel(be, CT_K_attention_backward) &&
              !(attn_mask && ct_requires_grad(attn_mask)); /* the fused backward gives the mask no gradient */
  ct_dtype dt = q->dtype, cdt = fused && !ct__supports(be, CT_K_attention, dt, CT_CONTIGUOUS_FORMAT) ? ct__compute_dtype(dt) : dt;
  if (fused && cdt != dt && !ct__supports(be, CT_K_attention, cdt, CT_CONTIGUOUS_FORMAT)) fused = 0;
  ct_tensor *out = NULL;
  if (!fused) {
    out = ct__sdpa_composed(q, k, v, attn_mask, dropout_p, is_causal, scale);
  } else if (cdt != dt) { /* float32 inside, one rounding out: the halves on a backend whose kernel lacks them */
    ct_tensor *qf = ct_cast(q, cdt), *kf = qf ? ct_cast(k, cdt) : NULL, *vf = kf ? ct_cast(v, cdt) : NULL;
    ct_tensor *mf = vf && attn_mask ? additive_mask(attn_mask, cdt, sshape) : NULL;
    if (vf && (!attn_mask || mf)) out = sdpa_fused(qf, kf, vf, mf, dropout_p, is_causal, scale);
    ct_tensor_free(qf), ct_tensor_free(kf), ct_tensor_free(vf), ct_tensor_free(mf);
    out = out ? ct__cast_result(out, dt) : NULL;
  } else {
    ct_tensor *m = attn_mask ? additive_mask(attn_mask, dt, sshape) : NULL;
    if (!attn_mask || m) out = sdpa_fused(q, k, v, m, dropout_p, is_causal, scale);
    ct_tensor_free(m);
  }
  if (!out && !strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
  return out;
}
