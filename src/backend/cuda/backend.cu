/* src/backend/cuda/backend.cu: the CUDA backend's vtable, ct__cuda_backend, which the device
 * registry (src/core/device.c) returns for CT_CUDA when cuttle is built with CUTTLE_WITH_CUDA.
 * Each entry lives in the file of its family (device.cu, context.cu, allocator.cu, pinned.cu, stream.cu, copy.cu,
 * elementwise.cu, reduce.cu, matmul.cu, conv.cu, pool.cu, softmax.cu, random.cu, index.cu). An
 * entry left NULL makes the core report "op X is not implemented on cuda". */
#include "backend/cuda/common.cuh"

extern "C" ct_status ct__cuda_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a);
extern "C" ct_status ct__cuda_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a);

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
    .copy = ct__cuda_copy,
    .fill = ct__cuda_fill,
    .unary = ct__cuda_unary,
    .unary_backward = ct__cuda_unary_backward,
    .binary = ct__cuda_binary,
    .binary_backward = ct__cuda_binary_backward,
    .where = ct__cuda_where,
    .reduce = ct__cuda_reduce,
    .matmul = ct__cuda_matmul,
    .conv2d = ct__cuda_conv2d,
    .conv2d_backward = ct__cuda_conv2d_backward,
    .pool2d_argmax_dtype = NULL, /* int64 flat indices */
    .pool2d_fuses_relu = 0,
    .conv2d_relu_pool2x2 = NULL, /* the front-end runs conv2d and pool2d */
    .conv2d_relu_pool2x2_backward = NULL,
    .pool2d = ct__cuda_pool2d,
    .pool2d_backward = ct__cuda_pool2d_backward,
    .softmax = ct__cuda_softmax,
    .softmax_backward = ct__cuda_softmax_backward,
    .random = ct__cuda_random,
    .index_select = ct__cuda_index_select,
    .index_add = ct__cuda_index_add,
    .gather = ct__cuda_gather,
    .scatter_add = ct__cuda_scatter_add,
    .adam_step = ct__cuda_adam_step,
    .sgd_step = ct__cuda_sgd_step,
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
    .amp_unscale_ = NULL, /* the GradScaler composes ops (src/optim/grad_scaler.c); no CUDA kernel yet */
    /* channels_last convolutions with cuDNN's NHWC descriptors; pooling has no NHWC kernel yet: the
     * front-end permutes channels_last tensors around pool2d */
    .conv2d_nhwc = ct__cuda_conv2d_nhwc,
    .conv2d_nhwc_backward = ct__cuda_conv2d_nhwc_backward,
    .pool2d_nhwc = NULL,
    .pool2d_nhwc_backward = NULL,
    /* cuBLAS (CUBLAS_COMPUTE_32F) and cuDNN (CUDNN_DATA_FLOAT compute, tensor-op math) take f16 and
     * bf16 operands as they are and accumulate in float32 (matmul.cu, conv.cu): tensor cores */
    .matmul_halves = (1u << CT_F16) | (1u << CT_BF16),
    .conv2d_halves = (1u << CT_F16) | (1u << CT_BF16),
    .conv2d_relu_pool2x2_halves = 0, /* no fused kernel: the front-end runs conv2d, then relu_max_pool2d */
};
