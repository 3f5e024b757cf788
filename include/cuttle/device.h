/* cuttle/device.h: devices, their enumeration, properties and choice.
 *
 * A device is a small value: a kind (CPU or CUDA) and an index. There is no "current device": every
 * constructor takes one, and every op runs on the device its inputs live on. The names follow
 * PyTorch: "cpu", "cuda", "cuda:N"; "gpu" and "gpu:N" are aliases of "cuda" and "cuda:N" (as in the
 * d2l course's try_gpu). */
#ifndef CUTTLE_DEVICE_H
#define CUTTLE_DEVICE_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CT_OPENCL: a device of an OpenCL platform ("opencl:N"), numbered over every device of every
 * platform in the order the ICD loader lists platforms, then devices within each. */
typedef enum { CT_CPU = 0, CT_CUDA = 1, CT_OPENCL = 2, CT_DEVICE_KIND_COUNT } ct_device_kind;

typedef struct {
  ct_device_kind kind;
  int index; /* 0 for the CPU; the CUDA ordinal after CUDA_VISIBLE_DEVICES for a GPU */
} ct_device;

#define CT_DEVICE_CPU ((ct_device){CT_CPU, 0})
#define CT_DEVICE_CUDA(i) ((ct_device){CT_CUDA, (i)})
#define CT_DEVICE_OPENCL(i) ((ct_device){CT_OPENCL, (i)})

/* Parse "cpu", "cuda", "cuda:N", "gpu", "gpu:N", "opencl", "opencl:N" (case-sensitive, N a decimal
 * >= 0) into *out. "cuda", "gpu" and "opencl" mean index 0. The names come from the device
 * registry (src/core/device.c), one row per backend, whether or not that backend is built in. Parsing does not check that the device exists.
 * Errors: CT_EINVAL for a NULL or malformed string (the message quotes it and lists the forms). */
CT_API ct_status ct_device_parse(const char *s, ct_device *out);

/* Write the canonical name ("cpu", "cuda:1", "opencl:0") into buf of size n (32 bytes always suffice) and
 * return buf; NULL with CT_EINVAL when buf is NULL. */
CT_API char *ct_device_str(ct_device d, char *buf, size_t n);

/* 1 when a and b are the same device, else 0. */
CT_API int ct_device_eq(ct_device a, ct_device b);

/* The number of devices of a kind: 1 for CT_CPU; for CT_CUDA the number of visible GPUs, 0 when
 * the CUDA backend is not compiled in, no driver is installed, or any CUDA runtime call fails while
 * probing (cudaGetDeviceCount returns error 35 on a machine with no driver, which counts as zero).
 * 0 with CT_EINVAL for a kind that is not a ct_device_kind. */
CT_API int ct_device_count(ct_device_kind kind);

/* 1 when the device exists on this machine (its index is below ct_device_count), else 0. */
CT_API int ct_device_available(ct_device d);

typedef struct {
  char name[256];            /* "NVIDIA H100 80GB HBM3", or the CPU model name */
  size_t total_memory;       /* bytes */
  size_t free_memory;        /* bytes, at the time of the call */
  int cores;                 /* CPU: online logical cores; GPU: streaming multiprocessors */
  int compute_major;         /* GPU compute capability, 0 for the CPU */
  int compute_minor;
  char pci_bus_id[32];       /* "00000000:01:00.0" as nvidia-smi prints it; "" for the CPU */
  char uuid[64];             /* "GPU-xxxxxxxx-..." as nvidia-smi prints it; "" for the CPU */
  int utilization;           /* GPU utilization in percent from NVML, -1 when unknown */
  /* Filled by the OpenCL backend (zeros / "" elsewhere unless said): */
  char vendor[128];          /* CL_DEVICE_VENDOR, "NVIDIA Corporation" for CUDA; "" for the CPU */
  char driver_version[64];   /* CL_DRIVER_VERSION; the CUDA driver version for CUDA where known */
  int device_type;           /* CT_DEVICE_TYPE_*: what the hardware is (PoCL's device is a CPU) */
  size_t max_alloc;          /* bytes: the largest single buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); 0 unknown */
  int fp16;                  /* 1 when the device computes in float16 (cl_khr_fp16), else 0 */
  int fp64;                  /* 1 when the device computes in float64 (cl_khr_fp64), else 0 */
} ct_device_props;

/* ct_device_props.device_type */
enum { CT_DEVICE_TYPE_UNKNOWN = 0, CT_DEVICE_TYPE_CPU, CT_DEVICE_TYPE_GPU, CT_DEVICE_TYPE_ACCELERATOR };

/* Fill *out with the properties of d. Errors: CT_EDEVICE when d does not exist (the message names
 * it and says how many devices of its kind there are). */
CT_API ct_status ct_device_props_get(ct_device d, ct_device_props *out);

/* The GPUs, in the order try_gpu and try_all_gpus number them: every CUDA GPU, then every OpenCL
 * device whose type is GPU. An OpenCL device of type CPU or accelerator (PoCL's) is never chosen
 * here; it is used only when named ("opencl:0"). */

/* GPU i when it exists, else the CPU (d2l's try_gpu). Never fails. */
CT_API ct_device ct_try_gpu(int i);

/* Every GPU, or just the CPU when there is none (d2l's try_all_gpus). Writes at most cap devices to
 * out and returns how many there are (which may exceed cap). */
CT_API int ct_try_all_gpus(ct_device *out, int cap);

typedef enum {
  CT_BEST_MOST_FREE_MEMORY = 0, /* the GPU with the most free memory */
  CT_BEST_LEAST_UTILIZATION,    /* the GPU with the lowest utilization (NVML), ties by free memory */
} ct_best_policy;

/* The best GPU by policy, or the CPU when there is no GPU. Never fails. */
CT_API ct_device ct_device_best(ct_best_policy policy);

/* Block the host until all work cuttle queued on d has finished: on a GPU the compute stream (every
 * op) and the copy stream (non-blocking copies; after ct_to(..., CT_NON_BLOCKING) the result may be
 * read on the host only after this or an event, see cuttle/cuda.h). Streams the caller made with
 * ct_stream_new are not waited for (ct_stream_synchronize). A no-op on the CPU. Counted in the
 * ledger as a synchronization point; an explicit wait, so never reported by the sync-debug mode.
 * Errors: CT_EDEVICE for a missing device, CT_EBACKEND for a driver error (also one left by an
 * earlier asynchronous kernel). */
CT_API ct_status ct_synchronize(ct_device d);

#ifdef __cplusplus
}
#endif
#endif
