/* src/monitor/props.c: the NVML side of the device registry's properties (ct_device_props_get
 * calls ct__nvml_fill_props for a GPU; ct_device_count may call ct__nvml_gpu_count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor_internal.h"

int ct__nvml_gpu_count(void) {
  ct__nvml nv;
  if (ct__nvml_open(&nv) != CT_OK) {
    ct_clear_error(); /* no driver means zero GPUs, not an error */
    return 0;
  }
  unsigned n = 0;
  if (nv.count(&n) != NVML_SUCCESS) n = 0;
  ct__nvml_close(&nv);
  return (int)n;
}

ct_status ct__nvml_fill_props(int cuda_index, ct_device_props *p) {
  char name[32];
  if (!p || cuda_index < 0)
    return ct__error(CT_EINVAL, "ct__nvml_fill_props: bad arguments (%s)", ct_device_str(CT_DEVICE_CUDA(cuda_index), name, sizeof name));
  ct_monitor_snapshot snap;
  memset(&snap, 0, sizeof snap);
  ct__nvml nv;
  ct_status s = ct__nvml_open(&nv);
  if (s != CT_OK) return s;
  s = ct__nvml_read_gpus(&nv, &snap);
  ct__nvml_close(&nv);
  if (s != CT_OK) return s;
  const ct_monitor_gpu *g = NULL;
  long long want = p->pci_bus_id[0] ? ct__pci_key(p->pci_bus_id) : -1;
  for (int i = 0; i < snap.ngpus && !g; i++) {
    /* The CUDA runtime's bus id, when the caller has it, beats our guess at CUDA's order. */
    if (want >= 0 ? ct__pci_key(snap.gpus[i].pci_bus_id) == want : snap.gpus[i].cuda_index == cuda_index) g = &snap.gpus[i];
  }
  if (!g) {
    s = ct__error(CT_EDEVICE, "no NVML device for %s%s%s (NVML lists %d GPUs; check CUDA_VISIBLE_DEVICES)",
                  ct_device_str(CT_DEVICE_CUDA(cuda_index), name, sizeof name), want >= 0 ? " at PCI bus id " : "", want >= 0 ? p->pci_bus_id : "", snap.ngpus);
  } else {
    snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", g->pci_bus_id);
    snprintf(p->uuid, sizeof p->uuid, "%.63s", g->uuid); /* GPU UUIDs are 40 characters */
    p->utilization = g->utilization_gpu;
    if (!p->name[0]) snprintf(p->name, sizeof p->name, "%s", g->name);
    if (p->total_memory == 0 && g->memory_total >= 0) {
      p->total_memory = (size_t)g->memory_total;
      if (g->memory_used >= 0 && g->memory_used <= g->memory_total)
        p->free_memory = (size_t)(g->memory_total - g->memory_used);
    }
  }
  for (int i = 0; i < snap.ngpus; i++) free(snap.gpus[i].processes);
  free(snap.gpus);
  return s;
}
