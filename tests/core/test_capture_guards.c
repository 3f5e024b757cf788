/* tests/core/test_capture_guards.c: the core's side of graph capture (core/capture.c), which runs
 * on every device. Only CUDA captures, but the guards are the core's: while a capture is marked on
 * a device, every call that would wait for it, read it back, copy from the host or free what it uses
 * fails with CT_EINVAL naming itself, is recorded as refused (so that capture_end fails instead of
 * returning a graph without it), and the other devices go on. Here the capture is marked on
 * opencl:0 (PoCL in CI) by the core's own hook, without a backend capture behind it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "core/internal.h"

static void test_guards_refuse_and_record(void **state) {
  (void)state;
  if (!ct_test_require_opencl(1)) fail();
  ct_device d = {CT_OPENCL, 0};
  int64_t n = 4;
  ct_tensor *x = ct_assert_nonnull(ct_full(1, &n, 2.0, CT_F32, d));
  ct_tensor *s = ct_assert_nonnull(ct_sum(x, 0, NULL, 0));
  ct_event *ev = ct_assert_nonnull(ct_event_record(d));
  ct_stream *st = ct_assert_nonnull(ct_stream_new(d));
  assert_true(ct__capture_claim(d));
  assert_false(ct__capture_claim(d)); /* one at a time */
  assert_null(ct__capture_refused());
  /* a read back */
  assert_true(isnan(ct_item(s)));
  ct_assert_error_contains("graph capture");
  assert_string_equal(ct__capture_refused(), "ct_item"); /* the first refusal is the one named */
  /* a copy from the host, waits, and freeing the cache */
  float host[4] = {1, 2, 3, 4};
  assert_null(ct_from_host(host, 1, &n, CT_F32, d));
  ct_assert_error_contains("graph capture");
  assert_int_equal(ct_synchronize(d), CT_EINVAL);
  assert_int_equal(ct_stream_synchronize(st), CT_EINVAL);
  assert_int_equal(ct_event_synchronize(ev), CT_EINVAL);
  assert_int_equal(ct_event_query(ev), CT_EINVAL);
  assert_int_equal(ct_empty_cache(d), CT_EINVAL);
  assert_int_equal(ct_empty_cache(CT_DEVICE_CPU), CT_EINVAL); /* pinned memory: a device-wide wait */
  assert_string_equal(ct__capture_refused(), "ct_item");
  /* another device goes on */
  ct_device other = {CT_OPENCL, 1};
  if (ct_device_available(other)) {
    ct_tensor *y = ct_assert_nonnull(ct_full(1, &n, 3.0, CT_F32, other));
    ct_tensor *ys = ct_assert_nonnull(ct_sum(y, 0, NULL, 0));
    assert_true(ct_item(ys) == 12.0);
    ct_assert_ok(ct_synchronize(other));
    ct_tensor_free(ys), ct_tensor_free(y);
  }
  ct__capture_release();
  /* after the capture: everything works again, and a new claim starts with no refusal */
  assert_true(ct_item(s) == 8.0);
  ct_assert_ok(ct_synchronize(d));
  ct_assert_ok(ct_event_synchronize(ev));
  ct_assert_ok(ct_empty_cache(d));
  assert_true(ct__capture_claim(d));
  assert_null(ct__capture_refused());
  ct__capture_release();
  ct_stream_free(st), ct_event_free(ev);
  ct_tensor_free(s), ct_tensor_free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_guards_refuse_and_record)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
