/* tests/opencl/test_opencl_copies.c: pinned host memory, non-blocking copies, streams and events,
 * the sync-debug mode and loader prefetch on OpenCL devices (PoCL; two devices: POCL_DEVICES is set
 * before the first OpenCL call). What each test proves:
 *  - a non-blocking copy from pinned memory is right after ct_synchronize, ops queued after it see
 *    its data, and the ledger says it was asynchronous and pinned; a non-blocking request from
 *    pageable memory is counted as synchronous;
 *  - events: record, query, synchronize, elapsed time; stream_wait_event orders a second stream and
 *    the compute queue behind a stream held back by a user event, and refuses an event of another
 *    OpenCL device;
 *  - the pinned cache's figures, reuse and empty_cache;
 *  - a pinned block freed while its copy is still queued behind a long matmul is not handed out
 *    again, and the copy delivers the original bytes (run under ASan, no use after free);
 *  - sync-debug mode 2 makes ct_item on opencl:0 fail with a message, and leaves pinned non-blocking
 *    copies alone;
 *  - loader prefetch to opencl:0 with pin_memory gives the CPU loader's batches, copied
 *    non-blocking from pinned staging;
 *  - two devices computing at once while copies run between them.
 * Never skips: deps.sh installs PoCL, so the devices exist wherever the tests run. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "core/internal.h"

static const ct_device D0 = {CT_OPENCL, 0}, D1 = {CT_OPENCL, 1};

static float value_at(int i, float scale) { return scale * (float)(i % 23) - 5.25f + 0.125f * (float)(i % 101); }

/* Every element of device (or host) tensor t, as float32, equals want[i] * mul. */
static void assert_values(ct_tensor *t, const float *want, float mul, int n) {
  float *got = malloc((size_t)n * sizeof *got);
  assert_non_null(got);
  ct_assert_ok(ct_to_host(t, got, (size_t)n * sizeof *got, CT_F32));
  for (int i = 0; i < n; i++)
    if (got[i] != want[i] * mul) fail_msg("element %d: got %g, want %g", i, (double)got[i], (double)(want[i] * mul));
  free(got);
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL); }

static void test_non_blocking_from_pinned(void **state) {
  (void)state;
  enum { N = 5000 };
  assert_int_equal(ct_device_can_pin(D0), 1);
  assert_int_equal(ct_device_can_pin(D1), 1);
  assert_int_equal(ct_device_can_pin(CT_DEVICE_CPU), 1); /* OpenCL pins for the CPU when nothing comes first */
  int64_t n = N;
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned_for(D0, 1, &n, CT_F32));
  assert_true(ct_tensor_is_pinned(p));
  float *v = ct_tensor_data(p), want[N];
  for (int i = 0; i < N; i++) want[i] = v[i] = value_at(i, 1.0f);
  ct_ledger_reset();
  ct_tensor *d = ct_assert_nonnull(ct_to(p, D0, CT_NON_BLOCKING));
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.h2d_bytes, N * 4);
  assert_int_equal(l.pinned_copies, 1);
  assert_int_equal(l.sync_copies, 0); /* asynchronous */
  assert_int_equal(l.syncs, 0);
  ct_tensor_free(p); /* allowed at once: the pinned cache keeps the bytes until the copy ended */
  ct_tensor *y = ct_assert_nonnull(ct_add(d, d)); /* queued on the compute queue, after the copy */
  /* back to the host, non-blocking: lands in pinned memory, valid after ct_synchronize */
  ct_tensor *h = ct_assert_nonnull(ct_to(y, CT_DEVICE_CPU, CT_NON_BLOCKING));
  assert_true(ct_tensor_is_pinned(h));
  l = ct_ledger_get();
  assert_int_equal(l.d2h_copies, 1);
  assert_int_equal(l.pinned_copies, 2);
  assert_int_equal(l.sync_copies, 0);
  assert_int_equal(l.syncs, 0);
  ct_assert_ok(ct_synchronize(D0));
  assert_int_equal(ct_ledger_get().syncs, 1);
  const float *hv = ct_tensor_data(h);
  for (int i = 0; i < N; i++) assert_true(hv[i] == 2.0f * want[i]);
  /* the device copy itself is right too */
  assert_values(d, want, 1.0f, N);
  ct_tensor_free(h), ct_tensor_free(y), ct_tensor_free(d);
}

static void test_pageable_non_blocking_is_synchronous(void **state) {
  (void)state;
  enum { N = 300 };
  float vals[N];
  for (int i = 0; i < N; i++) vals[i] = value_at(i, 0.5f);
  int64_t n = N;
  ct_tensor *x = ct_assert_nonnull(ct_from_host(vals, 1, &n, CT_F32, CT_DEVICE_CPU));
  assert_false(ct_tensor_is_pinned(x));
  ct_ledger_reset();
  ct_tensor *d = ct_assert_nonnull(ct_to(x, D0, CT_NON_BLOCKING));
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.pinned_copies, 0);
  assert_int_equal(l.sync_copies, 1); /* honestly blocking */
  assert_values(d, vals, 1.0f, N);
  ct_tensor_free(d), ct_tensor_free(x);
}

/* A cl_event that holds back whatever waits for it until the test releases it. */
static cl_event gate_on(ct_stream *s) {
  cl_command_queue q = ct_stream_native(s);
  assert_non_null(q);
  cl_context ctx;
  assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL), CL_SUCCESS);
  cl_int e;
  cl_event gate = clCreateUserEvent(ctx, &e);
  assert_int_equal(e, CL_SUCCESS);
  assert_int_equal(clEnqueueBarrierWithWaitList(q, 1, &gate, NULL), CL_SUCCESS);
  assert_int_equal(clFlush(q), CL_SUCCESS);
  return gate;
}

static void test_events_and_streams(void **state) {
  (void)state;
  enum { N = 4096 };
  float vals[N];
  for (int i = 0; i < N; i++) vals[i] = value_at(i, 2.0f);
  int64_t n = N, sq[2] = {256, 256};
  ct_tensor *d = ct_assert_nonnull(ct_from_host(vals, 1, &n, CT_F32, D0));
  /* record, elapsed, synchronize, query */
  ct_tensor *a = ct_assert_nonnull(ct_full(2, sq, 0.5, CT_F32, D0));
  ct_event *e0 = ct_assert_nonnull(ct_event_record(D0));
  ct_tensor *m = ct_assert_nonnull(ct_matmul(a, a));
  ct_event *e1 = ct_assert_nonnull(ct_event_record(D0));
  ct_ledger_reset();
  ct_assert_ok(ct_event_synchronize(e1));
  assert_int_equal(ct_ledger_get().syncs, 1);
  assert_int_equal(ct_event_query(e0), 1);
  assert_int_equal(ct_event_query(e1), 1);
  double ms = -1;
  ct_assert_ok(ct_event_elapsed_ms(e0, e1, &ms));
  printf("# 256x256 matmul on opencl:0 between two events: %.3f ms\n", ms);
  assert_true(ms >= 0.0 && ms < 60e3);
  ct_event_free(e0), ct_event_free(e1);

  /* ordering: stream s1 is held back by a gate; the compute queue waits for s1's event, a second
   * stream s2 waits for the compute queue's event, so nothing after the gate may run before it opens */
  ct_stream *s1 = ct_assert_nonnull(ct_stream_new(D0)), *s2 = ct_assert_nonnull(ct_stream_new(D0));
  assert_true(ct_device_eq(ct_stream_device(s1), D0));
  cl_event gate = gate_on(s1);
  ct_event *after_gate = ct_assert_nonnull(ct_stream_record_event(s1));
  ct_assert_ok(ct_stream_wait_event(NULL, after_gate)); /* the compute queue of opencl:0 */
  ct_tensor *y = ct_assert_nonnull(ct_mul_scalar(d, 3.0)); /* queued behind the gate */
  ct_event *after_op = ct_assert_nonnull(ct_event_record(D0));
  ct_assert_ok(ct_stream_wait_event(s2, after_op));
  ct_event *on_s2 = ct_assert_nonnull(ct_stream_record_event(s2));
  sleep_ms(50);
  assert_int_equal(ct_event_query(after_gate), 0);
  assert_int_equal(ct_event_query(after_op), 0);
  assert_int_equal(ct_event_query(on_s2), 0);
  assert_int_equal(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  ct_assert_ok(ct_event_synchronize(on_s2));
  assert_int_equal(ct_event_query(after_gate), 1);
  assert_int_equal(ct_event_query(after_op), 1);
  ct_assert_ok(ct_stream_synchronize(s1));
  assert_values(y, vals, 3.0f, N);
  /* an event of opencl:1 cannot order a queue of opencl:0 (two contexts): an error that says so */
  ct_event *other = ct_assert_nonnull(ct_event_record(D1));
  assert_int_equal(ct_stream_wait_event(s2, other), CT_EDEVICE);
  ct_assert_error_contains("ct_event_synchronize");
  ct_assert_ok(ct_event_synchronize(other));
  clReleaseEvent(gate);
  ct_event_free(other), ct_event_free(on_s2), ct_event_free(after_op), ct_event_free(after_gate);
  ct_stream_free(s1), ct_stream_free(s2);
  ct_tensor_free(y), ct_tensor_free(m), ct_tensor_free(a), ct_tensor_free(d);
}

static void test_pinned_cache(void **state) {
  (void)state;
  ct_memory_stats m0, m1;
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m0));
  int64_t n = 1 << 18; /* 1 MiB of float32 */
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned_for(D0, 1, &n, CT_F32));
  void *first = ct_tensor_data(p);
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  assert_true(m1.pinned_allocated >= m0.pinned_allocated + ((size_t)1 << 20));
  assert_true(m1.pinned_reserved >= m1.pinned_allocated);
  assert_int_equal(m1.num_pinned_allocs, m0.num_pinned_allocs + 1);
  ct_tensor_free(p);
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  assert_int_equal(m1.pinned_allocated, m0.pinned_allocated);
  assert_true(m1.pinned_reserved >= m0.pinned_reserved + ((size_t)1 << 20)); /* cached */
  /* no copy used it: the block is idle and comes back for the same request */
  p = ct_assert_nonnull(ct_empty_pinned_for(D0, 1, &n, CT_F32));
  assert_ptr_equal(ct_tensor_data(p), first);
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  assert_int_equal(m1.num_pinned_allocs, m0.num_pinned_allocs + 1);
  ct_tensor_free(p);
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &m1));
  assert_int_equal(m1.pinned_reserved, m0.pinned_reserved);
  assert_int_equal(m1.pinned_allocated, m0.pinned_allocated);
}

static void test_pinned_free_while_copy_queued(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  int64_t n = N, big[2] = {768, 768};
  ct_tensor *a = ct_assert_nonnull(ct_full(2, big, 0.001, CT_F32, D0));
  ct_tensor *w = ct_assert_nonnull(ct_matmul(a, a)); /* warm up (kernels compiled), then queue long work */
  ct_tensor_free(w);
  ct_assert_ok(ct_synchronize(D0));
  ct_tensor *m1 = ct_assert_nonnull(ct_matmul(a, a));
  ct_tensor *m2 = ct_assert_nonnull(ct_matmul(m1, a));
  ct_tensor *m3 = ct_assert_nonnull(ct_matmul(m2, a));
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned_for(D0, 1, &n, CT_F32));
  float *pv = ct_tensor_data(p);
  static float want[N];
  for (int i = 0; i < N; i++) want[i] = pv[i] = value_at(i, 1.5f);
  ct_tensor *d = ct_assert_nonnull(ct_to(p, D0, CT_NON_BLOCKING)); /* waits behind the matmuls */
  ct_event *copied = ct_assert_nonnull(ct_event_record(D0));
  assert_int_equal(ct_event_query(copied), 0); /* the copy has not run yet */
  void *old = pv;
  ct_tensor_free(p);
  /* the same request must not get the block back while the copy may still read it */
  ct_tensor *q = ct_assert_nonnull(ct_empty_pinned_for(D0, 1, &n, CT_F32));
  assert_ptr_not_equal(ct_tensor_data(q), old);
  float *qv = ct_tensor_data(q);
  for (int i = 0; i < N; i++) qv[i] = -1.0f;
  ct_assert_ok(ct_synchronize(D0));
  assert_int_equal(ct_event_query(copied), 1);
  assert_values(d, want, 1.0f, N);
  /* after the copy ended the old block is idle again: emptying the cache releases it */
  ct_tensor_free(q);
  ct_assert_ok(ct_empty_cache(CT_DEVICE_CPU));
  ct_memory_stats st;
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &st));
  assert_int_equal(st.pinned_allocated, 0);
  assert_int_equal(st.pinned_reserved, 0);
  ct_event_free(copied);
  ct_tensor_free(d), ct_tensor_free(m3), ct_tensor_free(m2), ct_tensor_free(m1), ct_tensor_free(a);
}

static void test_sync_debug(void **state) {
  (void)state;
  enum { N = 64 };
  float vals[N];
  for (int i = 0; i < N; i++) vals[i] = value_at(i, 1.0f);
  int64_t n = N;
  ct_tensor *d = ct_assert_nonnull(ct_from_host(vals, 1, &n, CT_F32, D0));
  ct_tensor *s = ct_assert_nonnull(ct_sum(d, 0, NULL, 0));
  ct_tensor *x = ct_assert_nonnull(ct_from_host(vals, 1, &n, CT_F32, CT_DEVICE_CPU));
  ct_tensor *p = ct_assert_nonnull(ct_pin_memory(x));
  assert_true(ct_tensor_is_pinned(p));
  /* warn: the read-back is counted and reported, and still works */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_WARN));
  uint64_t w0 = ct__sync_debug_warnings();
  double v = ct_item(s);
  assert_false(isnan(v));
  assert_int_equal(ct__sync_debug_warnings(), w0 + 1);
  /* error: ct_item on opencl:0 fails before it blocks, naming the op and the device */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_ERROR));
  ct_ledger_reset();
  assert_true(isnan(ct_item(s)));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("ct_item");
  ct_assert_error_contains("opencl:0");
  ct_assert_error_contains("sync-debug mode is 2");
  assert_int_equal(ct_ledger_get().d2h_copies, 0);
  /* a blocking copy from pageable memory fails too; the pinned non-blocking one does not */
  assert_null(ct_to(x, D0, CT_NON_BLOCKING));
  ct_assert_error_contains("pageable");
  ct_tensor *dp = ct_assert_nonnull(ct_to(p, D0, CT_NON_BLOCKING));
  ct_assert_ok(ct_synchronize(D0)); /* an explicit wait is never reported */
  ct_assert_ok(ct_set_sync_debug_mode(CT_SYNC_DEBUG_OFF));
  assert_values(dp, vals, 1.0f, N);
  ct_tensor_free(dp), ct_tensor_free(p), ct_tensor_free(x), ct_tensor_free(s), ct_tensor_free(d);
  ct_clear_error();
}

/* A dataset whose sample i has pixels (i * 7 + j) % 256 and label i. */
#define LN 103
#define LC 1
#define LH 4
#define LW 5
static ct_dataset *make_ds(void) {
  static uint8_t px[LN * LC * LH * LW];
  int64_t lb[LN];
  for (int i = 0; i < LN; i++) {
    lb[i] = i;
    for (int j = 0; j < LC * LH * LW; j++) px[i * LC * LH * LW + j] = (uint8_t)((i * 7 + j) % 256);
  }
  return ct_assert_nonnull(ct_dataset_from_u8(px, lb, LN, LC, LH, LW, LN, CT_FASHION_MNIST_MEAN, CT_FASHION_MNIST_STD));
}

static void test_loader_prefetch(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  const int workers[] = {0, 2};
  for (int wi = 0; wi < 2; wi++) {
    ct_loader_opts o = {.batch_size = 16, .shuffle = 1, .seed = 11, .num_workers = workers[wi]};
    ct_loader *cpu = ct_assert_nonnull(ct_loader_new(ds, &o));
    o.device = D0, o.pin_memory = 1;
    ct_loader *dev = ct_assert_nonnull(ct_loader_new(ds, &o));
    int64_t nb = ct_loader_len(cpu);
    assert_int_equal(ct_loader_len(dev), nb);
    for (int epoch = 0; epoch < 2; epoch++) {
      ct_ledger_reset();
      int batches = 0;
      for (;;) {
        ct_tensor *cx, *cy, *dx, *dy;
        int rc = ct_loader_next(cpu, &cx, &cy), rd = ct_loader_next(dev, &dx, &dy);
        assert_int_equal(rc, rd);
        if (rc == 0) break;
        assert_int_equal(rc, 1);
        batches++;
        assert_true(ct_device_eq(ct_tensor_device(dx), D0));
        assert_true(ct_device_eq(ct_tensor_device(dy), D0));
        ct_ledger before = ct_ledger_get();
        int64_t b = ct_tensor_size(cx, 0), nx = ct_tensor_numel(cx);
        assert_int_equal(ct_tensor_size(dx, 0), b);
        float *fx = malloc((size_t)nx * sizeof *fx);
        int64_t *iy = malloc((size_t)b * sizeof *iy), *cyv = ct_tensor_data(cy);
        ct_assert_ok(ct_to_host(dx, fx, (size_t)nx * sizeof *fx, CT_F32));
        ct_assert_ok(ct_to_host(dy, iy, (size_t)b * sizeof *iy, CT_I64));
        assert_memory_equal(fx, ct_tensor_data(cx), (size_t)nx * sizeof *fx); /* bit for bit */
        assert_memory_equal(iy, cyv, (size_t)b * sizeof *iy);
        free(fx), free(iy);
        ct_ledger after = ct_ledger_get();
        assert_int_equal(after.h2d_copies, before.h2d_copies); /* reading back adds no host-to-device copy */
        assert_int_equal(after.pinned_copies, before.pinned_copies); /* and reads into pageable memory */
        ct_tensor_free(cx), ct_tensor_free(cy), ct_tensor_free(dx), ct_tensor_free(dy);
      }
      assert_int_equal(batches, nb);
      ct_ledger l = ct_ledger_get();
      /* every batch came over as two pinned, asynchronous copies (x and y); only the read-backs blocked */
      assert_int_equal(l.h2d_copies, 2 * nb);
      assert_int_equal(l.pinned_copies, 2 * nb);
      assert_int_equal(l.sync_copies, 2 * nb);
      assert_int_equal(l.d2h_copies, 2 * nb);
    }
    ct_loader_free(dev), ct_loader_free(cpu);
  }
  ct_dataset_free(ds);
}

static void test_two_devices_at_once(void **state) {
  (void)state;
  enum { R = 192 };
  static float av[R * R], want[R * R];
  for (int i = 0; i < R * R; i++) av[i] = value_at(i, 0.01f);
  int64_t sq[2] = {R, R};
  ct_tensor *ha = ct_assert_nonnull(ct_empty_pinned_for(D0, 2, sq, CT_F32));
  memcpy(ct_tensor_data(ha), av, sizeof av);
  ct_tensor *ca = ct_assert_nonnull(ct_from_host(av, 2, sq, CT_F32, CT_DEVICE_CPU));
  ct_tensor *cm = ct_assert_nonnull(ct_matmul(ca, ca));
  memcpy(want, ct_tensor_data(cm), sizeof want);
  ct_ledger_reset();
  /* pinned memory from opencl:0's context feeds both devices asynchronously */
  ct_tensor *a0 = ct_assert_nonnull(ct_to(ha, D0, CT_NON_BLOCKING));
  ct_tensor *a1 = ct_assert_nonnull(ct_to(ha, D1, CT_NON_BLOCKING));
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.pinned_copies, 2);
  assert_int_equal(l.sync_copies, 0);
  ct_tensor_free(ha);
  /* both devices compute; copies between them run while the other device still has work queued */
  ct_tensor *m0 = ct_assert_nonnull(ct_matmul(a0, a0));
  ct_tensor *m1 = ct_assert_nonnull(ct_matmul(a1, a1));
  ct_tensor *m0b = ct_assert_nonnull(ct_matmul(m0, a0)); /* opencl:0 keeps busy */
  ct_tensor *m1_on0 = ct_assert_nonnull(ct_to(m1, D0, 0));
  ct_tensor *m0_on1 = ct_assert_nonnull(ct_to(m0, D1, 0));
  l = ct_ledger_get();
  assert_int_equal(l.d2h_copies, 2); /* each device-to-device copy staged through the host: two copies */
  assert_int_equal(l.h2d_copies, 4);
  ct_tensor *s0 = ct_assert_nonnull(ct_add(m1_on0, m0)); /* = 2 a a on opencl:0 */
  ct_tensor *s1 = ct_assert_nonnull(ct_add(m0_on1, m1)); /* = 2 a a on opencl:1 */
  /* float32 matmuls by different kernels may round differently: compare with a tolerance */
  ct_tensor *w = ct_assert_nonnull(ct_mul_scalar(cm, 2.0));
  ct_assert_close(s0, w, 1e-4, 1e-4);
  ct_assert_close(s1, w, 1e-4, 1e-4);
  ct_assert_close(m1_on0, cm, 1e-4, 1e-4);
  ct_assert_ok(ct_synchronize(D0));
  ct_assert_ok(ct_synchronize(D1));
  ct_tensor *all[] = {ca, cm, a0, a1, m0, m1, m0b, m1_on0, m0_on1, s0, s1, w};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}


int main(void) {
  if (!ct_test_require_opencl(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_non_blocking_from_pinned),
      cmocka_unit_test(test_pageable_non_blocking_is_synchronous),
      cmocka_unit_test(test_events_and_streams),
      cmocka_unit_test(test_pinned_cache),
      cmocka_unit_test(test_pinned_free_while_copy_queued),
      cmocka_unit_test(test_sync_debug),
      cmocka_unit_test(test_loader_prefetch),
      cmocka_unit_test(test_two_devices_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
