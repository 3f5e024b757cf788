/* src/core/check.c: the argument checks every public entry shares, so that a bad argument is an
 * error with one wording everywhere: a shape (ndim, NULL, negative sizes, a product that overflows
 * int64 or a byte count that overflows), a dtype, a device that does not exist. Each message names
 * the function, the argument and the fix. (A NULL input's error is status.c's ct__null_arg.)
 * Calls down only: the device registry, dtypes, shapes and errors; the tensors call it. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

int ct__checked_numel(const char *op, int ndim, const int64_t *shape, int64_t *numel) {
  char buf[200];
  if (ndim < 0 || ndim > CT_MAX_DIMS)
    return ct__error(CT_EINVAL, "%s: ndim must be in [0, %d], got %d", op, CT_MAX_DIMS, ndim), 0;
  if (ndim > 0 && !shape) return ct__error(CT_EINVAL, "%s: shape is NULL with ndim %d (pass ndim sizes)", op, ndim), 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return ct__error(CT_EINVAL, "%s: negative size %lld at dim %d of shape %s (sizes must be >= 0)", op,
                       (long long)shape[i], i, ct__shape_str(ndim, shape, buf, sizeof buf)),
             0;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(n, shape[i], &n))
      return ct__error(CT_EINVAL, "%s: shape %s has more than 2^63 elements (the product of the sizes overflows int64)",
                       op, ct__shape_str(ndim, shape, buf, sizeof buf)),
             0;
  if (numel) *numel = n;
  return 1;
}

int ct__check_dtype(const char *op, ct_dtype dt) {
  if ((unsigned)dt < CT_DTYPE_COUNT) return 1;
  return ct__error(CT_EDTYPE, "%s: invalid dtype %d (use a ct_dtype value such as CT_F32)", op, (int)dt), 0;
}

int ct__check_device(const char *op, ct_device dev) {
  char name[32], kind[32];
  if (ct_device_available(dev)) return 1;
  /* The kind's registry name ("opencl"), so that the count names the kind the caller asked for. */
  ct_device_str((ct_device){dev.kind, 1}, kind, sizeof kind);
  kind[strcspn(kind, ":")] = 0;
  int known = (unsigned)dev.kind < CT_DEVICE_KIND_COUNT;
  return ct__error(CT_EDEVICE, "%s: device %s does not exist on this machine (it has %d %s device(s)); pass "
                   "CT_DEVICE_CPU, or ct_try_gpu(i), which falls back to the CPU",
                   op, ct_device_str(dev, name, sizeof name), known ? ct_device_count(dev.kind) : 0, kind),
         0;
}

int ct__check_new(const char *op, int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) {
  int64_t numel, nbytes;
  char buf[200];
  if (!ct__checked_numel(op, ndim, shape, &numel) || !ct__check_dtype(op, dt)) return 0;
  if (__builtin_mul_overflow(numel, (int64_t)ct_dtype_size(dt), &nbytes))
    return ct__error(CT_EINVAL, "%s: shape %s of %s needs more than 2^63 bytes", op,
                     ct__shape_str(ndim, shape, buf, sizeof buf), ct_dtype_name(dt)),
           0;
  return ct__check_device(op, dev);
}
