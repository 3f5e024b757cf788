/* tests/cuda/test_cuda_api.c: the public API of cuttle/cuda.h.
 *
 * On every machine: the CPU's memory figures, cache and peak; the TF32 switch; pinned memory
 * without a GPU (ordinary, usable CPU tensors); CPU streams and events; the sync-debug decision and
 * its warn / error paths (driven directly, since the CPU never synchronizes); the errors for a GPU
 * that is not there. On a GPU (each test skips, printing why, when ct_device_count(CT_CUDA) is 0):
 * pinned + non-blocking copies and what the ledger says about them, pageable copies counted as
 * blocking, sync-debug on ct_item, no cudaMalloc in the steady state of a training-like loop,
 * the pinned cache, GPU events and streams. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "core/internal.h"
#ifdef CUTTLE_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#define BUILT_WITH_CUDA CT_TEST_BUILT_WITH_CUDA
#define SKIP_WITHOUT_GPU CT_TEST_SKIP_WITHOUT_GPU

static const ct_device GPU = {CT_CUDA, 0};

static int have_gpu(void) { return ct_device_count(CT_CUDA) > 0; }

static int cpu_cache_bypassed(void) {
#if defined(__SANITIZE_ADDRESS__)
  return 1;
#else
  const char *e = getenv("CUTTLE_CPU_NO_CACHE");
  return e && strcmp(e, "1") == 0;
#endif
}

/* ---------------------------------------------------------------- CPU side, every machine */

static void test_memory_stats_cpu(void **state) {
  (void)state;
  ct_memory_stats m0, m1, m2;
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m0));
  int64_t n = 1 << 18; /* 1 MiB of float32: cached by the CPU allocator (>= 64 KiB) */
  ct_tensor *t = ct_assert_nonnull(ct_zeros(1, &n, CT_F32, CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  assert_true(m1.allocated >= m0.allocated + ((size_t)1 << 20));
  assert_true(m1.reserved >= m1.allocated);
  assert_true(m1.peak_allocated >= m1.allocated);
  ct_tensor_free(t);
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m2));
  assert_int_equal(m2.allocated, m0.allocated);
  if (!cpu_cache_bypassed()) assert_true(m2.reserved >= m2.allocated + ((size_t)1 << 20)); /* kept in the cache */
  assert_true(m2.peak_allocated >= m1.allocated);
  /* empty_cache gives the cached blocks back; reset_peak brings the peak down to allocated */
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m2));
  assert_int_equal(m2.reserved, m2.allocated);
  ct_assert_ok(ct_reset_peak_memory_stats(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m2));
  assert_int_equal(m2.peak_allocated, m2.allocated);
  if (!have_gpu()) assert_int_equal(m2.num_pinned_allocs, 0);
  /* errors */
  assert_int_equal(ct_memory_stats_get(CT_DEVICE_CPU, NULL), CT_EINVAL);
}

static void test_missing_gpu_errors(void **state) {
  (void)state;
  ct_device absent = have_gpu() ? CT_DEVICE_CUDA(ct_device_count(CT_CUDA)) : GPU;
  ct_memory_stats m;
  memset(&m, 0xff, sizeof m);
  assert_int_equal(ct_memory_stats_get(absent, &m), CT_EDEVICE);
  ct_assert_error_contains("does not exist");
  assert_int_equal(m.allocated, 0); /* zeroed */
  assert_int_equal(m.num_device_mallocs, 0);
  assert_int_equal(ct_empty_cache(absent), CT_EDEVICE);
  assert_int_equal(ct_reset_peak_memory_stats(absent), CT_EDEVICE);
  assert_null(ct_stream_new(absent));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  assert_null(ct_event_record(absent));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  if (!BUILT_WITH_CUDA) ct_assert_error_contains("without the CUDA backend");
  ct_clear_error();
}

static void test_tf32_switch(void **state) {
  (void)state;
  assert_int_equal(ct_allow_tf32(), 0); /* off by default, as in PyTorch */
  ct_set_allow_tf32(1);
  assert_int_equal(ct_allow_tf32(), 1);
#ifdef CUTTLE_WITH_CUDA
  assert_int_equal(ct__cuda_allow_tf32(), 1); /* the CUDA backend follows the switch */
#endif
  ct_set_allow_tf32(7); /* any nonzero is "on" */
  assert_int_equal(ct_allow_tf32(), 1);
  ct_set_allow_tf32(0);
  assert_int_equal(ct_allow_tf32(), 0);
#ifdef CUTTLE_WITH_CUDA
  assert_int_equal(ct__cuda_allow_tf32(), 0);
#endif
}

static void test_pinned_cpu_side(void **state) {
  (void)state;
  int64_t shape[2] = {3, 5};
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned(2, shape, CT_F32));
  assert_true(ct_tensor_device(p).kind == CT_CPU);
  /* pinned where a backend pins (CUDA with a GPU, OpenCL with a device), which a GPU guarantees */
  assert_int_equal(ct_tensor_is_pinned(p), ct_device_can_pin(CT_DEVICE_CPU));
  if (have_gpu()) assert_true(ct_device_can_pin(CT_DEVICE_CPU));
  assert_true(ct_tensor_is_contiguous(p));
  float *d = ct_tensor_data(p);
  for (int i = 0; i < 15; i++) d[i] = (float)i * 0.5f;
  /* usable like any CPU tensor */
  ct_tensor *s = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
  assert_true(fabs(ct_item(s) - 52.5) < 1e-5);
  /* ct_pin_memory of a strided view of ordinary memory: a contiguous copy with the same values,
   * sharing nothing (a view of pinned p would be pinned already and come back itself) */
  ct_tensor *h = ct_assert_nonnull(ct_from_host(d, 2, shape, CT_F32, CT_DEVICE_CPU));
  d = ct_tensor_data(h);
  ct_tensor *v = ct_assert_nonnull(ct_transpose(h, 0, 1));
  ct_tensor *q = ct_assert_nonnull(ct_pin_memory(v));
  assert_int_equal(ct_tensor_is_pinned(q), ct_device_can_pin(CT_DEVICE_CPU));
  assert_true(ct_tensor_is_contiguous(q));
  assert_int_equal(ct_tensor_size(q, 0), 5);
  ct_assert_close(q, v, 0, 0);
  d[0] = 100.f;
  assert_true(((float *)ct_tensor_data(q))[0] == 0.f);
  /* an already pinned tensor comes back itself */
  ct_tensor *q2 = ct_assert_nonnull(ct_pin_memory(q));
  if (ct_device_can_pin(CT_DEVICE_CPU)) assert_ptr_equal(q2, q);
  assert_null(ct_pin_memory(NULL));
  assert_int_equal(ct_tensor_is_pinned(NULL), 0);
  /* bad shapes fail as ct_empty does */
  int64_t bad[1] = {-1};
  assert_null(ct_empty_pinned(1, bad, CT_F32));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  /* an ordinary tensor is not pinned */
  ct_tensor *o = ct_assert_nonnull(ct_empty(2, shape, CT_F32, CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_is_pinned(o), 0);
  /* a view of a pinned tensor shares its pinned storage: pinning it gives the view itself */
  ct_tensor *pv = ct_assert_nonnull(ct_transpose(p, 0, 1));
  assert_int_equal(ct_tensor_is_pinned(pv), ct_tensor_is_pinned(p));
  ct_tensor *pq = ct_assert_nonnull(ct_pin_memory(pv));
  if (ct_tensor_is_pinned(p)) assert_ptr_equal(pq, pv);
  ct_tensor_free(pq), ct_tensor_free(pv);
  ct_tensor_free(o), ct_tensor_free(q2), ct_tensor_free(q), ct_tensor_free(v), ct_tensor_free(h), ct_tensor_free(s), ct_tensor_free(p);
  ct_clear_error();
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_events_cpu(void **state) {
  (void)state;
  ct_event *a = ct_assert_nonnull(ct_event_record(CT_DEVICE_CPU));
  sleep_ms(5);
  ct_event *b = ct_assert_nonnull(ct_event_record(CT_DEVICE_CPU));
  assert_int_equal(ct_event_query(a), 1); /* the CPU queues nothing */
  ct_assert_ok(ct_event_synchronize(b));
  double ms = -1;
  ct_assert_ok(ct_event_elapsed_ms(a, b, &ms));
  assert_true(ms >= 4.0 && ms < 5000.0);
  ct_assert_ok(ct_event_elapsed_ms(a, a, &ms));
  assert_true(ms == 0.0);
  /* a CPU stream is a token */
  ct_stream *s = ct_assert_nonnull(ct_stream_new(CT_DEVICE_CPU));
  assert_true(ct_stream_device(s).kind == CT_CPU);
  assert_null(ct_stream_native(s));
  ct_event *c = ct_assert_nonnull(ct_stream_record_event(s));
  ct_assert_ok(ct_stream_wait_event(s, a));
  ct_assert_ok(ct_stream_wait_event(NULL, c));
  ct_assert_ok(ct_stream_synchronize(s));
  /* explicit waits are counted as synchronization points */
  ct_ledger_reset();
  ct_assert_ok(ct_event_synchronize(c));
  assert_int_equal(ct_ledger_get().syncs, 1);
  /* errors */
  assert_int_equal(ct_event_elapsed_ms(a, NULL, &ms), CT_EINVAL);
  assert_int_equal(ct_event_elapsed_ms(a, b, NULL), CT_EINVAL);
  assert_int_equal(ct_event_synchronize(NULL), CT_EINVAL);
  assert_true(ct_event_query(NULL) < 0);
  assert_int_equal(ct_stream_wait_event(s, NULL), CT_EINVAL);
  assert_int_equal(ct_stream_synchronize(NULL), CT_EINVAL);
  assert_null(ct_stream_record_event(NULL));
  ct_event_free(a), ct_event_free(b), ct_event_free(c), ct_event_free(NULL);
  ct_stream_free(s), ct_stream_free(NULL);
  ct_clear_error();
}

static void test_sync_debug_decision(void **state) {
  (void)state;
  /* the pure decision: nothing for the CPU, else by mode */
  for (int mode = 0; mode <= 2; mode++) assert_int_equal(ct__sync_debug_action(mode, CT_CPU), 0);
  assert_int_equal(ct__sync_debug_action(CT_SYNC_DEBUG_OFF, CT_CUDA), 0);
  assert_int_equal(ct__sync_debug_action(CT_SYNC_DEBUG_WARN, CT_CUDA), 1);
  assert_int_equal(ct__sync_debug_action(CT_SYNC_DEBUG_ERROR, CT_CUDA), 2);
  /* the switch */
  assert_int_equal(ct_get_sync_debug_mode(), 0);
  assert_int_equal(ct_set_sync_debug_mode(3), CT_EINVAL);
  assert_int_equal(ct_set_sync_debug_mode(-1), CT_EINVAL);
  assert_int_equal(ct_get_sync_debug_mode(), 0);
  /* warn: a message on stderr, the op goes on */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_WARN));
  uint64_t w0 = ct__sync_debug_warnings();
  ct_assert_ok(ct__sync_point("ct_item", GPU, "test: a device-to-host copy of 8 bytes"));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  ct_assert_ok(ct__sync_point("ct_item", CT_DEVICE_CPU, "never reported"));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  /* error: the op fails with a message naming it */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_ERROR));
  assert_int_equal(ct__sync_point("ct_item", GPU, "test: a device-to-host copy of 8 bytes"), CT_EINVAL);
  ct_assert_error_contains("ct_item");
  ct_assert_error_contains("sync-debug mode is 2");
  ct_assert_ok(ct__sync_point("ct_item", CT_DEVICE_CPU, "never reported"));
  /* CPU-only work never synchronizes: ct_item and ct_to_host still work in mode 2 */
  ct_tensor *s = ct_assert_nonnull(ct_scalar(2.5, CT_F32, CT_DEVICE_CPU));
  assert_true(ct_item(s) == 2.5);
  float f = 0;
  ct_assert_ok(ct_to_host(s, &f, sizeof f, CT_F32));
  assert_true(f == 2.5f);
  ct_tensor *c = ct_assert_nonnull(ct_to(s, CT_DEVICE_CPU, CT_COPY | CT_NON_BLOCKING));
  assert_true(ct_item(c) == 2.5);
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  ct_tensor_free(c), ct_tensor_free(s);
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_OFF));
  ct_clear_error();
}

/* Without CUDA, pin_memory and CT_NON_BLOCKING change nothing on the CPU path. */
static void test_non_blocking_cpu(void **state) {
  (void)state;
  int64_t n = 1000;
  ct_tensor *a = ct_assert_nonnull(ct_arange(0, (double)n, 1, CT_F32, CT_DEVICE_CPU));
  ct_tensor *p = ct_assert_nonnull(ct_pin_memory(a));
  ct_ledger_reset();
  ct_tensor *b = ct_assert_nonnull(ct_to(p, CT_DEVICE_CPU, CT_COPY | CT_NON_BLOCKING));
  ct_assert_close(b, a, 0, 0);
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies + l.d2h_copies + l.d2d_copies, 0); /* host to host is not traffic */
  ct_tensor_free(a), ct_tensor_free(p), ct_tensor_free(b);
}

/* ---------------------------------------------------------------- GPU side */

static void test_gpu_pinned_non_blocking(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  enum { N = (1 << 20) + 3 };
  int64_t n = N;
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned(1, &n, CT_F32));
  assert_true(ct_tensor_is_pinned(p));
  float *d = ct_tensor_data(p);
  for (int i = 0; i < N; i++) d[i] = (float)sin(i * 0.01) * 100.f;
  ct_ledger_reset();
  ct_tensor *g = ct_assert_nonnull(ct_to(p, GPU, CT_NON_BLOCKING));
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.h2d_bytes, (uint64_t)N * 4);
  assert_int_equal(l.pinned_copies, 1);
  assert_int_equal(l.sync_copies, 0); /* the host did not wait */
  ct_tensor_free(p); /* allowed at once: the pinned cache keeps the bytes until the copy ended */
  /* an op on the result is ordered after the copy */
  ct_tensor *g2 = ct_assert_nonnull(ct_mul_scalar(g, 2.0));
  /* back to the host, non-blocking: lands in pinned memory, valid after ct_synchronize */
  ct_ledger_reset();
  ct_tensor *h = ct_assert_nonnull(ct_to(g2, CT_DEVICE_CPU, CT_NON_BLOCKING));
  assert_true(ct_tensor_is_pinned(h));
  l = ct_ledger_get();
  assert_int_equal(l.d2h_copies, 1);
  assert_int_equal(l.pinned_copies, 1);
  assert_int_equal(l.sync_copies, 0);
  ct_assert_ok(ct_synchronize(GPU));
  const float *r = ct_tensor_data(h);
  for (int i = 0; i < N; i++)
    if (r[i] != (float)sin(i * 0.01) * 200.f) {
      fprintf(stderr, "element %d: %g, expected %g\n", i, r[i], (float)sin(i * 0.01) * 200.f);
      fail();
    }
  ct_tensor_free(g), ct_tensor_free(g2), ct_tensor_free(h);
}

static void test_gpu_pageable_is_blocking(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  int64_t n = 4096;
  ct_tensor *a = ct_assert_nonnull(ct_arange(0, (double)n, 1, CT_F32, CT_DEVICE_CPU));
  ct_ledger_reset();
  ct_tensor *g = ct_assert_nonnull(ct_to(a, GPU, CT_NON_BLOCKING)); /* asked, but pageable: honest */
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.pinned_copies, 0);
  assert_int_equal(l.sync_copies, 1);
  ct_tensor *b = ct_assert_nonnull(ct_to(g, CT_DEVICE_CPU, 0));
  l = ct_ledger_get();
  assert_int_equal(l.d2h_copies, 1);
  assert_int_equal(l.sync_copies, 2);
  assert_true(l.syncs >= 1);
  ct_assert_close(b, a, 0, 0);
  ct_tensor_free(a), ct_tensor_free(g), ct_tensor_free(b);
}

static void test_gpu_sync_debug(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  ct_tensor *s = ct_assert_nonnull(ct_scalar(4.0, CT_F32, GPU));
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_WARN));
  uint64_t w0 = ct__sync_debug_warnings();
  assert_true(ct_item(s) == 4.0); /* warns, then works */
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  /* a pinned non-blocking copy is not a synchronization */
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned(1, (int64_t[]){16}, CT_F32));
  ct_tensor *g = ct_assert_nonnull(ct_to(p, GPU, CT_NON_BLOCKING));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  /* a pageable one is */
  ct_tensor *q = ct_assert_nonnull(ct_empty(1, (int64_t[]){16}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *g2 = ct_assert_nonnull(ct_to(q, GPU, CT_NON_BLOCKING));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 2);
  /* explicit waits are never reported */
  ct_assert_ok(ct_synchronize(GPU));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 2);
  /* error mode: ct_item fails before it blocks */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_ERROR));
  assert_true(isnan(ct_item(s)));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("ct_item");
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_OFF));
  assert_true(ct_item(s) == 4.0);
  ct_tensor_free(s), ct_tensor_free(p), ct_tensor_free(g), ct_tensor_free(q), ct_tensor_free(g2);
  ct_clear_error();
}

/* One training-like step on the GPU: forward, backward, an SGD update, all temporaries in a scope. */
static void train_step(ct_tensor *w, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *y = ct_matmul(x, w);
  ct_tensor *l = ct_mean(ct_relu(y), 0, NULL, 0);
  ct_assert_ok(ct_backward(l));
  ct_no_grad_begin();
  ct_tensor *nw = ct_sub(w, ct_mul_scalar(ct_grad(w), 0.1));
  ct_assert_ok(ct_copy_(w, nw));
  ct_no_grad_end();
  ct_zero_grad(w);
  ct_scope_end();
}

static void test_gpu_memory_steady_state(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  const char *nc = getenv("CUTTLE_CUDA_NO_CACHE");
  if (nc && nc[0] && strcmp(nc, "0") != 0) {
    printf("# skipped: CUTTLE_CUDA_NO_CACHE turns the cache off\n");
    skip();
  }
  int64_t ws[2] = {256, 128}, xs[2] = {64, 256};
  ct_tensor *w = ct_assert_nonnull(ct_randn(2, ws, 0, 0.1, CT_F32, GPU, NULL));
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, xs, 0, 1, CT_F32, GPU, NULL));
  ct_assert_ok(ct_requires_grad_(w, 1));
  ct_memory_stats m[4];
  for (int step = 0; step < 3; step++) {
    train_step(w, x);
    ct_assert_ok(ct_memory_stats_get(GPU, &m[step]));
  }
  printf("# cudaMalloc calls after each step: %llu %llu %llu; allocated %zu, reserved %zu, peak %zu bytes\n",
         (unsigned long long)m[0].num_device_mallocs, (unsigned long long)m[1].num_device_mallocs,
         (unsigned long long)m[2].num_device_mallocs, m[2].allocated, m[2].reserved, m[2].peak_allocated);
  assert_int_equal(m[1].num_device_mallocs, m[0].num_device_mallocs); /* steady state: the cache serves */
  assert_int_equal(m[2].num_device_mallocs, m[0].num_device_mallocs);
  assert_int_equal(m[2].allocated, m[1].allocated);
  assert_true(m[2].reserved >= m[2].allocated);
  assert_true(m[2].peak_allocated >= m[2].allocated);
  /* the public figures are the allocator's */
  size_t al, re, pk;
  uint64_t nm;
#ifdef CUTTLE_WITH_CUDA
  ct__cuda_memory_stats(0, &al, &re, &pk, &nm);
  assert_int_equal(al, m[2].allocated);
  assert_int_equal(nm, m[2].num_device_mallocs);
#else
  (void)al, (void)re, (void)pk, (void)nm;
#endif
  ct_assert_ok(ct_reset_peak_memory_stats(GPU));
  ct_assert_ok(ct_memory_stats_get(GPU, &m[3]));
  assert_int_equal(m[3].peak_allocated, m[3].allocated);
  ct_assert_ok(ct_empty_cache(GPU));
  ct_assert_ok(ct_memory_stats_get(GPU, &m[3]));
  assert_int_equal(m[3].reserved, m[3].allocated);
  ct_tensor_free(w), ct_tensor_free(x);
}

static void test_gpu_pinned_cache(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  int64_t n = 3 << 18; /* 3 MiB of float32 */
  ct_memory_stats base, a, b;
  /* start from an empty pinned cache: a request takes a cached block of up to twice its size, and
   * pinned_allocated counts the block (on an H200 an earlier test's 5 MiB block served these 3 MiB) */
  ct_assert_ok(ct_synchronize(GPU));
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &base));
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned(1, &n, CT_F32));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &a));
  printf("# pinned bytes held: %zu before, %zu with the 3 MiB tensor\n", base.pinned_allocated, a.pinned_allocated);
  assert_int_equal(a.pinned_allocated, base.pinned_allocated + (size_t)n * 4);
  ct_tensor_free(p);
  for (int i = 0; i < 5; i++) { /* a steady state of pinned staging makes no cudaHostAlloc */
    ct_tensor *q = ct_assert_nonnull(ct_empty_pinned(1, &n, CT_F32));
    ct_tensor *g = ct_assert_nonnull(ct_to(q, GPU, CT_NON_BLOCKING));
    ct_tensor_free(q), ct_tensor_free(g);
  }
  ct_assert_ok(ct_synchronize(GPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &b));
  printf("# cudaHostAlloc calls: %llu then %llu\n", (unsigned long long)a.num_pinned_allocs,
         (unsigned long long)b.num_pinned_allocs);
  /* a block is reused once its copy ended; at most two may be in flight while the loop runs ahead */
  assert_true(b.num_pinned_allocs <= a.num_pinned_allocs + 2);
  assert_int_equal(b.pinned_allocated + (size_t)n * 4, a.pinned_allocated); /* 3 MiB: no rounding */
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &b));
  assert_int_equal(b.pinned_reserved, b.pinned_allocated);
}

static void test_gpu_events_and_streams(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  int64_t s[2] = {1024, 1024};
  ct_tensor *a = ct_assert_nonnull(ct_randn(2, s, 0, 1, CT_F32, GPU, NULL));
  ct_event *e0 = ct_assert_nonnull(ct_event_record(GPU));
  ct_tensor *b = ct_assert_nonnull(ct_matmul(a, a));
  ct_event *e1 = ct_assert_nonnull(ct_event_record(GPU));
  double ms = -1;
  ct_assert_ok(ct_event_elapsed_ms(e0, e1, &ms)); /* waits for e1 */
  printf("# 1024^3 matmul: %.3f ms\n", ms);
  assert_true(ms > 0 && ms < 10000);
  assert_int_equal(ct_event_query(e1), 1);
  /* a user stream ordered both ways against the compute stream */
  ct_stream *st = ct_assert_nonnull(ct_stream_new(GPU));
  assert_non_null(ct_stream_native(st));
  ct_assert_ok(ct_stream_wait_event(st, e1));
  ct_event *e2 = ct_assert_nonnull(ct_stream_record_event(st));
  ct_assert_ok(ct_stream_wait_event(NULL, e2));
  ct_assert_ok(ct_stream_synchronize(st));
  assert_int_equal(ct_event_query(e2), 1);
  /* events of two devices cannot be timed against each other */
  ct_event *c = ct_assert_nonnull(ct_event_record(CT_DEVICE_CPU));
  assert_int_equal(ct_event_elapsed_ms(c, e1, &ms), CT_EDEVICE);
  assert_int_equal(ct_stream_wait_event(st, c), CT_EDEVICE);
  ct_event_free(c), ct_event_free(e0), ct_event_free(e1), ct_event_free(e2);
  ct_stream_free(st);
  ct_tensor_free(a), ct_tensor_free(b);
  ct_clear_error();
}

int main(void) {
  if (!have_gpu())
    printf("# %s: the GPU tests below are skipped; the CPU side runs\n",
           BUILT_WITH_CUDA ? "CUDA backend built, no GPU visible" : "built without the CUDA backend");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_stats_cpu),
      cmocka_unit_test(test_missing_gpu_errors),
      cmocka_unit_test(test_tf32_switch),
      cmocka_unit_test(test_pinned_cpu_side),
      cmocka_unit_test(test_events_cpu),
      cmocka_unit_test(test_sync_debug_decision),
      cmocka_unit_test(test_non_blocking_cpu),
      cmocka_unit_test(test_gpu_pinned_non_blocking),
      cmocka_unit_test(test_gpu_pageable_is_blocking),
      cmocka_unit_test(test_gpu_sync_debug),
      cmocka_unit_test(test_gpu_memory_steady_state),
      cmocka_unit_test(test_gpu_pinned_cache),
      cmocka_unit_test(test_gpu_events_and_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
