/* src/backend/opencl/device.c: enumeration of every device of every OpenCL platform, their fixed
 * facts, and the OpenCL error names. Layer 0 of the folder (opencl_backend.h): it calls no other
 * file of the backend. (The vtable's device_props, which adds what the allocator holds, is in
 * backend.c.)
 *
 * Order: platforms as the ICD loader lists them, and within each platform its devices as
 * clGetDeviceIDs(CL_DEVICE_TYPE_ALL) lists them; "opencl:N" is the N-th of that list. The list is
 * read once per process (pthread_once) and never changes afterwards, so indices stay stable while
 * the process runs. A platform that fails to answer is skipped; no platform at all (no ICD, or
 * CL_PLATFORM_NOT_FOUND_KHR) means zero devices, not an error. */
#include <string.h>
#include <unistd.h>
#include "backend/opencl/opencl_backend.h"

static ct__ocl_devinfo devices[CT_OCL_MAX_DEVICES];
static int ndevices;
static pthread_once_t enumerated = PTHREAD_ONCE_INIT;

static void info_string(cl_device_id d, cl_device_info what, char *buf, size_t n) {
  buf[0] = 0;
  if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) buf[0] = 0;
  buf[n - 1] = 0;
}

static int has_extension(cl_device_id d, const char *ext) {
  size_t n = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || n == 0) return 0;
  char *s = malloc(n + 1);
  if (!s) return 0;
  int found = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, s, NULL) == CL_SUCCESS) {
    s[n] = 0;
    size_t len = strlen(ext);
    for (char *p = strstr(s, ext); p && !found; p = strstr(p + 1, ext))
      found = (p == s || p[-1] == ' ') && (p[len] == 0 || p[len] == ' ');
  }
  free(s);
  return found;
}

static void enumerate(void) {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return;
  cl_platform_id *ps = calloc(np, sizeof *ps);
  if (!ps) return;
  if (clGetPlatformIDs(np, ps, NULL) != CL_SUCCESS) np = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
    cl_device_id ids[CT_OCL_MAX_DEVICES];
    if (nd > CT_OCL_MAX_DEVICES) nd = CT_OCL_MAX_DEVICES;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < nd && ndevices < CT_OCL_MAX_DEVICES; i++) {
      ct__ocl_devinfo *d = &devices[ndevices++];
      cl_ulong gm = 0, ma = 0;
      d->platform = ps[p];
      d->device = ids[i];
      clGetDeviceInfo(ids[i], CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
      clGetDeviceInfo(ids[i], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
      d->global_mem = (size_t)gm;
      d->max_alloc = (size_t)ma;
      info_string(ids[i], CL_DEVICE_NAME, d->name, sizeof d->name);
      info_string(ids[i], CL_DEVICE_VENDOR, d->vendor, sizeof d->vendor);
      info_string(ids[i], CL_DRIVER_VERSION, d->driver, sizeof d->driver);
      d->fp16 = has_extension(ids[i], "cl_khr_fp16");
      d->fp64 = has_extension(ids[i], "cl_khr_fp64");
    }
  }
  free(ps);
}

int ct__ocl_device_count(void) {
  pthread_once(&enumerated, enumerate);
  return ndevices;
}

const ct__ocl_devinfo *ct__ocl_devinfo_get(int index) {
  return index >= 0 && index < ct__ocl_device_count() ? &devices[index] : NULL;
}

int ct__ocl_device_is_gpu(int index) {
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  return d && (d->type & CL_DEVICE_TYPE_GPU) ? 1 : 0;
}

const char *ct__ocl_errstr(cl_int e) {
  switch (e) {
#define E(x) \
  case x: return #x;
    E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
#undef E
    default: return "unknown OpenCL error";
  }
}
