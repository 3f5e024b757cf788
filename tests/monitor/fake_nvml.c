/* tests/monitor/fake_nvml.c: a stand-in libnvidia-ml.so.1 with three fixed GPUs, so the monitor's
 * tests run without a driver. Built twice (tests/monitor/fake_nvml.cmake):
 *  - the full library exports the versioned functions of a recent driver;
 *  - with -DFAKE_OLD_DRIVER it exports only the legacy names (no _v2/_v3, no power limit, no
 *    graphics listing), with the legacy struct layouts, so the fallbacks are really exercised.
 * FAKE_NVML_MODE=initfail makes nvmlInit fail; FAKE_NVML_MODE=zero reports no GPUs.
 *
 * The GPUs, in NVML order (deliberately not PCI order):
 *   0: "Fake GPU Busy"    00000000:81:00.0  busy, three processes
 *   1: "Fake GPU Idle"    00000000:01:00.0  idle, most free memory
 *   2: "Fake GPU Limited" 00000000:41:00.0  NOT_SUPPORTED for temperature, power, clocks,
 *                                           utilization and process listings
 * The legacy memory call reports 512 MiB more "used" than the v2 call (as real drivers do, counting
 * reserved memory), so a test can tell which one was called. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef int nvmlReturn_t;
enum { OK = 0, UNINIT = 1, BADARG = 2, NOTSUP = 3, INSUFFICIENT = 7, DRIVER_NOT_LOADED = 9, VERSION_MISMATCH = 25 };
#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)

typedef struct {
  const char *name, *uuid;
  unsigned domain, bus, device;
  int supported; /* 0: the sensors and listings answer NOT_SUPPORTED */
  unsigned temp, power_mw, limit_mw, util_gpu, util_mem, clock_sm, clock_mem;
  unsigned long long total, used;
  int nprocs;
  unsigned pids[3];
  unsigned long long proc_mem[3];
  char proc_type[3]; /* 'C' compute, 'G' graphics */
} fake_gpu;

static const fake_gpu gpus[3] = {
    {"Fake GPU Busy", "GPU-bbbbbbbb-1111-2222-3333-444444444444", 0, 0x81, 0, 1, 81, 350000, 400000, 97, 60, 1980,
     2619, 80 * GIB, 60 * GIB, 3, {4242, 4343, 4444}, {5 * GIB, 10 * GIB, ~0ULL}, {'C', 'C', 'G'}},
    {"Fake GPU Idle", "GPU-aaaaaaaa-5555-6666-7777-888888888888", 0, 0x01, 0, 1, 35, 60000, 300000, 3, 1, 1410, 1215,
     40 * GIB, 1 * GIB, 0, {0}, {0}, {0}},
    {"Fake GPU Limited", "GPU-aaaabbbb-9999-aaaa-bbbb-cccccccccccc", 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16 * GIB,
     2 * GIB, 0, {0}, {0}, {0}},
};

/* inits minus shutdowns, for the tests to check that cuttle pairs them. */
EXPORT int fake_nvml_live;

static int initialized;
static const char *mode(void) {
  const char *m = getenv("FAKE_NVML_MODE");
  return m ? m : "";
}
static nvmlReturn_t do_init(void) {
  if (!strcmp(mode(), "initfail")) return DRIVER_NOT_LOADED;
  initialized++;
  fake_nvml_live++;
  return OK;
}
static unsigned ngpus(void) { return !strcmp(mode(), "zero") ? 0 : 3; }
static const fake_gpu *dev(void *h) {
  const fake_gpu *g = h;
  return initialized && g >= gpus && g < gpus + 3 ? g : NULL;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (!initialized) return UNINIT;
  initialized--;
  fake_nvml_live--;
  return OK;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK: return "Success";
    case NOTSUP: return "Not Supported";
    case DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned n) {
  if (!initialized) return UNINIT;
#ifdef FAKE_OLD_DRIVER
  const char *v = "390.157";
#else
  const char *v = "999.12.34";
#endif
  if (strlen(v) + 1 > n) return INSUFFICIENT;
  strcpy(buf, v);
  return OK;
}
static nvmlReturn_t get_count(unsigned *n) {
  if (!initialized) return UNINIT;
  *n = ngpus();
  return OK;
}
static nvmlReturn_t get_handle(unsigned i, void **h) {
  if (!initialized) return UNINIT;
  if (i >= ngpus()) return BADARG;
  *h = (void *)&gpus[i];
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(void *h, char *buf, unsigned n) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (strlen(g->name) + 1 > n) return INSUFFICIENT;
  strcpy(buf, g->name);
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(void *h, char *buf, unsigned n) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (strlen(g->uuid) + 1 > n) return INSUFFICIENT;
  strcpy(buf, g->uuid);
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(void *h, int sensor, unsigned *t) {
  const fake_gpu *g = dev(h);
  if (!g || sensor != 0) return BADARG;
  if (!g->supported) return NOTSUP;
  *t = g->temp;
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(void *h, unsigned *mw) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (!g->supported) return NOTSUP;
  *mw = g->power_mw;
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(void *h, unsigned *u /* {gpu, memory} */) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (!g->supported) return NOTSUP;
  u[0] = g->util_gpu;
  u[1] = g->util_mem;
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(void *h, int type, unsigned *mhz) {
  const fake_gpu *g = dev(h);
  if (!g || type < 0 || type > 2) return BADARG;
  if (!g->supported) return NOTSUP;
  *mhz = type == 2 ? g->clock_mem : g->clock_sm;
  return OK;
}
typedef struct {
  unsigned long long total, free, used;
} mem_v1;
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(void *h, mem_v1 *m) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  m->total = g->total;
  m->used = g->used + 512 * MIB; /* the legacy call counts reserved memory as used */
  m->free = g->total - m->used;
  return OK;
}

/* Fill a process listing with elements of elem bytes (pid at 0, usedGpuMemory at 8 in both). */
static nvmlReturn_t procs(void *h, unsigned *count, void *infos, size_t elem, char type) {
  const fake_gpu *g = dev(h);
  if (!g || !count) return BADARG;
  if (!g->supported) return NOTSUP;
  unsigned n = 0;
  for (int i = 0; i < g->nprocs; i++) n += g->proc_type[i] == type;
  if (*count < n || (!infos && n)) {
    *count = n;
    return INSUFFICIENT;
  }
  unsigned k = 0;
  for (int i = 0; i < g->nprocs; i++) {
    if (g->proc_type[i] != type) continue;
    unsigned char *e = (unsigned char *)infos + k++ * elem;
    memset(e, 0xee, elem); /* the instance ids and padding: junk a reader must not need */
    memcpy(e, &g->pids[i], 4);
    memcpy(e + 8, &g->proc_mem[i], 8);
  }
  *count = n;
  return OK;
}

#ifdef FAKE_OLD_DRIVER
EXPORT nvmlReturn_t nvmlInit(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { return get_count(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, void **h) { return get_handle(i, h); }
/* The legacy nvmlPciInfo_t: a 16-byte busId, the numbers, then reserved words. */
typedef struct {
  char busId[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId, reserved[4];
} pci_v1;
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(void *h, pci_v1 *p) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  memset(p, 0, sizeof *p);
  snprintf(p->busId, sizeof p->busId, "%04X:%02X:%02X.0", g->domain, g->bus, g->device);
  p->domain = g->domain, p->bus = g->bus, p->device = g->device;
  for (int i = 0; i < 4; i++) p->reserved[i] = 0x33333333u; /* "3333..." if misread as a string */
  return OK;
}
/* The legacy listing: 16-byte elements. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(void *h, unsigned *count, void *infos) {
  return procs(h, count, infos, 16, 'C');
}
#else
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { return get_count(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { return get_handle(i, h); }
typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} pci_v3;
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *h, pci_v3 *p) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  memset(p, 0, sizeof *p);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.0", g->domain, g->bus, g->device);
  snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.0", g->domain, g->bus, g->device);
  p->domain = g->domain, p->bus = g->bus, p->device = g->device;
  return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned *mw) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (!g->supported) return NOTSUP;
  *mw = g->limit_mw;
  return OK;
}
typedef struct {
  unsigned version;
  unsigned long long total, reserved, free, used;
} mem_v2;
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *h, mem_v2 *m) {
  const fake_gpu *g = dev(h);
  if (!g) return BADARG;
  if (m->version != (unsigned)(sizeof(mem_v2) | (2u << 24))) return VERSION_MISMATCH; /* as the driver does */
  m->total = g->total;
  m->reserved = 512 * MIB;
  m->used = g->used;
  m->free = g->total - g->used - m->reserved;
  return OK;
}
/* The current listings: 24-byte elements. A _v2 is exported too, as real drivers do. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *count, void *infos) {
  return procs(h, count, infos, 24, 'C');
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(void *h, unsigned *count, void *infos) {
  return procs(h, count, infos, 24, 'C');
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(void *h, unsigned *count, void *infos) {
  return procs(h, count, infos, 24, 'G');
}
#endif
