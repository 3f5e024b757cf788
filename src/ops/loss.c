/* src/ops/loss.c: cross_entropy (class indices, label smoothing) and mse_loss, composed of
 * log_softmax, gather and reductions, as torch.nn.functional defines them:
 *   loss_i = (1 - eps) (-log p[i, y_i]) + eps mean_c(-log p[i, c]). */
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

ct_tensor *ct_cross_entropy(ct_tensor *logits, ct_tensor *target, ct_reduction reduction, double label_smoothing) {
  if (!logits || !target) return ct__null_arg("cross_entropy", !logits ? "logits" : "target");
  CT__AUTOCAST(CT__AUTOCAST_F32, ct_cross_entropy(logits, target, reduction, label_smoothing), &logits);
  char sl[160], st[160];
  if (ct__same_device("cross_entropy", 2, (ct_tensor *[]){logits, target}, (const char *[]){"logits", "target"}) != CT_OK)
    return NULL;
  if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
    CT_FAIL_NULL(CT_ESHAPE, "cross_entropy: expected logits (N, C) and target (N), got %s and %s",
                 ct_shape_str(logits, sl, sizeof sl), ct_shape_str(target, st, sizeof st));
  if (target->dtype != CT_I64 && target->dtype != CT_I32)
    CT_FAIL_NULL(CT_EDTYPE, "cross_entropy: target must hold int64 class indices, got %s", ct_dtype_name(target->dtype));
  if (!ct_dtype_is_floating(logits->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "cross_entropy: logits must be floating, got %s of %s (cast them first, e.g. ct_cast(logits, CT_F32))",
                 ct_dtype_name(logits->dtype), ct_shape_str(logits, sl, sizeof sl));
  if (!check_reduction("cross_entropy", reduction)) return NULL;
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    CT_FAIL_NULL(CT_EINVAL, "cross_entropy: label_smoothing must be in [0, 1], got %g", label_smoothing);
  if (logits->dtype == CT_F16 || logits->dtype == CT_BF16) {
    /* float32 inside (torch's opmath): the loss and its mean round once, and -log p of a
     * confident wrong class keeps its low bits (half's ulp is 2^-6 at 20) */
    ct_tensor *lf = ct_cast(logits, CT_F32);
    ct_tensor *r = lf ? ct_cross_entropy(lf, target, reduction, label_smoothing) : NULL;
    ct_tensor_free(lf);
    return ct__cast_result(r, logits->dtype);
  }
  int64_t N = logits->shape[0], C = logits->shape[1];
  if (target->device.kind == CT_CPU) { /* on a GPU the check would cost a synchronization */
    for (int64_t i = 0; i < N; i++) {
      const char *p = (const char *)ct__ptr(target) + i * target->stride[0] * (int64_t)ct_dtype_size(target->dtype);
      int64_t v = (int64_t)ct__load(p, target->dtype);
      if (v < 0 || v >= C)
        CT_FAIL_NULL(CT_EINVAL, "cross_entropy: target[%lld] = %lld is not a class index in [0, %lld)", (long long)i,
                     (long long)v, (long long)C);
    }
  }
  ct_tensor *lsm = ct_log_softmax(logits, 1);
  ct_tensor *ti = ct_cast(target, CT_I64);
  ct_tensor *t2 = ti ? ct_unsqueeze(ti, 1) : NULL;
  ct_tensor *picked = lsm && t2 ? ct_gather(lsm, 1, t2) : NULL; /* (N, 1) */
  ct_tensor *nll = picked ? ct_reshape(picked, 1, &N) : NULL;
  ct_tensor *loss = nll ? ct_neg(nll) : NULL;
  if (loss && label_smoothing > 0) {
    ct_tensor *m = ct_mean(lsm, 1, (int[]){1}, 0);
    ct_tensor *sm = m ? ct_mul_scalar(m, -label_smoothing) : NULL;
    ct_tensor *a = ct_mul_scalar(loss, 1.0 - label_smoothing);
    ct_tensor *sum = sm && a ? ct_add(a, sm) : NULL;
    ct_tensor_free(m), ct_tensor_free(sm), ct_tensor_free(a), ct_tensor_free(loss);
    loss = sum;
  }
  ct_tensor *r = reduce(loss, reduction);
  ct_tensor_free(lsm), ct_tensor_free(ti), ct_tensor_free(t2), ct_tensor_free(picked), ct_tensor_free(nll), ct_tensor_free(loss);
  if (!r) ct__error_prefix("cross_entropy");
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
