/* src/ops/memory_format.h: the internal side of memory formats (channels_last), shared by the op
 * families: allocating an output in a format, the format rule of the elementwise ops, running an
 * elementwise kernel on a channels_last output, and the channels_last paths of conv2d and pooling.
 * Not installed; only src/ includes it. The public side is cuttle/tensor.h's ct_memory_format. */
#ifndef CUTTLE_OPS_MEMORY_FORMAT_H
#define CUTTLE_OPS_MEMORY_FORMAT_H

#include "core/backend.h"

/* A new tensor of shape (ndim, shape) dense in format fmt (CT_CHANNELS_LAST only for ndim 4:
 * strides (H W C, 1, W C, C)); like ct__alloc otherwise (NULL with the error set). */
ct_tensor *ct__alloc_format(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, ct_memory_format fmt);
/* t in format fmt and dtype dt, without a tape node: t itself (one more reference) when it is
 * already dense in fmt with dtype dt, else a copy. For kernels that need one layout. */
ct_tensor *ct__to_format(ct_tensor *t, ct_dtype dt, ct_memory_format fmt);

/* 1 when t's numel elements fill its storage span from its data pointer without gaps or overlaps,
 * in some order of dims (PyTorch's is_non_overlapping_and_dense: contiguous, channels_last, any
 * permutation of them): a kernel that walks the elements flat covers exactly t (a transposed
 * gradient summed into in place, the fused optimizer and unscale kernels). */
int ct__non_overlapping_and_dense(const ct_tensor *t);

/* The format of an elementwise op's output of shape (nd, shape) over its n inputs (NULL entries are
 * skipped): channels_last when the first input of exactly that shape, not expanded, suggests
 * channels_last, as PyTorch's TensorIterator lets the first full-size operand's strides decide. */
ct_memory_format ct__elementwise_format(int n, ct_tensor *const *in, int nd, const int64_t *shape);

/* The elementwise kernels, called with a channels_last out as if it were contiguous: when out is a
 * 4-D dense channels_last tensor, each tensor is passed as its (N, H, W, C) view (out is then
 * contiguous, as the vtable requires, and the inputs keep their strides); otherwise the call is
 * the backend's own. */
ct_status ct__k_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x);
ct_status ct__k_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y);
ct_status ct__k_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b);
ct_status ct__k_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b);
ct_status ct__k_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b);

/* 1 when conv2d on x and w gives a channels_last output: x or w suggests channels_last (PyTorch's
 * cudnn_conv_suggest_memory_format and mkldnn_conv_use_channels_last). */
int ct__conv_channels_last(const ct_tensor *x, const ct_tensor *w);
/* conv2d's channels_last path, after ops/conv.c checked the arguments: o completed, y (N, O, Ho,
 * Wo) in dtype dt, channels_last, recorded as "conv2d". The backend's conv2d_nhwc, else NCHW
 * copies around its conv2d. */
ct_tensor *ct__conv2d_channels_last(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o, int64_t Ho, int64_t Wo,
                                    ct_dtype dt);
/* Pooling's channels_last path for a channels_last x, after ops/conv.c checked the arguments: o
 * completed, y (N, C, Ho, Wo) channels_last, recorded as op. */
ct_tensor *ct__pool2d_channels_last(const char *op, ct_pool_kind kind, ct_tensor *x, const ct_pool2d_opts *o, int64_t Ho,
                                    int64_t Wo);

#endif
