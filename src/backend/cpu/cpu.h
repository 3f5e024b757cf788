/* src/backend/cpu/cpu.h: the CPU kernels behind the vtable (backend.c assembles it). */
#ifndef CUTTLE_CPU_H
#define CUTTLE_CPU_H

#include "backend/backend.h"

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

ct_status ct__cpu_copy(ct_tensor *dst, ct_tensor *src);
ct_status ct__cpu_fill(ct_tensor *dst, double value);
ct_status ct__cpu_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x);
ct_status ct__cpu_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y);
ct_status ct__cpu_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b);
ct_status ct__cpu_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b);
ct_status ct__cpu_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b);
ct_status ct__cpu_reduce(ct_reduce_op op, ct_tensor *out, ct_tensor *indices, ct_tensor *x);
ct_status ct__cpu_matmul(ct_tensor *out, ct_tensor *a, ct_tensor *b);
ct_status ct__cpu_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o);
ct_status ct__cpu_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                  const ct_conv2d_opts *o);
/* pool.c: MaxPool2d(2) of one float32 plane x (H, W) -> y (Ho, Wo) = (H/2, W/2), with the winner's
 * position in each window (0 1 / 2 3; 4 = none, for relu = 1 when no element is positive) in a;
 * relu = 1 pools relu(x). The backward writes the whole plane gx (H, W) from gy and a. */
void ct__maxpool2x2_plane_f32(const float *x, int64_t H, int64_t W, float *y, uint8_t *a, int64_t Ho, int64_t Wo, int relu);
void ct__maxpool2x2_plane_backward_f32(float *gx, int64_t H, int64_t W, const float *gy, const uint8_t *a, int64_t Ho,
                                       int64_t Wo);
/* conv_relu_pool.c: the vtable's conv2d_relu_pool2x2 and its backward */
ct_status ct__cpu_conv2d_relu_pool2x2(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const ct_conv2d_opts *o);
ct_status ct__cpu_conv2d_relu_pool2x2_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy,
                                               ct_tensor *argmax, ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o);
ct_dtype ct__cpu_pool2d_argmax_dtype(const ct_tensor *x, const ct_pool2d_opts *o);
ct_status ct__cpu_pool2d(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o);
ct_status ct__cpu_pool2d_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o);
ct_status ct__cpu_softmax(ct_tensor *y, ct_tensor *x, int log);
ct_status ct__cpu_softmax_backward(ct_tensor *gx, ct_tensor *gy, ct_tensor *y, int log);
ct_status ct__cpu_random(ct_tensor *out, ct_dist dist, double p0, double p1, uint64_t seed, uint64_t offset);
ct_status ct__cpu_index_select(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index);
ct_status ct__cpu_index_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy);
ct_status ct__cpu_gather(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index);
ct_status ct__cpu_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a);
ct_status ct__cpu_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a);
ct_status ct__cpu_amp_unscale_(ct_tensor *g, double inv_scale, ct_tensor *found_inf); /* amp.c */
ct_status ct__cpu_scatter_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy);

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
