/* src/ops/loss.c: cross_entropy (class indices, class weights, ignore_index, label smoothing) and
 * mse_loss, composed of log_softmax, gather and reductions, as torch.nn.functional defines them. */
#include <math.h>
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/autocast.h"
#include "ops/ops_internal.h"

/* A ct_reduction value, or CT_EINVAL naming op (torch raises ValueError for an unknown reduction). */
static int check_reduction(const char *op, ct_reduction r) {
  if ((unsigned)r <= CT_REDUCTION_NONE) return 1;
  return ct__error(CT_EINVAL, "%s: invalid reduction %d (use CT_REDUCTION_MEAN, CT_REDUCTION_SUM or CT_REDUCTION_NONE)", op,
                   (int)r), 0;
}

static ct_tensor *reduce(ct_tensor *l, ct_reduction r) {
  if (!l) return NULL;
  if (r == CT_REDUCTION_NONE) return ct__retain_tracked(l);
  return r == CT_REDUCTION_SUM ? ct_sum(l, 0, NULL, 0) : ct_mean(l, 0, NULL, 0);
}

/* The loss of each sample, as PyTorch's cross_entropy_loss_label_smoothing and nll_loss
 * (aten/src/ATen/native/LossNLL.cpp) define it, with w the class weights (1 without) and m_i = 0
 * for an ignored sample, else 1:
 *   nll_i = -w[y_i] m_i log p[i, y_i],  smooth_i = -m_i sum_c w_c log p[i, c],
 *   loss_i = (1 - eps) nll_i + (eps / C) smooth_i,
 * and the mean divides both sums by sum_i w[y_i] m_i (torch's weighted mean; 0/0 = NaN when every
 * sample is ignored, as torch). masked = 0 when no sample can be ignored (checked on the CPU), so
 * the plain mean runs without the mask's ops. */
static ct_tensor *ce_compose(ct_tensor *logits, ct_tensor *target, ct_tensor *weight, int64_t ignore_index,
                             ct_reduction reduction, double eps, int masked) {
  int64_t N = logits->shape[0], C = logits->shape[1];
  ct_dtype dt = logits->dtype;
  ct_device dev = logits->device;
  ct_tensor *lsm = ct_log_softmax(logits, 1);
  ct_tensor *ti = ct_cast(target, CT_I64), *valid = NULL, *tsafe = NULL, *vf = NULL;
  if (ti && masked) {
    ct_tensor *ig = ct_scalar((double)ignore_index, CT_I64, dev), *zero = ct_scalar(0, CT_I64, dev);
    valid = ig ? ct_ne(ti, ig) : NULL;
    tsafe = valid && zero ? ct_where(valid, ti, zero) : NULL; /* an ignored sample reads class 0, then weighs 0 */
    vf = valid ? ct_cast(valid, dt) : NULL;
    ct_tensor_free(ig), ct_tensor_free(zero);
  } else if (ti) {
    tsafe = ct__retain_tracked(ti);
  }
  ct_tensor *wc = weight ? ct_cast(weight, dt) : NULL;          /* (C) */
  ct_tensor *wy = wc && tsafe ? ct_index_select(wc, 0, tsafe) : NULL; /* (N): w[y_i] */
  ct_tensor *wm = NULL;                                          /* (N): w[y_i] m_i, or NULL for all ones */
  if (wy && vf) wm = ct_mul(wy, vf);
  else if (wy) wm = ct__retain_tracked(wy);
  else if (vf) wm = ct__retain_tracked(vf);
  ct_tensor *t2 = tsafe ? ct_unsqueeze(tsafe, 1) : NULL;
  ct_tensor *picked = lsm && t2 ? ct_gather(lsm, 1, t2) : NULL; /* (N, 1) */
  ct_tensor *lp = picked ? ct_reshape(picked, 1, &N) : NULL;
  ct_tensor *nll = lp ? (wm ? ct_mul(lp, wm) : ct__retain_tracked(lp)) : NULL; /* -nll_i, signs below */
  ct_tensor *smooth = NULL;                                                  /* -smooth_i */
  int ok = nll != NULL && (!(weight || masked) || wm);
  if (ok && eps > 0) {
    ct_tensor *wl = wc ? ct_mul(lsm, wc) : ct__retain_tracked(lsm); /* (N, C) * (C) */
    ct_tensor *rs = wl ? ct_sum(wl, 1, (int[]){1}, 0) : NULL;
    smooth = rs && vf ? ct_mul(rs, vf) : ct__retain_tracked(rs);
    ok = smooth != NULL;
    ct_tensor_free(wl), ct_tensor_free(rs);
  }
  /* loss_i = (1 - eps) nll_i + (eps / C) smooth_i, then the reduction: the weighted mean divides by
   * sum_i w[y_i] m_i, the plain one is reduce()'s mean, as before weights and ignore_index came */
  ct_tensor *a = ok ? ct_mul_scalar(nll, -(1.0 - eps)) : NULL;
  ct_tensor *b = a && smooth ? ct_mul_scalar(smooth, -eps / (double)C) : NULL;
  ct_tensor *loss = smooth ? (a && b ? ct_add(a, b) : NULL) : ct__retain_tracked(a);
  ct_tensor *r = NULL;
  if (loss && reduction == CT_REDUCTION_MEAN && wm) {
    ct_tensor *tot = ct_sum(loss, 0, NULL, 0), *den = tot ? ct_sum(wm, 0, NULL, 0) : NULL;
    r = den ? ct_div(tot, den) : NULL;
    ct_tensor_free(tot), ct_tensor_free(den);
  } else if (loss) {
    r = reduce(loss, reduction);
  }
  ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(loss);
  ct_tensor_free(lsm), ct_tensor_free(ti), ct_tensor_free(valid), ct_tensor_free(tsafe), ct_tensor_free(vf);
  ct_tensor_free(wc), ct_tensor_free(wy), ct_tensor_free(wm), ct_tensor_free(t2), ct_tensor_free(picked);
  ct_tensor_free(lp), ct_tensor_free(nll), ct_tensor_free(smooth);
  return r;
}

ct_tensor *ct_cross_entropy_ex(ct_tensor *logits, ct_tensor *target, ct_tensor *weight, int64_t ignore_index,
                               ct_reduction reduction, double label_smoothing) {
  if (!logits || !target) return ct__null_arg("cross_entropy", !logits ? "logits" : "target");
  CT__AUTOCAST(CT__AUTOCAST_F32, ct_cross_entropy_ex(logits, target, weight, ignore_index, reduction, label_smoothing),
               &logits);
  char sl[160], st[160];
  if (ct__same_device("cross_entropy", 2, (ct_tensor *[]){logits, target}, (const char *[]){"logits", "target"}) != CT_OK)
    return NULL;
  if (weight && ct__same_device("cross_entropy", 2, (ct_tensor *[]){logits, weight}, (const char *[]){"logits", "weight"}) !=
                    CT_OK)
    return NULL;
  if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
    CT_FAIL_NULL(CT_ESHAPE, "cross_entropy: expected logits (N, C) and target (N), got %s and %s",
                 ct_shape_str(logits, sl, sizeof sl), ct_shape_str(target, st, sizeof st));
  if (target->dtype != CT_I64 && target->dtype != CT_I32)
    CT_FAIL_NULL(CT_EDTYPE, "cross_entropy: target must hold int64 class indices, got %s", ct_dtype_name(target->dtype));
  if (!ct_dtype_is_floating(logits->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "cross_entropy: logits must be floating, got %s of %s (cast them first, e.g. ct_cast(logits, CT_F32))",
                 ct_dtype_name(logits->dtype), ct_shape_str(logits, sl, sizeof sl));
  if (weight && !ct_dtype_is_floating(weight->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "cross_entropy: weight must be floating, got %s", ct_dtype_name(weight->dtype));
  if (weight && (weight->ndim != 1 || weight->shape[0] != logits->shape[1]))
    CT_FAIL_NULL(CT_ESHAPE, "cross_entropy: weight must be (C) = (%lld), one per class, got %s",
                 (long long)logits->shape[1], ct_shape_str(weight, st, sizeof st));
  if (!check_reduction("cross_entropy", reduction)) return NULL;
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    CT_FAIL_NULL(CT_EINVAL, "cross_entropy: label_smoothing must be in [0, 1], got %g", label_smoothing);
  if (logits->dtype == CT_F16 || logits->dtype == CT_BF16) {
    /* float32 inside (torch's opmath): the loss and its mean round once, and -log p of a
     * confident wrong class keeps its low bits (half's ulp is 2^-6 at 20) */
    ct_tensor *lf = ct_cast(logits, CT_F32);
    ct_tensor *r = lf ? ct_cross_entropy_ex(lf, target, weight, ignore_index, reduction, label_smoothing) : NULL;
    ct_tensor_free(lf);
    return ct__cast_result(r, logits->dtype);
  }
  int64_t N = logits->shape[0], C = logits->shape[1];
  int masked = 1; /* on a device, a sample may be ignored: the mask runs */
  if (target->device.kind == CT_CPU) { /* on a GPU the check would cost a synchronization */
    masked = 0;
    for (int64_t i = 0; i < N; i++) {
      const char *p = (const char *)ct__ptr(target) + i * target->stride[0] * (int64_t)ct_dtype_size(target->dtype);
      int64_t v = (int64_t)ct__load(p, target->dtype);
      if (v == ignore_index) masked = 1;
      else if (v < 0 || v >= C)
        CT_FAIL_NULL(CT_EINVAL, "cross_entropy: target[%lld] = %lld is not a class index in [0, %lld) nor ignore_index (%lld)",
                     (long long)i, (long long)v, (long long)C, (long long)ignore_index);
    }
  }
  ct_tensor *r = ce_compose(logits, target, weight, ignore_index, reduction, label_smoothing, masked);
  if (!r) ct__error_prefix("cross_entropy");
  return r;
}

ct_tensor *ct_cross_entropy(ct_tensor *logits, ct_tensor *target, ct_reduction reduction, double label_smoothing) {
  ct_tensor *r = ct_cross_entropy_ex(logits, target, NULL, CT_IGNORE_INDEX_DEFAULT, reduction, label_smoothing);
  return r;
}

ct_tensor *ct_mse_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction) {
  if (!input || !target) return ct__null_arg("mse_loss", !input ? "input" : "target");
  CT__AUTOCAST(CT__AUTOCAST_F32, ct_mse_loss(input, target, reduction), &input, &target);
  char a[160], b[160];
  if (ct__same_device("mse_loss", 2, (ct_tensor *[]){input, target}, (const char *[]){"input", "target"}) != CT_OK) return NULL;
  int same = input->ndim == target->ndim;
  for (int d = 0; same && d < input->ndim; d++) same = input->shape[d] == target->shape[d];
  if (!same)
    CT_FAIL_NULL(CT_ESHAPE, "mse_loss: input %s and target %s must have the same shape", ct_shape_str(input, a, sizeof a),
                 ct_shape_str(target, b, sizeof b));
  if (!check_reduction("mse_loss", reduction)) return NULL;
  ct_dtype dt = ct_promote_types(input->dtype, target->dtype);
  if (dt == CT_F16 || dt == CT_BF16) { /* float32 inside: a half square overflows past a difference of 256 */
    ct_tensor *i32 = ct_cast(input, CT_F32), *t32 = ct_cast(target, CT_F32);
    ct_tensor *r = i32 && t32 ? ct_mse_loss(i32, t32, reduction) : NULL;
    ct_tensor_free(i32), ct_tensor_free(t32);
    return ct__cast_result(r, dt);
  }
  ct_tensor *d = ct_sub(input, target);
  ct_tensor *sq = ct_mul(d, d);
  ct_tensor *r = reduce(sq, reduction);
  ct_tensor_free(d), ct_tensor_free(sq);
  if (!r) ct__error_prefix("mse_loss");
  return r;
}
