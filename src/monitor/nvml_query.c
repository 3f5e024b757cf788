/* src/monitor/nvml_query.c: read every GPU's figures from an open NVML into a snapshot, and place
 * the GPUs in CUDA order.
 *
 * Each figure is asked for separately and left at -1 (N/A) when the function is missing or the
 * call fails, because a GPU that does not support one sensor still has the others. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor_internal.h"

/* The bus id as nvidia-smi prints it ("00000000:01:00.0"), built from the numeric fields that every
 * version of nvmlPciInfo_t has at the same offsets; the function number comes from the first 16
 * bytes, a bus id string in every version (the v3 busId field would be reserved words in older). */
static void bus_id_of(const nvmlPciInfo_t *pci, char *out, size_t n) {
  unsigned fn = 0;
  const char *s = pci->busIdLegacy;
  const char *dot = memchr(s, '.', strnlen(s, sizeof pci->busIdLegacy));
  if (dot) fn = (unsigned)strtoul(dot + 1, NULL, 16);
  snprintf(out, n, "%08X:%02X:%02X.%X", pci->domain, pci->bus, pci->device, fn);
}

/* Read one listing (compute or graphics) into *procs, appending; processes already listed (a
 * process with both a compute and a graphics context) are kept once, as compute. Returns 0, or -1
 * when the driver cannot list them. */
static int read_procs(ct__nvml_procs_fn fn, size_t elem, char type, nvmlDevice_t dev, ct_monitor_gpu *g) {
  if (!fn) return -1;
  unsigned count = 0;
  nvmlReturn_t r = fn(dev, &count, NULL);
  if (r == NVML_SUCCESS && count == 0) return 0;
  if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) return -1;
  /* Processes may start between the two calls: leave room for a few more. */
  unsigned cap = count + 8;
  unsigned char *raw = calloc(cap, elem);
  if (!raw) return -1;
  count = cap;
  r = fn(dev, &count, raw);
  if (r != NVML_SUCCESS) {
    free(raw);
    return -1;
  }
  int have = g->process_count > 0 ? g->process_count : 0;
  ct_monitor_process *grown = realloc(g->processes, (have + count + 1) * sizeof *grown);
  if (!grown) {
    free(raw);
    return -1;
  }
  g->processes = grown;
  for (unsigned i = 0; i < count; i++) {
    /* Both structs start with pid then usedGpuMemory (8-aligned at offset 8). */
    const nvmlProcessInfo_v1_t *p = (const nvmlProcessInfo_v1_t *)(raw + i * elem);
    int dup = 0;
    for (int k = 0; k < have; k++) dup |= g->processes[k].pid == p->pid;
    if (dup) continue;
    ct_monitor_process *q = &g->processes[have++];
    memset(q, 0, sizeof *q);
    q->pid = p->pid;
    q->type = type;
    q->used_memory = p->usedGpuMemory == CT__NVML_VALUE_NOT_AVAILABLE ? -1 : (int64_t)p->usedGpuMemory;
    ct__proc_comm("/proc", (int)p->pid, q->name, sizeof q->name);
  }
  g->process_count = have;
  free(raw);
  return 0;
}

static void read_gpu(const ct__nvml *nv, nvmlDevice_t dev, ct_monitor_gpu *g) {
  unsigned u = 0;
  if (nv->name) nv->name(dev, g->name, sizeof g->name);
  g->name[sizeof g->name - 1] = 0;
  nvmlPciInfo_t pci;
  memset(&pci, 0, sizeof pci);
  if (nv->pci_info && nv->pci_info(dev, &pci) == NVML_SUCCESS) bus_id_of(&pci, g->pci_bus_id, sizeof g->pci_bus_id);
  if (nv->uuid) nv->uuid(dev, g->uuid, sizeof g->uuid);
  g->uuid[sizeof g->uuid - 1] = 0;
  if (nv->temperature && nv->temperature(dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS) g->temperature_c = (int)u;
  if (nv->power_usage && nv->power_usage(dev, &u) == NVML_SUCCESS) g->power_mw = u;
  if (nv->power_limit && nv->power_limit(dev, &u) == NVML_SUCCESS) g->power_limit_mw = u;
  /* v2 first: v1's "used" includes memory the driver reserves, so it disagrees with nvidia-smi. */
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof m2);
  m2.version = CT__NVML_MEMORY_V2;
  nvmlMemory_t m1;
  if (nv->memory_v2 && nv->memory_v2(dev, &m2) == NVML_SUCCESS) {
    g->memory_total = (int64_t)m2.total;
    g->memory_used = (int64_t)m2.used;
  } else if (nv->memory_v1 && nv->memory_v1(dev, &m1) == NVML_SUCCESS) {
    g->memory_total = (int64_t)m1.total;
    g->memory_used = (int64_t)m1.used;
  }
  nvmlUtilization_t ut;
  if (nv->utilization && nv->utilization(dev, &ut) == NVML_SUCCESS) {
    g->utilization_gpu = (int)ut.gpu;
    g->utilization_memory = (int)ut.memory;
  }
  if (nv->clock && nv->clock(dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS) g->clock_sm_mhz = (int)u;
  if (nv->clock && nv->clock(dev, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) g->clock_mem_mhz = (int)u;
  int c = read_procs(nv->compute_procs, nv->compute_proc_size, 'C', dev, g);
  int gr = read_procs(nv->graphics_procs, nv->graphics_proc_size, 'G', dev, g);
  if (c < 0 && gr < 0) g->process_count = -1; /* neither listing works: N/A, not "none" */
}

static void gpu_init_na(ct_monitor_gpu *g, int nvml_index) {
  memset(g, 0, sizeof *g);
  g->cuda_index = -1;
  g->nvml_index = nvml_index;
  g->temperature_c = g->utilization_gpu = g->utilization_memory = -1;
  g->clock_sm_mhz = g->clock_mem_mhz = -1;
  g->power_mw = g->power_limit_mw = g->memory_used = g->memory_total = -1;
  g->process_count = 0;
}

/* cuda_to_nvml from the CUDA runtime's bus ids when a probe is registered; else from the env. */
static int cuda_map(const ct__nvml_ident *ids, int n, int *cuda_to_nvml, int *exact) {
  ct__cuda_bus_ids_fn probe = ct__monitor_cuda_bus_ids();
  if (probe) {
    char(*rt)[32] = calloc(n > 0 ? n : 1, sizeof *rt);
    int m = rt ? probe(rt, n) : -1;
    if (m >= 0) {
      int out = 0;
      for (int c = 0; c < m && c < n; c++) {
        long long key = ct__pci_key(rt[c]);
        for (int i = 0; i < n; i++)
          if (key >= 0 && ct__pci_key(ids[i].pci_bus_id) == key) cuda_to_nvml[out++] = i;
      }
      free(rt);
      *exact = 1;
      return out;
    }
    free(rt);
  }
  const char *order = getenv("CUDA_DEVICE_ORDER");
  *exact = n <= 1 || (order && strcmp(order, "PCI_BUS_ID") == 0);
  return ct__cuda_visible_map(ids, n, getenv("CUDA_VISIBLE_DEVICES"), cuda_to_nvml);
}

ct_status ct__nvml_read_gpus(const ct__nvml *nv, ct_monitor_snapshot *snap) {
  unsigned count = 0;
  if (nv->count(&count) != NVML_SUCCESS) count = 0;
  if (count == 0) return CT_OK;
  int n = (int)count;
  ct_monitor_gpu *byn = calloc(n, sizeof *byn);
  ct__nvml_ident *ids = calloc(n, sizeof *ids);
  int *map = calloc(n, sizeof *map);
  int *placed = calloc(n, sizeof *placed);
  snap->gpus = calloc(n, sizeof *snap->gpus);
  if (!byn || !ids || !map || !placed || !snap->gpus) {
    free(byn), free(ids), free(map), free(placed), free(snap->gpus);
    snap->gpus = NULL;
    return ct__error(CT_ENOMEM, "cuttle smi: out of memory reading %d GPUs", n);
  }
  for (int i = 0; i < n; i++) {
    gpu_init_na(&byn[i], i);
    nvmlDevice_t dev = NULL;
    if (nv->handle_by_index(i, &dev) != NVML_SUCCESS) continue; /* a lost GPU: a row of N/A */
    read_gpu(nv, dev, &byn[i]);
    memcpy(ids[i].pci_bus_id, byn[i].pci_bus_id, sizeof ids[i].pci_bus_id);
    memcpy(ids[i].uuid, byn[i].uuid, sizeof ids[i].uuid);
  }
  int m = cuda_map(ids, n, map, &snap->cuda_order_exact);
  int k = 0;
  for (int c = 0; c < m; c++) {
    snap->gpus[k] = byn[map[c]];
    snap->gpus[k++].cuda_index = c;
    placed[map[c]] = 1;
  }
  for (int i = 0; i < n; i++)
    if (!placed[i]) snap->gpus[k++] = byn[i];
  snap->ngpus = k;
  free(byn), free(ids), free(map), free(placed);
  return CT_OK;
}
