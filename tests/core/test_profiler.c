/* tests/core/test_profiler.c: the kernel profiler (cuttle/profiler.h). Off, it records nothing;
 * on, every kernel call counts once in the row of its kernel, op and device, and pausing keeps the
 * sums while reset clears them; the table prints them; CT_PROFILE_SYNC waits for a device after
 * each of its kernel calls and never for the CPU. The OpenCL case runs on PoCL (deps.sh installs
 * it) wherever the OpenCL backend is built. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "core/backend.h"
#include "testutil.h"

/* the row of kernel k called by op on device dev among rows[0 .. n), or NULL */
static const ct_profile_row *find(const ct_profile_row *rows, int n, const char *k, const char *op, const char *dev) {
  for (int i = 0; i < n; i++)
    if (strcmp(rows[i].kernel, k) == 0 && (!op || strcmp(rows[i].op, op) == 0) && strcmp(rows[i].device, dev) == 0)
      return &rows[i];
  return NULL;
}

/* the calls of rows[0 .. n) on device dev (NULL: on every device) */
static int64_t calls_on(const ct_profile_row *rows, int n, const char *dev) {
  int64_t c = 0;
  for (int i = 0; i < n; i++) c += !dev || strcmp(rows[i].device, dev) == 0 ? rows[i].calls : 0;
  return c;
}

/* a (8, 16) @ (16, 4) matmul on dev, freed */
static void one_matmul(ct_device dev) {
  ct_tensor *a = ct_assert_nonnull(ct_ones(2, (int64_t[]){8, 16}, CT_F32, dev));
  ct_tensor *b = ct_assert_nonnull(ct_ones(2, (int64_t[]){16, 4}, CT_F32, dev));
  ct_tensor *c = ct_assert_nonnull(ct_matmul(a, b));
  ct_tensor_free(c), ct_tensor_free(b), ct_tensor_free(a);
}

static void off_records_nothing(void **state) {
  (void)state;
  ct_profiler_reset();
  assert_int_equal(ct_profiler_mode(), CT_PROFILE_OFF);
  one_matmul(CT_DEVICE_CPU);
  assert_int_equal(ct_profiler_rows(NULL, 0), 0);
}

static void host_counts_every_call(void **state) {
  (void)state;
  ct_profiler_reset();
  ct_tensor *a = ct_assert_nonnull(ct_ones(2, (int64_t[]){8, 16}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *b = ct_assert_nonnull(ct_ones(2, (int64_t[]){16, 4}, CT_F32, CT_DEVICE_CPU));
  ct_profiler_set_mode(CT_PROFILE_HOST);
  assert_int_equal(ct_profiler_mode(), CT_PROFILE_HOST);
  for (int i = 0; i < 3; i++) ct_tensor_free(ct_assert_nonnull(ct_matmul(a, b)));
  ct_tensor *s = ct_assert_nonnull(ct_add(a, a));
  ct_profiler_set_mode(CT_PROFILE_OFF);
  ct_tensor_free(ct_assert_nonnull(ct_matmul(a, b))); /* paused: not counted */

  ct_profile_row rows[64];
  int n = ct_profiler_rows(rows, 64);
  assert_true(n >= 2 && n <= 64);
  const ct_profile_row *mm = find(rows, n, "matmul", NULL, "cpu"), *add = find(rows, n, "binary", NULL, "cpu");
  assert_non_null(mm);
  assert_non_null(add);
  assert_int_equal(mm->calls, 3);
  assert_int_equal(add->calls, 1);
  assert_true(mm->seconds > 0 && add->seconds > 0);
  for (int i = 1; i < n; i++) assert_true(rows[i - 1].seconds >= rows[i].seconds); /* largest first */
  /* a smaller buffer gets the first rows and the count of all */
  ct_profile_row one;
  assert_int_equal(ct_profiler_rows(&one, 1), n);
  assert_string_equal(one.kernel, rows[0].kernel);

  /* on again: the sums go on from where they were */
  ct_profiler_set_mode(CT_PROFILE_HOST);
  ct_tensor_free(ct_assert_nonnull(ct_matmul(a, b)));
  ct_profiler_set_mode(CT_PROFILE_OFF);
  n = ct_profiler_rows(rows, 64);
  assert_int_equal(find(rows, n, "matmul", NULL, "cpu")->calls, 4);

  /* the table: a header, a line per row, the total */
  FILE *f = tmpfile();
  assert_non_null(f);
  double total = ct_profiler_print(f, 0);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += rows[i].seconds;
  assert_true(total > 0 && total == sum);
  char text[8192];
  rewind(f);
  size_t got = fread(text, 1, sizeof text - 1, f);
  text[got] = 0;
  fclose(f);
  assert_non_null(strstr(text, "kernel"));
  assert_non_null(strstr(text, "matmul"));
  char want[64];
  int64_t calls = calls_on(rows, n, NULL);
  snprintf(want, sizeof want, "total: %lld calls", (long long)calls);
  assert_non_null(strstr(text, want));

  ct_profiler_reset();
  assert_int_equal(ct_profiler_rows(NULL, 0), 0);
  ct_tensor_free(s), ct_tensor_free(b), ct_tensor_free(a);
}

/* an out-of-range mode is an error that changes nothing; the CPU is never waited for */
static void sync_waits_for_devices_only(void **state) {
  (void)state;
  ct_profiler_reset();
  assert_int_equal(ct_profiler_set_mode((ct_profile_mode)7), CT_EINVAL);
  ct_assert_error_contains("ct_profiler_set_mode: mode 7");
  assert_int_equal(ct_profiler_mode(), CT_PROFILE_OFF);
  int64_t w0 = ct__profile_waits();
  ct_profiler_set_mode(CT_PROFILE_SYNC);
  one_matmul(CT_DEVICE_CPU);
  ct_profiler_set_mode(CT_PROFILE_OFF);
  assert_int_equal(ct__profile_waits(), w0);
  ct_profile_row rows[16];
  int n = ct_profiler_rows(rows, 16);
  assert_non_null(find(rows, n, "matmul", NULL, "cpu"));
  ct_profiler_reset();
}

/* the file at path, parsed (NULL when it is not JSON) */
static cJSON *read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return cJSON_Parse(buf);
}

/* The Chrome trace: one complete ("X") event per profiled call with the row's names, a thread id,
 * non-negative times; the calls past max_events counted as dropped; an unwritable path is CT_EIO
 * and leaves no file; trace off keeps nothing new. */
static void chrome_trace(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  assert_non_null(dir);
  char path[4200], bad[4200];
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(bad, sizeof bad, "%s/no/such/dir/trace.json", dir);
  assert_int_equal(ct_profiler_set_trace(1, -1), CT_EINVAL);
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_trace(1, 0));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  for (int i = 0; i < 3; i++) one_matmul(CT_DEVICE_CPU);
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  ct_assert_ok(ct_profiler_export_chrome_trace(path));
  cJSON *j = read_json(path);
  assert_non_null(j);
  cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
  assert_true(cJSON_IsArray(ev));
  int64_t mm = 0;
  ct_profile_row rows[16];
  int n = ct_profiler_rows(rows, 16);
  int64_t calls = calls_on(rows, n, NULL);
  assert_int_equal(cJSON_GetArraySize(ev), calls);
  cJSON *e;
  cJSON_ArrayForEach(e, ev) {
    assert_string_equal(cJSON_GetObjectItem(e, "ph")->valuestring, "X");
    assert_true(cJSON_GetObjectItem(e, "ts")->valuedouble >= 0 && cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
    assert_true(cJSON_GetObjectItem(e, "tid")->valueint >= 0);
    cJSON *args = cJSON_GetObjectItem(e, "args");
    assert_string_equal(cJSON_GetObjectItem(args, "device")->valuestring, "cpu");
    mm += strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "matmul") == 0;
  }
  assert_int_equal(mm, 3);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "otherData"), "dropped_events")->valueint, 0);
  cJSON_Delete(j);

  /* two events kept, the rest dropped and counted */
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_trace(1, 2));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  for (int i = 0; i < 3; i++) one_matmul(CT_DEVICE_CPU);
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  ct_assert_ok(ct_profiler_export_chrome_trace(path));
  j = read_json(path);
  assert_non_null(j);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "traceEvents")), 2);
  n = ct_profiler_rows(rows, 16);
  calls = calls_on(rows, n, NULL);
  assert_true(calls > 2);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "otherData"), "dropped_events")->valueint, calls - 2);
  cJSON_Delete(j);

  /* off: the calls are summed, not kept */
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_trace(0, 0));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  one_matmul(CT_DEVICE_CPU);
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  assert_true(ct_profiler_rows(NULL, 0) > 0);
  ct_assert_ok(ct_profiler_export_chrome_trace(path));
  j = read_json(path);
  assert_non_null(j);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "traceEvents")), 0);
  cJSON_Delete(j);

  assert_int_equal(ct_profiler_export_chrome_trace(bad), CT_EIO);
  ct_assert_error_contains("cannot write");
  FILE *none = fopen(bad, "r");
  assert_null(none); /* nothing written there */
  /* shrinking the kept events counts the ones let go as dropped */
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_trace(1, 0));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  one_matmul(CT_DEVICE_CPU);
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  ct_assert_ok(ct_profiler_set_trace(1, 1));
  ct_assert_ok(ct_profiler_export_chrome_trace(path));
  j = read_json(path);
  assert_non_null(j);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "traceEvents")), 1);
  assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "otherData"), "dropped_events")->valueint >= 2);
  cJSON_Delete(j);
  assert_int_equal(ct_profiler_set_trace(1, INT64_MAX), CT_ENOMEM); /* no size to allocate: refused, nothing changes */
  ct_assert_ok(ct_profiler_set_trace(0, 0));
  assert_int_equal(ct_profiler_export_chrome_trace(NULL), CT_EINVAL);
  ct_profiler_reset();
  ct_test_rmdir(dir);
}

#ifdef CUTTLE_WITH_OPENCL
/* On opencl:0 every profiled kernel call is followed by one wait in CT_PROFILE_SYNC and none in
 * CT_PROFILE_HOST, and the rows name the device. */
static void sync_waits_after_each_device_kernel(void **state) {
  (void)state;
  ct_device cl = CT_DEVICE_OPENCL(0);
  if (!ct_device_available(cl)) fail_msg("no opencl:0: scripts/deps.sh installs PoCL, which gives one");
  one_matmul(cl); /* builds the programs outside the profile */
  ct_profiler_reset();
  int64_t w0 = ct__profile_waits();
  ct_profiler_set_mode(CT_PROFILE_HOST);
  one_matmul(cl);
  ct_profiler_set_mode(CT_PROFILE_OFF);
  assert_int_equal(ct__profile_waits(), w0);
  ct_profile_row rows[32];
  int n = ct_profiler_rows(rows, 32);
  int64_t host_calls = calls_on(rows, n, "opencl:0");
  assert_non_null(find(rows, n, "matmul", NULL, "opencl:0"));
  ct_profiler_reset();
  ct_profiler_set_mode(CT_PROFILE_SYNC);
  one_matmul(cl);
  ct_profiler_set_mode(CT_PROFILE_OFF);
  n = ct_profiler_rows(rows, 32);
  int64_t sync_calls = calls_on(rows, n, "opencl:0");
  assert_true(sync_calls >= 1);
  assert_int_equal(sync_calls, host_calls);
  assert_int_equal(ct__profile_waits() - w0, sync_calls);
  ct_profiler_reset();
}

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A kernel that calls another through CT_KERNEL_CALL (OpenCL's index_select casts an int32 index
 * to int64 through the copy kernel, "a contiguous temporary") is charged its self time: both rows
 * appear, and their sum stays within the wall time of the call, where inclusive times would count
 * the copy twice (in sync mode the copy waits for the device: most of the call). The copies between
 * memories have rows of their own. */
static void self_times_and_copies(void **state) {
  (void)state;
  ct_device cl = CT_DEVICE_OPENCL(0);
  if (!ct_device_available(cl)) fail_msg("no opencl:0: scripts/deps.sh installs PoCL, which gives one");
  int64_t xs[1] = {8}, is[1] = {1 << 18};
  ct_tensor *xh = ct_assert_nonnull(ct_ones(1, xs, CT_F32, CT_DEVICE_CPU));
  ct_tensor *idx = ct_assert_nonnull(ct_zeros(1, is, CT_I32, cl));
  ct_profiler_reset();
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_HOST));
  ct_tensor *x = ct_assert_nonnull(ct_to(xh, cl, 0));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  ct_tensor_free(ct_assert_nonnull(ct_index_select(x, 0, idx))); /* builds the programs outside the profile */
  ct_profile_row rows[32];
  int n = ct_profiler_rows(rows, 32);
  const ct_profile_row *up = find(rows, n, "memcpy_host_to_device", "ct_to", "opencl:0");
  assert_non_null(up);
  assert_int_equal(up->calls, 1);

  ct_profiler_reset();
  char *dir = ct_test_tmpdir(), path[4200];
  assert_non_null(dir);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  ct_assert_ok(ct_profiler_set_trace(1, 0));
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_SYNC));
  double t0 = wall();
  ct_tensor *y = ct_assert_nonnull(ct_index_select(x, 0, idx));
  double w = wall() - t0;
  float one;
  ct_tensor *first = ct_assert_nonnull(ct_narrow(y, 0, 0, 1));
  ct_assert_ok(ct_to_host(first, &one, sizeof one, CT_F32));
  ct_tensor_free(first);
  ct_assert_ok(ct_profiler_set_mode(CT_PROFILE_OFF));
  assert_true(one == 1.0f);
  n = ct_profiler_rows(rows, 32);
  const ct_profile_row *sel = find(rows, n, "index_select", NULL, "opencl:0"),
                       *tmp = find(rows, n, "copy", "a contiguous temporary", "opencl:0"),
                       *down = find(rows, n, "memcpy_device_to_host", "ct_to_host", "opencl:0");
  assert_non_null(sel);
  assert_non_null(tmp);
  assert_non_null(down);
  assert_int_equal(sel->calls, 1);
  assert_int_equal(tmp->calls, 1);
  assert_true(sel->seconds >= 0 && tmp->seconds > 0);
  if (sel->seconds + tmp->seconds > w) fail_msg("self times %g + %g s exceed the call's %g s", sel->seconds, tmp->seconds, w);
  /* in the trace the copy's event lies within index_select's, on the same thread */
  ct_assert_ok(ct_profiler_set_trace(0, 0));
  ct_assert_ok(ct_profiler_export_chrome_trace(path));
  cJSON *j = read_json(path), *e, *outer = NULL, *inner = NULL;
  assert_non_null(j);
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    if (strcmp(name, "index_select") == 0) outer = e;
    if (strcmp(name, "copy") == 0) inner = e;
  }
  assert_non_null(outer);
  assert_non_null(inner);
  double ots = cJSON_GetObjectItem(outer, "ts")->valuedouble, odur = cJSON_GetObjectItem(outer, "dur")->valuedouble;
  double its = cJSON_GetObjectItem(inner, "ts")->valuedouble, idur = cJSON_GetObjectItem(inner, "dur")->valuedouble;
  assert_true(its >= ots && its + idur <= ots + odur + 0.0025); /* the export's microseconds have 3 decimals */
  assert_int_equal(cJSON_GetObjectItem(outer, "tid")->valueint, cJSON_GetObjectItem(inner, "tid")->valueint);
  cJSON_Delete(j);
  ct_test_rmdir(dir);
  ct_profiler_reset();
  ct_tensor_free(y), ct_tensor_free(x), ct_tensor_free(idx), ct_tensor_free(xh);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(off_records_nothing),
      cmocka_unit_test(host_counts_every_call),
      cmocka_unit_test(sync_waits_for_devices_only),
      cmocka_unit_test(chrome_trace),
#ifdef CUTTLE_WITH_OPENCL
      cmocka_unit_test(sync_waits_after_each_device_kernel),
      cmocka_unit_test(self_times_and_copies),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
