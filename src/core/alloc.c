/* src/core/alloc.c: every host allocation of the library, and the fault injection that tests its
 * error paths.
 *
 * Out of memory is an error like any other (CT_ENOMEM), never an abort, so each allocation site
 * needs a failure path; a failure path that never runs is a failure path that does not work. As in
 * SQLite's malloc tests, a test asks for the k-th allocation from now to fail (ct__fault_inject_alloc,
 * or CUTTLE_FAIL_ALLOC=k in the environment for a whole process) and runs an operation for k = 1,
 * 2, ... until the operation no longer reaches the k-th allocation. Host allocations (these
 * wrappers) and device allocations (ct__fault_device_alloc, called by the core wherever a
 * backend's alloc entry is) share one counter, so one k walks through both in program order. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

/* Process-wide, because allocations happen on loader threads too; the tests that inject faults
 * run one thread of cuttle work at a time. */
static int64_t passed;      /* allocation points passed since the last arming */
static int64_t fail_at;     /* the point that fails (1-based); 0: none */
static int64_t fired;       /* injected failures since the last arming */
static int env_read;

static void read_env(void) {
  if (__atomic_exchange_n(&env_read, 1, __ATOMIC_ACQ_REL)) return;
  const char *e = getenv("CUTTLE_FAIL_ALLOC");
  long long k = e ? strtoll(e, NULL, 10) : 0;
  if (k > 0) __atomic_store_n(&fail_at, (int64_t)k, __ATOMIC_RELAXED);
}

void ct__fault_inject_alloc(int64_t k) {
  __atomic_store_n(&env_read, 1, __ATOMIC_RELAXED); /* an explicit arming overrides the environment */
  __atomic_store_n(&passed, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&fired, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&fail_at, k > 0 ? k : 0, __ATOMIC_RELAXED);
}

int64_t ct__fault_alloc_count(void) { return __atomic_load_n(&passed, __ATOMIC_RELAXED); }
int64_t ct__fault_alloc_fired(void) { return __atomic_load_n(&fired, __ATOMIC_RELAXED); }

/* Count one allocation point; 1 when it is the one that must fail. Unarmed (the normal case) it
 * costs two plain loads: every tensor header passes here, and an atomic read-modify-write on one
 * shared line per allocation was 3% of a small op's host time (ct_matmul of 2 x 2, perf) and
 * contends between the loader's threads. Points are counted only while armed, which is all
 * ct__fault_alloc_count promises. */
static int fault_point(void) {
  if (__builtin_expect(!__atomic_load_n(&env_read, __ATOMIC_RELAXED), 0)) read_env();
  if (__builtin_expect(!__atomic_load_n(&fail_at, __ATOMIC_RELAXED), 1)) return 0;
  int64_t n = __atomic_add_fetch(&passed, 1, __ATOMIC_RELAXED);
  if (n != __atomic_load_n(&fail_at, __ATOMIC_RELAXED)) return 0;
  __atomic_add_fetch(&fired, 1, __ATOMIC_RELAXED);
  return 1;
}

int ct__fault_device_alloc(void) { return fault_point(); }

static void *oom(size_t nbytes, const char *what) {
  ct__error(CT_ENOMEM, "out of host memory: allocating %zu bytes for %s failed", nbytes, what);
  return NULL;
}

void *ct__malloc(size_t nbytes, const char *what) {
  void *p = fault_point() ? NULL : malloc(nbytes ? nbytes : 1);
  return p ? p : oom(nbytes, what);
}

/* malloc through a pointer the compiler cannot see through, for ct__calloc: GCC's strlen pass turns
 * a malloc followed by a memset to 0 back into calloc, which is what ct__calloc avoids. */
static void *(*volatile plain_malloc)(size_t) = malloc;

/* malloc and memset rather than calloc: glibc's calloc (2.36, Debian 12) never takes a chunk from
 * the thread's tcache, so the tensor headers that every op makes and frees went through
 * _int_malloc's bins, 16% of a small op's host time (perf of ct_matmul on 2 x 2 matrices). */
void *ct__calloc(size_t n, size_t size, const char *what) {
  if (size && n > SIZE_MAX / size) return oom(SIZE_MAX, what);
  size_t nbytes = (n ? n : 1) * (size ? size : 1);
  void *p = fault_point() ? NULL : plain_malloc(nbytes);
  if (p) memset(p, 0, nbytes);
  return p ? p : oom(n * size, what);
}

void *ct__realloc(void *p, size_t nbytes, const char *what) {
  void *q = fault_point() ? NULL : realloc(p, nbytes ? nbytes : 1);
  return q ? q : oom(nbytes, what);
}

char *ct__strdup(const char *s, const char *what) {
  size_t n = strlen(s) + 1;
  char *d = ct__malloc(n, what);
  if (d) memcpy(d, s, n);
  return d;
}
