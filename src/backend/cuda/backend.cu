/* src/backend/cuda/backend.cu: the CUDA backend's vtable, ct__cuda_backend, which the device
 * registry (src/core/device.c) returns for CT_CUDA when cuttle is built with CUTTLE_WITH_CUDA.
 * Each entry lives in the file of its family (device.cu, context.cu, allocator.cu, pinned.cu, stream.cu, graph.cu, copy.cu,
 * elementwise.cu, reduce.cu, matmul.cu, conv.cu, pool.cu, softmax.cu, norm.cu, random.cu, index.cu); which
 * kernels it has is its column of src/backend/kernels_by_backend.def. */
#include "backend/cuda/common.cuh"


/* What the CUDA kernels take as they are (core/backend.h's supports): cuBLAS (CUBLAS_COMPUTE_32F)
 * and cuDNN (CUDNN_DATA_FLOAT compute, tensor-op math) take float16 and bfloat16 operands as they
 * are and accumulate in float32 (matmul.cu, conv.cu): tensor cores. Max pooling has no
 * CT_POOL_MAX_RELU (the front-end applies relu first). Batch norm takes float32 and float64 only,
 * and so does the fused attention (attention.cu): the front-end widens halves to float32 around it. */
static int cuda_supports(ct_kernel_id k, ct_dtype dt, ct_memory_format fmt) {
  switch (k) {
    case CT_K_pool2d_max_relu:
      return 0;
    case CT_K_attention:
    case CT_K_attention_backward: /* float32 and float64 (halves widened by the front-end) */
      return dt == CT_F32 || dt == CT_F64;
    case CT_K_batch_norm: /* no mixed (half x, float32 statistics) kernels yet: the front-end casts a
                             half input to float32 around them */
      return dt != CT_F16 && dt != CT_BF16;
    default:
      return 1;
  }
}

extern "C" const ct_backend ct__cuda_backend = {
    .name = "cuda",
    .kind = CT_CUDA,
    .device_count = ct__cuda_device_count,
    .device_is_gpu = NULL, /* every CUDA device is a GPU: the registry row says so */
    .device_props = ct__cuda_device_props,
    .synchronize = ct__cuda_synchronize,
    .alloc = ct__cuda_alloc,
    .free = ct__cuda_free,
    .memcpy = ct__cuda_memcpy,
    .memory_stats = ct__cuda_vt_memory_stats,
    .empty_cache = ct__cuda_vt_empty_cache,
    .reset_peak_memory_stats = ct__cuda_vt_reset_peak,
    .pinned_alloc = ct__cuda_pinned_alloc,
    .pinned_free = ct__cuda_pinned_free,
    .pinned_stats = ct__cuda_pinned_stats,
    .pinned_empty_cache = ct__cuda_pinned_empty_cache,
    .set_allow_tf32 = ct__cuda_set_allow_tf32,
    .stream_new = ct__cuda_stream_new,
    .stream_free = ct__cuda_stream_free,
    .stream_synchronize = ct__cuda_stream_synchronize,
    .stream_wait_event = ct__cuda_stream_wait_event,
    .event_record = ct__cuda_event_record,
    .event_synchronize = ct__cuda_event_synchronize,
    .event_query = ct__cuda_event_query,
    .event_elapsed_ms = ct__cuda_event_elapsed_ms,
    .event_free = ct__cuda_event_free,
    .graph_capture_begin = ct__cuda_graph_capture_begin,
    .graph_capture_end = ct__cuda_graph_capture_end,
    .graph_replay = ct__cuda_graph_replay,
    .graph_free = ct__cuda_graph_free,
    .kernels =
        {
#define CT_HAS(name, cpu, cuda, opencl) .name = CT_HAS_##cuda(ct__cuda_##name),
#include "backend/kernels_by_backend.def"
        },
    .supports = cuda_supports,
    .pool2d_argmax_dtype = NULL, /* int64 flat indices */
};
