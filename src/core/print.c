/* src/core/print.c: tensors printed in PyTorch's style:
 *   tensor([[1.0000, 2.5000],
 *           [3.0000, 4.0000]], dtype=float32, device=cpu)
 * Floats with integral values print as "1.", others with 4 decimals, or in scientific notation
 * when the magnitudes span more than 1e3 or exceed 1e8 (torch's _Formatter rules, simplified).
 * More than 1000 elements are summarized with "..." keeping 3 items at each edge. */
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include "core/internal.h"

typedef struct {
  char *s;
  size_t n, cap;
  int ok;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = (b->cap + (size_t)k) * 2;
    char *s = ct__realloc(b->s, cap, "a tensor's text");
    if (!s) {
      b->ok = 0;
      return;
    }
    b->s = s, b->cap = cap;
  }
}

typedef struct {
  const double *v;
  const int64_t *shape;
  int ndim;
  ct_dtype dt;
  int summarize, sci, integral, width;
} fmt;

static void value(sbuf *b, const fmt *f, double x) {
  char tmp[64];
  if (f->dt == CT_BOOL) snprintf(tmp, sizeof tmp, "%s", x != 0 ? "True" : "False");
  else if (!ct_dtype_is_floating(f->dt)) snprintf(tmp, sizeof tmp, "%lld", (long long)x);
  else if (isnan(x)) snprintf(tmp, sizeof tmp, "nan");
  else if (isinf(x)) snprintf(tmp, sizeof tmp, "%s", x > 0 ? "inf" : "-inf");
  else if (f->sci) snprintf(tmp, sizeof tmp, "%.4e", x);
  else if (f->integral) snprintf(tmp, sizeof tmp, "%.0f.", x);
  else snprintf(tmp, sizeof tmp, "%.4f", x);
  put(b, "%*s", f->width, tmp);
}

static void rec(sbuf *b, const fmt *f, int dim, int64_t offset, int indent) {
  if (dim == f->ndim) {
    value(b, f, f->v[offset]);
    return;
  }
  int64_t n = f->shape[dim], inner = 1;
  for (int d = dim + 1; d < f->ndim; d++) inner *= f->shape[d];
  put(b, "[");
  for (int64_t i = 0; i < n; i++) {
    if (f->summarize && n > 6 && i == 3) {
      put(b, dim == f->ndim - 1 ? "..., " : "...,\n%*s", dim == f->ndim - 1 ? 0 : indent + 1, "");
      i = n - 3;
    }
    rec(b, f, dim + 1, offset + i * inner, indent + 1);
    if (i < n - 1) {
      if (dim == f->ndim - 1) put(b, ", ");
      else {
        put(b, ",");
        for (int k = 0; k < f->ndim - dim - 1; k++) put(b, "\n");
        put(b, "%*s", indent + 1, "");
      }
    }
  }
  put(b, "]");
}

char *ct_tensor_to_string(ct_tensor *t) {
  if (!t) return ct__null_arg("ct_tensor_to_string", "t");
  int64_t n = ct_tensor_numel(t);
  double *v = ct__malloc((size_t)n * sizeof(double), "a host copy of a tensor to print");
  if (!v) return NULL;
  if (ct_to_host(t, v, (size_t)n * sizeof(double), CT_F64) != CT_OK) {
    free(v);
    return NULL;
  }
  fmt f = {v, t->shape, t->ndim, t->dtype, n > 1000, 0, 1, 0};
  double maxa = 0, mina = INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(v[i])) continue;
    double a = fabs(v[i]);
    if (v[i] != floor(v[i])) f.integral = 0;
    if (a > maxa) maxa = a;
    if (a > 0 && a < mina) mina = a;
  }
  if (ct_dtype_is_floating(t->dtype) && maxa > 0 && (maxa / mina > 1e3 || maxa >= 1e8 || mina < 1e-4) && !f.integral) f.sci = 1;
  if (ct_dtype_is_floating(t->dtype) && f.integral && maxa >= 1e8) f.sci = 1, f.integral = 0;
  for (int64_t i = 0; i < n; i++) { /* column width: the widest value */
    sbuf tmp = {0, 0, 0, 1};
    fmt g = f;
    g.width = 0;
    value(&tmp, &g, v[i]);
    if ((int)tmp.n > f.width) f.width = (int)tmp.n;
    free(tmp.s);
  }
  sbuf b = {0, 0, 0, 1};
  char dev[32];
  put(&b, "tensor(");
  if (n == 0) put(&b, "[]");
  else rec(&b, &f, 0, 0, 7);
  put(&b, ", dtype=%s, device=%s)", ct_dtype_name(t->dtype), ct_device_str(t->device, dev, sizeof dev));
  free(v);
  if (!b.ok) {
    free(b.s);
    return NULL; /* ct__realloc said how many bytes */
  }
  return b.s;
}

ct_status ct_tensor_print(ct_tensor *t, FILE *f) {
  if (!t || !f) return ct__null_status("ct_tensor_print", !t ? "t" : "f");
  char *s = ct_tensor_to_string(t);
  if (!s) return t ? ct_last_status() : ct__error(CT_EINVAL, "print: NULL tensor");
  fprintf(f, "%s\n", s);
  free(s);
  return CT_OK;
}
