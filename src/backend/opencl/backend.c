/* src/backend/opencl/backend.c: the OpenCL backend's vtable, ct__opencl_backend, which the device
 * registry (src/core/device.c) returns for CT_OPENCL when cuttle is built with CUTTLE_WITH_OPENCL.
 * The top of the folder's layers (opencl_backend.h). Each entry lives in the file of its family
 * (device.c, allocator.c, event.c, copy.c, elementwise.c, reduce.c, matmul.c, conv.c, pool.c,
 * softmax.c, random.c, index.c, optim.c), but device_props, here: it joins device.c's facts and
 * allocator.c's figures.
 * pool2d_argmax_dtype is NULL (int64 flat indices); conv2d_relu_pool2x2 (conv_relu_pool.c) pools
 * the conv output of a chunk of images from scratch, in float32 and the halves. Pinned host memory
 * lives in pinned.c, streams and events in event.c. */
#include "backend/opencl/opencl_backend.h"

/* The vtable's device_props: device.c's facts, and as free memory what the allocator does not hold
 * (OpenCL has no portable free-memory query). */
static ct_status ocl_device_props(int index, ct_device_props *out) {
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  if (!d) return ct__error(CT_EDEVICE, "opencl:%d does not exist: this machine has %d OpenCL device(s)", index, ct__ocl_device_count());
  snprintf(out->name, sizeof out->name, "%s", d->name);
  snprintf(out->vendor, sizeof out->vendor, "%s", d->vendor);
  snprintf(out->driver_version, sizeof out->driver_version, "%s", d->driver);
  out->device_type = d->type & CL_DEVICE_TYPE_GPU           ? CT_DEVICE_TYPE_GPU
                     : d->type & CL_DEVICE_TYPE_CPU         ? CT_DEVICE_TYPE_CPU
                     : d->type & CL_DEVICE_TYPE_ACCELERATOR ? CT_DEVICE_TYPE_ACCELERATOR
                                                            : CT_DEVICE_TYPE_UNKNOWN;
  cl_uint cu = 0;
  clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  out->cores = (int)cu;
  out->total_memory = d->global_mem;
  ct_memory_stats st = {0};
  ct__ocl_memory_stats(index, &st); /* zeros before the first allocation */
  out->free_memory = d->global_mem > st.reserved ? d->global_mem - st.reserved : 0;
  out->max_alloc = d->max_alloc;
  out->fp16 = d->fp16;
  out->fp64 = d->fp64;
  out->utilization = -1;
  return CT_OK;
}

/* What the OpenCL kernels take as they are (core/backend.h's supports): the fused conv + relu +
 * pool in float16 and bfloat16 (conv_relu_pool.c); matmul (CLBlast) and conv2d compute halves in
 * float32 through the front-end; the fused attention (attention.c) takes float32 and float64 only,
 * so the front-end widens halves to float32 around it; max pooling has no CT_POOL_MAX_RELU. */
static int ocl_supports(ct_kernel_id k, ct_dtype dt, ct_memory_format fmt) {
  int half = dt == CT_F16 || dt == CT_BF16;
  switch (k) {
    case CT_K_matmul:
    case CT_K_conv2d:
    case CT_K_batch_norm: /* the front-end casts a half input to float32 around the kernels */
      return !half;
    case CT_K_attention:
    case CT_K_attention_backward: /* float32 and float64 (halves widened by the front-end) */
      return dt == CT_F32 || dt == CT_F64;
    case CT_K_pool2d_max_relu:
      return 0;
    default:
      return 1;
  }
}

const ct_backend ct__opencl_backend = {
    .name = "opencl",
    .kind = CT_OPENCL,
    .device_count = ct__ocl_device_count,
    .device_is_gpu = ct__ocl_device_is_gpu,
    .device_props = ocl_device_props,
    .synchronize = ct__ocl_synchronize,
    .alloc = ct__ocl_alloc,
    .free = ct__ocl_free,
    .memcpy = ct__ocl_memcpy,
    .memory_stats = ct__ocl_memory_stats,
    .empty_cache = ct__ocl_empty_cache,
    .reset_peak_memory_stats = ct__ocl_reset_peak,
    .pinned_alloc = ct__ocl_pinned_alloc,
    .pinned_free = ct__ocl_pinned_free,
    .pinned_stats = ct__ocl_pinned_stats,
    .pinned_empty_cache = ct__ocl_pinned_empty_cache,
    .stream_new = ct__ocl_stream_new,
    .stream_free = ct__ocl_stream_free,
    .stream_synchronize = ct__ocl_stream_synchronize,
    .stream_wait_event = ct__ocl_stream_wait_event,
    .event_record = ct__ocl_event_record,
    .event_synchronize = ct__ocl_event_synchronize,
    .event_query = ct__ocl_event_query,
    .event_elapsed_ms = ct__ocl_event_elapsed_ms,
    .event_free = ct__ocl_event_free,
    .kernels =
        {
#define CT_HAS(name, cpu, cuda, opencl) .name = CT_HAS_##opencl(ct__ocl_##name),
#include "backend/kernels_by_backend.def"
        },
    .supports = ocl_supports,
    .pool2d_argmax_dtype = NULL,
};
