/* src/core/cuda.c: the device-neutral half of cuttle/cuda.h: memory figures, TF32, pinned host
 * memory, streams and events. Each function validates its arguments and calls the backend's vtable
 * entry (backend.h), so the devices differ only in their backend, never by #ifdef or by a kind's
 * name here: which backend pins host memory is asked of the registry (ct__pinning_backend). The
 * sync-debug mode lives in sync_debug.c and the ledger in ledger.c. */
#include <stdio.h>
#include <string.h>
#include "core/backend.h"

/* The backend of d when d exists, else NULL with CT_EDEVICE set (naming op and d). */
static const ct_backend *backend_of(const char *op, ct_device d) {
  char name[32], kind[32];
  if (!ct__backend(d.kind) || !ct_device_available(d)) {
    int known = (unsigned)d.kind < CT_DEVICE_KIND_COUNT;
    ct_device_str(d, name, sizeof name);
    size_t i = 0; /* the kind's registry name in capitals ("CUDA"), for the message */
    for (; name[i] && name[i] != ':' && i + 1 < sizeof kind; i++) kind[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    kind[i] = 0;
    ct__error(CT_EDEVICE, "%s: device %s does not exist on this machine (%d %s device(s)%s%s%s)", op, name,
              known ? ct_device_count(d.kind) : 0, kind, known && !ct__backend(d.kind) ? "; cuttle was built without the " : "",
              known && !ct__backend(d.kind) ? kind : "", known && !ct__backend(d.kind) ? " backend" : "");
    return NULL;
  }
  return ct__backend(d.kind);
}

/* ---- memory */
ct_status ct_memory_stats_get(ct_device d, ct_memory_stats *out) {
  if (!out) return ct__error(CT_EINVAL, "ct_memory_stats_get: out is NULL");
  memset(out, 0, sizeof *out);
  const ct_backend *be = backend_of("ct_memory_stats_get", d);
  if (!be) return ct_last_status();
  ct_status s = be->memory_stats ? be->memory_stats(d.index, out) : CT_OK;
  /* pinned host memory belongs to the CPU's figures: the sum over every backend that pins */
  for (int k = 0; s == CT_OK && d.kind == CT_CPU && k < CT_DEVICE_KIND_COUNT; k++) {
    const ct_backend *pb = ct__backend((ct_device_kind)k);
    if (!pb || !pb->pinned_stats) continue;
    ct_memory_stats p = {0};
    pb->pinned_stats(&p);
    out->pinned_allocated += p.pinned_allocated;
    out->pinned_reserved += p.pinned_reserved;
    out->num_pinned_allocs += p.num_pinned_allocs;
  }
  return s;
}

ct_status ct_empty_cache(ct_device d) {
  const ct_backend *be = backend_of("ct_empty_cache", d);
  if (!be) return ct_last_status();
  if (ct__capture_guard("ct_empty_cache", d) != CT_OK) return ct_last_status();
  if (d.kind == CT_CPU && ct__capture_running()) /* cudaFreeHost waits for every device */
    return ct__error(CT_EINVAL, "ct_empty_cache: a graph capture runs, and freeing pinned host memory would wait for "
                     "its device; call it after ct_device_graph_capture_end");
  ct_status s = be->empty_cache ? be->empty_cache(d.index) : CT_OK;
  for (int k = 0; s == CT_OK && d.kind == CT_CPU && k < CT_DEVICE_KIND_COUNT; k++) {
    const ct_backend *pb = ct__backend((ct_device_kind)k);
    if (pb && pb->pinned_empty_cache) pb->pinned_empty_cache();
  }
  return s;
}

ct_status ct_reset_peak_memory_stats(ct_device d) {
  const ct_backend *be = backend_of("ct_reset_peak_memory_stats", d);
  if (!be) return ct_last_status();
  return be->reset_peak_memory_stats ? be->reset_peak_memory_stats(d.index) : CT_OK;
}

/* ---- TF32 */
static int allow_tf32;

void ct_set_allow_tf32(int on) {
  __atomic_store_n(&allow_tf32, on ? 1 : 0, __ATOMIC_RELAXED);
  for (int k = 0; k < CT_DEVICE_KIND_COUNT; k++) {
    const ct_backend *be = ct__backend((ct_device_kind)k);
    if (be && be->set_allow_tf32) be->set_allow_tf32(on ? 1 : 0);
  }
}

int ct_allow_tf32(void) { return __atomic_load_n(&allow_tf32, __ATOMIC_RELAXED); }

/* ---- pinned host memory */

/* A backend pins host memory when it has pinned_alloc and at least one device. For a device other
 * than the CPU only its own backend counts: another backend's pinned blocks would not be fenced
 * against this device's queued copies (each pinned cache waits only for its own backend's copy
 * queues), so copies with them are blocking. For the CPU (memory not meant for one device yet), the
 * first backend in registry order that pins. */
const ct_backend *ct__pinning_backend(ct_device d) {
  if (!ct_device_available(d)) return NULL; /* cpu:3 no more exists than cuda:99 */
  if (d.kind != CT_CPU) {
    const ct_backend *be = ct__backend(d.kind);
    return be && be->pinned_alloc ? be : NULL;
  }
  for (int k = 0; k < CT_DEVICE_KIND_COUNT; k++) {
    const ct_backend *be = ct__backend((ct_device_kind)k);
    if (be && be->pinned_alloc && be->device_count() > 0) return be;
  }
  return NULL;
}

/* ct__alloc_custom's allocation hook takes no context, so the backend chosen by the calling thread
 * travels in a thread-local; the release hook finds it in the storage (release_ctx). */
static _Thread_local const ct_backend *pinning_now;
static void *pinned_alloc(size_t nbytes) { return pinning_now->pinned_alloc(nbytes); }
static void pinned_release(ct_storage *s) { ((const ct_backend *)s->release_ctx)->pinned_free(s->data, s->nbytes); }

int ct__pinned_by(const ct_storage *s, const ct_backend *be) {
  return s && be && s->pinned && s->release == pinned_release && s->release_ctx == (void *)be;
}

static ct_tensor *empty_pinned(const char *op, const ct_backend *be, int ndim, const int64_t *shape, ct_dtype dt) {
  if (!ct__check_new(op, ndim, shape, dt, CT_DEVICE_CPU)) return NULL;
  if (!be) return ct_empty(ndim, shape, dt, CT_DEVICE_CPU); /* nothing can pin: ordinary memory */
  pinning_now = be;
  return ct__alloc_custom(ndim, shape, dt, CT_DEVICE_CPU, pinned_alloc, pinned_release, (void *)be, true);
}

ct_tensor *ct_empty_pinned(int ndim, const int64_t *shape, ct_dtype dt) {
  return empty_pinned("ct_empty_pinned", ct__pinning_backend(CT_DEVICE_CPU), ndim, shape, dt);
}

ct_tensor *ct_empty_pinned_for(ct_device d, int ndim, const int64_t *shape, ct_dtype dt) {
  char name[32];
  if (!ct_device_available(d))
    CT_FAIL_NULL(CT_EDEVICE, "ct_empty_pinned_for: device %s does not exist on this machine (%d device(s) of its kind)",
                 ct_device_str(d, name, sizeof name), ct_device_count(d.kind));
  return empty_pinned("ct_empty_pinned_for", ct__pinning_backend(d), ndim, shape, dt);
}

int ct_device_can_pin(ct_device d) { return ct__pinning_backend(d) != NULL; }

int ct_tensor_is_pinned(const ct_tensor *t) { return t && t->device.kind == CT_CPU && t->storage->pinned; }

ct_tensor *ct_pin_memory(ct_tensor *t) {
  char name[32];
  if (!t) return ct__null_arg("ct_pin_memory", "t");
  if (t->device.kind != CT_CPU)
    CT_FAIL_NULL(CT_EDEVICE, "ct_pin_memory: only CPU tensors can be pinned, got a tensor on %s (it already lives on the device)",
                 ct_device_str(t->device, name, sizeof name));
  if (ct_tensor_is_pinned(t)) return ct__retain_tracked(t);
  ct_tensor *p = ct_empty_pinned(t->ndim, t->shape, t->dtype);
  if (!p) return NULL;
  ct_status s = CT_KERNEL_CALL(p->storage->backend, copy, __func__, t, p, t); /* same dtype: an element-wise copy, any strides */
  if (s != CT_OK) {
    ct_tensor_free(p);
    return NULL;
  }
  return p;
}

/* ---- streams and events */
struct ct_stream {
  ct_device device;
  void *handle; /* the backend's; NULL on the CPU */
};
struct ct_event {
  ct_device device;
  void *handle;
};

static const ct_backend *stream_backend(const char *op, ct_device d) {
  const ct_backend *be = backend_of(op, d);
  if (be && !be->event_record) {
    ct__error(CT_EUNSUPPORTED, "%s: the %s backend has no streams or events", op, be->name);
    return NULL;
  }
  return be;
}

ct_stream *ct_stream_new(ct_device d) {
  const ct_backend *be = stream_backend("ct_stream_new", d);
  if (!be) return NULL;
  ct_stream *s = ct__calloc(1, sizeof *s, "a stream handle");
  if (!s) return NULL;
  s->device = d;
  if (be->stream_new(d.index, &s->handle) != CT_OK) {
    free(s);
    return NULL;
  }
  return s;
}

void ct_stream_free(ct_stream *s) {
  if (!s) return;
  ct__backend(s->device.kind)->stream_free(s->device.index, s->handle);
  free(s);
}

ct_device ct_stream_device(const ct_stream *s) {
  if (!s) return ct__null_arg("ct_stream_device", "s"), (ct_device){CT_DEVICE_KIND_COUNT, -1};
  return s->device;
}
void *ct_stream_native(ct_stream *s) { return s ? s->handle : NULL; }

ct_status ct_stream_synchronize(ct_stream *s) {
  if (!s) return ct__error(CT_EINVAL, "ct_stream_synchronize: stream is NULL");
  if (ct__capture_guard("ct_stream_synchronize", s->device) != CT_OK) return ct_last_status();
  ct__ledger_sync();
  return ct__backend(s->device.kind)->stream_synchronize(s->device.index, s->handle);
}

ct_status ct_stream_wait_event(ct_stream *s, ct_event *e) {
  char a[32], b[32];
  if (!e) return ct__error(CT_EINVAL, "ct_stream_wait_event: event is NULL");
  ct_device d = s ? s->device : e->device;
  if (d.kind != e->device.kind)
    return ct__error(CT_EDEVICE, "ct_stream_wait_event: the stream lives on %s and the event on %s; a stream can only wait "
                     "for an event of the same kind of device",
                     ct_device_str(d, a, sizeof a), ct_device_str(e->device, b, sizeof b));
  return ct__backend(d.kind)->stream_wait_event(d.index, s ? s->handle : NULL, e->handle);
}

static ct_event *record(const ct_backend *be, ct_device d, void *stream) {
  ct_event *e = ct__calloc(1, sizeof *e, "an event handle");
  if (!e) return NULL;
  e->device = d;
  if (be->event_record(d.index, stream, &e->handle) != CT_OK) {
    free(e);
    return NULL;
  }
  return e;
}

ct_event *ct_event_record(ct_device d) {
  const ct_backend *be = stream_backend("ct_event_record", d);
  return be ? record(be, d, NULL) : NULL;
}

ct_event *ct_stream_record_event(ct_stream *s) {
  if (!s) CT_FAIL_NULL(CT_EINVAL, "ct_stream_record_event: stream is NULL");
  return record(ct__backend(s->device.kind), s->device, s->handle);
}

void ct_event_free(ct_event *e) {
  if (!e) return;
  ct__backend(e->device.kind)->event_free(e->device.index, e->handle);
  free(e);
}

ct_status ct_event_synchronize(ct_event *e) {
  if (!e) return ct__error(CT_EINVAL, "ct_event_synchronize: event is NULL");
  if (ct__capture_guard("ct_event_synchronize", e->device) != CT_OK) return ct_last_status();
  ct__ledger_sync();
  return ct__backend(e->device.kind)->event_synchronize(e->device.index, e->handle);
}

int ct_event_query(ct_event *e) {
  if (!e) return ct__error(CT_EINVAL, "ct_event_query: event is NULL");
  if (ct__capture_guard("ct_event_query", e->device) != CT_OK) return ct_last_status();
  return ct__backend(e->device.kind)->event_query(e->device.index, e->handle);
}

ct_status ct_event_elapsed_ms(ct_event *start, ct_event *end, double *ms) {
  char a[32], b[32];
  if (!start || !end || !ms) return ct__error(CT_EINVAL, "ct_event_elapsed_ms: NULL argument");
  if (!ct_device_eq(start->device, end->device))
    return ct__error(CT_EDEVICE, "ct_event_elapsed_ms: start was recorded on %s and end on %s; time events of one device",
                     ct_device_str(start->device, a, sizeof a), ct_device_str(end->device, b, sizeof b));
  if (ct__capture_guard("ct_event_elapsed_ms", start->device) != CT_OK) return ct_last_status();
  ct__ledger_sync();
  return ct__backend(start->device.kind)->event_elapsed_ms(start->device.index, start->handle, end->handle, ms);
}

/* ---- graphs (torch.cuda.CUDAGraph). One capture at a time in the process: core/capture.c keeps
 * its device, so that the core refuses the synchronizations a capture cannot hold (ct__sync_point,
 * ct_synchronize, the stream and event waits above, ct_empty_cache) with a message of its own,
 * before the driver would invalidate the capture, and records them for capture_end. */
struct ct_device_graph {
  ct_device device;
  void *handle;
};

static const ct_backend *graph_backend(const char *op, ct_device d) {
  const ct_backend *be = backend_of(op, d);
  if (be && !be->graph_capture_begin) {
    char name[32];
    ct__error(CT_EUNSUPPORTED, "%s: %s cannot capture graphs (the %s backend has none; CUDA devices can)", op,
              ct_device_str(d, name, sizeof name), be->name);
    return NULL;
  }
  return be;
}

int ct_device_can_capture(ct_device d) {
  const ct_backend *be = ct__backend(d.kind);
  return be && be->graph_capture_begin && ct_device_available(d);
}

ct_status ct_device_graph_capture_begin(ct_device d) {
  const ct_backend *be = graph_backend("ct_device_graph_capture_begin", d);
  if (!be) return ct_last_status();
  if (__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED) == CT_PROFILE_SYNC)
    return ct__error(CT_EINVAL, "ct_device_graph_capture_begin: the profiler's sync mode waits for the device after "
                     "every kernel, which a capture cannot hold; profile with CT_PROFILE_HOST or none");
  if (!ct__capture_claim(d))
    return ct__error(CT_EINVAL, "ct_device_graph_capture_begin: a capture is already running (one at a time); end it "
                     "with ct_device_graph_capture_end first");
  ct_status s = be->graph_capture_begin(d.index);
  if (s != CT_OK) ct__capture_release();
  return s;
}

ct_device_graph *ct_device_graph_capture_end(ct_device d) {
  char name[32];
  const ct_backend *be = graph_backend("ct_device_graph_capture_end", d);
  if (!be) return NULL;
  if (!ct__capturing(d))
    CT_FAIL_NULL(CT_EINVAL, "ct_device_graph_capture_end: no capture is running on %s", ct_device_str(d, name, sizeof name));
  ct_device_graph *g = ct__calloc(1, sizeof *g, "a graph handle");
  void *h = NULL;
  /* the backend's capture ends even when the handle could not be made, so the stream is free again */
  ct_status s = be->graph_capture_end(d.index, &h);
  const char *refused = ct__capture_refused();
  char op[64] = "";
  if (refused) snprintf(op, sizeof op, "%s", refused);
  ct__capture_release();
  if (s == CT_OK && op[0]) /* the driver's capture is whole, but without the refused op */
    s = ct__error(CT_EINVAL, "ct_device_graph_capture_end: the capture on %s is incomplete: %s was refused inside it "
                  "(its error said why); nothing of it is kept", ct_device_str(d, name, sizeof name), op);
  if (s != CT_OK || !g) {
    if (h) be->graph_free(d.index, h);
    free(g);
    return NULL;
  }
  g->device = d, g->handle = h;
  return g;
}

ct_status ct_device_graph_replay(ct_device_graph *g) {
  if (!g) return ct__error(CT_EINVAL, "ct_device_graph_replay: graph is NULL");
  return ct__backend(g->device.kind)->graph_replay(g->device.index, g->handle);
}

void ct_device_graph_free(ct_device_graph *g) {
  if (!g) return;
  ct__backend(g->device.kind)->graph_free(g->device.index, g->handle);
  free(g);
}
