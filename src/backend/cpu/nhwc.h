/* src/backend/cpu/nhwc.h: the CPU's channels_last (NHWC) kernels, the vtable's conv2d_nhwc,
 * conv2d_nhwc_backward, pool2d_nhwc and pool2d_nhwc_backward (backend.h says what they take).
 * conv_nhwc.c and pool_nhwc.c; the vtable in memory.c. */
#ifndef CUTTLE_CPU_NHWC_H
#define CUTTLE_CPU_NHWC_H

#include "backend/backend.h"

ct_status ct__cpu_conv2d_nhwc(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o);
ct_status ct__cpu_conv2d_nhwc_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                       const ct_conv2d_opts *o);
ct_status ct__cpu_pool2d_nhwc(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o);
ct_status ct__cpu_pool2d_nhwc_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o);

#endif
