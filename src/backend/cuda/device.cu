/* src/backend/cuda/device.cu: enumerating CUDA devices and reading their properties.
 *
 * device_count never fails: any CUDA runtime error while probing (cudaErrorNoDevice, or
 * cudaErrorInsufficientDriver = 35 on a machine without a driver) counts as zero GPUs, and the
 * sticky error is cleared so later calls are not poisoned. device_props formats the PCI bus id and
 * the UUID exactly as nvidia-smi prints them ("00000000:01:00.0", "GPU-1a2b3c4d-...-..."), so the
 * CLI's `cuttle devices` can be read beside `nvidia-smi -L`. */
#include <atomic>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/common.cuh"

#include "monitor/hooks.h"

static int cuda_bus_ids(char (*ids)[32], int cap) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  for (int i = 0; i < n && i < cap; i++)
    if (cudaDeviceGetPCIBusId(ids[i], 32, i) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
  return n;
}

static ct_status cuda_allocator_stats(ct_device d, size_t *allocated, size_t *reserved) {
  if (d.kind != CT_CUDA || d.index < 0 || d.index >= ct__cuda_device_count())
    return ct__error(CT_EDEVICE, "cuda allocator: no device cuda:%d", d.index);
  size_t peak = 0;
  uint64_t mallocs = 0;
  ct__cuda_memory_stats(d.index, allocated, reserved, &peak, &mallocs);
  return CT_OK;
}

int ct__cuda_device_count(void) {
  static int hooks_registered;
  if (!hooks_registered) { /* idempotent, so a race between first callers is harmless */
    hooks_registered = 1;
    ct__monitor_set_cuda_bus_ids(cuda_bus_ids);
    ct__monitor_set_allocator_stats(CT_CUDA, cuda_allocator_stats);
  }
  /* asked of the runtime once: the devices a process sees are fixed when CUDA starts in it
   * (CUDA_VISIBLE_DEVICES is read then), and every op's context lookup asks */
  static std::atomic<int> known{-1};
  int n = known.load(std::memory_order_relaxed);
  if (n >= 0) return n;
  n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* clear it: no GPU is not an error */
    n = 0;
  }
  if (n < 0) n = 0;
  known.store(n, std::memory_order_relaxed);
  return n;
}

ct_status ct__cuda_device_props(int index, ct_device_props *out) {
  int n = ct__cuda_device_count();
  if (index < 0 || index >= n)
    return ct__error(CT_EDEVICE, "cuda:%d does not exist: this machine has %d CUDA device%s", index, n, n == 1 ? "" : "s");
  cudaDeviceProp p;
  CT_CUDA_TRY(cudaGetDeviceProperties(&p, index));
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", p.name);
  out->total_memory = p.totalGlobalMem;
  out->cores = p.multiProcessorCount;
  out->compute_major = p.major;
  out->compute_minor = p.minor;
  out->utilization = -1; /* NVML's business (src/monitor) */
  /* nvidia-smi: 8 hex digits of domain, then bus:device.function */
  snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%08X:%02X:%02X.0", (unsigned)p.pciDomainID,
           (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
  const unsigned char *u = (const unsigned char *)p.uuid.bytes;
  snprintf(out->uuid, sizeof out->uuid,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
           u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  /* Free memory needs a context on the device; cudaMemGetInfo creates the primary one. */
  int prev = -1;
  (void)cudaGetDevice(&prev);
  size_t free_b = 0, total_b = 0;
  cudaError_t e = cudaSetDevice(index);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
  if (prev >= 0) (void)cudaSetDevice(prev);
  if (e != cudaSuccess)
    return ct__error(CT_EBACKEND, "cuda: cudaMemGetInfo failed on cuda:%d: %s", index, cudaGetErrorString(e));
  out->free_memory = free_b;
  if (total_b) out->total_memory = total_b;
  /* utilization (for ct_device_best's least-utilization policy) comes from NVML, matched by bus id;
   * no NVML is not an error */
  if (ct__nvml_fill_props(index, out) != CT_OK) ct_clear_error();
  return CT_OK;
}
