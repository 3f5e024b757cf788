/* src/autograd/gradcheck.c: analytic gradients against central finite differences in float64
 * (torch.autograd.gradcheck). The output is reduced to L = sum(out * w) for a fixed random w, so
 * one backward pass checks every output element at once. Works on any device: inputs are
 * perturbed through host copies. */
#include <math.h>
#include <string.h>
#include "core/internal.h"

/* L = sum(fn(inputs) * w) as a double, under no-grad; NAN on error. */
static double objective(ct_gradcheck_fn fn, void *ctx, ct_tensor *const *inputs, ct_tensor *w) {
  ct_scope_begin();
  ct_tensor *out = fn(inputs, ctx);
  ct_tensor *p = out ? ct_mul(out, w) : NULL;
  ct_tensor *s = p ? ct_sum(p, 0, NULL, 0) : NULL;
  double v = s ? ct_item(s) : NAN;
  ct_scope_end();
  return v;
}

/* Write one element j of input t (f64) from the host mirror h. */
static ct_status set_elem(ct_tensor *t, const double *h) {
  ct_tensor *src = ct_from_host(h, t->ndim, t->shape, CT_F64, CT_DEVICE_CPU);
  ct_status s = src ? ct_copy_(t, src) : ct_last_status();
  ct_tensor_free(src);
  return s;
}

ct_status ct_gradcheck(ct_gradcheck_fn fn, void *ctx, int n, ct_tensor *const *inputs, double eps, double atol, double rtol) {
  if (!fn || n < 1 || !inputs) return ct__error(CT_EINVAL, "gradcheck: need a function and at least one input");
  for (int i = 0; i < n; i++)
    if (!inputs[i] || inputs[i]->dtype != CT_F64 || !inputs[i]->requires_grad || inputs[i]->grad_fn)
      return ct__error(CT_EINVAL, "gradcheck: input %d must be a float64 leaf that requires grad", i);
  if (eps <= 0) eps = 1e-6;
  ct_status st = CT_OK;
  ct_scope_begin();
  ct_tensor *out = fn(inputs, ctx);
  ct_tensor *w = NULL;
  if (!out) st = ct_last_status();
  else if (!out->requires_grad) st = ct__error(CT_EAUTOGRAD, "gradcheck: the output does not depend on the inputs");
  else {
    ct_generator g = ct_generator_new(1234);
    w = ct_randn(out->ndim, out->shape, 0, 1, out->dtype, out->device, &g);
    ct_tensor *p = w ? ct_mul(out, w) : NULL, *L = p ? ct_sum(p, 0, NULL, 0) : NULL;
    for (int i = 0; i < n; i++) ct_zero_grad(inputs[i]);
    st = L ? ct_backward(L) : ct_last_status();
    if (w) ct_scope_keep(w);
  }
  ct_scope_end(); /* frees out too: only w is kept */
  for (int i = 0; i < n && st == CT_OK; i++) {
    ct_tensor *x = inputs[i];
    int64_t m = ct_tensor_numel(x);
    double *h = ct__malloc((size_t)m * sizeof(double), "gradcheck's input values");
    double *ga = h ? ct__malloc((size_t)m * sizeof(double), "gradcheck's analytic gradient") : NULL;
    if (!ga) {
      free(h);
      st = CT_ENOMEM;
      break;
    }
    st = ct_to_host(x, h, (size_t)m * sizeof(double), CT_F64);
    if (st == CT_OK && x->grad) st = ct_to_host(x->grad, ga, (size_t)m * sizeof(double), CT_F64);
    else if (st == CT_OK) memset(ga, 0, (size_t)m * sizeof(double)); /* no gradient reached x: zero */
    for (int64_t j = 0; j < m && st == CT_OK; j++) {
      double orig = h[j];
      h[j] = orig + eps;
      st = set_elem(x, h);
      double lp = st == CT_OK ? objective(fn, ctx, inputs, w) : NAN;
      h[j] = orig - eps;
      if (st == CT_OK) st = set_elem(x, h);
      double lm = st == CT_OK ? objective(fn, ctx, inputs, w) : NAN;
      h[j] = orig;
      if (st == CT_OK) st = set_elem(x, h);
      if (st != CT_OK) break;
      double num = (lp - lm) / (2 * eps);
      if (isnan(num) || fabs(ga[j] - num) > atol + rtol * fabs(num)) {
        char shp[160];
        st = ct__error(CT_EAUTOGRAD, "gradcheck: input %d %s, element %lld: analytic %.10g vs numeric %.10g", i,
                       ct_shape_str(x, shp, sizeof shp), (long long)j, ga[j], num);
      }
    }
    free(h), free(ga);
  }
  for (int i = 0; i < n; i++) ct_zero_grad(inputs[i]);
  ct_tensor_free(w);
  return st;
}
