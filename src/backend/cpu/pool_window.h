/* src/backend/cpu/pool_window.h: one side of a pooling window, by torch's rules, for pool.c (NCHW)
 * and pool_nhwc.c (channels_last).
 *
 * Output o's window along a side of n input elements starts at o s - p and holds the elements
 * start + i d, i < k. Max pooling visits those inside the input: lo, lo + d, ... < hi (torch's
 * cpu_max_pool, aten/src/ATen/native/cpu/MaxPoolKernel.cpp: `while (ih0 < 0) ih0 += dilation`).
 * Average pooling (d = 1) sums [lo, hi) and divides as cpu_avg_pool
 * (aten/src/ATen/native/cpu/AvgPoolKernel.cpp): `padded` is the window's length clipped to the padded
 * input [-p, n + p) (k, except a ceil_mode window running past it), taken for count_include_pad;
 * hi - lo for count_include_pad=False. lo >= hi: no element inside the input (a ceil_mode or
 * dilated window may have none): max gives -inf, avg 0, and neither passes a gradient. */
#ifndef CUTTLE_BACKEND_CPU_POOL_WINDOW_H
#define CUTTLE_BACKEND_CPU_POOL_WINDOW_H

#include <stdint.h>
#include "cuttle/ops.h"

typedef struct {
  int64_t lo, hi, step, padded;
} ct__pool_span;

static inline ct__pool_span ct__pool_span_of(int64_t o, int64_t n, int k, int s, int p, int d) {
  if (d < 1) d = 1; /* 0 means 1 */
  int64_t start = o * s - p, end = start + (int64_t)d * (k - 1) + 1;
  ct__pool_span r;
  r.padded = (end < n + p ? end : n + p) - start;
  r.step = d;
  r.lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  r.hi = end < n ? end : n;
  return r;
}

/* Average pooling's divisor for the window of spans a (rows) and b (columns), o's options. */
static inline int64_t ct__pool_avg_divisor(const ct__pool_span *a, const ct__pool_span *b, const ct_pool2d_opts *o) {
  if (o->divisor_override > 0) return o->divisor_override;
  if (o->exclude_pad) return (a->hi - a->lo) * (b->hi - b->lo);
  return a->padded * b->padded;
}

#endif
