/* src/core/shape.c: arithmetic on a shape given as (ndim, sizes), with no tensor: the element
 * count, contiguous strides, a possibly negative dim, and the shape as text for messages. Calls no
 * other core file, so that the checks (check.c) and the tensors (tensor.c) both build on it. */
#include <stdio.h>
#include "core/internal.h"

int64_t ct__numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

void ct__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

int ct__dim(int dim, int ndim) {
  int d = dim < 0 ? dim + ndim : dim;
  return d >= 0 && d < (ndim > 0 ? ndim : 1) ? d : -1;
}

char *ct__shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, ndim == 1 ? ",)" : ")");
  return buf;
}
