/* src/backend/opencl/copy.c: copies between host and device memory (the vtable's memcpy), and the
 * strided copy and fill kernels' launchers (kernels/elementwise.cl). Layer 4 of the folder
 * (opencl_backend.h): it calls launch.c, pinned.c, allocator.c and context.c.
 *
 * memcpy: a copy from or to pageable host memory runs on the device's in-order compute queue,
 * behind the kernels queued before it, and blocks until done (OpenCL would let a non-blocking write
 * read pageable memory later, but nothing keeps that memory alive until then). A non-blocking copy
 * whose host side lies in a live pinned block of this backend (pinned.c, which keeps the bytes until
 * queued copies ended) runs on the copy queue instead, fenced by events both ways as the CUDA
 * backend's copy stream is: a marker on the compute queue, the copy waiting for it (so a write never
 * overtakes kernels still reading the destination's recycled buffer, and a read sees the kernels'
 * results), then a barrier on the compute queue waiting for the copy (so every later kernel, blocking
 * copy and event sees the bytes, and a buffer freed after the copy is reused only after it). The host
 * thread moves on at once; ct_synchronize finishes both queues. A non-blocking request from pageable
 * memory falls back to the blocking path, which the core's ledger counts as synchronous. A
 * device-to-device copy is queued on the compute queue and does not block. */
#include <string.h>
#include "backend/opencl/opencl_backend.h"

/* The non-blocking path above: dir 0 writes host src into (dm, doff), dir 1 reads (sm, soff) into
 * host dst. */
static ct_status copy_async(ct__ocl_ctx *c, int dir, cl_mem dm, size_t doff, void *dst, cl_mem sm, size_t soff,
                            const void *src, size_t nbytes) {
  int index = c->index;
  cl_event before, copied;
  CT_OCL_TRY(clEnqueueMarkerWithWaitList(c->compute, 0, NULL, &before), "clEnqueueMarkerWithWaitList (compute queue)", index);
  cl_int e = dir == 0 ? clEnqueueWriteBuffer(c->copy, dm, CL_FALSE, doff, nbytes, src, 1, &before, &copied)
                      : clEnqueueReadBuffer(c->copy, sm, CL_FALSE, soff, nbytes, dst, 1, &before, &copied);
  clReleaseEvent(before);
  CT_OCL_TRY(e, dir == 0 ? "clEnqueueWriteBuffer (non-blocking, copy queue)" : "clEnqueueReadBuffer (non-blocking, copy queue)",
             index);
  e = clEnqueueBarrierWithWaitList(c->compute, 1, &copied, NULL);
  clReleaseEvent(copied);
  CT_OCL_TRY(e, "clEnqueueBarrierWithWaitList (compute queue waits for the copy)", index);
  CT_OCL_TRY(clFlush(c->copy), "clFlush (copy queue)", index);
  CT_OCL_TRY(clFlush(c->compute), "clFlush (compute queue)", index);
  return CT_OK;
}

ct_status ct__ocl_memcpy(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking) {
  if (nbytes == 0) return CT_OK;
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  if (!c) return ct_last_status();
  cl_mem dm = NULL, sm = NULL;
  size_t doff = 0, soff = 0;
  if (dir == 0 || dir == 2) CT_TRY(ct__ocl_resolve(index, dst, &dm, &doff));
  if (dir == 1 || dir == 2) CT_TRY(ct__ocl_resolve(index, src, &sm, &soff));
  if (dir != 2 && non_blocking && ct__ocl_pinned_use(dir == 0 ? src : dst, nbytes))
    return copy_async(c, dir, dm, doff, dst, sm, soff, src, nbytes);
  if (dir == 0) CT_OCL_TRY(clEnqueueWriteBuffer(c->compute, dm, CL_TRUE, doff, nbytes, src, 0, NULL, NULL), "clEnqueueWriteBuffer", index);
  else if (dir == 1) CT_OCL_TRY(clEnqueueReadBuffer(c->compute, sm, CL_TRUE, soff, nbytes, dst, 0, NULL, NULL), "clEnqueueReadBuffer", index);
  else CT_OCL_TRY(clEnqueueCopyBuffer(c->compute, sm, dm, soff, doff, nbytes, 0, NULL, NULL), "clEnqueueCopyBuffer", index);
  return CT_OK;
}

ct_status ct__ocl_copy(ct_tensor *dst, ct_tensor *src) {
  int64_t n = ct_tensor_numel(dst);
  if (n == 0) return CT_OK;
  ct__ocl_buf d, s;
  CT_TRY(ct__ocl_buf_of(dst, &d));
  CT_TRY(ct__ocl_buf_of(src, &s));
  const int64_t *strides[2] = {dst->stride, src->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, dst->ndim, dst->shape, 2, strides);
  int idx = dst->device.index;
  if (dst->dtype == src->dtype) {
    cl_int es = (cl_int)ct_dtype_size(dst->dtype);
    /* one contiguous run: a buffer copy, which the driver does best */
    if (it.ndim == 1 && it.stride[0][0] == 1 && it.stride[1][0] == 1) {
      ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
      if (!c) return ct_last_status();
      CT_OCL_TRY(clEnqueueCopyBuffer(c->compute, s.mem, d.mem, (size_t)s.off * es, (size_t)d.off * es, (size_t)n * es, 0, NULL, NULL),
                 "clEnqueueCopyBuffer", idx);
      return CT_OK;
    }
    ct__ocl_arg args[] = {CT_OCL_ARG(d.mem), CT_OCL_ARG(d.off), CT_OCL_ARG(s.mem), CT_OCL_ARG(s.off), CT_OCL_ARG(es), CT_OCL_ARG(it)};
    return ct__ocl_launch(idx, "copy_bits", (size_t)n, 6, args);
  }
  ct__ocl_arg args[] = {CT_OCL_ARG(d.mem), CT_OCL_ARG(d.off), CT_OCL_ARG(d.dt), CT_OCL_ARG(s.mem), CT_OCL_ARG(s.off), CT_OCL_ARG(s.dt), CT_OCL_ARG(it)};
  return ct__ocl_launch(idx, "copy_convert", (size_t)n, 7, args);
}

ct_status ct__ocl_fill(ct_tensor *dst, double value) {
  int64_t n = ct_tensor_numel(dst);
  if (n == 0) return CT_OK;
  ct__ocl_buf d;
  CT_TRY(ct__ocl_buf_of(dst, &d));
  const int64_t *strides[1] = {dst->stride};
  ct__ocl_iter it;
  ct__ocl_iter_init(&it, dst->ndim, dst->shape, 1, strides);
  ct__ocl_real r;
  ct__ocl_arg args[] = {CT_OCL_ARG(d.mem), CT_OCL_ARG(d.off), CT_OCL_ARG(d.dt), ct__ocl_real_arg(dst->device.index, value, &r), CT_OCL_ARG(it)};
  return ct__ocl_launch(dst->device.index, "fill", (size_t)n, 5, args);
}
