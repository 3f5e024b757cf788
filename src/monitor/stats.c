/* src/monitor/stats.c: cuttle's allocator statistics, in this process (ct_monitor_allocator_stats)
 * and across processes (ct_monitor_publish writes a small file that `cuttle smi --pid` reads).
 *
 * Allocators register a statistics function per device kind instead of the monitor calling into
 * them, so that the monitor links without them and a process that never allocated on a GPU simply
 * reports N/A there. The format of the file is documented in cuttle/monitor.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "monitor/monitor_internal.h"

static ct__allocator_stats_fn stats_fn[CT_DEVICE_KIND_COUNT];
static ct__cuda_bus_ids_fn bus_ids_fn;

void ct__monitor_set_allocator_stats(ct_device_kind kind, ct__allocator_stats_fn fn) {
  if ((int)kind >= 0 && kind < CT_DEVICE_KIND_COUNT) __atomic_store_n(&stats_fn[kind], fn, __ATOMIC_RELEASE);
}

void ct__monitor_set_cuda_bus_ids(ct__cuda_bus_ids_fn fn) { __atomic_store_n(&bus_ids_fn, fn, __ATOMIC_RELEASE); }
ct__cuda_bus_ids_fn ct__monitor_cuda_bus_ids(void) { return __atomic_load_n(&bus_ids_fn, __ATOMIC_ACQUIRE); }

ct_status ct_monitor_allocator_stats(ct_device d, size_t *allocated, size_t *reserved) {
  if (!allocated || !reserved) return ct__error(CT_EINVAL, "ct_monitor_allocator_stats: allocated and reserved must not be NULL");
  if ((int)d.kind < 0 || d.kind >= CT_DEVICE_KIND_COUNT)
    return ct__error(CT_EINVAL, "ct_monitor_allocator_stats: unknown device kind %d (pass a ct_device such as CT_DEVICE_CPU)",
                     (int)d.kind);
  if (d.kind == CT_CPU && d.index != 0)
    return ct__error(CT_EDEVICE, "ct_monitor_allocator_stats: there is one CPU device (cpu), not cpu:%d; pass CT_DEVICE_CPU",
                     d.index);
  ct__allocator_stats_fn fn = __atomic_load_n(&stats_fn[d.kind], __ATOMIC_ACQUIRE);
  if (fn) { /* the allocator's own message names the allocator; the caller called this function */
    ct_status s = fn(d, allocated, reserved);
    return s == CT_OK ? s : ct__error_prefix("ct_monitor_allocator_stats");
  }
  if (d.kind == CT_CPU) {
    /* No CPU allocator has registered: the process's malloc heap is the closest honest figure. */
    struct mallinfo2 mi = mallinfo2();
    *allocated = mi.uordblks + mi.hblkhd;
    *reserved = mi.arena + mi.hblkhd;
    return CT_OK;
  }
  /* No allocator registered for this kind: its backend's caching allocator has the figures, asked
   * through the registry like any device property. */
  char name[32];
  ct_memory_stats ms;
  if (ct_device_available(d) && ct_memory_stats_get(d, &ms) == CT_OK) {
    *allocated = ms.allocated;
    *reserved = ms.reserved;
    return CT_OK;
  }
  return ct__error(CT_EUNSUPPORTED, "ct_monitor_allocator_stats: no allocator statistics for %s in this process (the "
                   "device does not exist here, or its allocator has not registered them yet)",
                   ct_device_str(d, name, sizeof name));
}

/* The folder for stats files: $XDG_RUNTIME_DIR when it is a folder, else /tmp. */
static const char *stats_dir(int prefer_xdg) {
  const char *x = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (prefer_xdg && x && *x && stat(x, &st) == 0 && S_ISDIR(st.st_mode)) return x;
  return "/tmp";
}

ct_status ct_monitor_stats_path(int pid, char *buf, size_t n) {
  if (!buf) return ct__error(CT_EINVAL, "ct_monitor_stats_path: buf is NULL");
  int w = snprintf(buf, n, "%s/cuttle-%d.stats", stats_dir(1), pid);
  if (w < 0 || (size_t)w >= n) return ct__error(CT_EINVAL, "ct_monitor_stats_path: a buffer of %zu bytes is too small", n);
  return CT_OK;
}

/* Append d's row to out when its allocator answers; 0 when it does not (the end of that kind's
 * devices). A device of a kind whose allocator has not registered (registered 0) is listed only
 * once this process has allocated there, so that every device the machine has is not a row. */
static int gather_one(ct_monitor_proc *out, ct_device d, int registered) {
  size_t a = 0, r = 0;
  if (ct_monitor_allocator_stats(d, &a, &r) != CT_OK) {
    ct_clear_error(); /* an absent device is the normal end of the list, not an error */
    return 0;
  }
  ct_memory_stats ms = {0};
  int64_t peak = -1;
  if (d.kind != CT_CPU && ct_memory_stats_get(d, &ms) == CT_OK) peak = (int64_t)ms.peak_allocated;
  else ct_clear_error();
  if (!registered && ms.reserved == 0 && ms.peak_allocated == 0) return 1;
  ct_monitor_proc_device *pd = &out->devices[out->ndevices++];
  ct_device_str(d, pd->device, sizeof pd->device);
  pd->allocated = (int64_t)a;
  pd->reserved = (int64_t)r;
  pd->peak_allocated = peak;
  pd->driver_used = -1;
  return 1;
}

/* Fill out->devices with what this process's allocators say (allocated/reserved/peak): the CPU,
 * then each other kind in registry order. A kind whose allocator registered is asked for devices
 * 0, 1, ... until it knows no more; another kind for each device its backend counts. */
static void gather_self(ct_monitor_proc *out) {
  out->ndevices = 0;
  gather_one(out, CT_DEVICE_CPU, 1);
  for (int k = 0; k < CT_DEVICE_KIND_COUNT; k++) {
    if (k == CT_CPU) continue;
    int registered = __atomic_load_n(&stats_fn[k], __ATOMIC_ACQUIRE) != NULL;
    int n = registered ? CT_MONITOR_MAX_PROC_DEVICES : ct_device_count((ct_device_kind)k);
    for (int i = 0; i < n && out->ndevices < CT_MONITOR_MAX_PROC_DEVICES; i++)
      if (!gather_one(out, (ct_device){(ct_device_kind)k, i}, registered)) break;
  }
}

void ct__stats_self(ct_monitor_proc *out) { gather_self(out); }

ct_status ct_monitor_publish(void) {
  ct_monitor_proc p;
  memset(&p, 0, sizeof p);
  gather_self(&p);
  char path[512], *tmp;
  ct_status s = ct_monitor_stats_path((int)getpid(), path, sizeof path);
  if (s != CT_OK) return s;
  /* written whole, then renamed: a reader sees the old file or the new one, never half */
  FILE *f = ct__replace_open("ct_monitor_publish", path, &tmp);
  if (!f) return ct_last_status();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(f, "cuttle-stats 1\npid %d\ntime %lld.%03ld\n", (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec / 1000000);
  for (int i = 0; i < p.ndevices; i++)
    fprintf(f, "%s %lld %lld %lld\n", p.devices[i].device, (long long)p.devices[i].allocated, (long long)p.devices[i].reserved,
            (long long)p.devices[i].peak_allocated);
  return ct__replace_commit("ct_monitor_publish", f, tmp, path);
}

ct_status ct_monitor_unpublish(void) {
  char path[512];
  ct_status s = ct_monitor_stats_path((int)getpid(), path, sizeof path);
  if (s != CT_OK) return s;
  if (remove(path) != 0 && errno != ENOENT)
    return ct__error(CT_EIO, "ct_monitor_unpublish: cannot remove %s: %s", path, strerror(errno));
  return CT_OK;
}

/* 1 when name is a device as ct_device_str prints it ("cpu", "cuda:0", "opencl:1"): the registry
 * parses it and prints it back the same. */
static int known_device(const char *name) {
  ct_device d;
  char back[32];
  if (ct_device_parse(name, &d) != CT_OK) return ct_clear_error(), 0;
  return d.index >= 0 && strcmp(ct_device_str(d, back, sizeof back), name) == 0;
}

/* Parse one stats file; 1 when it is a valid version-1 file of pid. */
static int parse_file(const char *path, int pid, ct_monitor_proc *out) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[256];
  int ok = 0, version = 0, file_pid = -1;
  double t = 0;
  out->ndevices = 0;
  if (fgets(line, sizeof line, f) && sscanf(line, "cuttle-stats %d", &version) == 1 && version == 1) ok = 1;
  while (ok && fgets(line, sizeof line, f)) {
    char dev[32];
    long long a, r;
    if (sscanf(line, "pid %d", &file_pid) == 1) continue;
    if (sscanf(line, "time %lf", &t) == 1) continue;
    long long peak = -1;
    int got = sscanf(line, "%31s %lld %lld %lld", dev, &a, &r, &peak);
    if (got >= 3 && out->ndevices < CT_MONITOR_MAX_PROC_DEVICES) {
      if (!known_device(dev)) continue; /* a device this version does not know */
      ct_monitor_proc_device *pd = &out->devices[out->ndevices++];
      snprintf(pd->device, sizeof pd->device, "%s", dev);
      pd->allocated = a;
      pd->reserved = r;
      pd->peak_allocated = got == 4 ? peak : -1;
      pd->driver_used = -1;
    }
  }
  fclose(f);
  if (!ok || file_pid != pid) {
    out->ndevices = 0;
    return 0;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  out->stats_age_s = t > 0 && now > t ? now - t : 0;
  return 1;
}

int ct__stats_read(int pid, ct_monitor_proc *out) {
  char path[512];
  /* The reader may run with another XDG_RUNTIME_DIR (sudo, another session) than the writer, so
   * both places are tried. */
  for (int xdg = 1; xdg >= 0; xdg--) {
    snprintf(path, sizeof path, "%s/cuttle-%d.stats", stats_dir(xdg), pid);
    if (parse_file(path, pid, out)) return 1;
  }
  return 0;
}
