/* src/backend/cpu/cpu.h: the CPU backend's internals; its kernel table is assembled in memory.c. */
#ifndef CUTTLE_CPU_H
#define CUTTLE_CPU_H

#include "core/backend.h"

/* The kernels of core/kernels.def, ct__cpu_<name>, each in the file of its family (elementwise.c,
 * reduce.c, matmul.c, conv.c, conv_nhwc.c, conv_relu_pool.c, pool.c, pool_nhwc.c, softmax.c,
 * norm.c, random.c, index.c, optim.c, amp.c, memory.c). */
#define CT_KERNEL(name, params) ct_status ct__cpu_##name params;
#include "core/kernels.def"

/* allocator.c: cached host memory (64-byte aligned) and its statistics, in bytes. */
void *ct__cpu_alloc(size_t nbytes);
void ct__cpu_free(void *p, size_t nbytes);
void ct__cpu_empty_cache(void);
void ct__cpu_memory_stats(size_t *allocated, size_t *reserved, size_t *peak);
void ct__cpu_reset_peak(void); /* peak = allocated */

/* stream.c: streams (tokens) and events (monotonic-clock stamps) of the CPU */
ct_status ct__cpu_stream_new(int index, void **out);
void ct__cpu_stream_free(int index, void *stream);
ct_status ct__cpu_stream_synchronize(int index, void *stream);
ct_status ct__cpu_stream_wait_event(int index, void *stream, void *event);
ct_status ct__cpu_event_record(int index, void *stream, void **out);
ct_status ct__cpu_event_synchronize(int index, void *event);
int ct__cpu_event_query(int index, void *event);
ct_status ct__cpu_event_elapsed_ms(int index, void *start, void *end, double *ms);
void ct__cpu_event_free(int index, void *event);

/* pool.c: MaxPool2d(2) of one float32 plane x (H, W) -> y (Ho, Wo) = (H/2, W/2), with the winner's
 * position in each window (0 1 / 2 3; 4 = none, for relu = 1 when no element is positive) in a;
 * relu = 1 pools relu(x). The backward writes the whole plane gx (H, W) from gy and a. */
void ct__maxpool2x2_plane_f32(const float *x, int64_t H, int64_t W, float *y, uint8_t *a, int64_t Ho, int64_t Wo, int relu);
void ct__maxpool2x2_plane_backward_f32(float *gx, int64_t H, int64_t W, const float *gy, const uint8_t *a, int64_t Ho,
                                       int64_t Wo);
ct_dtype ct__cpu_pool2d_argmax_dtype(const ct_tensor *x, const ct_pool2d_opts *o);

/* Flat element offset of the multi-index idx in t (strides in elements). */
static inline int64_t ct__cpu_offset(const ct_tensor *t, const int64_t *idx) {
  int64_t o = 0;
  for (int d = 0; d < t->ndim; d++) o += idx[d] * t->stride[d];
  return o;
}
/* Advance a row-major multi-index over shape; returns 0 after the last one. */
static inline int ct__cpu_next(int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

#endif
