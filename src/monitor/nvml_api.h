/* src/monitor/nvml_api.h: the slice of NVML that cuttle uses, declared here because cuttle loads
 * libnvidia-ml.so.1 with dlopen at run time and never needs the CUDA toolkit's nvml.h to build.
 *
 * Only the types and enum values we call with are declared; their layouts follow nvml.h (R470 and
 * later, and the older layouts where a function has a legacy version we fall back to). */
#ifndef CUTTLE_MONITOR_NVML_API_H
#define CUTTLE_MONITOR_NVML_API_H

typedef int nvmlReturn_t; /* an enum in nvml.h; int keeps the ABI */
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

#define CT__NVML_NAME_SIZE 96   /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define CT__NVML_UUID_SIZE 96   /* NVML_DEVICE_UUID_V2_BUFFER_SIZE is 96 */
#define CT__NVML_DRIVER_SIZE 80 /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */

/* nvmlDeviceGetPciInfo_v3's struct. The legacy versions put a 16-byte busId first and then the same
 * domain/bus/device fields, so reading those numeric fields works with every version; the string
 * bus id is rebuilt from them (see nvml_query.c). */
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total, free, used; /* v1: used includes memory the driver reserves */
} nvmlMemory_t;

typedef struct {
  unsigned int version; /* nvmlMemory_v2 */
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
/* NVML_STRUCT_VERSION(Memory, 2): the struct size with the version in the top byte. */
#define CT__NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
  unsigned int gpu, memory; /* percent over the last sample period */
} nvmlUtilization_t;

/* nvmlProcessInfo_t of the _v2 and _v3 process listings (24 bytes). */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
/* The legacy listing's struct (16 bytes). */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
#define CT__NVML_VALUE_NOT_AVAILABLE (~0ULL) /* usedGpuMemory when the driver cannot say */

/* A process listing call: the _v3/_v2 and legacy functions share this signature and differ only in
 * the element struct, so the table records the element size beside the pointer. */
typedef nvmlReturn_t (*ct__nvml_procs_fn)(nvmlDevice_t, unsigned int *, void *);

/* The loaded library: every pointer may be NULL when this driver lacks the function (then the
 * column it feeds reads N/A). */
typedef struct ct__nvml {
  void *dl;
  char path[256]; /* what was dlopen'ed */
  nvmlReturn_t (*init)(void);
  nvmlReturn_t (*shutdown)(void);
  const char *(*error_string)(nvmlReturn_t);
  nvmlReturn_t (*driver_version)(char *, unsigned int);
  nvmlReturn_t (*count)(unsigned int *);
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t *);
  nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*memory_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
  nvmlReturn_t (*memory_v1)(nvmlDevice_t, nvmlMemory_t *);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
  ct__nvml_procs_fn compute_procs, graphics_procs;
  size_t compute_proc_size, graphics_proc_size; /* sizeof the element struct each one fills */
} ct__nvml;

/* Load NVML (CUTTLE_NVML_LIBRARY, else "libnvidia-ml.so.1"), resolve its functions and call
 * nvmlInit. Returns CT_OK with *n filled, or CT_EUNSUPPORTED when the library is missing, lacks
 * nvmlInit, or nvmlInit fails; the error message says which, and *n is then all zero (closed). */
int ct__nvml_open(ct__nvml *n);
/* nvmlShutdown and dlclose; safe on a zeroed or already closed struct. */
void ct__nvml_close(ct__nvml *n);
/* NVML's text for a return code ("Not Supported"), or "error N" when the library cannot say. */
const char *ct__nvml_strerror(const ct__nvml *n, nvmlReturn_t r);

#endif
