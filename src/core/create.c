/* src/core/create.c: the constructors: empty, zeros, ones, full, scalar, arange, from_host, and the
 * random ones (rand, randn, randint) over the Philox generator of rng.c. */
#include <math.h>
#include <stdio.h>
#include "core/backend.h"

ct_tensor *ct_empty(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) {
  if (!ct__check_new("ct_empty", ndim, shape, dt, dev)) return NULL;
  return ct__alloc(ndim, shape, dt, dev);
}

/* ct_full under the name of the constructor the caller called. */
static ct_tensor *full(const char *op, int ndim, const int64_t *shape, double value, ct_dtype dt, ct_device dev) {
  if (!ct__check_new(op, ndim, shape, dt, dev)) return NULL;
  ct_tensor *t = ct__alloc(ndim, shape, dt, dev);
  if (t && CT_KERNEL_CALL(t->storage->backend, fill, __func__, t, t, value) != CT_OK) {
    ct_tensor_free(t);
    return NULL;
  }
  return t;
}

ct_tensor *ct_full(int ndim, const int64_t *shape, double value, ct_dtype dt, ct_device dev) {
  return full("ct_full", ndim, shape, value, dt, dev);
}
ct_tensor *ct_zeros(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) { return full("ct_zeros", ndim, shape, 0, dt, dev); }
ct_tensor *ct_ones(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) { return full("ct_ones", ndim, shape, 1, dt, dev); }
ct_tensor *ct_scalar(double value, ct_dtype dt, ct_device dev) { return full("ct_scalar", 0, NULL, value, dt, dev); }

/* Fill the new contiguous tensor t from the host bytes data (t's size): a blocking copy through
 * the backend's memcpy onto a device, counted in the ledger and announced to the sync-debug mode
 * under the name op. The core's own path, so that no constructor needs ct_to (an op). */
static ct_status upload(const char *op, ct_tensor *t, const void *data) {
  size_t nbytes = t->storage->nbytes;
  ct_status s = CT_OK;
  if (nbytes && t->device.kind != CT_CPU) {
    char what[96];
    snprintf(what, sizeof what, "blocking host-to-device copy of %zu bytes from pageable memory", nbytes);
    s = ct__sync_point(op, t->device, what);
  }
  if (s == CT_OK && nbytes) s = ct__profile_memcpy(t->storage->backend, t->device, t->storage->data, data, nbytes, 0, 0, op);
  if (s == CT_OK && t->device.kind != CT_CPU) ct__ledger_copy(CT_DEVICE_CPU, t->device, nbytes, false, true);
  return s;
}

ct_tensor *ct_arange(double start, double end, double step, ct_dtype dt, ct_device dev) {
  if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
    CT_FAIL_NULL(CT_EINVAL, "arange: need finite bounds and a nonzero step, got start %g end %g step %g", start, end, step);
  double span = (end - start) / step;
  if (span > 0x1p62) /* also keeps the conversion to int64 below defined */
    CT_FAIL_NULL(CT_EINVAL, "arange: [%g, %g) in steps of %g has more than 2^62 elements; use a larger step", start, end, step);
  int64_t n = span > 0 ? (int64_t)ceil(span) : 0;
  if (!ct__check_new("arange", 1, &n, dt, dev)) return NULL;
  ct_tensor *h = ct__alloc(1, &n, dt, CT_DEVICE_CPU);
  if (!h) return NULL;
  size_t es = ct_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) ct__store((char *)ct__ptr(h) + i * es, dt, start + (double)i * step);
  if (dev.kind == CT_CPU) return h;
  ct_tensor *d = ct__alloc(1, &n, dt, dev);
  if (d && n > 0 && upload("arange", d, ct__ptr(h)) != CT_OK) { /* an empty range moves no bytes and counts no copy */
    ct_tensor_free(d);
    d = NULL;
  }
  ct_tensor_free(h);
  return d;
}

ct_tensor *ct_from_host(const void *data, int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) {
  int64_t numel;
  if (!ct__check_new("ct_from_host", ndim, shape, dt, dev) || !ct__checked_numel("ct_from_host", ndim, shape, &numel))
    return NULL;
  if (!data && numel > 0) CT_FAIL_NULL(CT_EINVAL, "ct_from_host: data is NULL for %lld elements", (long long)numel);
  ct_tensor *t = ct__alloc(ndim, shape, dt, dev);
  if (t && upload("ct_from_host", t, data) != CT_OK) {
    ct_tensor_free(t);
    return NULL;
  }
  return t;
}

static ct_tensor *random_tensor(const char *op, int ndim, const int64_t *shape, ct_dist dist, double p0, double p1,
                                ct_dtype dt, ct_device dev, ct_generator *gen) {
  int want_float = dist != CT_DIST_RANDINT;
  if (!ct__check_new(op, ndim, shape, dt, dev)) return NULL;
  if (want_float != ct_dtype_is_floating(dt) || dt == CT_BOOL)
    CT_FAIL_NULL(CT_EDTYPE, "%s: dtype %s is not allowed (use a %s dtype)", op, ct_dtype_name(dt),
                 want_float ? "floating" : "integer");
  ct_tensor *t = ct__alloc(ndim, shape, dt, dev);
  if (!t) return NULL;
  if (!gen) gen = ct_default_generator();
  /* The draw's blocks are reserved with one atomic add, so that threads drawing from one generator
   * (the default one, from Dropout in replicas on several devices: cuttle/data_parallel.h) get
   * distinct numbers; a draw that fails still uses up its blocks. */
  uint64_t offset = __atomic_fetch_add(&gen->offset, (uint64_t)(ct_tensor_numel(t) + 3) / 4, __ATOMIC_RELAXED);
  ct_status s = CT_KERNEL_CALL(t->storage->backend, random, __func__, t, t, dist, p0, p1, gen->seed, offset);
  if (s != CT_OK) {
    ct_tensor_free(t);
    return NULL;
  }
  return t;
}

ct_tensor *ct_rand(int ndim, const int64_t *shape, double lo, double hi, ct_dtype dt, ct_device dev, ct_generator *gen) {
  return random_tensor("rand", ndim, shape, CT_DIST_UNIFORM, lo, hi, dt, dev, gen);
}

ct_tensor *ct_randn(int ndim, const int64_t *shape, double mean, double std, ct_dtype dt, ct_device dev, ct_generator *gen) {
  return random_tensor("randn", ndim, shape, CT_DIST_NORMAL, mean, std, dt, dev, gen);
}

ct_tensor *ct_randint(int ndim, const int64_t *shape, int64_t lo, int64_t hi, ct_dtype dt, ct_device dev,
                      ct_generator *gen) {
  if (hi <= lo || (uint64_t)hi - (uint64_t)lo > 4294967296ULL)
    CT_FAIL_NULL(CT_EINVAL, "randint: need lo < hi and hi - lo <= 2^32, got [%lld, %lld)", (long long)lo, (long long)hi);
  return random_tensor("randint", ndim, shape, CT_DIST_RANDINT, (double)lo, (double)hi, dt, dev, gen);
}
