/* src/io/dlpack_internal.h: what src/io/dlpack.c asks of the OpenCL backend. */
#ifndef CUTTLE_IO_DLPACK_INTERNAL_H
#define CUTTLE_IO_DLPACK_INTERNAL_H

#include <stdint.h>
#include "core/internal.h"

/* The cl_mem (as a void *) and the byte offset inside it of p, an address of a buffer of
 * opencl:index (storage data + offset, see src/backend/opencl/opencl_backend.h). Errors: CT_EINVAL
 * (p belongs to no buffer of the device), CT_EUNSUPPORTED (a build without the OpenCL backend).
 * src/io/dlpack_opencl.c. */
ct_status ct__dlpack_ocl_mem(int index, const void *p, void **mem, uint64_t *byte_offset);

#endif
