/* tests/monitor/test_monitor_nvml.c: the monitor against the stand-in NVML libraries of
 * fake_nvml.c (a recent driver and an old one): the figures in --json, the CUDA mapping through
 * CUDA_VISIBLE_DEVICES, N/A columns, the legacy fallbacks, the registry hooks and the no-driver
 * path. The JSON is parsed with cJSON, so a malformed document fails too. */
#define _GNU_SOURCE
#include <cJSON.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor_internal.h"
#include "testutil.h"

#define GIB (1024LL * 1024 * 1024)
#define MIB (1024LL * 1024)

static char full_lib[1024], old_lib[1024];

static int setup(void **state) {
  const char *b = getenv("CUTTLE_BINARY_DIR");
  if (!b) return -1;
  snprintf(full_lib, sizeof full_lib, "%s/tests/monitor/fake_nvml_full/libnvidia-ml.so.1", b);
  snprintf(old_lib, sizeof old_lib, "%s/tests/monitor/fake_nvml_old/libnvidia-ml.so.1", b);
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_DEVICE_ORDER");
  unsetenv("FAKE_NVML_MODE");
  return 0;
}

/* A snapshot of lib rendered as JSON and parsed; the caller deletes it. */
static cJSON *snapshot_json(const char *lib, const char *visible) {
  setenv("CUTTLE_NVML_LIBRARY", lib, 1);
  if (visible)
    setenv("CUDA_VISIBLE_DEVICES", visible, 1);
  else
    unsetenv("CUDA_VISIBLE_DEVICES");
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(NULL));
  char *text = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_JSON));
  ct_monitor_snapshot_free(s);
  cJSON *j = cJSON_Parse(text);
  if (!j) fprintf(stderr, "not JSON: %s\n", text);
  free(text);
  assert_non_null(j);
  unsetenv("CUDA_VISIBLE_DEVICES");
  return j;
}

static cJSON *at(const cJSON *o, const char *key) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) fprintf(stderr, "no key \"%s\"\n", key);
  assert_non_null(v);
  return v;
}
static long long num(const cJSON *o, const char *key) {
  cJSON *v = at(o, key);
  if (!cJSON_IsNumber(v)) fprintf(stderr, "\"%s\" is not a number\n", key);
  assert_true(cJSON_IsNumber(v));
  return (long long)v->valuedouble;
}
static int is_null(const cJSON *o, const char *key) { return cJSON_IsNull(at(o, key)); }
static const char *str(const cJSON *o, const char *key) {
  cJSON *v = at(o, key);
  assert_true(cJSON_IsString(v));
  return v->valuestring;
}
static cJSON *gpu(const cJSON *j, int i) {
  cJSON *g = cJSON_GetArrayItem(at(j, "gpus"), i);
  assert_non_null(g);
  return g;
}

static void test_full_driver_figures(void **state) {
  cJSON *j = snapshot_json(full_lib, NULL);
  cJSON *drv = at(j, "driver");
  assert_true(cJSON_IsTrue(at(drv, "found")));
  assert_string_equal(str(drv, "version"), "999.12.34");
  assert_int_equal(cJSON_GetArraySize(at(j, "gpus")), 3);
  /* CUDA order is PCI order: Idle (01), Limited (41), Busy (81). */
  cJSON *idle = gpu(j, 0), *lim = gpu(j, 1), *busy = gpu(j, 2);
  assert_int_equal(num(idle, "cuda_index"), 0);
  assert_int_equal(num(idle, "nvml_index"), 1);
  assert_string_equal(str(idle, "name"), "Fake GPU Idle");
  assert_string_equal(str(idle, "pci_bus_id"), "00000000:01:00.0");
  assert_string_equal(str(idle, "uuid"), "GPU-aaaaaaaa-5555-6666-7777-888888888888");
  assert_int_equal(num(lim, "cuda_index"), 1);
  assert_int_equal(num(lim, "nvml_index"), 2);
  assert_int_equal(num(busy, "cuda_index"), 2);
  assert_int_equal(num(busy, "nvml_index"), 0);
  assert_int_equal(num(busy, "temperature_c"), 81);
  assert_int_equal(num(busy, "power_mw"), 350000);
  assert_int_equal(num(busy, "power_limit_mw"), 400000);
  assert_int_equal(num(busy, "memory_used_bytes"), 60 * GIB); /* the v2 figure, not v1's +512 MiB */
  assert_int_equal(num(busy, "memory_total_bytes"), 80 * GIB);
  assert_int_equal(num(busy, "utilization_gpu_pct"), 97);
  assert_int_equal(num(busy, "utilization_memory_pct"), 60);
  assert_int_equal(num(busy, "clock_sm_mhz"), 1980);
  assert_int_equal(num(busy, "clock_mem_mhz"), 2619);
  cJSON *procs = at(busy, "processes");
  assert_int_equal(cJSON_GetArraySize(procs), 3); /* two compute, one graphics */
  cJSON *p0 = cJSON_GetArrayItem(procs, 0), *p1 = cJSON_GetArrayItem(procs, 1), *p2 = cJSON_GetArrayItem(procs, 2);
  assert_int_equal(num(p0, "pid"), 4242);
  assert_string_equal(str(p0, "type"), "C");
  assert_int_equal(num(p0, "used_memory_bytes"), 5 * GIB);
  assert_int_equal(num(p1, "pid"), 4343);
  assert_int_equal(num(p1, "used_memory_bytes"), 10 * GIB);
  assert_int_equal(num(p2, "pid"), 4444);
  assert_string_equal(str(p2, "type"), "G");
  assert_true(is_null(p2, "used_memory_bytes")); /* NVML_VALUE_NOT_AVAILABLE */
  assert_int_equal(cJSON_GetArraySize(at(idle, "processes")), 0);
  /* The CPU row is always there. */
  cJSON *cpu = at(j, "cpu");
  assert_true(num(cpu, "cores") >= 1);
  assert_true(num(cpu, "memory_total_bytes") > 0);
  cJSON_Delete(j);
}

static void test_not_supported_reads_na(void **state) {
  cJSON *j = snapshot_json(full_lib, NULL);
  cJSON *lim = gpu(j, 1);
  assert_string_equal(str(lim, "name"), "Fake GPU Limited");
  const char *na[] = {"temperature_c", "power_mw", "power_limit_mw", "utilization_gpu_pct",
                      "utilization_memory_pct", "clock_sm_mhz", "clock_mem_mhz", "processes"};
  for (size_t i = 0; i < sizeof na / sizeof *na; i++) {
    if (!is_null(lim, na[i])) fprintf(stderr, "%s should be null\n", na[i]);
    assert_true(is_null(lim, na[i]));
  }
  assert_int_equal(num(lim, "memory_total_bytes"), 16 * GIB); /* what it does support is there */
  cJSON_Delete(j);
  /* The text and CSV say N/A too. */
  setenv("CUTTLE_NVML_LIBRARY", full_lib, 1);
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(NULL));
  char *text = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_TEXT));
  char *csv = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_CSV));
  const char *row = strstr(csv, "gpu,1,2,Fake GPU Limited,00000000:41:00.0,");
  assert_non_null(row);
  assert_non_null(strstr(row, ",N/A,N/A,N/A,2147483648,17179869184,N/A,N/A,N/A,N/A,N/A,"));
  assert_non_null(strstr(csv, "gpu,2,0,Fake GPU Busy,00000000:81:00.0,GPU-bbbbbbbb-1111-2222-3333-444444444444,81,"
                              "350000,400000,64424509440,85899345920,97,60,1980,2619,4242:5368709120;4343:10737418240;"
                              "4444:N/A,"));
  assert_non_null(strstr(text, "processes: N/A"));
  assert_non_null(strstr(text, "Fake GPU Limited"));
  free(text);
  free(csv);
  ct_monitor_snapshot_free(s);
}

static void test_old_driver_fallbacks(void **state) {
  cJSON *j = snapshot_json(old_lib, NULL);
  assert_string_equal(str(at(j, "driver"), "version"), "390.157");
  cJSON *busy = gpu(j, 2);
  /* Legacy PCI struct: the bus id is rebuilt from its numbers, not read from reserved words. */
  assert_string_equal(str(busy, "pci_bus_id"), "00000000:81:00.0");
  assert_int_equal(num(busy, "memory_used_bytes"), 60 * GIB + 512 * MIB); /* nvmlDeviceGetMemoryInfo */
  assert_true(is_null(busy, "power_limit_mw"));                         /* no such function */
  assert_int_equal(num(busy, "power_mw"), 350000);
  /* Legacy 16-byte process entries, compute only (no graphics listing in this driver). */
  cJSON *procs = at(busy, "processes");
  assert_int_equal(cJSON_GetArraySize(procs), 2);
  assert_int_equal(num(cJSON_GetArrayItem(procs, 1), "pid"), 4343);
  assert_int_equal(num(cJSON_GetArrayItem(procs, 1), "used_memory_bytes"), 10 * GIB);
  cJSON_Delete(j);
}

static void test_cuda_visible_devices(void **state) {
  cJSON *j = snapshot_json(full_lib, "GPU-bbbb,0");
  /* cuda:0 is Busy by UUID prefix, cuda:1 is PCI-order 0 (Idle), Limited is hidden. */
  assert_string_equal(str(gpu(j, 0), "name"), "Fake GPU Busy");
  assert_int_equal(num(gpu(j, 0), "cuda_index"), 0);
  assert_string_equal(str(gpu(j, 1), "name"), "Fake GPU Idle");
  assert_int_equal(num(gpu(j, 1), "cuda_index"), 1);
  assert_string_equal(str(gpu(j, 2), "name"), "Fake GPU Limited");
  assert_true(is_null(gpu(j, 2), "cuda_index"));
  cJSON_Delete(j);
  j = snapshot_json(full_lib, "2,bogus,1");
  assert_string_equal(str(gpu(j, 0), "name"), "Fake GPU Busy");
  assert_true(is_null(gpu(j, 1), "cuda_index")); /* stopped at "bogus" */
  cJSON_Delete(j);
}

static void test_registry_hooks(void **state) {
  setenv("CUTTLE_NVML_LIBRARY", full_lib, 1);
  assert_int_equal(ct__nvml_gpu_count(), 3);
  ct_device_props p[3];
  for (int i = 0; i < 3; i++) {
    memset(&p[i], 0, sizeof p[i]);
    p[i].utilization = -1;
    ct_assert_ok(ct__nvml_fill_props(i, &p[i]));
  }
  assert_string_equal(p[0].name, "Fake GPU Idle");
  assert_string_equal(p[0].pci_bus_id, "00000000:01:00.0");
  assert_int_equal(p[0].utilization, 3);
  assert_int_equal(p[0].total_memory, 40 * GIB);
  assert_int_equal(p[0].free_memory, 39 * GIB);
  assert_int_equal(p[1].utilization, -1);
  assert_string_equal(p[2].uuid, "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  /* Best: Idle has the most free memory (39 GiB) and the least utilization. */
  assert_int_equal(ct__best_index(p, 3, CT_BEST_MOST_FREE_MEMORY), 0);
  assert_int_equal(ct__best_index(p, 3, CT_BEST_LEAST_UTILIZATION), 0);
  p[0].utilization = 99;
  assert_int_equal(ct__best_index(p, 3, CT_BEST_LEAST_UTILIZATION), 2); /* Busy 97% beats 99%; Limited unknown */
  /* A bus id from the CUDA runtime wins over the guessed order. */
  ct_device_props q;
  memset(&q, 0, sizeof q);
  snprintf(q.pci_bus_id, sizeof q.pci_bus_id, "0000:81:00.0");
  ct_assert_ok(ct__nvml_fill_props(0, &q));
  assert_string_equal(q.name, "Fake GPU Busy");
  assert_string_equal(q.pci_bus_id, "00000000:81:00.0");
  memset(&q, 0, sizeof q);
  assert_int_equal(ct__nvml_fill_props(3, &q), CT_EDEVICE);
  ct_assert_error_contains("cuda:3");
}

static int probe_calls;
static int fake_runtime(char (*ids)[32], int cap) {
  probe_calls++;
  /* A "fastest first" order that differs from PCI order. */
  const char *order[] = {"0000:41:00.0", "0000:81:00.0", "0000:01:00.0"};
  for (int i = 0; i < 3 && i < cap; i++) snprintf(ids[i], 32, "%s", order[i]);
  return 3;
}

static void test_cuda_runtime_order(void **state) {
  ct__monitor_set_cuda_bus_ids(fake_runtime);
  cJSON *j = snapshot_json(full_lib, NULL);
  ct__monitor_set_cuda_bus_ids(NULL);
  assert_true(probe_calls > 0);
  assert_true(cJSON_IsTrue(at(at(j, "driver"), "cuda_order_exact")));
  assert_string_equal(str(gpu(j, 0), "name"), "Fake GPU Limited");
  assert_string_equal(str(gpu(j, 1), "name"), "Fake GPU Busy");
  assert_string_equal(str(gpu(j, 2), "name"), "Fake GPU Idle");
  cJSON_Delete(j);
  j = snapshot_json(full_lib, NULL);
  assert_true(cJSON_IsFalse(at(at(j, "driver"), "cuda_order_exact"))); /* 3 GPUs, PCI order assumed */
  cJSON_Delete(j);
}

static void expect_no_driver(const char *lib, const char *mode, const char *why) {
  setenv("CUTTLE_NVML_LIBRARY", lib, 1);
  if (mode) setenv("FAKE_NVML_MODE", mode, 1);
  ct_clear_error();
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(NULL));
  assert_int_equal(s->driver_found, 0);
  assert_int_equal(s->ngpus, 0);
  if (!strstr(s->driver_note, why)) fprintf(stderr, "note \"%s\" lacks \"%s\"\n", s->driver_note, why);
  assert_non_null(strstr(s->driver_note, why));
  assert_string_equal(ct_last_error(), ""); /* no driver is not an error */
  char *text = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_TEXT));
  assert_non_null(strstr(text, "No NVIDIA driver found"));
  assert_non_null(strstr(text, "\nCPU "));
  free(text);
  char *json = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_JSON));
  cJSON *j = cJSON_Parse(json);
  assert_non_null(j);
  assert_true(cJSON_IsFalse(at(at(j, "driver"), "found")));
  assert_int_equal(cJSON_GetArraySize(at(j, "gpus")), 0);
  cJSON_Delete(j);
  free(json);
  ct_monitor_snapshot_free(s);
  assert_int_equal(ct__nvml_gpu_count(), 0);
  unsetenv("FAKE_NVML_MODE");
}

static void test_no_driver(void **state) {
  expect_no_driver("/nonexistent/libnvidia-ml.so.1", NULL, "cannot load /nonexistent/libnvidia-ml.so.1");
  expect_no_driver(full_lib, "initfail", "Driver Not Loaded");
  expect_no_driver(full_lib, "zero", "lists no GPU");
  setenv("CUTTLE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  ct_device_props p;
  memset(&p, 0, sizeof p);
  assert_int_equal(ct__nvml_fill_props(0, &p), CT_EUNSUPPORTED);
  ct_assert_error_contains("NVML unavailable: cannot load");
}

static void test_init_shutdown_paired(void **state) {
  /* Hold our own reference so the counter survives cuttle's dlclose. */
  void *dl = dlopen(full_lib, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(dl);
  int *live = dlsym(dl, "fake_nvml_live");
  assert_non_null(live);
  setenv("CUTTLE_NVML_LIBRARY", full_lib, 1);
  ct_monitor_snapshot_free(ct_assert_nonnull(ct_monitor_snapshot_new(NULL)));
  ct_device_props p;
  memset(&p, 0, sizeof p);
  ct_assert_ok(ct__nvml_fill_props(1, &p));
  assert_int_equal(ct__nvml_gpu_count(), 3);
  assert_int_equal(*live, 0);
  dlclose(dl);
}

static void test_pid_without_stats(void **state) {
  setenv("CUTTLE_NVML_LIBRARY", full_lib, 1);
  ct_monitor_options opt = {.pid = 4242}; /* on the Busy GPU; never published stats */
  ct_monitor_snapshot *s = ct_assert_nonnull(ct_monitor_snapshot_new(&opt));
  assert_int_equal(s->proc.stats_found, 0);
  assert_int_equal(s->proc.ndevices, 2); /* the CPU, and cuda:2 where the driver sees it */
  assert_string_equal(s->proc.devices[1].device, "cuda:2");
  assert_int_equal(s->proc.devices[1].allocated, -1);
  assert_int_equal(s->proc.devices[1].driver_used, 5 * GIB);
  char *text = ct_assert_nonnull(ct_monitor_render(s, CT_MONITOR_TEXT));
  assert_non_null(strstr(text, "no cuttle stats"));
  free(text);
  ct_monitor_snapshot_free(s);
}

/* The built `cuttle` binary, or NULL (with the test skipped) when the CLI is not built. */
static const char *cli(char *buf, size_t n) {
  snprintf(buf, n, "%s/cuttle", getenv("CUTTLE_BINARY_DIR"));
  if (access(buf, X_OK) != 0) {
    fprintf(stderr, "skipping: %s is not built\n", buf);
    return NULL;
  }
  return buf;
}

/* Run `cuttle smi args...` with stdout to out_path; returns the exit status, or -1. When
 * sigint_after_ms > 0, Ctrl-C is sent after that long. */
static int run_smi(const char *bin, char *const argv[], const char *out_path, int sigint_after_ms) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  extern char **environ;
  int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  if (sigint_after_ms > 0) {
    struct timespec ts = {sigint_after_ms / 1000, (sigint_after_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGINT);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char *buf = calloc(1, 1 << 16);
  assert_non_null(buf);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static void test_cli(void **state) {
  char bin[1024];
  if (!cli(bin, sizeof bin)) skip();
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char out[1200];
  snprintf(out, sizeof out, "%s/out", dir);
  setenv("CUTTLE_NVML_LIBRARY", full_lib, 1);
  char *json_args[] = {"cuttle", "smi", "--json", NULL};
  assert_int_equal(run_smi(bin, json_args, out, 0), 0);
  char *text = slurp(out);
  cJSON *j = cJSON_Parse(text);
  free(text);
  assert_non_null(j);
  assert_int_equal(num(gpu(j, 2), "memory_used_bytes"), 60 * GIB);
  cJSON_Delete(j);
  /* --watch redraws in place until Ctrl-C, then exits 0. */
  char *watch_args[] = {"cuttle", "smi", "--watch", "0.1", NULL};
  assert_int_equal(run_smi(bin, watch_args, out, 500), 0);
  text = slurp(out);
  assert_non_null(strstr(text, "\033[H"));
  assert_non_null(strstr(text, "Fake GPU Busy"));
  free(text);
  /* No driver: the CPU row, the line saying so, status 0. */
  setenv("CUTTLE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  char *plain_args[] = {"cuttle", "smi", NULL};
  assert_int_equal(run_smi(bin, plain_args, out, 0), 0);
  text = slurp(out);
  assert_non_null(strstr(text, "No NVIDIA driver found"));
  assert_non_null(strstr(text, "\nCPU "));
  free(text);
  char *bad_args[] = {"cuttle", "smi", "--watch", "soon", NULL};
  assert_int_equal(run_smi(bin, bad_args, out, 0), 2);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_driver_figures),  cmocka_unit_test(test_not_supported_reads_na),
      cmocka_unit_test(test_old_driver_fallbacks), cmocka_unit_test(test_cuda_visible_devices),
      cmocka_unit_test(test_registry_hooks),       cmocka_unit_test(test_cuda_runtime_order),
      cmocka_unit_test(test_no_driver),            cmocka_unit_test(test_init_shutdown_paired),
      cmocka_unit_test(test_pid_without_stats),    cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
