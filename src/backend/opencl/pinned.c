/* src/backend/opencl/pinned.c: the caching allocator of pinned host memory for the OpenCL backend
 * (the vtable's pinned_alloc / pinned_free / pinned_stats / pinned_empty_cache, behind
 * ct_empty_pinned and ct_empty_pinned_for). Layer 2 of the folder (opencl_backend.h): it calls
 * context.c and device.c only.
 *
 * OpenCL has no call that page-locks host memory; the portable way to get memory a device copies
 * from at full speed is a buffer created with CL_MEM_ALLOC_HOST_PTR and mapped into the host's
 * address space (clEnqueueMapBuffer): the driver allocates it where its DMA engine reaches. A block
 * is such a buffer, mapped once for its whole life; the host pointer of the mapping is what cuttle
 * stores. All blocks come from the context of opencl:0 (contexts are per device here), mapped with
 * a queue of their own so that mapping never waits for a device's work. A copy to another OpenCL
 * device from such a block still runs asynchronously, because OpenCL lets any host pointer feed
 * a non-blocking write; only the transfer speed on a real GPU may be lower. On PoCL, the CPU as a
 * device, the memory is ordinary host memory and the point is the semantics, not the speed.
 *
 * Creating and mapping a buffer costs driver calls (and on a GPU pins pages), so freed blocks are
 * kept and handed out again, as the CUDA backend's pinned cache does: requests are rounded up (to
 * 4 KiB up to 1 MiB, to 1 MiB above) and a request takes the smallest cached block of at least its
 * size and at most twice it.
 *
 * A freed block may still be read or written by a non-blocking copy queued on some device's copy
 * queue (ct_to with CT_NON_BLOCKING returns before the bytes moved; the caller may free the host
 * tensor at once, as the data loader does). So when a block on which such a copy was queued comes
 * back (the copy path marks it, ct__ocl_pinned_use), a marker is enqueued on the copy queue of
 * every device context that exists (each queue is in order: the marker completes
 * after every copy queued before it), and the block is handed out again only after all its markers
 * completed (a status query, never a wait). Emptying the cache waits for them before the buffer is
 * unmapped and released. Blocking copies from pinned memory have finished when they return.
 *
 * ct__ocl_pinned_use tells the copy path whether a host address lies inside a live block (and
 * marks the block): only then may a copy be asynchronous, since only this allocator keeps the bytes
 * alive until the copy ended. A block no copy used needs no fence and is idle at once when freed. One process-wide allocator (pinned memory is host memory, not any one device's), guarded
 * by one mutex. */
#include <string.h>
#include "core/caching.h"
#include "backend/opencl/opencl_backend.h"

typedef struct {
  void *p;          /* the mapped host pointer */
  size_t size;      /* rounded size */
  cl_mem mem;       /* the CL_MEM_ALLOC_HOST_PTR buffer of opencl:0's context */
  int live;         /* 1: held by a tensor; 0: cached */
  int used;         /* a non-blocking copy was queued on it since it was handed out */
  cl_event *fences; /* markers on copy queues enqueued when the block was freed */
  int nfences;
} pblock;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pblock *blocks;
static size_t nblocks, cap;
static size_t allocated, reserved;
static uint64_t num_allocs;
static cl_command_queue map_queue; /* on opencl:0's context; only maps and unmaps */


/* 1 when every copy that may use b has finished; completed markers are released. The caller holds
 * `lock`. A marker whose status cannot be read, or that failed, no longer guards a running copy. */
static int idle(pblock *b) {
  while (b->nfences > 0) {
    cl_int st = CL_COMPLETE;
    cl_event e = b->fences[b->nfences - 1];
    if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) == CL_SUCCESS && st > CL_COMPLETE)
      return 0;
    clReleaseEvent(e);
    b->nfences--;
  }
  free(b->fences);
  b->fences = NULL;
  return 1;
}

/* Wait for b's copies, unmap and release its buffer, and clear the entry. The caller holds `lock`. */
static void release_block(pblock *b) {
  if (b->nfences > 0) clWaitForEvents((cl_uint)b->nfences, b->fences);
  for (int i = 0; i < b->nfences; i++) clReleaseEvent(b->fences[i]);
  free(b->fences);
  cl_event done = NULL;
  if (clEnqueueUnmapMemObject(map_queue, b->mem, b->p, 0, NULL, &done) == CL_SUCCESS) {
    clWaitForEvents(1, &done);
    clReleaseEvent(done);
  }
  clReleaseMemObject(b->mem);
  reserved -= b->size;
  memset(b, 0, sizeof *b);
}

static void release_all_cached(void) {
  for (size_t i = 0; i < nblocks; i++)
    if (blocks[i].mem && !blocks[i].live) release_block(&blocks[i]);
}

/* A free entry of the block table, growing it; NULL when out of host memory. The caller holds `lock`. */
static pblock *free_entry(void) {
  for (size_t i = 0; i < nblocks; i++)
    if (!blocks[i].mem) return &blocks[i];
  if (nblocks == cap) {
    size_t ncap = cap ? 2 * cap : 32;
    pblock *nb = realloc(blocks, ncap * sizeof *nb);
    if (!nb) return NULL;
    blocks = nb, cap = ncap;
  }
  memset(&blocks[nblocks], 0, sizeof *blocks);
  return &blocks[nblocks++];
}

/* A new mapped block of size bytes in c's context, or NULL with *err set. The caller holds `lock`. */
static void *create_block(ct__ocl_ctx *c, size_t size, cl_mem *mem, cl_int *err) {
  *mem = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, NULL, err);
  if (*err != CL_SUCCESS) return NULL;
  void *p = clEnqueueMapBuffer(map_queue, *mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, NULL, NULL, err);
  if (*err != CL_SUCCESS) {
    clReleaseMemObject(*mem);
    return NULL;
  }
  return p;
}

void *ct__ocl_pinned_alloc(size_t nbytes) {
  ct__ocl_ctx *c = ct__ocl_ctx_get(0);
  if (!c) return NULL;
  size_t size = ct__cache_round_pinned(nbytes);
  pthread_mutex_lock(&lock);
  pblock *best = NULL;
  for (size_t i = 0; i < nblocks; i++) {
    pblock *b = &blocks[i];
    if (!b->mem || b->live || b->size < size || b->size > 2 * size) continue;
    if (best && b->size >= best->size) continue;
    if (idle(b)) best = b;
  }
  if (best) {
    best->live = 1;
    allocated += best->size;
    void *p = best->p;
    pthread_mutex_unlock(&lock);
    return p;
  }
  cl_int e = CL_SUCCESS;
  if (!map_queue) map_queue = clCreateCommandQueue(c->context, c->info->device, 0, &e);
  if (e != CL_SUCCESS) {
    map_queue = NULL;
    pthread_mutex_unlock(&lock);
    ct__error(CT_EBACKEND, "opencl:0: clCreateCommandQueue failed while setting up pinned host memory: %s", ct__ocl_errstr(e));
    return NULL;
  }
  cl_mem mem;
  void *p = create_block(c, size, &mem, &e);
  num_allocs++;
  if (!p) { /* the cache may hold what the driver lacks: give it back and retry once */
    release_all_cached();
    p = create_block(c, size, &mem, &e);
    num_allocs++;
  }
  pblock *b = p ? free_entry() : NULL;
  if (!b) {
    if (p) {
      clEnqueueUnmapMemObject(map_queue, mem, p, 0, NULL, NULL);
      clFinish(map_queue);
      clReleaseMemObject(mem);
      e = CL_OUT_OF_HOST_MEMORY;
    }
    size_t held = reserved, in_use = allocated;
    pthread_mutex_unlock(&lock);
    if (e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES ||
        e == CL_INVALID_BUFFER_SIZE)
      ct__error(CT_ENOMEM,
                "out of pinned host memory (opencl): requested %zu bytes (rounded to %zu); cuttle holds %zu pinned bytes, "
                "%zu of them in tensors (the cache was emptied and the allocation retried: %s). Pin less (smaller "
                "batches, fewer loader workers) or use ordinary memory (ct_empty)",
                nbytes, size, held, in_use, ct__ocl_errstr(e));
    else
      ct__error(CT_EBACKEND, "opencl:0: creating or mapping a pinned host buffer of %zu bytes failed: %s", size,
                ct__ocl_errstr(e));
    return NULL;
  }
  *b = (pblock){.p = p, .size = size, .mem = mem, .live = 1};
  allocated += size;
  reserved += size;
  pthread_mutex_unlock(&lock);
  return p;
}

/* The live block holding p, or NULL. The caller holds `lock`. */
static pblock *live_block(const void *p) {
  for (size_t i = 0; i < nblocks; i++)
    if (blocks[i].mem && blocks[i].live && blocks[i].p == p) return &blocks[i];
  return NULL;
}

void ct__ocl_pinned_free(void *p, size_t nbytes) {
  (void)nbytes; /* the block's own size is known */
  if (!p) return;
  pthread_mutex_lock(&lock);
  pblock *b = live_block(p);
  CT_ASSERT(b != NULL); /* a pointer this allocator did not hand out: a bug */
  int used = b->used;
  pthread_mutex_unlock(&lock);
  /* fence every copy queue (outside the lock: enqueueing may take a driver lock); the block stays
   * live meanwhile, so no other thread touches its entry */
  cl_event fences[CT_OCL_MAX_DEVICES];
  int nf = 0;
  for (int d = 0; used && d < CT_OCL_MAX_DEVICES; d++) {
    ct__ocl_ctx *c = ct__ocl_ctx_peek(d);
    if (!c) continue;
    if (clEnqueueMarkerWithWaitList(c->copy, 0, NULL, &fences[nf]) == CL_SUCCESS) {
      clFlush(c->copy);
      nf++;
    } else {
      clFinish(c->copy); /* cannot fence: wait instead, so reuse stays safe */
    }
  }
  pthread_mutex_lock(&lock);
  b = live_block(p); /* the table may have moved (realloc) while unlocked */
  b->live = 0;
  b->used = 0;
  allocated -= b->size;
  b->fences = nf ? malloc((size_t)nf * sizeof *b->fences) : NULL;
  if (b->fences) {
    memcpy(b->fences, fences, (size_t)nf * sizeof *fences);
    b->nfences = nf;
  } else {
    if (nf) clWaitForEvents((cl_uint)nf, fences); /* no room to remember them: wait now instead */
    for (int i = 0; i < nf; i++) clReleaseEvent(fences[i]);
  }
  pthread_mutex_unlock(&lock);
}

int ct__ocl_pinned_use(const void *p, size_t nbytes) {
  uintptr_t a = (uintptr_t)p;
  int owns = 0;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nblocks && !owns; i++) {
    uintptr_t s = (uintptr_t)blocks[i].p;
    owns = blocks[i].mem && blocks[i].live && a >= s && a - s <= blocks[i].size && nbytes <= blocks[i].size - (a - s);
    if (owns) blocks[i].used = 1;
  }
  pthread_mutex_unlock(&lock);
  return owns;
}

void ct__ocl_pinned_stats(ct_memory_stats *out) {
  pthread_mutex_lock(&lock);
  out->pinned_allocated = allocated;
  out->pinned_reserved = reserved;
  out->num_pinned_allocs = num_allocs;
  pthread_mutex_unlock(&lock);
}

void ct__ocl_pinned_empty_cache(void) {
  pthread_mutex_lock(&lock);
  release_all_cached();
  pthread_mutex_unlock(&lock);
}
