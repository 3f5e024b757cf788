/* src/backend/opencl/backend.c: the OpenCL backend's vtable, ct__opencl_backend, which the device
 * registry (src/core/device.c) returns for CT_OPENCL when cuttle is built with CUTTLE_WITH_OPENCL.
 * Each entry lives in the file of its family (device.c, context.c, allocator.c, copy.c,
 * elementwise.c, reduce.c, matmul.c, conv.c, pool.c, softmax.c, random.c, index.c, optim.c).
 * pool2d_argmax_dtype is NULL (int64 flat indices); conv2d_relu_pool2x2 (conv_relu_pool.c) pools
 * the conv output of a chunk of images from scratch, in float32 and the halves. Pinned host memory
 * lives in pinned.c, streams and events in event.c. */
#include "backend/opencl/opencl_backend.h"

/* What the OpenCL kernels take as they are (core/backend.h's supports): the fused conv + relu +
 * pool in float16 and bfloat16 (conv_relu_pool.c); matmul (CLBlast) and conv2d compute halves in
 * float32 through the front-end; max pooling has no CT_POOL_MAX_RELU. */
static int ocl_supports(ct_kernel_id k, ct_dtype dt, ct_memory_format fmt) {
  int half = dt == CT_F16 || dt == CT_BF16;
  switch (k) {
    case CT_K_matmul:
    case CT_K_conv2d:
      return !half;
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
    .device_props = ct__ocl_device_props,
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
