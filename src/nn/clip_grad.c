/* src/nn/clip_grad.c: torch.nn.utils.clip_grad_norm_ over a module's gradients. The total norm
 * and the scale stay on the gradients' device (no value is read back, so a step with clipping
 * needs no synchronization and can be captured in a CUDA graph), as torch's foreach path does. */
#include <math.h>
#include <string.h>
#include "nn/module.h"
#include "ops/ops_internal.h"

/* sum(|g|^p) (p finite) or max|g| (p = inf) over all of g, a 0-dim float32 tensor (float64 for a
 * float64 g), computed in float32 or wider. */
static ct_tensor *grad_part(ct_tensor *g, double p) {
  ct_tensor *gw = ct_cast(g, g->dtype == CT_F64 ? CT_F64 : CT_F32), *r = NULL;
  ct_tensor *ag = !gw ? NULL : p == 2 ? ct__retain_tracked(gw) : ct_abs(gw); /* p = 2 squares: no |g| pass */
  if (ag && isinf(p)) {
    ct_tensor *flat = ct_reshape(ag, 1, (int64_t[]){-1});
    r = flat ? (ct_tensor_numel(flat) ? ct_max(flat, 0, 0, NULL) : ct_scalar(0, ag->dtype, ag->device)) : NULL;
    ct_tensor_free(flat);
  } else if (ag) {
    ct_tensor *pw = p == 2 ? ct_mul(ag, ag) : p == 1 ? ct__retain_tracked(ag) : ct_pow_scalar(ag, p);
    r = pw ? ct_sum(pw, 0, NULL, 0) : NULL;
    ct_tensor_free(pw);
  }
  ct_tensor_free(gw), ct_tensor_free(ag);
  return r;
}

ct_tensor *ct_clip_grad_norm_(ct_module *m, double max_norm, double norm_type) {
  const char *op = "ct_clip_grad_norm_";
  if (!m) return ct__null_arg(op, "m");
  if (!(max_norm >= 0) || isinf(max_norm))
    CT_FAIL_NULL(CT_EINVAL, "%s: max_norm must be finite and >= 0, got %g", op, max_norm);
  if (!(norm_type > 0))
    CT_FAIL_NULL(CT_EINVAL, "%s: norm_type must be > 0 (2 is the Euclidean norm, INFINITY the largest |g|), got %g", op,
                 norm_type);
  int n = ct_module_named_tensors(m, 0, NULL, 0);
  if (n < 0) return ct__error_prefix("%s", op), NULL;
  ct_named_tensor *ps = ct__calloc((size_t)(n ? n : 1), sizeof *ps, "clip_grad_norm_'s list of parameters");
  if (!ps) return NULL;
  ct_module_named_tensors(m, 0, ps, n);
  ct_tensor *first = NULL, *total = NULL;
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int i = 0; i < n && s == CT_OK; i++) {
    ct_tensor *g = ct_grad(ps[i].tensor);
    if (!g) continue;
    if (first && !ct_device_eq(first->device, g->device)) {
      s = ct__same_device(op, 2, (ct_tensor *[]){first, g}, (const char *[]){"the first gradient", ps[i].name});
      break;
    }
    first = first ? first : g;
    ct_tensor *part = grad_part(g, norm_type), *next = NULL;
    if (part && total) next = isinf(norm_type) ? ct_maximum(total, part) : ct_add(total, part);
    else if (part) next = ct__retain_tracked(part);
    ct_tensor_free(part), ct_tensor_free(total);
    total = next;
    if (!total) s = ct_last_status();
  }
  ct_tensor *norm = NULL;
  if (s == CT_OK && !first) norm = ct_scalar(0, CT_F32, CT_DEVICE_CPU); /* no gradients: torch's tensor(0.) */
  else if (s == CT_OK) norm = isinf(norm_type) || norm_type == 1 ? ct__retain_tracked(total) : ct_pow_scalar(total, 1.0 / norm_type);
  /* clip_coef = max_norm / (total_norm + 1e-6), clamped to 1: torch.nn.utils.clip_grad_norm_ */
  ct_tensor *den = norm && first ? ct_add_scalar(norm, 1e-6) : NULL, *num = den ? ct_scalar(max_norm, den->dtype, den->device) : NULL;
  ct_tensor *q = num ? ct_div(num, den) : NULL, *one = q ? ct_scalar(1.0, q->dtype, q->device) : NULL;
  ct_tensor *coef = one ? ct_minimum(q, one) : NULL;
  if (first && s == CT_OK && !coef) s = ct_last_status();
  for (int i = 0; first && coef && i < n && s == CT_OK; i++) {
    ct_tensor *g = ct_grad(ps[i].tensor);
    if (!g) continue;
    ct_tensor *c = ct_cast(coef, g->dtype);
    s = c ? ct__binary_into(CT_BINARY_MUL, g, g, c) : ct_last_status();
    ct_tensor_free(c);
  }
  ct_no_grad_end();
  ct_tensor_free(total), ct_tensor_free(den), ct_tensor_free(num), ct_tensor_free(q), ct_tensor_free(one), ct_tensor_free(coef);
  free(ps);
  if (s != CT_OK || !norm) {
    ct_tensor_free(norm);
    if (!strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
    return NULL;
  }
  return norm;
}
