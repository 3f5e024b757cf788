/* tests/core/test_lsan_dynamic_tls.c: LeakSanitizer's check, as the sanitizer build runs it, survives
 * a thread whose dynamic TLS block starts 16 bytes into a page, and still finds a real leak.
 *
 * Why (issue 35): every OpenCL test loads PoCL, and with it LLVM and clang, whose thread-local
 * variables live in dynamic TLS: glibc mallocs one block per thread and module on the thread's
 * first use. This libasan (GCC 12) records each block from its __tls_get_addr interceptor and sizes
 * it with a guess made for glibc 2.19, which mmapped blocks behind a {size, start} header: a block
 * 16 bytes into a page is taken to follow such a header. Since glibc 2.25 the blocks come from
 * malloc, which is ASan's, and a 16-byte-redzone chunk that starts a page has its user memory just
 * there, so ASan's own chunk header is read as the block's range: LeakSanitizer's stop-the-world
 * tracer then scans that range and dies ("Tracer caught signal 11 ... LeakSanitizer has encountered
 * a fatal error"), at exit or in any explicit check, in whichever run a PoCL worker or the main
 * thread drew such a chunk. tests/CMakeLists.txt gives every test intercept_tls_get_addr=0 (and
 * testutil.c's __lsan_default_options the test binaries run by hand), so no such range is recorded:
 * the blocks are ordinary heap chunks, reached through glibc's table of them from the thread's
 * descriptor, so what they hold still counts as reachable.
 *
 * The test puts a worker thread's block of a module of its own (lsan_tls_module.c, loaded with
 * dlopen as PoCL is) at page offset 16, where the guess fires, leaves the thread idle as PoCL's
 * workers are, and runs the check: with intercept_tls_get_addr=1 the process dies in the tracer.
 * The block holds the only pointer to an allocation, which must not be reported; a deliberately
 * leaked allocation must be. In a build without ASan only the module's TLS is exercised. */
#define _GNU_SOURCE
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define CT_LSAN 1
#include <sanitizer/lsan_interface.h>
#else
#define CT_LSAN 0
#endif

static void *(*tls_block)(void);
static void (*tls_hold)(void *);
static void *(*tls_get)(void);

#define MAX_THREADS 8
#define MAX_STEER 4096

typedef struct {
  pthread_t thread;
  void *block;            /* the thread's dynamic TLS block in the module */
  void *steer[MAX_STEER]; /* the allocations that placed it */
  int nsteer, ready, quit;
} worker_slot;

static worker_slot slots[MAX_THREADS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

/* Under ASan, malloc(16) comes from the block's size class (a 16-byte left redzone, the chunk
 * header), one chunk after another at a fixed stride: allocate until the next one would have its
 * user memory 16 bytes into a page. */
static void steer(worker_slot *s) {
  if (!CT_LSAN) return;
  uintptr_t prev = 0;
  while (s->nsteer < MAX_STEER) {
    void *p = malloc(16);
    s->steer[s->nsteer++] = p;
    uintptr_t q = (uintptr_t)p;
    if (prev && (q - prev == 32 || prev - q == 32) && (q + (q - prev)) % 4096 == 16) return;
    prev = q;
  }
}

static void *worker(void *arg) {
  worker_slot *s = arg;
  steer(s);
  s->block = tls_block(); /* the thread's first use: glibc mallocs the block */
  tls_hold(malloc(100));  /* held by the block alone */
  pthread_mutex_lock(&lock);
  s->ready = 1;
  pthread_cond_broadcast(&cond);
  while (!s->quit) pthread_cond_wait(&cond, &lock); /* idle, as PoCL's workers at exit */
  pthread_mutex_unlock(&lock);
  free(tls_get());
  for (int i = 0; i < s->nsteer; i++) free(s->steer[i]);
  return NULL;
}

/* A leak no root reaches: made by a thread that has exited (no stack or registers of its own left
 * to hold it), its address kept only masked. */
static volatile uintptr_t hidden;
#define MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull)

static void *leaker(void *arg) {
  (void)arg;
  hidden = (uintptr_t)malloc(48) ^ MASK;
  return NULL;
}

static void test_check_over_dynamic_tls(void **state) {
  (void)state;
  void *h = dlopen(CT_TLS_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen %s: %s", CT_TLS_MODULE, dlerror());
  tls_block = (void *(*)(void))dlsym(h, "ct_tls_block");
  tls_hold = (void (*)(void *))dlsym(h, "ct_tls_hold");
  tls_get = (void *(*)(void))dlsym(h, "ct_tls_get");
  assert_non_null(tls_block), assert_non_null(tls_hold), assert_non_null(tls_get);

  /* Threads until one has its block where the guess fires (the first, as a rule). */
  int n = 0, placed = -1;
  while (n < MAX_THREADS && placed < 0) {
    worker_slot *s = &slots[n];
    assert_int_equal(pthread_create(&s->thread, NULL, worker, s), 0);
    pthread_mutex_lock(&lock);
    while (!s->ready) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    n++;
    if ((uintptr_t)s->block % 4096 == 16) placed = n - 1;
  }
  printf("%d worker thread%s; dynamic TLS block at page offset %lu\n", n, n == 1 ? "" : "s",
         (unsigned long)((uintptr_t)slots[n - 1].block % 4096));
  if (CT_LSAN && placed < 0) fail_msg("no worker's dynamic TLS block landed 16 bytes into a page: the test proves nothing");

#if CT_LSAN
  /* Dies in the tracer when LeakSanitizer records the block's range (intercept_tls_get_addr=1). */
  assert_int_equal(__lsan_do_recoverable_leak_check(), 0);

  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, leaker, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  printf("a deliberate leak of 48 bytes (leaker): LeakSanitizer must report it here\n");
  fflush(stdout);
  assert_int_equal(__lsan_do_recoverable_leak_check(), 1);
  free((void *)(hidden ^ MASK));
  assert_int_equal(__lsan_do_recoverable_leak_check(), 0);
#endif

  pthread_mutex_lock(&lock);
  for (int i = 0; i < n; i++) slots[i].quit = 1;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < n; i++) assert_int_equal(pthread_join(slots[i].thread, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_check_over_dynamic_tls)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
