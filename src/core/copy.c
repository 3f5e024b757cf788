/* src/core/copy.c: the only paths between devices (ct_to, ct_copy_, ct_to_host, ct_item) and the
 * ledger that counts every host<->device copy and synchronization point. */
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "backend/backend.h"

/* ---- the ledger: process-wide counters, updated atomically */
static ct_ledger ledger;

static void add(uint64_t *c, uint64_t v) { __atomic_add_fetch(c, v, __ATOMIC_RELAXED); }

void ct__ledger_copy(ct_device src, ct_device dst, size_t nbytes, bool pinned, bool synchronous) {
  if (src.kind == CT_CPU && dst.kind != CT_CPU) add(&ledger.h2d_copies, 1), add(&ledger.h2d_bytes, nbytes);
  else if (src.kind != CT_CPU && dst.kind == CT_CPU) add(&ledger.d2h_copies, 1), add(&ledger.d2h_bytes, nbytes);
  else add(&ledger.d2d_copies, 1), add(&ledger.d2d_bytes, nbytes);
  if (pinned) add(&ledger.pinned_copies, 1);
  if (synchronous) add(&ledger.sync_copies, 1);
}

void ct__ledger_sync(void) { add(&ledger.syncs, 1); }

ct_ledger ct_ledger_get(void) {
  return ledger; /* fields are read one by one: a consistent snapshot across them is not promised */
}

void ct_ledger_reset(void) { memset(&ledger, 0, sizeof ledger); }

void ct_ledger_print(FILE *f) {
  ct_ledger l = ct_ledger_get();
  fprintf(f, "ledger: h2d %llu copies %.1f MB, d2h %llu copies %.1f MB, d2d %llu copies %.1f MB, pinned %llu, "
          "blocking %llu, syncs %llu\n",
          (unsigned long long)l.h2d_copies, l.h2d_bytes / 1e6, (unsigned long long)l.d2h_copies, l.d2h_bytes / 1e6,
          (unsigned long long)l.d2d_copies, l.d2d_bytes / 1e6, (unsigned long long)l.pinned_copies,
          (unsigned long long)l.sync_copies, (unsigned long long)l.syncs);
}

/* ---- copies */
static ct_status bw_to(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  grads[0] = ct_to(g, n->in[0]->device, 0);
  return grads[0] ? CT_OK : ct_last_status();
}

/* Copy the contiguous src into the contiguous dst of the same dtype and size across devices. */
static ct_status raw_copy(ct_tensor *dst, ct_tensor *src, int non_blocking) {
  size_t nbytes = (size_t)ct_tensor_numel(src) * ct_dtype_size(src->dtype);
  if (!nbytes) return CT_OK;
  ct_status s;
  if (src->device.kind == CT_CPU && dst->device.kind == CT_CPU) {
    memcpy(ct__ptr(dst), ct__ptr(src), nbytes);
    return CT_OK;
  }
  if (src->device.kind == CT_CPU) { /* host to device */
    s = dst->storage->backend->memcpy(dst->device.index, ct__ptr(dst), ct__ptr(src), nbytes, 0, non_blocking);
    /* The CPU backend allocates pageable memory, so the copy blocked; pinned staging is the CUDA issue's. */
    if (s == CT_OK) ct__ledger_copy(src->device, dst->device, nbytes, false, true);
    return s;
  }
  if (dst->device.kind == CT_CPU) { /* device to host */
    s = src->storage->backend->memcpy(src->device.index, ct__ptr(dst), ct__ptr(src), nbytes, 1, 0);
    if (s == CT_OK) ct__ledger_copy(src->device, dst->device, nbytes, false, true), ct__ledger_sync();
    return s;
  }
  if (ct_device_eq(src->device, dst->device)) {
    s = src->storage->backend->memcpy(src->device.index, ct__ptr(dst), ct__ptr(src), nbytes, 2, non_blocking);
    if (s == CT_OK) ct__ledger_copy(src->device, dst->device, nbytes, false, false);
    return s;
  }
  /* between two GPUs: through the host, honestly counted as two copies */
  void *tmp = malloc(nbytes);
  if (!tmp) return ct__error(CT_ENOMEM, "ct_to: out of host memory staging %zu bytes between GPUs", nbytes);
  s = src->storage->backend->memcpy(src->device.index, tmp, ct__ptr(src), nbytes, 1, 0);
  if (s == CT_OK) s = dst->storage->backend->memcpy(dst->device.index, ct__ptr(dst), tmp, nbytes, 0, 0);
  free(tmp);
  if (s == CT_OK) ct__ledger_copy(src->device, CT_DEVICE_CPU, nbytes, false, true), ct__ledger_copy(CT_DEVICE_CPU, dst->device, nbytes, false, true);
  return s;
}

ct_tensor *ct_to(ct_tensor *t, ct_device dev, int flags) {
  if (!t) return NULL;
  if (ct_device_eq(t->device, dev) && !(flags & CT_COPY)) {
    ct_tensor_retain(t);
    ct__scope_track(t);
    return t;
  }
  ct_tensor *src = ct_contiguous(t);
  if (!src) return NULL;
  ct_tensor *out = ct__alloc(t->ndim, t->shape, t->dtype, dev);
  ct_status s = out ? raw_copy(out, src, flags & CT_NON_BLOCKING) : ct_last_status();
  ct_tensor_free(src);
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  ct__record(out, "to", bw_to, 1, &t);
  return out;
}

ct_status ct_copy_(ct_tensor *dst, ct_tensor *src) {
  if (!dst || !src) return ct__error(CT_EINVAL, "ct_copy_: NULL tensor");
  char a[160], b[160];
  ct_tensor *moved = NULL;
  if (!ct_device_eq(dst->device, src->device)) {
    src = moved = ct_to(src, dst->device, 0); /* the explicit copy the caller asked for, counted */
    if (!src) return ct_last_status();
  }
  ct_tensor *e = ct_expand(src, dst->ndim, dst->shape);
  ct_status s;
  if (!e) s = ct__error(CT_ESHAPE, "ct_copy_: source of shape %s does not broadcast to destination %s",
                        ct_shape_str(src, a, sizeof a), ct_shape_str(dst, b, sizeof b));
  else s = dst->storage->backend->copy(dst, e);
  ct_tensor_free(e);
  ct_tensor_free(moved);
  return s;
}

ct_status ct_to_host(ct_tensor *t, void *out, size_t nbytes, ct_dtype dt) {
  if (!t || !out) return ct__error(CT_EINVAL, "ct_to_host: NULL argument");
  size_t need = (size_t)ct_tensor_numel(t) * ct_dtype_size(dt);
  if (nbytes < need)
    return ct__error(CT_EINVAL, "ct_to_host: buffer of %zu bytes is too small for %lld elements of %s (%zu bytes)", nbytes,
                     (long long)ct_tensor_numel(t), ct_dtype_name(dt), need);
  ct_no_grad_begin();
  ct_tensor *c = ct_cast(t, dt);
  ct_no_grad_end();
  if (!c) return ct_last_status();
  ct_status s = CT_OK;
  if (c->device.kind == CT_CPU) memcpy(out, ct__ptr(c), need);
  else {
    s = c->storage->backend->memcpy(c->device.index, out, ct__ptr(c), need, 1, 0);
    if (s == CT_OK) ct__ledger_copy(c->device, CT_DEVICE_CPU, need, false, true), ct__ledger_sync();
  }
  ct_tensor_free(c);
  return s;
}

double ct_item(ct_tensor *t) {
  char a[160];
  if (!t) return ct__error(CT_EINVAL, "ct_item: NULL tensor"), NAN;
  if (ct_tensor_numel(t) != 1)
    return ct__error(CT_ESHAPE, "ct_item: only one-element tensors have an item, got shape %s", ct_shape_str(t, a, sizeof a)),
           NAN;
  double v;
  if (ct_to_host(t, &v, sizeof v, CT_F64) != CT_OK) return NAN;
  return v;
}
