/* src/core/copy.c: the storage mechanics of moving bytes between devices: the copy of one
 * contiguous tensor into another across devices (ct__copy_between, which ct_to in ops/to.c and
 * ct_copy_ build on) and the reads back to the host (ct_to_host, ct_item). Each copy is counted in
 * the ledger (core/ledger.c) and announced to the sync-debug mode (core/sync_debug.c). Nothing here
 * records autograd nodes or calls an op, so the core stays the ground floor. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "core/backend.h"

/* Copy the contiguous src into the contiguous dst of the same dtype and size across devices. A
 * host<->device copy is asynchronous only when non_blocking is asked and the host side is pinned
 * (storage->pinned); the ledger and the sync-debug mode are told which it was. */
ct_status ct__copy_between(const char *op, ct_tensor *dst, ct_tensor *src, int non_blocking) {
  size_t nbytes = (size_t)ct_tensor_numel(src) * ct_dtype_size(src->dtype);
  if (!nbytes) return CT_OK;
  ct_status s;
  char what[96];
  if (src->device.kind == CT_CPU && dst->device.kind == CT_CPU) {
    memcpy(ct__ptr(dst), ct__ptr(src), nbytes);
    return CT_OK;
  }
  if (src->device.kind == CT_CPU || dst->device.kind == CT_CPU) {
    int h2d = src->device.kind == CT_CPU;
    ct_tensor *host = h2d ? src : dst, *dev = h2d ? dst : src;
    /* pinned only counts when the device's own backend pinned it: only that backend's pinned cache
     * keeps the bytes until its queued copies ended */
    bool pinned = ct__pinned_by(host->storage, dev->storage->backend), async = pinned && non_blocking;
    if (!async) {
      snprintf(what, sizeof what, "blocking %s copy of %zu bytes %s %s memory", h2d ? "host-to-device" : "device-to-host",
               nbytes, h2d ? "from" : "to", pinned ? "pinned" : "pageable");
      if ((s = ct__sync_point(op, dev->device, what)) != CT_OK) return s;
    }
    s = ct__profile_memcpy(dev->storage->backend, dev->device, ct__ptr(dst), ct__ptr(src), nbytes, h2d ? 0 : 1, async, op);
    if (s == CT_OK) {
      ct__ledger_copy(src->device, dst->device, nbytes, pinned, !async);
      if (!h2d && !async) ct__ledger_sync();
    }
    return s;
  }
  if (ct_device_eq(src->device, dst->device)) {
    s = ct__profile_memcpy(src->storage->backend, src->device, ct__ptr(dst), ct__ptr(src), nbytes, 2, non_blocking, op);
    if (s == CT_OK) ct__ledger_copy(src->device, dst->device, nbytes, false, false);
    return s;
  }
  /* between two GPUs: through the host, honestly counted as two copies */
  snprintf(what, sizeof what, "copy of %zu bytes to another GPU, staged through pageable host memory", nbytes);
  if ((s = ct__sync_point(op, src->device, what)) != CT_OK) return s;
  void *tmp = ct__malloc(nbytes, "staging a copy between GPUs");
  if (!tmp) return CT_ENOMEM;
  s = ct__profile_memcpy(src->storage->backend, src->device, tmp, ct__ptr(src), nbytes, 1, 0, op);
  if (s == CT_OK) s = ct__profile_memcpy(dst->storage->backend, dst->device, ct__ptr(dst), tmp, nbytes, 0, 0, op);
  free(tmp);
  if (s == CT_OK) ct__ledger_copy(src->device, CT_DEVICE_CPU, nbytes, false, true), ct__ledger_copy(CT_DEVICE_CPU, dst->device, nbytes, false, true);
  return s;
}

/* t contiguous in dtype dt on its own device: t itself (one more reference) when it already is, else
 * a new tensor filled by the backend's converting copy. What ct_cast does under no-grad, done here
 * with the backend alone so that reading a tensor back needs nothing above the core. */
static ct_tensor *host_layout(ct_tensor *t, ct_dtype dt) {
  if (t->dtype == dt && ct_tensor_is_contiguous(t)) return ct__retain_tracked(t);
  ct_tensor *c = ct__alloc(t->ndim, t->shape, dt, t->device);
  if (!c) return NULL;
  if (CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t) != CT_OK) {
    ct_tensor_free(c);
    return NULL;
  }
  return c;
}

/* ct_to_host under the name of the op the caller called (ct_item reports itself). */
static ct_status to_host(const char *op, ct_tensor *t, void *out, size_t nbytes, ct_dtype dt) {
  if (!t || !out) return ct__null_status(op, !t ? "t" : "out");
  if (!ct__check_dtype(op, dt)) return CT_EDTYPE;
  size_t need = (size_t)ct_tensor_numel(t) * ct_dtype_size(dt);
  if (nbytes < need)
    return ct__error(CT_EINVAL, "%s: buffer of %zu bytes is too small for %lld elements of %s (%zu bytes)", op, nbytes,
                     (long long)ct_tensor_numel(t), ct_dtype_name(dt), need);
  if (t->device.kind != CT_CPU && need) {
    char what[96];
    snprintf(what, sizeof what, "blocking device-to-host copy of %zu bytes to pageable memory", need);
    ct_status s = ct__sync_point(op, t->device, what);
    if (s != CT_OK) return s;
  }
  ct_tensor *c = host_layout(t, dt);
  if (!c) return ct_last_status();
  ct_status s = CT_OK;
  if (c->device.kind == CT_CPU) memcpy(out, ct__ptr(c), need);
  else if (need) {
    s = ct__profile_memcpy(c->storage->backend, c->device, out, ct__ptr(c), need, 1, 0, op);
    if (s == CT_OK) ct__ledger_copy(c->device, CT_DEVICE_CPU, need, false, true), ct__ledger_sync();
  }
  ct_tensor_free(c);
  return s;
}

ct_status ct_to_host(ct_tensor *t, void *out, size_t nbytes, ct_dtype dt) { return to_host("ct_to_host", t, out, nbytes, dt); }

double ct_item(ct_tensor *t) {
  char a[160];
  if (!t) return ct__error(CT_EINVAL, "ct_item: NULL tensor"), NAN;
  if (ct_tensor_numel(t) != 1)
    return ct__error(CT_ESHAPE, "ct_item: only one-element tensors have an item, got shape %s", ct_shape_str(t, a, sizeof a)),
           NAN;
  double v;
  if (to_host("ct_item", t, &v, sizeof v, CT_F64) != CT_OK) return NAN;
  return v;
}
