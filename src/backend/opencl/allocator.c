/* src/backend/opencl/allocator.c: the caching allocator, one per device, and the device addresses
 * that stand for buffers (opencl_backend.h). Layer 2 of the folder: it calls context.c (the
 * cl_context its buffers belong to, the queues it finishes) and device.c only. The allocators are
 * kept in a table of their own, one made on a device's first allocation, after its context; the
 * context knows nothing of them.
 *
 * clCreateBuffer and clReleaseMemObject cost a driver call each (PoCL: a host malloc and its
 * bookkeeping), so freed buffers are kept and handed out again. Requests are rounded up (to 512 B up
 * to 1 MiB, to 2 MiB above) and a request takes the smallest cached buffer of at least its rounded
 * size but at most twice it (buffers are never split). Every kernel and blocking copy runs on the
 * device's in-order compute queue, and the compute queue waits for every non-blocking copy queued on
 * the copy queue (a barrier, copy.c), so a buffer freed by the host while queued work still uses it
 * is only reused by work queued after that.
 *
 * Each buffer sits in a slot of the allocator's slot table for as long as it exists (live or
 * cached); the slot gives the buffer's address (slot + 1) << CT_OCL_SLOT_BITS.
 *
 * Statistics as the CUDA allocator's: allocated, reserved (allocated + cached), peak allocated, and
 * the number of clCreateBuffer calls. Out of memory: a request above the device's maximum buffer
 * size (CL_DEVICE_MAX_MEM_ALLOC_SIZE) fails at once; a request that would take reserved memory past
 * the device's global memory, or a failed clCreateBuffer, first empties the cache and retries once;
 * then alloc returns NULL with CT_ENOMEM, naming the bytes asked, held and the device's limits. A
 * driver that reports running out of memory later, at an enqueue (ct__ocl_call_error), gets the same
 * figures. */
#include <string.h>
#include "core/caching.h"
#include "backend/opencl/opencl_backend.h"

typedef struct {
  cl_mem mem; /* NULL: a free slot */
  size_t size;
  int live;   /* 1: held by a tensor; 0: cached */
} slot;

typedef struct {
  int index;
  ct__ocl_ctx *ctx; /* the device's context, which lives as long as the process */
  pthread_mutex_t lock;
  slot *slots;
  size_t nslots, cap;
  size_t allocated, reserved, peak, cached;
  uint64_t num_mallocs;
} allocator;


static void *addr_of(size_t s) { return (void *)(uintptr_t)(((uint64_t)s + 1) << CT_OCL_SLOT_BITS); }

static allocator *allocators[CT_OCL_MAX_DEVICES]; /* written once each, under allocators_lock */
static pthread_mutex_t allocators_lock = PTHREAD_MUTEX_INITIALIZER;

/* The allocator of device index when it exists, else NULL (no error): nothing was allocated there. */
static allocator *allocator_peek(int index) {
  if (index < 0 || index >= CT_OCL_MAX_DEVICES) return NULL;
  return __atomic_load_n(&allocators[index], __ATOMIC_ACQUIRE);
}

/* The allocator of device index, made after the device's context on first use; NULL with
 * CT_EDEVICE / CT_EBACKEND (the context) or CT_ENOMEM set. */
static allocator *allocator_get(int index) {
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  if (!c) return NULL;
  allocator *a = allocator_peek(index);
  if (a) return a;
  pthread_mutex_lock(&allocators_lock);
  if (!(a = allocators[index]) && (a = calloc(1, sizeof *a))) {
    a->index = index;
    a->ctx = c;
    pthread_mutex_init(&a->lock, NULL);
    __atomic_store_n(&allocators[index], a, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&allocators_lock);
  if (!a) CT_FAIL_NULL(CT_ENOMEM, "opencl:%d: out of host memory for the allocator", index);
  return a;
}

/* Release every cached buffer; the caller holds a->lock. */
static void release_cached(allocator *a) {
  for (size_t i = 0; i < a->nslots; i++) {
    slot *s = &a->slots[i];
    if (!s->mem || s->live) continue;
    clReleaseMemObject(s->mem);
    a->reserved -= s->size;
    a->cached -= s->size;
    s->mem = NULL;
    s->size = 0;
  }
}

/* A free slot index, growing the table; (size_t)-1 when out of host memory. */
static size_t free_slot(allocator *a) {
  for (size_t i = 0; i < a->nslots; i++)
    if (!a->slots[i].mem) return i;
  if (a->nslots == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    slot *ns = ct__realloc(a->slots, cap * sizeof *ns, "the OpenCL allocator's slot table");
    if (!ns) return (size_t)-1;
    a->slots = ns;
    a->cap = cap;
  }
  a->slots[a->nslots] = (slot){0};
  return a->nslots++;
}

static void *oom(allocator *a, size_t nbytes, size_t size, const char *why) {
  char b[6][32];
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(a->index);
  ct__error(CT_ENOMEM,
            "opencl:%d: out of memory: asked for %s (%zu bytes, %s after rounding); %s. cuttle's allocator holds %s "
            "(%s allocated by tensors, the rest cached); the device allows %s per buffer and has %s of global memory. "
            "Free tensors, call ct_empty_cache, or use smaller batches",
            a->index, ct__bytes_human(nbytes, b[0], 32), nbytes, ct__bytes_human(size, b[1], 32), why, ct__bytes_human(a->reserved, b[2], 32),
            ct__bytes_human(a->allocated, b[3], 32), ct__bytes_human(d->max_alloc, b[4], 32), ct__bytes_human(d->global_mem, b[5], 32));
  return NULL;
}

int ct__ocl_is_oom(cl_int e) {
  return e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY;
}

ct_status ct__ocl_call_error(int index, const char *what, cl_int e) {
  if (!ct__ocl_is_oom(e)) return ct__error(CT_EBACKEND, "opencl:%d: %s failed: %s", index, what, ct__ocl_errstr(e));
  ct_memory_stats st = {0};
  ct__ocl_memory_stats(index, &st);
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  char b[3][32];
  return ct__error(CT_ENOMEM,
                   "opencl:%d: out of memory: %s failed with %s. cuttle's allocator holds %s (%s allocated by tensors, the "
                   "rest cached); the device has %s of global memory. Free tensors, call ct_empty_cache, or use smaller "
                   "batches",
                   index, what, ct__ocl_errstr(e), ct__bytes_human(st.reserved, b[0], 32), ct__bytes_human(st.allocated, b[1], 32),
                   ct__bytes_human(d ? d->global_mem : 0, b[2], 32));
}

void *ct__ocl_alloc(int index, size_t nbytes) {
  allocator *a = allocator_get(index);
  if (!a) return NULL;
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  ct__ocl_ctx *c = a->ctx;
  size_t size = ct__cache_round(nbytes);
  if (nbytes > d->max_alloc || size > ((size_t)1 << CT_OCL_SLOT_BITS)) {
    pthread_mutex_lock(&a->lock);
    void *r = oom(a, nbytes, size, "that is more than one buffer can hold");
    pthread_mutex_unlock(&a->lock);
    return r;
  }
  if (size > d->max_alloc) size = nbytes; /* rounding must not push a legal request over the limit */
  pthread_mutex_lock(&a->lock);
  size_t best = (size_t)-1;
  for (size_t i = 0; i < a->nslots; i++) {
    slot *s = &a->slots[i];
    if (s->mem && !s->live && s->size >= size && s->size <= 2 * size && (best == (size_t)-1 || s->size < a->slots[best].size))
      best = i;
  }
  if (best != (size_t)-1) {
    slot *s = &a->slots[best];
    s->live = 1;
    a->cached -= s->size;
    a->allocated += s->size;
    if (a->allocated > a->peak) a->peak = a->allocated;
    pthread_mutex_unlock(&a->lock);
    return addr_of(best);
  }
  if (a->reserved + size > d->global_mem) release_cached(a);
  if (a->reserved + size > d->global_mem) {
    void *r = oom(a, nbytes, size, "the device's global memory is taken");
    pthread_mutex_unlock(&a->lock);
    return r;
  }
  cl_int e;
  cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size, NULL, &e);
  if (e != CL_SUCCESS) {
    release_cached(a);
    m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size, NULL, &e);
  }
  if (e != CL_SUCCESS) {
    char why[96];
    snprintf(why, sizeof why, "clCreateBuffer failed with %s", ct__ocl_errstr(e));
    void *r = oom(a, nbytes, size, why);
    pthread_mutex_unlock(&a->lock);
    return r;
  }
  size_t i = free_slot(a);
  if (i == (size_t)-1) { /* ct__realloc set CT_ENOMEM */
    clReleaseMemObject(m);
    pthread_mutex_unlock(&a->lock);
    return NULL;
  }
  a->slots[i] = (slot){m, size, 1};
  a->num_mallocs++;
  a->reserved += size;
  a->allocated += size;
  if (a->allocated > a->peak) a->peak = a->allocated;
  pthread_mutex_unlock(&a->lock);
  return addr_of(i);
}

/* The slot of address p (which may point inside its buffer), or (size_t)-1. The caller holds a->lock. */
static size_t slot_of(allocator *a, const void *p, size_t *byte_off) {
  uint64_t v = (uint64_t)(uintptr_t)p, s = v >> CT_OCL_SLOT_BITS;
  if (s == 0 || s - 1 >= a->nslots || !a->slots[s - 1].mem) return (size_t)-1;
  *byte_off = (size_t)(v & (((uint64_t)1 << CT_OCL_SLOT_BITS) - 1));
  return (size_t)(s - 1);
}

void ct__ocl_free(int index, void *p, size_t nbytes) {
  (void)nbytes;
  allocator *a = allocator_peek(index);
  if (!a || !p) return;
  size_t off;
  pthread_mutex_lock(&a->lock);
  size_t i = slot_of(a, p, &off);
  if (i != (size_t)-1 && a->slots[i].live) {
    a->slots[i].live = 0;
    a->allocated -= a->slots[i].size;
    a->cached += a->slots[i].size;
  }
  pthread_mutex_unlock(&a->lock);
}

ct_status ct__ocl_resolve(int index, const void *p, cl_mem *mem, size_t *byte_offset) {
  allocator *a = allocator_peek(index);
  if (!a)
    return ct__error(CT_EINVAL, "opencl:%d: address %p belongs to no buffer (nothing was allocated on the device)", index, p);
  pthread_mutex_lock(&a->lock);
  size_t i = slot_of(a, p, byte_offset);
  *mem = i != (size_t)-1 ? a->slots[i].mem : NULL;
  pthread_mutex_unlock(&a->lock);
  if (!*mem) return ct__error(CT_EINVAL, "opencl:%d: address %p belongs to no buffer of this device", index, p);
  return CT_OK;
}

ct_status ct__ocl_memory_stats(int index, ct_memory_stats *out) {
  allocator *a = allocator_peek(index);
  if (!a) return CT_OK; /* nothing allocated yet: zeros */
  pthread_mutex_lock(&a->lock);
  out->allocated = a->allocated;
  out->reserved = a->reserved;
  out->peak_allocated = a->peak;
  out->num_device_mallocs = a->num_mallocs;
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}

ct_status ct__ocl_empty_cache(int index) {
  ct__ocl_ctx *c = ct__ocl_ctx_peek(index);
  if (!c) return CT_OK;
  /* queued work may still use a cached buffer's memory only through a live one; finish first anyway,
   * so that the memory is back with the driver when this returns */
  CT_OCL_TRY(clFinish(c->compute), "clFinish", index);
  CT_OCL_TRY(clFinish(c->copy), "clFinish (copy queue)", index);
  allocator *a = allocator_peek(index);
  if (!a) return CT_OK;
  pthread_mutex_lock(&a->lock);
  release_cached(a);
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}

ct_status ct__ocl_reset_peak(int index) {
  allocator *a = allocator_peek(index);
  if (!a) return CT_OK;
  pthread_mutex_lock(&a->lock);
  a->peak = a->allocated;
  pthread_mutex_unlock(&a->lock);
  return CT_OK;
}
