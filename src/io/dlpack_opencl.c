/* src/io/dlpack_opencl.c: the cl_mem behind an OpenCL tensor, for DLPack's kDLOpenCL (whose data is
 * a cl_mem). The OpenCL backend's buffers are addresses of a virtual window
 * (src/backend/opencl/opencl_backend.h) that ct__ocl_resolve turns back into (cl_mem, offset); this
 * file is the one place outside the backend's folder that includes its header (and so the CL
 * headers), because the device interface (core/backend.h) has no entry for a native buffer handle
 * yet. Once it has one (a backend's own handle for a tensor's memory, asked like any other entry),
 * this file becomes a call through it and io/ includes no backend header. */
#include "io/dlpack_internal.h"

#ifdef CUTTLE_WITH_OPENCL
#include "backend/opencl/opencl_backend.h"

ct_status ct__dlpack_ocl_mem(int index, const void *p, void **mem, uint64_t *byte_offset) {
  cl_mem m = NULL;
  size_t off = 0;
  ct_status s = ct__ocl_resolve(index, p, &m, &off);
  if (s != CT_OK) return s;
  *mem = (void *)m;
  *byte_offset = off;
  return CT_OK;
}
#else
ct_status ct__dlpack_ocl_mem(int index, const void *p, void **mem, uint64_t *byte_offset) {
  (void)p, (void)mem, (void)byte_offset;
  return ct__error(CT_EUNSUPPORTED, "opencl:%d: this build has no OpenCL backend", index);
}
#endif
