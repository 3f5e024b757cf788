/* src/core/copy.c: the only paths between devices (ct_to, ct_copy_, ct_to_host, ct_item), the
 * ledger that counts every host<->device copy and synchronization point, and the sync-debug mode
 * that reports each implicit synchronization of those paths (cuttle/cuda.h). */
#include <math.h>
#include <stdio.h>
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
  if (!f) return (void)ct__null_status("ct_ledger_print", "f");
  ct_ledger l = ct_ledger_get();
  fprintf(f, "ledger: h2d %llu copies %.1f MB, d2h %llu copies %.1f MB, d2d %llu copies %.1f MB, pinned %llu, "
          "blocking %llu, syncs %llu\n",
          (unsigned long long)l.h2d_copies, l.h2d_bytes / 1e6, (unsigned long long)l.d2h_copies, l.d2h_bytes / 1e6,
          (unsigned long long)l.d2d_copies, l.d2d_bytes / 1e6, (unsigned long long)l.pinned_copies,
          (unsigned long long)l.sync_copies, (unsigned long long)l.syncs);
}

/* ---- sync-debug: report implicit synchronizations (torch.cuda.set_sync_debug_mode) */
static int sync_mode = -1; /* -1: not read from the environment yet */
static uint64_t sync_warnings;

int ct__sync_debug_action(int mode, ct_device_kind kind) {
  if (kind == CT_CPU) return 0; /* the host never waits for itself */
  return mode == CT_SYNC_DEBUG_WARN ? 1 : mode == CT_SYNC_DEBUG_ERROR ? 2 : 0;
}

int ct_get_sync_debug_mode(void) {
  int m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
  if (m < 0) {
    const char *e = getenv("CUTTLE_SYNC_DEBUG");
    m = e && (e[0] == '1' || e[0] == '2') && !e[1] ? e[0] - '0' : 0;
    int expect = -1;
    __atomic_compare_exchange_n(&sync_mode, &expect, m, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
  }
  return m;
}

ct_status ct_set_sync_debug_mode(int mode) {
  if (mode < CT_SYNC_DEBUG_OFF || mode > CT_SYNC_DEBUG_ERROR)
    return ct__error(CT_EINVAL, "ct_set_sync_debug_mode: mode must be 0 (off), 1 (warn) or 2 (error), got %d", mode);
  __atomic_store_n(&sync_mode, mode, __ATOMIC_RELAXED);
  return CT_OK;
}

uint64_t ct__sync_debug_warnings(void) { return __atomic_load_n(&sync_warnings, __ATOMIC_RELAXED); }

ct_status ct__sync_point(const char *op, ct_device dev, const char *what) {
  char name[32];
  int action = ct__sync_debug_action(ct_get_sync_debug_mode(), dev.kind);
  if (action == 0) return CT_OK;
  ct_device_str(dev, name, sizeof name);
  if (action == 1) {
    add(&sync_warnings, 1);
    fprintf(stderr, "cuttle: warning: %s synchronized the host with %s (%s); sync-debug mode is 1 (warn)\n", op, name, what);
    return CT_OK;
  }
  return ct__error(CT_EINVAL,
                   "%s: called a synchronizing operation on %s (%s) while sync-debug mode is 2 (error); use pinned memory "
                   "(ct_empty_pinned) with CT_NON_BLOCKING and one explicit ct_synchronize, or ct_set_sync_debug_mode(0)",
                   op, name, what);
}

/* ---- copies */
static ct_status bw_to(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  grads[0] = ct_to(g, n->in[0]->device, 0);
  return grads[0] ? CT_OK : ct_last_status();
}

/* Copy the contiguous src into the contiguous dst of the same dtype and size across devices. A
 * host<->device copy is asynchronous only when non_blocking is asked and the host side is pinned
 * (storage->pinned); the ledger and the sync-debug mode are told which it was. */
static ct_status raw_copy(const char *op, ct_tensor *dst, ct_tensor *src, int non_blocking) {
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
    s = dev->storage->backend->memcpy(dev->device.index, ct__ptr(dst), ct__ptr(src), nbytes, h2d ? 0 : 1, async);
    if (s == CT_OK) {
      ct__ledger_copy(src->device, dst->device, nbytes, pinned, !async);
      if (!h2d && !async) ct__ledger_sync();
    }
    return s;
  }
  if (ct_device_eq(src->device, dst->device)) {
    s = src->storage->backend->memcpy(src->device.index, ct__ptr(dst), ct__ptr(src), nbytes, 2, non_blocking);
    if (s == CT_OK) ct__ledger_copy(src->device, dst->device, nbytes, false, false);
    return s;
  }
  /* between two GPUs: through the host, honestly counted as two copies */
  snprintf(what, sizeof what, "copy of %zu bytes to another GPU, staged through pageable host memory", nbytes);
  if ((s = ct__sync_point(op, src->device, what)) != CT_OK) return s;
  void *tmp = ct__malloc(nbytes, "staging a copy between GPUs");
  if (!tmp) return CT_ENOMEM;
  s = src->storage->backend->memcpy(src->device.index, tmp, ct__ptr(src), nbytes, 1, 0);
  if (s == CT_OK) s = dst->storage->backend->memcpy(dst->device.index, ct__ptr(dst), tmp, nbytes, 0, 0);
  free(tmp);
  if (s == CT_OK) ct__ledger_copy(src->device, CT_DEVICE_CPU, nbytes, false, true), ct__ledger_copy(CT_DEVICE_CPU, dst->device, nbytes, false, true);
  return s;
}

ct_tensor *ct_to(ct_tensor *t, ct_device dev, int flags) {
  if (!t) return ct__null_arg("ct_to", "t");
  if (flags & ~(CT_COPY | CT_NON_BLOCKING))
    CT_FAIL_NULL(CT_EINVAL, "ct_to: unknown flags 0x%x (use 0, CT_COPY, CT_NON_BLOCKING or both)", (unsigned)flags);
  if (!ct__check_device("ct_to", dev)) return NULL;
  if (ct_device_eq(t->device, dev) && !(flags & CT_COPY)) return ct__retain_tracked(t);
  ct_tensor *src = ct_contiguous(t);
  if (!src) return NULL;
  /* A non-blocking copy to the host lands in memory pinned by the source device's backend, so it can
   * be asynchronous (as in torch); where that backend cannot pin, ct_empty_pinned_for gives ordinary
   * memory and the copy blocks. */
  int d2h_async = dev.kind == CT_CPU && t->device.kind != CT_CPU && (flags & CT_NON_BLOCKING);
  ct_tensor *out = d2h_async ? ct_empty_pinned_for(t->device, t->ndim, t->shape, t->dtype)
                             : ct__alloc(t->ndim, t->shape, t->dtype, dev);
  ct_status s = out ? raw_copy("ct_to", out, src, flags & CT_NON_BLOCKING) : ct_last_status();
  ct_tensor_free(src);
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  ct_node *n;
  if (ct__record(out, "to", bw_to, 1, &t, &n) != CT_OK) return ct_tensor_free(out), NULL;
  return out;
}

ct_status ct_copy_(ct_tensor *dst, ct_tensor *src) {
  if (!dst || !src) return ct__error(CT_EINVAL, "ct_copy_: NULL tensor");
  char a[160], b[160];
  ct_tensor *moved = NULL;
  if (!ct_device_eq(dst->device, src->device)) {
    src = moved = ct_to(src, dst->device, 0); /* the explicit copy the caller asked for, counted */
    if (!src) return ct__error_prefix("ct_copy_");
  }
  /* Equal shapes need no broadcast view, so the copy allocates nothing: ct_checkpoint_load relies
   * on that to apply a loaded state without a failure half way through. */
  int same = src->ndim == dst->ndim && memcmp(src->shape, dst->shape, (size_t)dst->ndim * sizeof(int64_t)) == 0;
  ct_tensor *e = same ? NULL : ct_expand(src, dst->ndim, dst->shape);
  ct_status s;
  if (same) s = dst->storage->backend->copy(dst, src);
  else if (!e && ct_last_status() == CT_ENOMEM) s = CT_ENOMEM;
  else if (!e)
    s = ct__error(CT_ESHAPE, "ct_copy_: source of shape %s does not broadcast to destination %s", ct_shape_str(src, a, sizeof a),
                  ct_shape_str(dst, b, sizeof b));
  else s = dst->storage->backend->copy(dst, e);
  ct_tensor_free(e);
  ct_tensor_free(moved);
  return s;
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
  ct_no_grad_begin();
  ct_tensor *c = ct_cast(t, dt);
  ct_no_grad_end();
  if (!c) return ct_last_status();
  ct_status s = CT_OK;
  if (c->device.kind == CT_CPU) memcpy(out, ct__ptr(c), need);
  else if (need) {
    s = c->storage->backend->memcpy(c->device.index, out, ct__ptr(c), need, 1, 0);
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
