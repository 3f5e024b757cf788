/* src/ops/autocast.c: autocast regions (cuttle/autocast.h), the per-thread cast cache, and the hook
 * the op front-ends call (src/ops/autocast.h).
 *
 * The state is thread-local, as PyTorch's (c10/core/impl/LocalDispatchKeySet and the autocast
 * TLS of aten/src/ATen/autocast_mode.cpp): a stack of regions (kind, dtype, enabled), a counter of
 * hooks under way (while it is non-zero the hooks do nothing: the ops an autocast op runs on its
 * casts are not autocast again), and the cache of parameter casts, emptied when the stack does. */
#include <string.h>
#include "autograd/node.h"
#include "ops/autocast.h"

#define MAX_DEPTH 64

typedef struct {
  ct_device_kind kind;
  ct_dtype dtype;
  bool enabled;
} region;

typedef struct {
  ct_tensor *src;  /* the parameter (a reference outside any scope) */
  ct_tensor *cast; /* its cast values, without a graph; dtype = cast->dtype (a reference outside any scope) */
} cache_entry;

static _Thread_local region regions[MAX_DEPTH];
static _Thread_local int depth;
static _Thread_local int excluded;
static _Thread_local cache_entry *cache;
static _Thread_local size_t cache_n, cache_cap;
static _Thread_local int64_t casts_made;

static int valid_kind(ct_device_kind kind) { return (unsigned)kind < CT_DEVICE_KIND_COUNT; }

/* The innermost region of kind, or NULL. */
static const region *innermost(ct_device_kind kind) {
  for (int i = depth; i-- > 0;)
    if (regions[i].kind == kind) return &regions[i];
  return NULL;
}

/* ---- the public API */
ct_status ct_autocast_begin(ct_device_kind kind, ct_dtype dtype, int enabled) {
  if (!valid_kind(kind))
    return ct__error(CT_EINVAL, "autocast_begin: invalid device kind %d (use CT_CPU, CT_CUDA or CT_OPENCL)", (int)kind);
  if (dtype != CT_F16 && dtype != CT_BF16)
    return ct__error(CT_EDTYPE, "autocast_begin: dtype must be float16 or bfloat16 (the lower precision ops run in), got %s",
                     ct_dtype_name(dtype));
  if (depth == MAX_DEPTH)
    return ct__error(CT_EINVAL, "autocast_begin: more than %d nested autocast regions on this thread (is a ct_autocast_end "
                     "missing?)", MAX_DEPTH);
  regions[depth++] = (region){kind, dtype, enabled != 0};
  return CT_OK;
}

/* Drop every reference the cache holds. Its references are outside any scope, so they go back
 * with ct__tensor_decref: ct_tensor_free would take a reference of the scope that holds the same
 * tensor instead. */
static void cache_clear(void) {
  for (size_t i = 0; i < cache_n; i++) {
    ct__tensor_decref(cache[i].cast);
    ct__tensor_decref(cache[i].src);
  }
  free(cache);
  cache = NULL, cache_n = cache_cap = 0;
}

ct_status ct_autocast_end(void) {
  if (depth == 0) return ct__error(CT_EINVAL, "autocast_end: no autocast region is open on this thread (each ct_autocast_end "
                                   "closes one ct_autocast_begin of the same thread)");
  if (--depth == 0) cache_clear();
  return CT_OK;
}

int ct_autocast_enabled(ct_device_kind kind) {
  if (!valid_kind(kind)) return ct__error(CT_EINVAL, "autocast_enabled: invalid device kind %d", (int)kind), 0;
  const region *r = innermost(kind);
  return r && r->enabled;
}

ct_dtype ct_autocast_dtype(ct_device_kind kind) {
  if (!valid_kind(kind)) return ct__error(CT_EINVAL, "autocast_dtype: invalid device kind %d", (int)kind), CT_DTYPE_COUNT;
  const region *r = innermost(kind);
  return r ? r->dtype : kind == CT_CPU ? CT_BF16 : CT_F16;
}

/* ---- the cast cache */
static cache_entry *cache_find(const ct_tensor *t, ct_dtype dt) {
  for (size_t i = 0; i < cache_n; i++)
    if (cache[i].src == t && cache[i].cast->dtype == dt) return &cache[i];
  return NULL;
}

int64_t ct__autocast_cache_size(void) { return (int64_t)cache_n; }

ct_tensor *ct__autocast_cached(const ct_tensor *t, ct_dtype dt) {
  cache_entry *e = t ? cache_find(t, dt) : NULL;
  return e ? e->cast : NULL;
}

int64_t ct__autocast_casts_made(void) { return casts_made; }

/* The backward of a use of a cached cast: the gradient as it is; the engine casts it to the
 * parameter's dtype (float32) when it accumulates, as for ct_cast's own node. */
static ct_status bw_cached_cast(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  (void)n;
  grads[0] = ct_tensor_retain(g);
  return CT_OK;
}

/* One use of the cached cast data of src: a new header on data's storage with its own "to" node
 * from src (when grad mode is on and src requires grad), as a reference outside any scope. Each use
 * has its own node because ct_backward frees the nodes it walks: a node shared by two forward
 * passes would leave the second one's graph cut from the parameter after the first backward, and
 * its gradient silently missing (PyTorch's nodes outlive a backward; cuttle's do not). */
static ct_tensor *use_of(ct_tensor *data, ct_tensor *src) {
  ct_tensor *v = ct__view_of(data, data->ndim, data->shape, data->stride, data->offset);
  ct_node *n;
  if (!v || ct__record(v, "to", bw_cached_cast, 1, &src, &n) != CT_OK) return ct_tensor_free(v), NULL;
  ct__untrack(v);
  return v;
}

/* t cast to dt, as a reference outside any scope (the hook's frame releases it with
 * ct__tensor_decref). torch's cached_cast caches only what can be shared safely: the float32 leaf
 * that requires grad (a parameter, whose value does not change within a region), cast to the lower
 * precision. The cache keeps the cast values, made without a graph; every use gets its own node
 * (use_of), so a cast cached under no-grad still carries gradients when used with grad mode on. */
static ct_tensor *cast(ct_tensor *t, ct_dtype dt) {
  int cacheable = t->dtype == CT_F32 && (dt == CT_F16 || dt == CT_BF16) && t->requires_grad && !t->grad_fn;
  cache_entry *e = cacheable ? cache_find(t, dt) : NULL;
  if (e) return use_of(e->cast, t);
  if (!cacheable) {
    ct_tensor *c = ct_cast(t, dt);
    if (c) ct__untrack(c), casts_made++;
    return c;
  }
  ct_no_grad_begin();
  ct_tensor *data = ct_cast(t, dt);
  ct_no_grad_end();
  if (!data) return NULL;
  ct__untrack(data);
  casts_made++;
  ct_tensor *v = use_of(data, t);
  if (v && cache_n == cache_cap) {
    size_t cap = cache_cap ? 2 * cache_cap : 16;
    cache_entry *grown = ct__realloc(cache, cap * sizeof *grown, "autocast's cast cache");
    if (grown) cache = grown, cache_cap = cap;
    else ct_clear_error(); /* the cache only saves work: the op goes on with an uncached cast */
  }
  if (v && cache_n < cache_cap) cache[cache_n++] = (cache_entry){ct_tensor_retain(t), data}; /* data's reference */
  else ct__tensor_decref(data); /* v holds the storage */
  return v;
}

/* ---- the hook */

/* Whether t takes part in the policy for kind: a floating tensor, not float64 (torch's
 * is_autocast_eligible, and its casts leave doubles alone), on a device of that kind. */
static int eligible(const ct_tensor *t, ct_device_kind kind) {
  return t && t->device.kind == kind && ct_dtype_is_floating(t->dtype) && t->dtype != CT_F64;
}

/* The dtype the policy casts the eligible inputs to, or CT_DTYPE_COUNT when autocast is off here
 * or no input needs a cast. */
static ct_dtype target(ct__autocast_policy p, int n, ct_tensor *const *ts) {
  if (depth == 0 || excluded) return CT_DTYPE_COUNT;
  ct_device_kind kind = CT_DEVICE_KIND_COUNT;
  for (int i = 0; i < n && kind == CT_DEVICE_KIND_COUNT; i++)
    if (ts[i]) kind = ts[i]->device.kind;
  const region *r = valid_kind(kind) ? innermost(kind) : NULL;
  if (!r || !r->enabled) return CT_DTYPE_COUNT;
  if (p == CT__AUTOCAST_F32_GPU && kind != CT_CUDA && kind != CT_OPENCL) return CT_DTYPE_COUNT;
  ct_dtype dt = p == CT__AUTOCAST_LOWER                                 ? r->dtype
                : p == CT__AUTOCAST_F32 || p == CT__AUTOCAST_F32_GPU ? CT_F32
                                                                      : CT_DTYPE_COUNT;
  if (p == CT__AUTOCAST_PROMOTE) /* torch's promote_type: float32 wins; float16 with bfloat16 gives float32 too */
    for (int i = 0; i < n; i++)
      if (eligible(ts[i], kind)) dt = dt == CT_DTYPE_COUNT ? ts[i]->dtype : ct_promote_types(dt, ts[i]->dtype);
  for (int i = 0; i < n; i++)
    if (eligible(ts[i], kind) && ts[i]->dtype != dt) return dt;
  return CT_DTYPE_COUNT;
}

static void frame_free(ct__autocast_frame *f) {
  for (int i = 0; i < f->n; i++) ct__tensor_decref(f->own[i]);
  if (f->list) {
    for (int i = 0; i < f->n_list; i++)
      if (f->list[f->n_list + i]) ct__tensor_decref(f->list[f->n_list + i]);
    free(f->list);
  }
  f->n = 0, f->list = NULL, f->n_list = 0;
}

int ct__autocast_args(ct__autocast_frame *f, ct__autocast_policy p, int n, ct_tensor **const *args) {
  f->n = 0, f->list = NULL, f->n_list = 0;
  if (depth == 0 || excluded) return 0; /* the common case, decided without a look at the inputs */
  CT_ASSERT(n <= CT__AUTOCAST_MAX_ARGS);
  ct_tensor *ts[CT__AUTOCAST_MAX_ARGS] = {0};
  for (int i = 0; i < n; i++) ts[i] = *args[i];
  ct_dtype dt = target(p, n, ts);
  if (dt == CT_DTYPE_COUNT) return 0;
  ct_device_kind kind = CT_DEVICE_KIND_COUNT;
  for (int i = 0; i < n && kind == CT_DEVICE_KIND_COUNT; i++)
    if (ts[i]) kind = ts[i]->device.kind;
  for (int i = 0; i < n; i++) {
    if (!eligible(ts[i], kind) || ts[i]->dtype == dt) continue;
    ct_tensor *c = cast(ts[i], dt);
    if (!c) return frame_free(f), -1;
    f->own[f->n++] = c;
    *args[i] = c;
  }
  excluded++;
  return 1;
}

int ct__autocast_list(ct__autocast_frame *f, ct__autocast_policy p, int n, ct_tensor *const **tsp) {
  f->n = 0, f->list = NULL, f->n_list = 0;
  if (depth == 0 || excluded) return 0;
  ct_tensor *const *ts = *tsp;
  ct_dtype dt = target(p, n, ts);
  if (dt == CT_DTYPE_COUNT) return 0;
  ct_device_kind kind = ts[0]->device.kind;
  f->list = ct__calloc(2 * (size_t)n, sizeof *f->list, "autocast's list of cast inputs");
  if (!f->list) return -1;
  f->n_list = n;
  for (int i = 0; i < n; i++) {
    f->list[i] = ts[i];
    if (!eligible(ts[i], kind) || ts[i]->dtype == dt) continue;
    ct_tensor *c = cast(ts[i], dt);
    if (!c) return frame_free(f), -1;
    f->list[n + i] = f->list[i] = c;
  }
  *tsp = f->list;
  excluded++;
  return 1;
}

ct_tensor *ct__autocast_release(ct__autocast_frame *f, ct_tensor *result) {
  excluded--;
  frame_free(f);
  return result;
}
