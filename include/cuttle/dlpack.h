/* cuttle/dlpack.h: tensors exchanged without a copy with NumPy, PyTorch, CuPy, JAX and any other
 * framework that speaks DLPack (https://dmlc.github.io/dlpack/latest/, the header dlpack/dlpack.h of
 * https://github.com/dmlc/dlpack; Debian's libdlpack-dev). Python's array API standard wraps the
 * same struct in a PyCapsule named "dltensor" (or "dltensor_versioned"): `torch.from_dlpack`,
 * `numpy.from_dlpack`, `Tensor.__dlpack__`.
 *
 * Two structs carry a tensor:
 *  - DLManagedTensor, the struct of DLPack 0.x (what Debian 12's dlpack.h 0.6 defines, and what
 *    PyTorch 1.x, NumPy 1.x and every capsule named "dltensor" carry);
 *  - struct DLManagedTensorVersioned, of DLPack 1.x (a version number and flags before the tensor;
 *    capsules named "dltensor_versioned"). cuttle supports it in every build: where the dlpack.h
 *    cuttle was built with predates 1.0, src/io/dlpack.c lays the struct out as DLPack 1.0's
 *    dlpack.h does (tests/io/test_dlpack_v1.c checks the layout against DLPack 1.1's header).
 * This header only names the two structs; include <dlpack/dlpack.h> to read their fields.
 *
 * Ownership (DLPack's rule: the consumer calls the deleter once, when it no longer needs the memory):
 *  - ct_to_dlpack(t) hands out a struct that holds one reference to t (so to t's storage); its
 *    deleter releases it. t and the struct may be freed in either order, from any thread.
 *  - ct_from_dlpack(m) takes m over on success: the new tensor (and every view of it) shares m's
 *    memory, and m's deleter is called when the last cuttle reference to that memory goes. On
 *    failure m stays the caller's (call its deleter yourself), except as ct_from_dlpack_versioned
 *    says for a major version cuttle cannot read.
 *  - A struct made by ct_to_dlpack* that comes back to ct_from_dlpack* gives a view of the original
 *    storage (the struct's deleter is called at once): the round trip shares memory on every device.
 *
 * Devices. Export: a CPU tensor is kDLCPU, or kDLCUDAHost when its storage was pinned by the CUDA
 * backend (ct_empty_pinned with a GPU present); a CUDA tensor is kDLCUDA with device_id its index;
 * an OpenCL tensor is kDLOpenCL with device_id its index (see below). Import: kDLCPU and kDLCUDAHost
 * become CPU tensors (kDLCUDAHost ones report ct_tensor_is_pinned, but cuttle's own copies from them
 * block, as from any memory another allocator pinned); kDLCUDA becomes a tensor on cuda:device_id,
 * which must exist in this process (CT_EDEVICE otherwise); kDLOpenCL only round-trips cuttle's own
 * tensors (a foreign cl_mem gives CT_EUNSUPPORTED: cuttle's OpenCL allocator would have to adopt
 * the buffer, which it cannot yet); every other device type gives CT_EUNSUPPORTED.
 *
 * kDLOpenCL. DLPack says that data is a cl_mem for OpenCL. cuttle's export gives the cl_mem buffer
 * object that holds the tensor, in the cl_context cuttle created for opencl:N (a consumer finds it
 * with clGetMemObjectInfo(data, CL_MEM_CONTEXT, ...) and must enqueue its reads and writes on a
 * queue of that context), and byte_offset is the byte offset of element 0 inside that buffer
 * (clEnqueueReadBuffer's offset). The buffer is not retained for the consumer: it stays valid until
 * the deleter is called, after which cuttle's caching allocator may hand it to another tensor.
 *
 * Layout. shape and strides (in elements, never NULL, every stride >= 0) describe t exactly, views
 * included: slices, transposes, expanded (stride-0) dims and channels_last tensors keep their
 * strides. On the CPU and CUDA, data points at element 0 and byte_offset is 0 (as PyTorch exports,
 * and as consumers that ignore byte_offset, such as PyTorch 1.x, need); on OpenCL see above.
 * Import accepts any byte_offset on the CPU and CUDA (element 0 must be aligned to its dtype's
 * size), and strides NULL (row-major). Negative strides are refused (CT_EUNSUPPORTED: cuttle's
 * views have none; make the tensor contiguous on the producer's side first).
 *
 * Dtypes, both ways: float64, float32, float16 (kDLFloat 64/32/16), bfloat16 (kDLBfloat 16), int64,
 * int32 (kDLInt 64/32), uint8 (kDLUInt 8), bool (kDLBool, code 6, 8 bits: DLPack 0.8's code, which
 * consumers older than DLPack 0.8, such as PyTorch 1.13, refuse). lanes must be 1. Any other
 * (code, bits, lanes) gives CT_EDTYPE naming it.
 *
 * Synchronization (DLPack's stream rule, from the Python array API's `__dlpack__(stream=...)`):
 * the producer makes the consumer's stream wait for the producer's work on the tensor, so the
 * consumer can use it at once on that stream. ct_dlpack_opts.stream names the consumer's stream:
 *  - CUDA export: 0 (the default, DLPack's None) and 1 mean the legacy default stream, 2 the
 *    per-thread default stream, any other value a cudaStream_t of the tensor's device, and -1 (or
 *    CT_DLPACK_NO_SYNC) no synchronization. cuttle records an event after all the work it queued on
 *    the device's compute stream and makes that stream wait for it (cudaStreamWaitEvent); the host
 *    does not wait.
 *  - CUDA import: the stream on which the producer made the tensor ready (the stream cuttle's
 *    caller passed to the producer's __dlpack__; 0 and 1: the legacy default stream, 2: the
 *    per-thread default stream). cuttle makes its compute stream wait for all the work queued on it
 *    so far. -1: no synchronization.
 *  - OpenCL export: OpenCL has no stream rule in DLPack. Unless stream is -1, cuttle waits until
 *    all its queued work on the device has finished (ct_synchronize), so a consumer's queue of the
 *    same context sees the values. OpenCL import (cuttle's own tensors) needs no synchronization.
 *  - The CPU: nothing to do; stream is ignored. (A CPU tensor that is the target of a
 *    CT_NON_BLOCKING copy from a device must be synchronized first, as for any other reader.)
 *
 * Autograd: an exported tensor shares its values, not its gradient; writes through the consumer
 * bypass autograd (as with ct_tensor_data). An imported tensor is a leaf that does not require
 * grad; ct_requires_grad_(t, 1) makes it one that does. */
#ifndef CUTTLE_DLPACK_H
#define CUTTLE_DLPACK_H

#include "cuttle/export.h"

#include <stdint.h>
#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;          /* dlpack/dlpack.h (any version) */
struct DLManagedTensorVersioned; /* dlpack/dlpack.h 1.x */

/* ct_dlpack_opts.stream: leave the streams alone (DLPack's -1). */
#define CT_DLPACK_NO_SYNC (-1)

/* Options of the exchange; a NULL pointer or zeros mean the defaults. */
typedef struct {
  int64_t stream; /* the consumer's stream on export, the producer's on import (see above); 0: the
                     legacy default stream (DLPack's None); CT_DLPACK_NO_SYNC: none */
} ct_dlpack_opts;

/* t as a DLManagedTensor (DLPack 0.x's struct) sharing t's memory; t: any shape (0 to 8 dims),
 * dtype and strides, on the CPU, a CUDA device or an OpenCL device (see the top of this file). The
 * caller (the consumer) calls the struct's deleter exactly once, which releases the reference to t
 * it holds. Synchronizes as the top of this file says, for the legacy default stream on CUDA.
 * Errors (NULL): CT_EINVAL (t NULL), CT_EUNSUPPORTED (a device without DLPack support),
 * CT_EBACKEND (the event or synchronization failed), CT_ENOMEM. */
CT_API struct DLManagedTensor *ct_to_dlpack(ct_tensor *t);
/* ct_to_dlpack with options (NULL: the defaults). Errors: those of ct_to_dlpack. */
CT_API struct DLManagedTensor *ct_to_dlpack_ex(ct_tensor *t, const ct_dlpack_opts *o);
/* The same as a DLPack 1.x struct: version {1, 0}, flags 0 (writable, not a copy). Errors: those of
 * ct_to_dlpack. */
CT_API struct DLManagedTensorVersioned *ct_to_dlpack_versioned(ct_tensor *t, const ct_dlpack_opts *o);

/* A tensor wrapping the foreign tensor m without a copy (see the top of this file): shape, strides,
 * byte offset and dtype as m describes them, on the device m names. The new tensor's ownership is
 * as for ct_empty (the caller's, or the open scope's). Takes m over on success only.
 * Synchronizes as the top of this file says, for the legacy default stream on CUDA.
 * Errors (NULL, and m stays the caller's): CT_EINVAL (m NULL, its data NULL with elements, a NULL
 * shape with ndim > 0, a negative size, sizes whose product overflows int64, element 0 not aligned
 * to the dtype's size, a struct of cuttle's whose view no longer fits its storage), CT_ESHAPE (ndim
 * outside [0, 8], strides whose span overflows), CT_EDTYPE (a dtype cuttle lacks, lanes != 1),
 * CT_EUNSUPPORTED (a device type cuttle cannot use, a foreign kDLOpenCL tensor, negative
 * strides), CT_EDEVICE (a kDLCUDA device this process does not have, e.g. in a build without
 * CUDA), CT_EBACKEND, CT_ENOMEM. */
CT_API ct_tensor *ct_from_dlpack(struct DLManagedTensor *m);
/* ct_from_dlpack with options (NULL: the defaults). Errors: those of ct_from_dlpack. */
CT_API ct_tensor *ct_from_dlpack_ex(struct DLManagedTensor *m, const ct_dlpack_opts *o);
/* ct_from_dlpack for a DLPack 1.x struct. A major version other than 1 is refused with
 * CT_EUNSUPPORTED after calling m's deleter, as DLPack requires (its other fields cannot be read);
 * the flag DLPACK_FLAG_BITMASK_READ_ONLY is refused with CT_EUNSUPPORTED (cuttle has no read-only
 * tensors; m stays the caller's). Errors: those of ct_from_dlpack. */
CT_API ct_tensor *ct_from_dlpack_versioned(struct DLManagedTensorVersioned *m, const ct_dlpack_opts *o);

#ifdef __cplusplus
}
#endif
#endif
