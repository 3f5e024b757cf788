/* src/ops/multinomial.c: torch.multinomial, drawing class indices from rows of non-negative
 * weights, by the Gumbel-max trick: argmax_c (log p_c + G_c), G_c = -log(-log U_c) with U_c
 * uniform, is a draw from p / sum(p) (Gumbel 1954; Maddison et al. 2014, "A* Sampling"), and the
 * k largest of one row of keys are a draw of k without replacement (Vieira 2014, the Gumbel-top-k
 * trick). So it runs on every backend with their uniform, log, add and argmax kernels, from
 * cuttle's seeded Philox generator; the draws are torch's in distribution, not its bits. */
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "core/backend.h"

/* torch's checks of a CPU distribution: finite, non-negative, a positive sum per row and, without
 * replacement, at least num_samples non-zero weights per row. A device's rows are not read (that
 * would synchronize): there, a row of zeros draws index 0 and a NaN or negative weight draws an
 * index without meaning. */
static int check_rows(ct_tensor *p, int64_t rows, int64_t C, int64_t num_samples, int replacement) {
  if (p->device.kind != CT_CPU) return 1;
  for (int64_t r = 0; r < rows; r++) {
    double sum = 0;
    int64_t nonzero = 0;
    for (int64_t c = 0; c < C; c++) {
      double v = ct__load((const char *)ct__ptr(p) + (r * C + c) * (int64_t)ct_dtype_size(p->dtype), p->dtype);
      if (!(v >= 0) || isinf(v))
        return ct__error(CT_EINVAL, "multinomial: probs row %lld holds %g at class %lld; it needs finite weights >= 0",
                         (long long)r, v, (long long)c), 0;
      sum += v, nonzero += v > 0;
    }
    if (!(sum > 0))
      return ct__error(CT_EINVAL, "multinomial: probs row %lld sums to 0; it needs a positive sum", (long long)r), 0;
    if (!replacement && nonzero < num_samples)
      return ct__error(CT_EINVAL, "multinomial: probs row %lld has %lld non-zero weights, fewer than num_samples = %lld "
                       "without replacement", (long long)r, (long long)nonzero, (long long)num_samples), 0;
  }
  return 1;
}

ct_tensor *ct_multinomial(ct_tensor *probs, int64_t num_samples, int replacement, ct_generator *gen) {
  if (!probs) return ct__null_arg("multinomial", "probs");
  char a[160];
  if (!ct_dtype_is_floating(probs->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "multinomial: probs must be floating, got %s", ct_dtype_name(probs->dtype));
  if (probs->ndim != 1 && probs->ndim != 2)
    CT_FAIL_NULL(CT_ESHAPE, "multinomial: probs must be (C) or (N, C), got %s", ct_shape_str(probs, a, sizeof a));
  int64_t C = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
  if (C < 1) CT_FAIL_NULL(CT_ESHAPE, "multinomial: probs %s has no classes", ct_shape_str(probs, a, sizeof a));
  if (replacement != 0 && replacement != 1)
    CT_FAIL_NULL(CT_EINVAL, "multinomial: replacement must be 0 or 1, got %d", replacement);
  if (num_samples < 1 || (!replacement && num_samples > C))
    CT_FAIL_NULL(CT_EINVAL, "multinomial: num_samples = %lld must be >= 1%s (C = %lld)", (long long)num_samples,
                 replacement ? "" : " and <= C without replacement", (long long)C);
  ct_dtype dt = probs->dtype == CT_F64 ? CT_F64 : CT_F32;
  ct_device dev = probs->device;
  ct_no_grad_begin();
  ct_tensor *p0 = ct_cast(probs, dt), *p2 = p0 ? ct_reshape(p0, 2, (int64_t[]){rows, C}) : NULL;
  ct_tensor *pc = p2 ? ct_contiguous(p2) : NULL, *out = NULL;
  if (pc && check_rows(pc, rows, C, num_samples, replacement)) {
    ct_tensor *lp = ct_log(pc); /* log 0 = -inf: a class of weight 0 is never drawn */
    /* with replacement, each sample draws its own keys: (N, S, C); without, one row of keys: (N, C) */
    int64_t ushape[3] = {rows, replacement ? num_samples : C, C};
    ct_tensor *u = lp ? ct_rand(replacement ? 3 : 2, ushape, 0.0, 1.0, dt, dev, gen) : NULL;
    ct_tensor *l1 = u ? ct_log(u) : NULL, *nl = l1 ? ct_neg(l1) : NULL, *l2 = nl ? ct_log(nl) : NULL;
    ct_tensor *g = l2 ? ct_neg(l2) : NULL;                      /* Gumbel(0, 1) */
    ct_tensor *lpb = lp && replacement ? ct_unsqueeze(lp, 1) : lp ? ct__retain_tracked(lp) : NULL;
    ct_tensor *keys = g && lpb ? ct_add(lpb, g) : NULL;
    if (keys && replacement) {
      out = ct_argmax(keys, 2, 0); /* (N, S) */
    } else if (keys) {
      ct_tensor *v = ct_topk(keys, num_samples, 1, 1, &out);
      ct_tensor_free(v);
    }
    ct_tensor_free(lp), ct_tensor_free(u), ct_tensor_free(l1), ct_tensor_free(nl), ct_tensor_free(l2), ct_tensor_free(g);
    ct_tensor_free(lpb), ct_tensor_free(keys);
  }
  ct_tensor_free(p0), ct_tensor_free(p2), ct_tensor_free(pc);
  ct_no_grad_end();
  if (out && probs->ndim == 1) {
    ct_tensor *o1 = ct_reshape(out, 1, &num_samples);
    ct_tensor_free(out);
    out = o1;
  }
  if (!out && ct_last_status() != CT_OK && !strstr(ct_last_error(), "multinomial")) ct__error_prefix("multinomial");
  return out;
}
