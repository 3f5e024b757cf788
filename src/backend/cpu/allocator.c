/* src/backend/cpu/allocator.c: a caching allocator for host memory.
 *
 * glibc serves blocks above 128 KiB with mmap and returns them with munmap, so every training step
 * paid a page fault per 4 KiB of every activation (measured in docs/perf-history.md). Blocks of 64 KiB and
 * more are therefore rounded up to 64 KiB and kept, when freed, in a free list from which a later
 * request of the same rounded size is served. The cache holds at most 2 GiB (then blocks go back
 * to the system). Smaller blocks go straight to aligned_alloc/free. CUTTLE_CPU_NO_CACHE=1, and
 * builds with AddressSanitizer, bypass the cache so every allocation is visible to the tools.
 * Statistics: bytes handed out (allocated), plus cached (reserved), and the peak of allocated. */
#include <pthread.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "monitor/monitor_internal.h"

#define CACHE_MIN (64u << 10)
#define CACHE_MAX_BYTES ((size_t)2 << 30)

typedef struct block {
  struct block *next;
  size_t size;
  void *p;
} block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *free_list;   /* cached blocks */
static block *spare_nodes; /* list nodes kept for reuse */
static size_t allocated, cached, peak;
static int bypass = -1;

static int cache_bypassed(void) {
  if (bypass < 0) {
#if defined(__SANITIZE_ADDRESS__)
    bypass = 1;
#else
    const char *e = getenv("CUTTLE_CPU_NO_CACHE");
    bypass = e && strcmp(e, "1") == 0;
#endif
  }
  return bypass;
}

static size_t round_size(size_t n) {
  if (n == 0) n = 1; /* the storage of an empty tensor still holds one byte */
  if (n < CACHE_MIN) return (n + 63) & ~(size_t)63;
  return (n + CACHE_MIN - 1) & ~(size_t)(CACHE_MIN - 1);
}

static ct_status cpu_stats(ct_device d, size_t *alloc_out, size_t *reserved_out) {
  if (d.kind != CT_CPU || d.index != 0) return ct__error(CT_EDEVICE, "cpu allocator: no such device");
  pthread_mutex_lock(&lock);
  if (alloc_out) *alloc_out = allocated;
  if (reserved_out) *reserved_out = allocated + cached;
  pthread_mutex_unlock(&lock);
  return CT_OK;
}

void *ct__cpu_alloc(size_t nbytes) {
  static int registered;
  size_t size = round_size(nbytes);
  void *p = NULL;
  pthread_mutex_lock(&lock);
  if (!registered) registered = 1, ct__monitor_set_allocator_stats(CT_CPU, cpu_stats);
  if (size >= CACHE_MIN && !cache_bypassed())
    for (block **b = &free_list; *b; b = &(*b)->next)
      if ((*b)->size == size) {
        block *hit = *b;
        *b = hit->next;
        p = hit->p;
        cached -= size;
        hit->next = spare_nodes, spare_nodes = hit;
        break;
      }
  pthread_mutex_unlock(&lock);
  if (!p) p = aligned_alloc(64, size);
  if (!p) return NULL;
  pthread_mutex_lock(&lock);
  allocated += size;
  if (allocated > peak) peak = allocated;
  pthread_mutex_unlock(&lock);
  return p;
}

void ct__cpu_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t size = round_size(nbytes);
  pthread_mutex_lock(&lock);
  allocated -= size;
  if (size >= CACHE_MIN && !cache_bypassed() && cached + size <= CACHE_MAX_BYTES) {
    block *b = spare_nodes;
    if (b) spare_nodes = b->next;
    else b = malloc(sizeof *b); /* not ct__malloc: failing here only skips the cache, and must not
                                   overwrite the error of the op whose temporaries are being freed */
    if (b) {
      b->p = p, b->size = size, b->next = free_list, free_list = b;
      cached += size;
      p = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
  free(p);
}

void ct__cpu_empty_cache(void) {
  pthread_mutex_lock(&lock);
  block *b = free_list;
  free_list = NULL;
  cached = 0;
  while (b) {
    block *next = b->next;
    free(b->p);
    b->next = spare_nodes, spare_nodes = b;
    b = next;
  }
  pthread_mutex_unlock(&lock);
}

void ct__cpu_memory_stats(size_t *alloc_out, size_t *reserved_out, size_t *peak_out) {
  pthread_mutex_lock(&lock);
  if (alloc_out) *alloc_out = allocated;
  if (reserved_out) *reserved_out = allocated + cached;
  if (peak_out) *peak_out = peak;
  pthread_mutex_unlock(&lock);
}

void ct__cpu_reset_peak(void) {
  pthread_mutex_lock(&lock);
  peak = allocated;
  pthread_mutex_unlock(&lock);
}
