/* src/backend/cuda/allocator.cu: the caching allocator, one per device (in its context).
 *
 * cudaMalloc and cudaFree are slow and cudaFree synchronizes the device, so freed blocks are kept
 * and handed out again. Requests are rounded up (to 512 B up to 1 MiB, to 2 MiB above, the
 * driver's own large-page granularity), and free blocks sit in lists bucketed by their exact
 * rounded size (a std::map from size to a stack of pointers). A request takes the smallest cached
 * block of at least its rounded size, provided that block is at most twice that size (blocks are
 * never split, so this bounds the waste to half a block). All device work runs on the context's
 * compute stream (copies on the copy stream are fenced by events both ways), so a block freed by
 * the host while a kernel still reads it can only be reused by work queued after that kernel.
 *
 * Statistics: allocated (bytes in blocks handed out), reserved (bytes held from cudaMalloc),
 * peak allocated, and the number of cudaMalloc calls (ct__cuda_memory_stats).
 *
 * CUTTLE_CUDA_NO_CACHE=1 in the environment (read when the device's context is created) turns the
 * cache off: every alloc is a cudaMalloc of the exact size and every free a cudaFree, so
 * compute-sanitizer's memcheck sees each tensor's bounds.
 *
 * Out of memory: on a failed cudaMalloc the cache is emptied and the call retried once; if it still
 * fails, alloc returns NULL with CT_ENOMEM and a message saying how much was requested, and how much
 * the device has free, how much cuttle reserves and how much of that is allocated.
 *
 * Graph capture (graph.cu; PyTorch's private memory pools of torch.cuda.graphs): a captured graph
 * writes to the same addresses at every replay, so while a capture runs, every block handed out or
 * freed joins the capture's pool, and a pool's blocks, freed or not, never go back to the general
 * cache until the graph is freed (ct__cuda_pool_release). Blocks are taken from the pool's own free
 * lists first, then from the general cache, then from cudaMalloc; never is a block cudaFree'd
 * during a capture (cudaFree synchronizes the device, which a capture forbids). A block freed during
 * a capture that was allocated before it joins the pool too, since the captured work may read it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <map>
#include <unordered_map>
#include <vector>

#include "backend/cuda/common.cuh"
#include "core/caching.h"

typedef std::map<size_t, std::vector<void *>> free_lists; /* rounded size -> cached blocks */

/* A capture's private memory: its free blocks (its live ones are tagged in the allocator's map).
 * refs counts its own graph and every other capture that freed one of its blocks (that capture's
 * graph may read the block, so it keeps the pool whole until it is freed too; PyTorch's private
 * pools count their users the same way); held lists the pools this one keeps so. */
struct ct__cuda_pool {
  free_lists free_blocks;
  int refs;
  std::vector<ct__cuda_pool *> held;
};

struct block {
  size_t size;
  ct__cuda_pool *pool; /* the capture pool the block belongs to, or NULL */
};

struct ct__cuda_allocator {
  int device;
  int no_cache;
  std::mutex lock;
  free_lists free_blocks;                  /* the general cache */
  std::unordered_map<void *, block> live;  /* block -> its size and pool */
  ct__cuda_pool *capturing;                /* the pool of the capture running now, or NULL */
  size_t allocated, reserved, peak, cached;
  uint64_t num_mallocs;
};


struct ct__cuda_allocator *ct__cuda_allocator_new(int dev) {
  ct__cuda_allocator *a = new (std::nothrow) ct__cuda_allocator();
  if (!a) return NULL;
  a->device = dev;
  const char *e = getenv("CUTTLE_CUDA_NO_CACHE");
  a->no_cache = e && e[0] && strcmp(e, "0") != 0;
  return a;
}

/* Give every block of the general cache back to the driver; the caller holds a->lock. */
static void release_cached(ct__cuda_allocator *a) {
  for (auto &kv : a->free_blocks) {
    for (void *p : kv.second) {
      cudaFree(p);
      a->reserved -= kv.first;
      a->cached -= kv.first;
    }
  }
  a->free_blocks.clear();
}

void ct__cuda_allocator_free_all(struct ct__cuda_allocator *a) {
  {
    std::lock_guard<std::mutex> g(a->lock);
    release_cached(a);
  }
  delete a; /* blocks still live belong to tensors that outlive the context: leaked with the process */
}

/* The smallest block of lists of at least size and at most twice it, taken off its list; NULL when
 * none. */
static void *take_fit(free_lists &lists, size_t size, size_t *bsize) {
  auto it = lists.lower_bound(size);
  if (it == lists.end() || it->first > 2 * size) return NULL;
  void *p = it->second.back();
  *bsize = it->first;
  it->second.pop_back();
  if (it->second.empty()) lists.erase(it);
  return p;
}

void *ct__cuda_alloc(int dev, size_t nbytes) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(dev);
  if (!ctx) return NULL;
  ct__cuda_allocator *a = ctx->alloc;
  std::lock_guard<std::mutex> g(a->lock);
  size_t size = a->no_cache ? (nbytes ? nbytes : 1) : ct__cache_round(nbytes);
  if (!a->no_cache) {
    size_t bsize = 0;
    void *p = a->capturing ? take_fit(a->capturing->free_blocks, size, &bsize) : NULL;
    if (!p) p = take_fit(a->free_blocks, size, &bsize);
    if (p) {
      a->cached -= bsize;
      a->live[p] = block{bsize, a->capturing};
      a->allocated += bsize;
      if (a->allocated > a->peak) a->peak = a->allocated;
      return p;
    }
  }
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, size);
  a->num_mallocs++;
  if (e == cudaErrorMemoryAllocation && !a->capturing) { /* no cudaFree inside a capture */
    (void)cudaGetLastError();
    release_cached(a); /* cudaFree synchronizes, so nothing queued still needs these blocks */
    e = cudaMalloc(&p, size);
    a->num_mallocs++;
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (e == cudaErrorMemoryAllocation)
      ct__error(CT_ENOMEM,
                "cuda:%d out of memory: requested %s (%zu bytes); the device has %s free of %s total; cuttle has "
                "reserved %s, of which %s is allocated to tensors (%s). Free tensors you no longer need, or use a "
                "smaller batch",
                dev, ct__bytes_human(size, b1, sizeof b1), nbytes, ct__bytes_human(free_b, b2, sizeof b2), ct__bytes_human(total_b, b3, sizeof b3),
                ct__bytes_human(a->reserved, b4, sizeof b4), ct__bytes_human(a->allocated, b5, sizeof b5),
                a->capturing ? "inside a graph capture, which cannot empty the cache: nothing was retried"
                             : "the cache was emptied and the allocation retried");
    else
      ct__error(CT_EBACKEND, "cuda: cudaMalloc(%zu) failed on cuda:%d: %s (requested %zu bytes)", size, dev,
                cudaGetErrorString(e), nbytes);
    return NULL;
  }
  a->live[p] = block{size, a->capturing};
  a->reserved += size;
  a->allocated += size;
  if (a->allocated > a->peak) a->peak = a->allocated;
  return p;
}

void ct__cuda_free(int dev, void *p, size_t nbytes) {
  (void)nbytes; /* the block's own size is known */
  if (!p) return;
  ct__cuda_ctx *ctx = ct__cuda_ctx_get(dev);
  if (!ctx) return;
  ct__cuda_allocator *a = ctx->alloc;
  std::lock_guard<std::mutex> g(a->lock);
  auto it = a->live.find(p);
  CT_ASSERT(it != a->live.end()); /* a pointer this allocator did not hand out: a bug */
  size_t size = it->second.size;
  ct__cuda_pool *pool = it->second.pool ? it->second.pool : a->capturing;
  if (a->capturing && pool != a->capturing) { /* another graph's block, which this capture may read */
    bool held = false;
    for (ct__cuda_pool *h : a->capturing->held) held = held || h == pool;
    if (!held) {
      a->capturing->held.push_back(pool);
      pool->refs++;
    }
  }
  a->live.erase(it);
  a->allocated -= size;
  if (pool) { /* a graph's memory (or memory a capture may read): kept for the graph */
    pool->free_blocks[size].push_back(p);
    a->cached += size;
    return;
  }
  if (a->no_cache) {
    cudaFree(p);
    a->reserved -= size;
    return;
  }
  a->free_blocks[size].push_back(p);
  a->cached += size;
}

ct__cuda_pool *ct__cuda_pool_begin_capture(ct__cuda_ctx *ctx) {
  ct__cuda_allocator *a = ctx->alloc;
  std::lock_guard<std::mutex> g(a->lock);
  if (a->capturing) return NULL;
  ct__cuda_pool *pool = new (std::nothrow) ct__cuda_pool();
  if (pool) pool->refs = 1, a->capturing = pool;
  return pool;
}

void ct__cuda_pool_end_capture(ct__cuda_ctx *ctx) {
  std::lock_guard<std::mutex> g(ctx->alloc->lock);
  ctx->alloc->capturing = NULL;
}

/* Drop one reference to pool; the last one gives its blocks to the general cache and drops the
 * pools it held. The caller holds a->lock. */
static void release_locked(ct__cuda_allocator *a, ct__cuda_pool *pool) {
  if (--pool->refs > 0) return;
  if (a->capturing == pool) a->capturing = NULL;
  /* Work that used these blocks (replays included) is queued on the compute stream, and whatever
   * is handed them next is queued after it: the stream orders the reuse, as for any freed block. */
  for (auto &kv : pool->free_blocks)
    for (void *p : kv.second) {
      if (a->no_cache) {
        cudaFree(p);
        a->reserved -= kv.first;
        a->cached -= kv.first;
      } else a->free_blocks[kv.first].push_back(p);
    }
  for (auto &kv : a->live) /* tensors made in the capture that outlive the graph: ordinary blocks now */
    if (kv.second.pool == pool) kv.second.pool = NULL;
  for (ct__cuda_pool *h : pool->held) release_locked(a, h);
  delete pool;
}

void ct__cuda_pool_release(ct__cuda_ctx *ctx, ct__cuda_pool *pool) {
  if (!pool) return;
  std::lock_guard<std::mutex> g(ctx->alloc->lock);
  if (ctx->alloc->capturing == pool) ctx->alloc->capturing = NULL;
  release_locked(ctx->alloc, pool);
}

extern "C" void ct__cuda_memory_stats(int dev, size_t *allocated, size_t *reserved, size_t *peak, uint64_t *num_mallocs) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_peek(dev);
  size_t al = 0, re = 0, pk = 0;
  uint64_t nm = 0;
  if (ctx) {
    std::lock_guard<std::mutex> g(ctx->alloc->lock);
    al = ctx->alloc->allocated, re = ctx->alloc->reserved, pk = ctx->alloc->peak, nm = ctx->alloc->num_mallocs;
  }
  if (allocated) *allocated = al;
  if (reserved) *reserved = re;
  if (peak) *peak = pk;
  if (num_mallocs) *num_mallocs = nm;
}

extern "C" void ct__cuda_empty_cache(int dev) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_peek(dev);
  if (!ctx) return;
  int prev = -1;
  (void)cudaGetDevice(&prev);
  (void)cudaSetDevice(dev);
  {
    std::lock_guard<std::mutex> g(ctx->alloc->lock);
    release_cached(ctx->alloc);
  }
  if (prev >= 0 && prev != dev) (void)cudaSetDevice(prev);
}

extern "C" void ct__cuda_reset_peak(int dev) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_peek(dev);
  if (!ctx) return;
  std::lock_guard<std::mutex> g(ctx->alloc->lock);
  ctx->alloc->peak = ctx->alloc->allocated;
}

/* ---- the vtable's memory entries (index exists: the core checked) */
ct_status ct__cuda_vt_memory_stats(int index, ct_memory_stats *out) {
  ct__cuda_memory_stats(index, &out->allocated, &out->reserved, &out->peak_allocated, &out->num_device_mallocs);
  return CT_OK;
}

ct_status ct__cuda_vt_empty_cache(int index) {
  ct__cuda_empty_cache(index);
  return CT_OK;
}

ct_status ct__cuda_vt_reset_peak(int index) {
  ct__cuda_reset_peak(index);
  return CT_OK;
}
