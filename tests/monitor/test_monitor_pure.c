/* tests/monitor/test_monitor_pure.c: the monitor's pure parts, no driver needed: the CUDA index
 * mapping, the best-device choice, /proc parsing, JSON escaping, and the stats file round trip. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "monitor/monitor_internal.h"
#include "testutil.h"

/* NVML order deliberately differs from PCI order: PCI order is nvml 1, 2, 0. */
static const ct__nvml_ident devs[3] = {
    {"00000000:81:00.0", "GPU-bbbbbbbb-1111-2222-3333-444444444444"},
    {"00000000:01:00.0", "GPU-aaaaaaaa-5555-6666-7777-888888888888"},
    {"00000000:41:00.0", "GPU-aaaabbbb-9999-aaaa-bbbb-cccccccccccc"},
};

static int map(const char *env, int *out) { return ct__cuda_visible_map(devs, 3, env, out); }

static void test_map_default_is_pci_order(void **state) {
  int m[3];
  assert_int_equal(map(NULL, m), 3);
  assert_int_equal(m[0], 1);
  assert_int_equal(m[1], 2);
  assert_int_equal(m[2], 0);
}

static void test_map_integers(void **state) {
  int m[3];
  assert_int_equal(map("2,0", m), 2); /* base (PCI) index 2 is nvml 0 */
  assert_int_equal(m[0], 0);
  assert_int_equal(m[1], 1);
  assert_int_equal(map(" 1 ", m), 1);
  assert_int_equal(m[0], 2);
  assert_int_equal(map("", m), 0); /* set but empty: no GPU visible */
}

static void test_map_stops_at_first_invalid(void **state) {
  int m[3];
  assert_int_equal(map("0,2,-1,1", m), 2); /* CUDA's documented example */
  assert_int_equal(m[0], 1);
  assert_int_equal(m[1], 0);
  assert_int_equal(map("1,7,0", m), 1); /* out of range */
  assert_int_equal(map("1x,0", m), 0);  /* malformed */
  assert_int_equal(map("0,0,1", m), 1); /* a repeat */
  assert_int_equal(map("MIG-1234,0", m), 0);
}

static void test_map_uuids(void **state) {
  int m[3];
  assert_int_equal(map("GPU-bbbbbbbb-1111-2222-3333-444444444444,1", m), 2);
  assert_int_equal(m[0], 0);
  assert_int_equal(m[1], 2);
  assert_int_equal(map("gpu-AAAAB,GPU-b", m), 2); /* unique prefixes, any case */
  assert_int_equal(m[0], 2);
  assert_int_equal(m[1], 0);
  assert_int_equal(map("GPU-b,GPU-aaaa,0", m), 1); /* "GPU-aaaa" is ambiguous: stop */
  assert_int_equal(m[0], 0);
  assert_int_equal(map("GPU-,0", m), 0);
  assert_int_equal(map("GPU-cccc", m), 0);
}

static void test_pci_key(void **state) {
  assert_true(ct__pci_key("0000:01:00.0") == ct__pci_key("00000000:01:00.0"));
  assert_true(ct__pci_key("00000000:01:00.0") < ct__pci_key("00000000:41:00.0"));
  assert_true(ct__pci_key("00000001:01:00.0") > ct__pci_key("00000000:ff:1f.7"));
  assert_true(ct__pci_key("01:00.0") < 0);
  assert_true(ct__pci_key("0000:01:00.0x") < 0);
  assert_true(ct__pci_key(NULL) < 0);
}

static ct_device_props prop(size_t free_mb, int util) {
  ct_device_props p;
  memset(&p, 0, sizeof p);
  p.free_memory = free_mb << 20;
  p.utilization = util;
  return p;
}

static void test_best_index(void **state) {
  ct_device_props p[4] = {prop(100, 50), prop(900, 90), prop(300, 10), prop(500, 10)};
  assert_int_equal(ct__best_index(p, 4, CT_BEST_MOST_FREE_MEMORY), 1);
  assert_int_equal(ct__best_index(p, 4, CT_BEST_LEAST_UTILIZATION), 3); /* tie at 10%: more free */
  p[0].utilization = 0;
  assert_int_equal(ct__best_index(p, 4, CT_BEST_LEAST_UTILIZATION), 0);
  /* Unknown utilization ranks after every known one, however much memory it has free. */
  ct_device_props q[2] = {prop(10000, -1), prop(1, 99)};
  assert_int_equal(ct__best_index(q, 2, CT_BEST_LEAST_UTILIZATION), 1);
  assert_int_equal(ct__best_index(q, 2, CT_BEST_MOST_FREE_MEMORY), 0);
  /* Full ties keep the lowest index. */
  ct_device_props r[2] = {prop(5, 5), prop(5, 5)};
  assert_int_equal(ct__best_index(r, 2, CT_BEST_LEAST_UTILIZATION), 0);
  assert_int_equal(ct__best_index(p, 0, CT_BEST_MOST_FREE_MEMORY), -1);
  assert_int_equal(ct__best_index(NULL, 3, CT_BEST_MOST_FREE_MEMORY), -1);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[1024];
  assert_true(snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_cpu_read_fixture(void **state) {
  char *dir = ct_test_tmpdir();
  assert_non_null(dir);
  write_file(dir, "cpuinfo", "processor\t: 0\ncpu MHz\t\t: 2000.0\nmodel name\t: Test CPU @ 3.00GHz\nprocessor\t: 1\n");
  write_file(dir, "loadavg", "1.50 0.75 0.25 2/300 12345\n");
  write_file(dir, "meminfo", "MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    4096 kB\n");
  char sub[1024];
  snprintf(sub, sizeof sub, "%s/77", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  write_file(sub, "status", "Name:\tx\nVmRSS:\t    2048 kB\n");
  write_file(sub, "comm", "trainer\n");
  ct_monitor_cpu c;
  ct__cpu_read(dir, &c);
  assert_string_equal(c.model, "Test CPU @ 3.00GHz");
  assert_true(c.cores >= 1);
  assert_true(c.load[0] == 1.5 && c.load[1] == 0.75 && c.load[2] == 0.25);
  assert_int_equal(c.memory_total, 16384LL * 1024);
  assert_int_equal(c.memory_used, (16384LL - 4096) * 1024);
  assert_int_equal(ct__proc_rss(dir, 77), 2048LL * 1024);
  assert_int_equal(ct__proc_rss(dir, 78), -1);
  char comm[64];
  ct__proc_comm(dir, 77, comm, sizeof comm);
  assert_string_equal(comm, "trainer");
  /* A malformed file and missing files leave N/A, not zeros. */
  write_file(dir, "loadavg", "garbage\n");
  ct__cpu_read(dir, &c);
  assert_true(c.load[0] < 0 && c.load[2] < 0);
  assert_string_equal(c.model, "Test CPU @ 3.00GHz");
  ct_test_rmdir(dir);
  ct__cpu_read("/nonexistent-proc", &c);
  assert_string_equal(c.model, "");
  assert_true(c.load[0] < 0);
  assert_int_equal(c.memory_total, -1);
  assert_int_equal(c.memory_used, -1);
}

static void test_json_and_csv_escaping(void **state) {
  ct__sbuf b = {0};
  ct__sb_json_str(&b, "a\"b\\c\nd\x01");
  ct__sb_printf(&b, " ");
  ct__sb_csv_str(&b, "x,\"y\"");
  ct__sb_printf(&b, " ");
  ct__sb_csv_str(&b, "plain");
  char *s = ct__sb_finish(&b);
  assert_non_null(s);
  assert_string_equal(s, "\"a\\\"b\\\\c\\nd\\u0001\" \"x,\"\"y\"\"\" plain");
  free(s);
}

static ct_status fake_cpu_stats(ct_device d, size_t *a, size_t *r) {
  if (d.index != 0) return ct__error(CT_EDEVICE, "no cpu:%d", d.index);
  *a = 1000, *r = 4096;
  return CT_OK;
}
static ct_status fake_cuda_stats(ct_device d, size_t *a, size_t *r) {
  if (d.index >= 2) return ct__error(CT_EDEVICE, "no cuda:%d", d.index);
  *a = (size_t)(d.index + 1) << 20, *r = (size_t)(d.index + 1) << 21;
  return CT_OK;
}

static void test_allocator_stats_and_publish(void **state) {
  char *dir = ct_test_tmpdir();
  assert_non_null(dir);
  setenv("XDG_RUNTIME_DIR", dir, 1);
  size_t a = 0, r = 0;
  /* Unregistered: the CPU falls back to the heap figures, a GPU is unsupported. */
  ct_assert_ok(ct_monitor_allocator_stats(CT_DEVICE_CPU, &a, &r));
  assert_int_equal(ct_monitor_allocator_stats(CT_DEVICE_CUDA(0), &a, &r), CT_EUNSUPPORTED);
  ct_assert_error_contains("cuda:0");
  assert_int_equal(ct_monitor_allocator_stats(CT_DEVICE_CPU, NULL, &r), CT_EINVAL);

  ct__monitor_set_allocator_stats(CT_CPU, fake_cpu_stats);
  ct__monitor_set_allocator_stats(CT_CUDA, fake_cuda_stats);
  ct_assert_ok(ct_monitor_allocator_stats(CT_DEVICE_CUDA(1), &a, &r));
  assert_int_equal(a, 2 << 20);
  assert_int_equal(r, 2 << 21);

  char path[256];
  ct_assert_ok(ct_monitor_stats_path(getpid(), path, sizeof path));
  assert_non_null(strstr(path, dir));
  assert_int_equal(ct_monitor_stats_path(getpid(), path, 8), CT_EINVAL);
  ct_assert_ok(ct_monitor_stats_path(getpid(), path, sizeof path));
  ct_assert_ok(ct_monitor_publish());
  assert_int_equal(access(path, R_OK), 0);

  ct_monitor_proc p;
  memset(&p, 0, sizeof p);
  assert_int_equal(ct__stats_read(getpid(), &p), 1);
  assert_int_equal(p.ndevices, 3);
  assert_string_equal(p.devices[0].device, "cpu");
  assert_int_equal(p.devices[0].allocated, 1000);
  assert_int_equal(p.devices[0].reserved, 4096);
  assert_string_equal(p.devices[2].device, "cuda:1");
  assert_int_equal(p.devices[2].reserved, 2 << 21);
  assert_true(p.stats_age_s >= 0 && p.stats_age_s < 60);
  /* Another pid's file is not ours; a file claiming another pid is rejected. */
  assert_int_equal(ct__stats_read(getpid() + 100000, &p), 0);
  char other[512];
  snprintf(other, sizeof other, "%s/cuttle-%d.stats", dir, 1);
  FILE *f = fopen(other, "w");
  fputs("cuttle-stats 1\npid 2\ncpu 1 2\n", f);
  fclose(f);
  assert_int_equal(ct__stats_read(1, &p), 0);
  /* A newer version we do not understand is not read as this one. */
  f = fopen(other, "w");
  fputs("cuttle-stats 2\npid 1\ncpu 1 2\n", f);
  fclose(f);
  assert_int_equal(ct__stats_read(1, &p), 0);

  /* In-process through the snapshot: the allocator view of every device. */
  ct_monitor_options opt = {.pid = getpid()};
  setenv("CUTTLE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(&opt));
  assert_int_equal(s->proc.stats_found, 1);
  assert_int_equal(s->proc.ndevices, 3);
  assert_int_equal(s->proc.devices[1].allocated, 1 << 20);
  assert_true(s->proc.devices[0].driver_used > 0); /* our own VmRSS */
  ct_monitor_snapshot_free(s);
  unsetenv("CUTTLE_NVML_LIBRARY");

  ct_assert_ok(ct_monitor_unpublish());
  assert_int_not_equal(access(path, F_OK), 0);
  ct_assert_ok(ct_monitor_unpublish()); /* already gone: fine */
  ct__monitor_set_allocator_stats(CT_CPU, NULL);
  ct__monitor_set_allocator_stats(CT_CUDA, NULL);
  unsetenv("XDG_RUNTIME_DIR");
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map_default_is_pci_order),
      cmocka_unit_test(test_map_integers),
      cmocka_unit_test(test_map_stops_at_first_invalid),
      cmocka_unit_test(test_map_uuids),
      cmocka_unit_test(test_pci_key),
      cmocka_unit_test(test_best_index),
      cmocka_unit_test(test_cpu_read_fixture),
      cmocka_unit_test(test_json_and_csv_escaping),
      cmocka_unit_test(test_allocator_stats_and_publish),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
