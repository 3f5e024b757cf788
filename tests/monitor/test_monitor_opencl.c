/* tests/monitor/test_monitor_opencl.c: the monitor knows OpenCL devices through the registry. After
 * a tensor is allocated on opencl:0, this process's allocator view (what `cuttle smi --pid` shows)
 * lists opencl:0 with the backend's allocated, reserved and peak figures, in the snapshot, in its
 * JSON and text renderings, and through the published stats file; a device never allocated on is
 * not a row; and ct_device_best never picks PoCL's CPU-type device on its own.
 *
 * Runs on PoCL (two devices with POCL_DEVICES="pthread pthread"); never skips, as tests/opencl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "monitor/monitor_internal.h"

static const ct_monitor_proc_device *find(const ct_monitor_proc *p, const char *name) {
  for (int i = 0; i < p->ndevices; i++)
    if (strcmp(p->devices[i].device, name) == 0) return &p->devices[i];
  return NULL;
}

static void test_best_skips_cpu_type_devices(void **state) {
  (void)state;
  int n = ct_device_count(CT_OPENCL), gpus = 0;
  for (int i = 0; i < n; i++) {
    ct_device_props props;
    ct_assert_ok(ct_device_props_get(CT_DEVICE_OPENCL(i), &props));
    gpus += props.device_type == CT_DEVICE_TYPE_GPU;
  }
  for (int policy = CT_BEST_MOST_FREE_MEMORY; policy <= CT_BEST_LEAST_UTILIZATION; policy++) {
    ct_device best = ct_device_best((ct_best_policy)policy), none = {CT_CPU, 0};
    ct_device_props props;
    if (best.kind == CT_OPENCL) { /* chosen among GPUs only */
      ct_assert_ok(ct_device_props_get(best, &props));
      assert_int_equal(props.device_type, CT_DEVICE_TYPE_GPU);
    }
    /* PoCL's devices are CPU-type: without a GPU of either backend the best device is the CPU. */
    if (gpus == 0 && ct_device_count(CT_CUDA) == 0) assert_true(ct_device_eq(best, none));
  }
}

static void test_allocator_view_lists_opencl(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  assert_non_null(dir);
  setenv("XDG_RUNTIME_DIR", dir, 1);
  setenv("CUTTLE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  int64_t shape[] = {1000};
  ct_tensor *t = ct_assert_nonnull(ct_ones(1, shape, CT_F32, CT_DEVICE_OPENCL(0)));
  ct_memory_stats ms;
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_OPENCL(0), &ms));
  assert_true(ms.allocated >= 4000 && ms.peak_allocated >= ms.allocated);

  size_t a = 0, r = 0;
  ct_assert_ok(ct_monitor_allocator_stats(CT_DEVICE_OPENCL(0), &a, &r));
  assert_int_equal(a, ms.allocated);
  assert_int_equal(r, ms.reserved);
  assert_int_equal(ct_monitor_allocator_stats(CT_DEVICE_OPENCL(99), &a, &r), CT_EUNSUPPORTED);
  ct_assert_error_contains("opencl:99");

  ct_monitor_options opt = {.pid = getpid()};
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(&opt));
  assert_string_equal(s->proc.devices[0].device, "cpu");
  const ct_monitor_proc_device *d = find(&s->proc, "opencl:0");
  assert_non_null(d);
  assert_int_equal(d->allocated, (int64_t)ms.allocated);
  assert_int_equal(d->reserved, (int64_t)ms.reserved);
  assert_int_equal(d->peak_allocated, (int64_t)ms.peak_allocated);
  assert_null(find(&s->proc, "opencl:1")); /* never allocated on: not a row */
  char *json = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_JSON));
  char want[128];
  snprintf(want, sizeof want, "\"device\":\"opencl:0\",\"allocated_bytes\":%zu,\"reserved_bytes\":%zu,\"peak_allocated_bytes\":%zu",
           ms.allocated, ms.reserved, ms.peak_allocated);
  assert_non_null(strstr(json, want));
  free(json);
  char *text = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_TEXT));
  assert_non_null(strstr(text, "opencl:0"));
  assert_non_null(strstr(text, "peak"));
  free(text);
  ct_monitor_snapshot_free(s);

  /* What `cuttle smi --pid` of another process reads: the published file keeps the row and its peak. */
  ct_assert_ok(ct_monitor_publish());
  ct_monitor_proc p;
  memset(&p, 0, sizeof p);
  assert_int_equal(ct__stats_read(getpid(), &p), 1);
  d = find(&p, "opencl:0");
  assert_non_null(d);
  assert_int_equal(d->allocated, (int64_t)ms.allocated);
  assert_int_equal(d->peak_allocated, (int64_t)ms.peak_allocated);
  ct_assert_ok(ct_monitor_unpublish());

  ct_tensor_free(t);
  unsetenv("CUTTLE_NVML_LIBRARY");
  unsetenv("XDG_RUNTIME_DIR");
  ct_test_rmdir(dir);
}

int main(void) {
  if (!ct_test_require_opencl(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_best_skips_cpu_type_devices),
      cmocka_unit_test(test_allocator_view_lists_opencl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
