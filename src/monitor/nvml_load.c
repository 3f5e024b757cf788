/* src/monitor/nvml_load.c: load libnvidia-ml with dlopen and resolve the functions cuttle uses.
 *
 * Drivers export several versions of some functions (nvmlDeviceGetCount_v2 beside the legacy
 * nvmlDeviceGetCount). The newest one we know is tried first, because the legacy ones are kept
 * only for old binaries and some report wrong figures on recent drivers (nvmlDeviceGetMemoryInfo
 * counts reserved memory as used). A function that an older driver lacks stays NULL, and the
 * column it feeds reads N/A. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor_internal.h"

/* The first of names[] (NULL-terminated) that the library exports, or NULL. */
static void *sym_first(void *dl, const char *const *names, int *which) {
  for (int i = 0; names[i]; i++) {
    void *p = dlsym(dl, names[i]);
    if (p) {
      if (which) *which = i;
      return p;
    }
  }
  return NULL;
}

#define SYMS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void resolve(ct__nvml *n) {
  void *dl = n->dl;
  n->init = sym_first(dl, SYMS("nvmlInit_v2", "nvmlInit"), NULL);
  n->shutdown = sym_first(dl, SYMS("nvmlShutdown"), NULL);
  n->error_string = sym_first(dl, SYMS("nvmlErrorString"), NULL);
  n->driver_version = sym_first(dl, SYMS("nvmlSystemGetDriverVersion"), NULL);
  n->count = sym_first(dl, SYMS("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), NULL);
  n->handle_by_index = sym_first(dl, SYMS("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"), NULL);
  n->name = sym_first(dl, SYMS("nvmlDeviceGetName"), NULL);
  n->pci_info = sym_first(dl, SYMS("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"), NULL);
  n->uuid = sym_first(dl, SYMS("nvmlDeviceGetUUID"), NULL);
  n->temperature = sym_first(dl, SYMS("nvmlDeviceGetTemperature"), NULL);
  n->power_usage = sym_first(dl, SYMS("nvmlDeviceGetPowerUsage"), NULL);
  /* The enforced limit is what nvidia-smi prints as the cap; the management limit is the older
   * name for nearly the same figure. */
  n->power_limit = sym_first(dl, SYMS("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"), NULL);
  n->memory_v2 = sym_first(dl, SYMS("nvmlDeviceGetMemoryInfo_v2"), NULL);
  n->memory_v1 = sym_first(dl, SYMS("nvmlDeviceGetMemoryInfo"), NULL);
  n->utilization = sym_first(dl, SYMS("nvmlDeviceGetUtilizationRates"), NULL);
  n->clock = sym_first(dl, SYMS("nvmlDeviceGetClockInfo"), NULL);
  /* _v3 and _v2 fill the 24-byte struct, the legacy one the 16-byte struct. */
  int which = 0;
  n->compute_procs = (ct__nvml_procs_fn)sym_first(
      dl, SYMS("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
               "nvmlDeviceGetComputeRunningProcesses"), &which);
  n->compute_proc_size = which == 2 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_v2_t);
  which = 0;
  n->graphics_procs = (ct__nvml_procs_fn)sym_first(
      dl, SYMS("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
               "nvmlDeviceGetGraphicsRunningProcesses"), &which);
  n->graphics_proc_size = which == 2 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_v2_t);
}

const char *ct__nvml_strerror(const ct__nvml *n, nvmlReturn_t r) {
  static __thread char buf[32];
  if (n && n->error_string) {
    const char *s = n->error_string(r);
    if (s) return s;
  }
  snprintf(buf, sizeof buf, "error %d", (int)r);
  return buf;
}

int ct__nvml_open(ct__nvml *n) {
  memset(n, 0, sizeof *n);
  const char *path = getenv("CUTTLE_NVML_LIBRARY");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  snprintf(n->path, sizeof n->path, "%s", path);
  n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!n->dl) {
    const char *why = dlerror();
    ct__error(CT_EUNSUPPORTED, "NVML unavailable: cannot load %s (%s)", path, why ? why : "unknown reason");
    memset(n, 0, sizeof *n);
    return CT_EUNSUPPORTED;
  }
  resolve(n);
  if (!n->init || !n->count || !n->handle_by_index) {
    ct__error(CT_EUNSUPPORTED, "NVML unavailable: %s lacks nvmlInit, nvmlDeviceGetCount or "
              "nvmlDeviceGetHandleByIndex", path);
    dlclose(n->dl);
    memset(n, 0, sizeof *n);
    return CT_EUNSUPPORTED;
  }
  nvmlReturn_t r = n->init();
  if (r != NVML_SUCCESS) {
    ct__error(CT_EUNSUPPORTED, "NVML unavailable: nvmlInit failed: %s", ct__nvml_strerror(n, r));
    dlclose(n->dl);
    memset(n, 0, sizeof *n);
    return CT_EUNSUPPORTED;
  }
  return CT_OK;
}

void ct__nvml_close(ct__nvml *n) {
  if (!n || !n->dl) return;
  if (n->shutdown) n->shutdown();
  dlclose(n->dl);
  memset(n, 0, sizeof *n);
}
