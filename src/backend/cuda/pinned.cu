/* src/backend/cuda/pinned.cu: the caching allocator of pinned (page-locked) host memory, behind
 * ct_empty_pinned.
 *
 * cudaHostAlloc costs milliseconds (it locks the pages and maps them for every device) and
 * cudaFreeHost synchronizes, so freed blocks are kept and handed out again, as the device allocator
 * does: requests are rounded up (to 4 KiB up to 1 MiB, to 1 MiB above) and free blocks sit in lists
 * bucketed by rounded size; a request takes the smallest cached block of at least its size and at
 * most twice it. The memory is allocated portable (cudaHostAllocPortable), so every device's
 * copies may use it.
 *
 * A freed block may still be read or written by a non-blocking copy queued on a device's copy
 * stream (ct_to with CT_NON_BLOCKING returns before the bytes moved; the caller may free the
 * source at once, as the data loader does). So when a block comes back, an event is recorded on
 * the copy stream of every device context that exists, and the block is handed out again only
 * after all its events completed (cudaEventQuery, never a wait). Blocking copies from pinned memory
 * have finished when they return, and nothing else touches host memory asynchronously.
 *
 * Statistics (the pinned_* fields of the CPU's ct_memory_stats): bytes held by tensors, bytes held
 * from cudaHostAlloc, and the number of cudaHostAlloc calls. One process-wide allocator (pinned
 * memory is host memory, not any one device's), guarded by one mutex. */
#include <map>
#include <unordered_map>
#include <vector>

#include "backend/cuda/common.cuh"
#include "core/caching.h"

namespace {
struct pblock {
  void *p;
  std::vector<cudaEvent_t> events; /* recorded on copy streams when the block was freed */
};

std::mutex lock;
std::map<size_t, std::vector<pblock>> free_blocks; /* rounded size -> cached blocks */
std::unordered_map<void *, size_t> live;           /* block -> its rounded size */
size_t allocated, reserved;
uint64_t num_allocs;


/* 1 when every copy that may use b has finished; completed events are destroyed. */
bool idle(pblock &b) {
  while (!b.events.empty()) {
    cudaError_t e = cudaEventQuery(b.events.back());
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) (void)cudaGetLastError(); /* a failed copy no longer uses the block */
    cudaEventDestroy(b.events.back());
    b.events.pop_back();
  }
  return true;
}

/* Wait for b's copies, then return it to the driver. The caller holds `lock`. */
void release_block(pblock &b, size_t size) {
  for (cudaEvent_t e : b.events) cudaEventSynchronize(e), cudaEventDestroy(e);
  b.events.clear();
  cudaFreeHost(b.p);
  reserved -= size;
}

void release_all_cached() {
  for (auto &kv : free_blocks)
    for (pblock &b : kv.second) release_block(b, kv.first);
  free_blocks.clear();
}
}  // namespace

void *ct__cuda_pinned_alloc(size_t nbytes) {
  size_t size = ct__cache_round_pinned(nbytes);
  std::lock_guard<std::mutex> g(lock);
  for (auto it = free_blocks.lower_bound(size); it != free_blocks.end() && it->first <= 2 * size; ++it) {
    std::vector<pblock> &v = it->second;
    for (size_t i = v.size(); i-- > 0;) {
      if (!idle(v[i])) continue;
      void *p = v[i].p;
      size_t bsize = it->first;
      v.erase(v.begin() + (ptrdiff_t)i);
      if (v.empty()) free_blocks.erase(it);
      live[p] = bsize;
      allocated += bsize;
      return p;
    }
  }
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
  num_allocs++;
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_all_cached();
    e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    num_allocs++;
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
      ct__error(CT_ENOMEM,
                "out of pinned host memory: requested %zu bytes (rounded to %zu); cuttle holds %zu pinned bytes, %zu of "
                "them in tensors (the cache was emptied and the allocation retried). Pin less (smaller batches, fewer "
                "loader workers) or use ordinary memory (ct_empty)",
                nbytes, size, reserved, allocated);
    else
      ct__error(CT_EBACKEND, "cuda: cudaHostAlloc(%zu) failed: %s", size, cudaGetErrorString(e));
    return NULL;
  }
  live[p] = size;
  allocated += size;
  reserved += size;
  return p;
}

void ct__cuda_pinned_free(void *p, size_t nbytes) {
  (void)nbytes; /* the block's own size is known */
  if (!p) return;
  pblock b = {p, {}};
  /* fence every copy stream: a non-blocking copy queued there may still use the block */
  int prev = -1;
  (void)cudaGetDevice(&prev);
  for (int d = 0; d < CT_CUDA_MAX_DEVICES; d++) {
    ct__cuda_ctx *ctx = ct__cuda_ctx_peek(d);
    if (!ctx) continue;
    cudaEvent_t e;
    if (cudaSetDevice(d) != cudaSuccess || cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaDeviceSynchronize(); /* cannot fence: wait instead, so reuse stays safe */
      continue;
    }
    if (cudaEventRecord(e, ctx->copy) != cudaSuccess) {
      (void)cudaGetLastError();
      cudaEventDestroy(e);
      (void)cudaStreamSynchronize(ctx->copy);
      continue;
    }
    b.events.push_back(e);
  }
  if (prev >= 0) (void)cudaSetDevice(prev);
  std::lock_guard<std::mutex> g(lock);
  auto it = live.find(p);
  CT_ASSERT(it != live.end()); /* a pointer this allocator did not hand out: a bug */
  size_t size = it->second;
  live.erase(it);
  allocated -= size;
  free_blocks[size].push_back(std::move(b));
}

void ct__cuda_pinned_stats(ct_memory_stats *out) {
  std::lock_guard<std::mutex> g(lock);
  out->pinned_allocated = allocated;
  out->pinned_reserved = reserved;
  out->num_pinned_allocs = num_allocs;
}

void ct__cuda_pinned_empty_cache(void) {
  std::lock_guard<std::mutex> g(lock);
  release_all_cached();
}
