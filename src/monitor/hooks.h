/* src/monitor/hooks.h: the monitor's entry points that the rest of the library calls or registers
 * with: the CUDA backend asks NVML for a device's properties, and
 * allocators and the CUDA backend register what `cuttle smi` shows. One declaration each, read by
 * the C sources and by nvcc (src/backend/cuda/device.cu), so nothing declares them again by hand.
 * Not installed. */
#ifndef CUTTLE_MONITOR_HOOKS_H
#define CUTTLE_MONITOR_HOOKS_H

#include <stddef.h>
#include "cuttle/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- called by the CUDA backend's device_props (src/backend/cuda/device.cu) */

/* The number of GPUs NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES), 0 without a
 * driver. Opens and closes NVML. */
int ct__nvml_gpu_count(void);

/* Fill the NVML fields of p for CUDA device cuda_index: pci_bus_id, uuid, utilization, and name /
 * total_memory / free_memory when p has none yet. When p->pci_bus_id is already set (by the CUDA
 * runtime) the NVML device is found by it; otherwise by the CUDA_VISIBLE_DEVICES mapping in PCI
 * bus order. Errors: CT_EUNSUPPORTED without a driver, CT_EDEVICE when no NVML device matches. */
ct_status ct__nvml_fill_props(int cuda_index, ct_device_props *p);


/* ---- registered by allocators and the CUDA backend (optional; the monitor works without them) */

/* An allocator's statistics for device d: CT_OK, or CT_EDEVICE when it has no such device (that is
 * how ct_monitor_publish finds where the GPUs end). Must be thread-safe. */
typedef ct_status (*ct__allocator_stats_fn)(ct_device d, size_t *allocated, size_t *reserved);
/* Register fn for devices of kind (CT_CPU or CT_CUDA); NULL unregisters. The caching allocator
 * calls this when it is first used. */
void ct__monitor_set_allocator_stats(ct_device_kind kind, ct__allocator_stats_fn fn);

/* The CUDA runtime's PCI bus id of each CUDA ordinal: writes up to cap ids ("0000:01:00.0", any
 * domain width) and returns how many devices there are, or -1 when the runtime is unavailable. */
typedef int (*ct__cuda_bus_ids_fn)(char (*ids)[32], int cap);
/* The CUDA backend registers this so that CUDA indices follow CUDA's own order exactly. */
void ct__monitor_set_cuda_bus_ids(ct__cuda_bus_ids_fn fn);
ct__cuda_bus_ids_fn ct__monitor_cuda_bus_ids(void);

#ifdef __cplusplus
}
#endif
#endif
