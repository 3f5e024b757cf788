/* src/core/tensor.c: tensor headers over reference-counted storage, and the accessors.
 * Storage is shared by every view; a tensor header is itself reference counted so that ct_to can
 * hand back the same tensor with one more reference (the counts: refs.c). Every new header is
 * recorded in the open scope (scope.c). */
#include <stdio.h>
#include <string.h>
#include "core/backend.h"

char *ct_shape_str(const ct_tensor *t, char *buf, size_t n) {
  if (!t || !buf) return ct__null_arg("ct_shape_str", !t ? "t" : "buf");
  if (n == 0) return buf;
  return ct__shape_str(t->ndim, t->shape, buf, n);
}

/* A new header over s (whose reference it takes over only on success). */
static ct_tensor *header_new(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, ct_storage *s) {
  ct_tensor *t = ct__calloc(1, sizeof *t, "a tensor header");
  if (!t) return NULL;
  t->refs = 1;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
  t->dtype = dt;
  t->device = dev;
  t->storage = s;
  if (ct__scope_track(t) != CT_OK) {
    free(t);
    return NULL;
  }
  return t;
}

/* The checks every constructor makes; 0 with the error set when one fails. */
static int check_new(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) {
  return ct__check_new("tensor allocation", ndim, shape, dt, dev);
}

/* A contiguous tensor over the new storage s (whose data is set); releases s on failure. */
static ct_tensor *wrap_new(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, ct_storage *s) {
  ct_tensor *t = header_new(ndim, shape, dt, dev, s);
  if (!t) {
    ct__storage_release(s);
    return NULL;
  }
  ct__contiguous_strides(ndim, shape, t->stride);
  return t;
}

void *ct__device_alloc(const ct_backend *be, ct_device dev, size_t nbytes) {
  if (ct__fault_device_alloc()) {
    char name[32];
    ct__error(CT_ENOMEM, "out of memory on %s: allocating %zu bytes failed (injected fault)", ct_device_str(dev, name, sizeof name),
              nbytes);
    return NULL;
  }
  return be->alloc(dev.index, nbytes); /* the backend sets CT_ENOMEM with its figures */
}

ct_tensor *ct__alloc(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev) {
  if (!check_new(ndim, shape, dt, dev)) return NULL;
  const ct_backend *be = ct__backend(dev.kind);
  int64_t numel = ct__numel(ndim, shape);
  size_t nbytes = (size_t)numel * ct_dtype_size(dt);
  ct_storage *s = ct__calloc(1, sizeof *s, "a storage header");
  if (!s) return NULL;
  s->refs = 1;
  s->device = dev;
  s->backend = be;
  s->nbytes = nbytes;
  s->data = ct__device_alloc(be, dev, nbytes ? nbytes : 1);
  if (!s->data) {
    free(s);
    return NULL; /* the backend set CT_ENOMEM with the figures */
  }
  return wrap_new(ndim, shape, dt, dev, s);
}

ct_tensor *ct__alloc_custom(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, void *(*alloc)(size_t nbytes),
                            void (*release)(ct_storage *s), void *ctx, bool pinned) {
  if (!check_new(ndim, shape, dt, dev)) return NULL;
  size_t nbytes = (size_t)ct__numel(ndim, shape) * ct_dtype_size(dt);
  ct_storage *s = ct__calloc(1, sizeof *s, "a storage header");
  if (!s) return NULL;
  s->refs = 1;
  s->device = dev;
  s->backend = ct__backend(dev.kind);
  s->nbytes = nbytes;
  s->release = release;
  s->release_ctx = ctx;
  s->pinned = pinned;
  if (ct__fault_device_alloc())
    ct__error(CT_ENOMEM, "out of memory: allocating %zu bytes of %s host memory failed (injected fault)", nbytes ? nbytes : 1,
              pinned ? "pinned" : "custom");
  else s->data = alloc(nbytes ? nbytes : 1);
  if (!s->data) {
    free(s);
    return NULL; /* alloc set the error */
  }
  return wrap_new(ndim, shape, dt, dev, s);
}

ct_tensor *ct__view_of(ct_tensor *t, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset) {
  ct__storage_retain(t->storage);
  ct_tensor *v = header_new(ndim, shape, t->dtype, t->device, t->storage);
  if (!v) {
    ct__storage_release(t->storage);
    return NULL;
  }
  if (ndim) memcpy(v->stride, stride, (size_t)ndim * sizeof(int64_t));
  v->offset = offset;
  return v;
}

void ct_tensor_free(ct_tensor *t) {
  if (!t) return;
  if (t->scope_refs > 0) ct__scope_release_one(t); /* the scope no longer holds this reference */
  ct__tensor_decref(t);
}

/* The accessors' answer for a NULL tensor: the sentinel, with CT_EINVAL set. */
#define NULL_T(op, sentinel) \
  if (!t) return ct__null_arg(op, "t"), (sentinel)
int ct_tensor_ndim(const ct_tensor *t) {
  NULL_T("ct_tensor_ndim", -1);
  return t->ndim;
}
const int64_t *ct_tensor_shape(const ct_tensor *t) {
  NULL_T("ct_tensor_shape", NULL);
  return t->shape;
}
const int64_t *ct_tensor_strides(const ct_tensor *t) {
  NULL_T("ct_tensor_strides", NULL);
  return t->stride;
}
int64_t ct_tensor_size(const ct_tensor *t, int dim) {
  NULL_T("ct_tensor_size", -1);
  int d = ct__dim(dim, t->ndim);
  return d < 0 || t->ndim == 0 ? -1 : t->shape[d];
}
int64_t ct_tensor_numel(const ct_tensor *t) {
  NULL_T("ct_tensor_numel", -1);
  return ct__numel(t->ndim, t->shape);
}
ct_dtype ct_tensor_dtype(const ct_tensor *t) {
  NULL_T("ct_tensor_dtype", CT_DTYPE_COUNT);
  return t->dtype;
}
ct_device ct_tensor_device(const ct_tensor *t) {
  NULL_T("ct_tensor_device", ((ct_device){CT_DEVICE_KIND_COUNT, -1}));
  return t->device;
}
void *ct_tensor_data(ct_tensor *t) {
  NULL_T("ct_tensor_data", NULL);
  return t->device.kind == CT_CPU ? ct__ptr(t) : NULL;
}

int ct_tensor_is_contiguous(const ct_tensor *t) {
  NULL_T("ct_tensor_is_contiguous", 0);
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

ct_status ct__same_device(const char *op, int n, ct_tensor *const *ts, const char *const *names) {
  int first = -1;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    if (!ct_device_eq(ts[i]->device, ts[first]->device)) {
      char msg[1024], dev[32];
      size_t k = (size_t)snprintf(msg, sizeof msg, "%s: arguments live on different devices (", op);
      for (int j = 0; j < n; j++)
        if (ts[j] && k < sizeof msg)
          k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s on %s", j ? ", " : "", names[j],
                                ct_device_str(ts[j]->device, dev, sizeof dev));
      return ct__error(CT_EDEVICE,
                       "%s); cuttle never copies implicitly: move them to one device first, e.g. %s = ct_to(%s, dev, 0) "
                       "with dev the device \"%s\" (ct_device_parse)",
                       msg, names[i], names[i], ct_device_str(ts[first]->device, dev, sizeof dev));
    }
  }
  return CT_OK;
}
