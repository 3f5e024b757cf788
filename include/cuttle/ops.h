/* cuttle/ops.h: the ops, with PyTorch's semantics. Every op:
 *  - returns a new tensor (see tensor.h for ownership), or NULL on error with ct_last_error() set;
 *  - returns NULL at once when an input is NULL, so a chain can be checked once at its end; the
 *    error is then the one already pending (the failure that made the NULL), or, when none is,
 *    CT_EINVAL naming the op and the NULL argument;
 *  - fails with CT_EDEVICE when its inputs live on different devices; the message names the op,
 *    each argument with its device, and the fix (a ct_to). Nothing is copied implicitly;
 *  - fails with CT_ESHAPE naming the shapes when they do not fit;
 *  - promotes dtypes by PyTorch's rules (ct_promote_types);
 *  - records itself on the autograd tape when an input requires grad and grad mode is on.
 * Dims may be negative (counted from the end). */
#ifndef CUTTLE_OPS_H
#define CUTTLE_OPS_H

#include "cuttle/export.h"

#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise binary ops with NumPy broadcasting */
CT_API ct_tensor *ct_add(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_sub(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_mul(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_div(ct_tensor *a, ct_tensor *b); /* true division: integer inputs give float32 */
CT_API ct_tensor *ct_pow(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_maximum(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_minimum(ct_tensor *a, ct_tensor *b);
/* a + alpha*b style scalar forms; the scalar does not change a's dtype when a is floating, and an
 * integer tensor with a fractional scalar gives float32 (PyTorch's "wrapped number" rule). */
CT_API ct_tensor *ct_add_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_mul_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_pow_scalar(ct_tensor *a, double s);

/* ---- comparisons: bool results, no gradient */
CT_API ct_tensor *ct_eq(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_ne(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_lt(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_le(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_gt(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_ge(ct_tensor *a, ct_tensor *b);
/* cond ? a : b elementwise, all three broadcast together; cond is converted to bool. */
CT_API ct_tensor *ct_where(ct_tensor *cond, ct_tensor *a, ct_tensor *b);
/* torch.clamp(x, min=lo, max=hi): min(max(x, lo), hi) elementwise; pass -INFINITY/INFINITY for no
 * bound. lo > hi is allowed and gives hi everywhere, as torch does (a NaN x stays NaN). x: any
 * shape and dtype -> the same shape and dtype (the bounds are converted to x's dtype). Gradient
 * where(lo <= x <= hi, grad, 0) (tools/autograd/derivatives.yaml, clamp), so 0 everywhere when
 * lo > hi. The caller frees the result. Errors (NULL, ct_last_error() naming clamp): CT_EINVAL for
 * a NULL x or a NaN bound (where torch would return NaN everywhere; pass an infinity for no
 * bound), CT_ENOMEM. */
CT_API ct_tensor *ct_clamp(ct_tensor *x, double lo, double hi);

/* ---- unary math (floating results; an integer input gives float32). ct_exp and ct_log of a half x
 * give float32 in a CUDA or OpenCL autocast region (cuttle/autocast.h). */
CT_API ct_tensor *ct_neg(ct_tensor *x);
CT_API ct_tensor *ct_abs(ct_tensor *x);
CT_API ct_tensor *ct_exp(ct_tensor *x);
CT_API ct_tensor *ct_log(ct_tensor *x);
CT_API ct_tensor *ct_sqrt(ct_tensor *x);
/* max(x, 0) as torch.relu: a NaN passes through, and so does its gradient (0 where x <= 0) */
CT_API ct_tensor *ct_relu(ct_tensor *x);
CT_API ct_tensor *ct_sigmoid(ct_tensor *x);
CT_API ct_tensor *ct_tanh(ct_tensor *x);
CT_API ct_tensor *ct_gelu(ct_tensor *x); /* exact: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
/* SiLU (swish), torch.nn.functional.silu: x * sigmoid(x) = x / (1 + exp(-x)), elementwise, with
 * the exact derivative s (1 + x (1 - s)), s = sigmoid(x) (aten/src/ATen/native/cpu/Activation.cpp,
 * silu_kernel and silu_backward_kernel). x: any shape; a floating x gives a result of its dtype
 * (float16/bfloat16 compute in float32 or wider and round once), an integer or bool x a float32
 * result. Not in autocast's lists: it runs in its input's dtype inside a region, as in torch. The
 * caller frees the result. Errors (NULL, ct_last_error() naming silu): CT_EINVAL for a NULL x,
 * CT_ENOMEM, CT_EUNSUPPORTED on a device without the unary kernel. */
CT_API ct_tensor *ct_silu(ct_tensor *x);
/* GELU's tanh approximation, torch.nn.functional.gelu(x, approximate='tanh'):
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), elementwise, with the exact derivative of that
 * formula (aten/src/ATen/native/cpu/Activation.cpp, GeluKernelImpl and GeluBackwardKernelImpl with
 * GeluType::Tanh). Shapes, dtypes, autocast, ownership and errors as ct_silu's (naming gelu_tanh).
 * ct_gelu is the exact (erf) form, approximate='none'. */
CT_API ct_tensor *ct_gelu_tanh(ct_tensor *x);

/* ---- reductions over dims: dims has ndims entries (ndims 0 = all dims). keepdim keeps them as 1.
 * ct_sum and ct_norm of a half x give float32 in a CUDA or OpenCL autocast region; ct_mean keeps
 * x's dtype in every region (cuttle/autocast.h). */
CT_API ct_tensor *ct_sum(ct_tensor *x, int ndims, const int *dims, int keepdim);
CT_API ct_tensor *ct_mean(ct_tensor *x, int ndims, const int *dims, int keepdim);
/* Variance with Bessel's correction `correction` (1 = unbiased, torch.var's default). */
CT_API ct_tensor *ct_var(ct_tensor *x, int ndims, const int *dims, int correction, int keepdim);
/* Max/min over one dim; *indices (optional, may be NULL) receives the int64 argmax/argmin. */
CT_API ct_tensor *ct_max(ct_tensor *x, int dim, int keepdim, ct_tensor **indices);
CT_API ct_tensor *ct_min(ct_tensor *x, int dim, int keepdim, ct_tensor **indices);
/* int64 index of the first maximum along dim. */
CT_API ct_tensor *ct_argmax(ct_tensor *x, int dim, int keepdim);
/* sqrt(sum(x^2)) over all elements: the Frobenius norm, a 0-dim tensor. */
CT_API ct_tensor *ct_norm(ct_tensor *x);

/* ---- linear algebra (BLAS on the CPU) */
/* torch.matmul: 1-D x 1-D dot, 2-D x 2-D, and batched with broadcast batch dims. f32/f64. */
CT_API ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b);
/* x: (*, in), w: (out, in), b: (out) or NULL -> (*, out) = x w^T + b. */
CT_API ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *b);

/* ---- convolution and pooling, NCHW */
typedef struct {
  int stride[2];   /* 0 = 1 */
  int padding[2];  /* zero padding */
  int dilation[2]; /* 0 = 1 */
  int groups;      /* 0 = 1 */
} ct_conv2d_opts;
/* x: (N, Cin, H, W), w: (Cout, Cin/groups, kH, kW), b: (Cout) or NULL -> (N, Cout, Ho, Wo) with
 * Ho = (H + 2 pad - dil (kH - 1) - 1) / stride + 1. f32/f64. */
CT_API ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *opts);
/* Pooling options, torch.nn.functional.max_pool2d / avg_pool2d's arguments. Zero-initialized
 * fields keep torch's defaults, so `(ct_pool2d_opts){.kernel = {2, 2}}` is MaxPool2d(2). */
typedef struct {
  int kernel[2];   /* kernel_size, >= 1 */
  int stride[2];   /* stride; 0 = kernel */
  int padding[2];  /* padding (zeros for avg, -inf for max), 0 .. kernel/2 */
  int dilation[2]; /* max pooling's dilation; 0 = 1. Avg pooling has none (must be 0 or 1) */
  int ceil_mode;   /* ceil_mode: 0 = floor (torch's default), 1 = ceil */
  int exclude_pad; /* avg pooling: 1 = torch's count_include_pad=False (divide by the window's
                      elements inside the input); 0 = count_include_pad=True, torch's default */
  int divisor_override; /* avg pooling's divisor_override: 0 = none (torch's None), else >= 1 */
} ct_pool2d_opts;
/* torch.nn.functional.max_pool2d and avg_pool2d. x: (N, C, H, W) floating (float32, float64,
 * float16, bfloat16; NCHW or channels_last, which gives a channels_last result) -> (N, C, Ho, Wo) of
 * x's dtype, with torch's size rule (aten/src/ATen/native/Pool.h, pooling_output_shape_pad_lr):
 *   Ho = floor_or_ceil((H + 2 pH - dH (kH - 1) - 1) / sH) + 1, and with ceil_mode, Ho - 1 when the
 *   last window would start at or past H + pH (beyond the input and its left padding); Wo alike.
 * Max pooling pads with -inf, keeps the first maximum of a window (row-major) and lets a NaN win;
 * a window with no element inside the input gives -inf. Avg pooling (no dilation) sums the window's
 * elements inside the input and divides as aten/src/ATen/native/cpu/AvgPoolKernel.cpp does:
 *   divisor_override if set; else with count_include_pad (exclude_pad = 0) the window clipped to
 *   the padded input [-pH, H + pH) (kH kW except for a ceil_mode window running past it); else
 *   (exclude_pad = 1) the number of its elements inside the input. A window with none gives 0.
 * Gradients flow to the chosen element (max; none from a window without one) or, divided by the
 * divisor, to every element of the window inside the input (avg).
 * The caller frees the result. Errors (NULL, ct_last_error() naming the op): CT_EINVAL for NULL x
 * or opts, a kernel, stride or dilation below 1 (0 means the default where documented), padding
 * outside 0 .. kernel/2 (torch's "pad should be smaller than or equal to half of kernel size", the
 * tighter of its two checks, the other being half the dilated kernel), a dilation other than 1 for
 * avg pooling, exclude_pad or divisor_override given to max pooling, a negative divisor_override,
 * ceil_mode or exclude_pad other than 0 or 1; CT_ESHAPE for x not 4-D or an output size below 1
 * (torch's "Output size is too small"); CT_EDTYPE for an integer x; CT_ENOMEM. The modules
 * (ct_max_pool2d_new, ct_avg_pool2d_new) pass the options on as they are. */
CT_API ct_tensor *ct_max_pool2d(ct_tensor *x, const ct_pool2d_opts *opts);
CT_API ct_tensor *ct_avg_pool2d(ct_tensor *x, const ct_pool2d_opts *opts);
/* Adaptive average pooling, torch.nn.functional.adaptive_avg_pool2d: x (N, C, H, W) floating ->
 * (N, C, out_h, out_w), output cell (i, j) the mean of rows [floor(i H / out_h), ceil((i + 1) H /
 * out_h)) and columns likewise (aten/src/ATen/native/AdaptiveAveragePooling.cpp); out_h = out_w = 1
 * is ResNet's global average pooling. The output is row-major (a channels_last x gives a row-major
 * result). Differentiable. The caller frees the result. Errors (NULL, ct_last_error() naming the
 * op): CT_EINVAL for a NULL x or an output size below 1, CT_ESHAPE for x not 4-D, CT_EDTYPE for an
 * integer x. The CPU, CUDA and OpenCL backends have the kernel; a backend without it runs the op as
 * avg_pool2d with kernel and stride H / out_h, W / out_w where out_h divides H and out_w W, and
 * fails with CT_EUNSUPPORTED elsewhere. */
CT_API ct_tensor *ct_adaptive_avg_pool2d(ct_tensor *x, int64_t out_h, int64_t out_w);
/* max_pool2d(relu(x)) as one op: the same values and gradients as the two ops in a row (ties go to
 * the first element, a window whose maximum is 0 passes no gradient, a NaN propagates), but one
 * pass over x instead of three, and no relu(x) in memory. Sequential runs a ReLU followed by a
 * MaxPool2d through it. x: (N, C, H, W) floating -> (N, C, Ho, Wo) of x's dtype, sizes as
 * ct_max_pool2d's, with all of ct_max_pool2d's options (dilation, ceil_mode). Errors: CT_EINVAL for
 * missing or bad options (as ct_max_pool2d's, avg-only options included), CT_ESHAPE for a non-4-D x
 * or an output size below 1, CT_EDTYPE for an integer x. */
CT_API ct_tensor *ct_relu_max_pool2d(ct_tensor *x, const ct_pool2d_opts *opts);
/* max_pool2d(relu(conv2d(x, w, b))) as one op, with the same values and gradients as the three in a
 * row. On the CPU, for a 2x2 window with stride 2 in float32, each image's conv output is pooled
 * while it is in cache and never stored (nor is its gradient): the cnn's layers without a pass over
 * their largest tensors. Other cases and backends run the ops one by one. Sequential runs a
 * Conv2d, ReLU, MaxPool2d run through it.
 * x: (N, C, H, W), w: (O, C/groups, kH, kW), b: (O) or NULL, float32/float64 after promotion ->
 * (N, O, Hp, Wp): conv2d's (Ho, Wo) pooled as ct_max_pool2d sizes it, with all of its options (the
 * fused CPU path is taken only without dilation and ceil_mode). Errors: conv2d's (CT_ESHAPE,
 * CT_EINVAL, CT_EDTYPE, CT_EDEVICE, naming this op) and then ct_relu_max_pool2d's. */
CT_API ct_tensor *ct_conv2d_relu_max_pool2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *conv_opts,
                                     const ct_pool2d_opts *pool_opts);

/* ---- normalization and regularization */
/* Batch normalization, torch.nn.functional.batch_norm (aten/src/ATen/native/Normalization.cpp):
 * y = (x - mean) / sqrt(var + eps) * weight + bias per channel over the N * (prod of *) values of
 * that channel. x: (N, C, *). weight, bias: (C) or NULL. running_mean, running_var: (C) or NULL.
 * training: normalize with the batch statistics and update the running ones in place with
 * momentum (r = (1 - m) r + m stat, unbiased variance, as torch); eval: use the running ones.
 * A float32/float64 x, contiguous or dense channels_last, with parameters and running statistics
 * of its dtype, runs on the backend's batch norm kernels (CPU src/backend/cpu/norm.c, OpenCL
 * kernels/norm.cl, CUDA norm.cu: one tape node that keeps x and two (C) statistics for the
 * backward, as torch's); anything else is composed of mean, var and elementwise ops (the same
 * values to rounding, more memory kept for backward). A float16/bfloat16 x is normalized in
 * float32 and rounded once, with parameters and running statistics of any floating dtype (float32
 * ones stay float32: torch's mixed-type batch norm), and the result keeps x's dtype; autocast leaves
 * the op alone, as torch's lists do (cuttle/autocast.h). With float32 parameters and statistics
 * (autocast's case) the CPU's kernels take the half x as it is, one node and no casts; elsewhere
 * the front-end casts x to float32 around the kernels, with the same values bit for bit. The
 * gradients of weight and bias have their dtype (float32 under autocast).
 * Differentiable in x, weight and bias. The caller frees the result; the running statistics stay
 * the caller's. Errors (NULL, ct_last_error() naming batch_norm): CT_EINVAL for a NULL x, eps < 0
 * or NaN, or eval without both running statistics; CT_ESHAPE for an x of fewer than 2 dims, a
 * parameter or statistic that is not (C), or training with one value per channel; CT_EDTYPE for an
 * integer or bool tensor; CT_EDEVICE for tensors on different devices. */
CT_API ct_tensor *ct_batch_norm(ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var, ct_tensor *weight,
                         ct_tensor *bias, int training, double momentum, double eps);
/* Layer normalization, torch.nn.functional.layer_norm(x, x.shape[-normalized_ndim:], weight, bias,
 * eps) (aten/src/ATen/native/layer_norm.cpp): over each slice of x's last normalized_ndim dims,
 * y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance (divided by the
 * slice's element count, as torch). x: (*, D1, ..., Dk) with k = normalized_ndim in [1, x's ndim];
 * weight and bias: (D1, ..., Dk) exactly, or NULL for none (elementwise_affine=False). eps: no
 * default here, the caller passes it; PyTorch's default (nn.LayerNorm) is 1e-5. Differentiable in
 * x, weight and bias. dtypes: floating; a float16/bfloat16 x is normalized in float32 and rounded
 * once, its result keeping x's dtype whatever the parameters' dtype; otherwise the result has the
 * promoted dtype of x and the parameters. Under CUDA or OpenCL autocast it runs in float32
 * (torch's CUDA fp32 list), so a float16 x there gives a float32 result; under CPU autocast it runs
 * in x's dtype (torch's CPU lists leave it out). A contiguous float32/float64 x with parameters of its
 * dtype runs on the backend's layer norm kernels (CPU src/backend/cpu/layer_norm.c, OpenCL
 * kernels/norm.cl, CUDA norm.cu: one tape node that keeps x and two per-row statistics for the
 * backward, as torch's), else the op is composed of mean, var and elementwise ops (the same values
 * to rounding, more memory kept for backward). The
 * caller frees the result. Errors (NULL,
 * ct_last_error() naming layer_norm): CT_EINVAL for a NULL x, normalized_ndim outside
 * [1, x's ndim], or eps < 0 or NaN; CT_ESHAPE naming both shapes for a weight or bias that is not
 * x's last normalized_ndim dims; CT_EDTYPE for an integer or bool x, weight or bias; CT_EDEVICE for
 * x, weight and bias on different devices. */
CT_API ct_tensor *ct_layer_norm(ct_tensor *x, int normalized_ndim, ct_tensor *weight, ct_tensor *bias, double eps);
/* Zero elements with probability p and scale the rest by 1/(1-p) when training; x itself (one more
 * reference) otherwise. gen may be NULL for the default generator. */
CT_API ct_tensor *ct_dropout(ct_tensor *x, double p, int training, ct_generator *gen);
/* x floating (an integer x is CT_EDTYPE, as in torch); the result has x's shape and dtype (float32
 * for a half x in a CUDA or OpenCL autocast region: cuttle/autocast.h). */
CT_API ct_tensor *ct_softmax(ct_tensor *x, int dim);
CT_API ct_tensor *ct_log_softmax(ct_tensor *x, int dim);

/* ---- attention */
/* torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
 * scale): out = softmax(q k^T scale + mask) v, per batch and head. q: (B, H, Tq, D), k: (B, H, Tk,
 * D), v: (B, H, Tk, Dv), one floating dtype -> out (B, H, Tq, Dv) of that dtype. attn_mask: NULL,
 * bool (true: the query may attend to the key; false: its score is -inf) or additive of q's dtype,
 * broadcasting to (B, H, Tq, Tk). is_causal: 1 masks key j > query i (torch's top-left tril of
 * ones(Tq, Tk)); not with attn_mask. dropout_p in [0, 1): the probabilities' dropout, drawn from the
 * default generator (ct_manual_seed), whenever p > 0 (torch's op has no training flag: pass 0 in
 * eval). scale: 0 for torch's default 1 / sqrt(D), else any finite value. A row whose keys are all
 * masked gives NaN, as softmax does. With the fused kernels (the CPU, OpenCL and CUDA, whose kernels
 * compile and are unproven until the GPU kit runs them: float32 and float64, the halves widened to
 * float32 and rounded once) the op runs FlashAttention-2's tiled
 * algorithm (Dao 2023) forward and backward, keeping q, k, v, out and (B, H, Tq) log-sum-exps for
 * the backward: memory O(B H T), never the (Tq, Tk) scores; otherwise (when attn_mask
 * requires grad) it is composed of matmul, softmax and dropout (torch's math reference, memory
 * O(B H Tq Tk)), with the same values to rounding and, for the same generator state, the same
 * dropped elements. Differentiable in q, k and v (and, composed, a float mask). On autocast's
 * lower-precision list (torch's CUDA and CPU lists). The caller frees the result. Errors (NULL,
 * ct_last_error() naming scaled_dot_product_attention): CT_EINVAL for a NULL q, k or v, attn_mask
 * with is_causal, is_causal not 0 or 1, dropout_p outside [0, 1), a scale NaN or infinite;
 * CT_ESHAPE for shapes that do not fit (q, k, v not 4-D, other B or H, k's D not q's, v's Tk not
 * k's) or a mask that does not broadcast to (B, H, Tq, Tk); CT_EDTYPE for integer or mixed dtypes
 * or a mask neither bool nor q's dtype; CT_EDEVICE for tensors on different devices. */
CT_API ct_tensor *ct_scaled_dot_product_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *attn_mask,
                                                  double dropout_p, int is_causal, double scale);

/* ---- losses */
typedef enum { CT_REDUCTION_MEAN = 0, CT_REDUCTION_SUM, CT_REDUCTION_NONE } ct_reduction;
/* logits: (N, C) floating; target: (N) int64 class indices in [0, C). label_smoothing in [0, 1)
 * as in torch.nn.functional.cross_entropy. Errors: CT_EINVAL for a class index out of range or an
 * unknown reduction, CT_EDTYPE for integer logits or a floating target. */
CT_API ct_tensor *ct_cross_entropy(ct_tensor *logits, ct_tensor *target, ct_reduction reduction, double label_smoothing);
/* torch's default ignore_index (-100), which ct_cross_entropy passes: a target of -100 is ignored. */
#define CT_IGNORE_INDEX_DEFAULT (-100)
/* torch.nn.functional.cross_entropy(logits, target, weight, ignore_index=ignore_index,
 * reduction=reduction, label_smoothing=label_smoothing), with the formulas of
 * aten/src/ATen/native/LossNLL.cpp (nll_loss and cross_entropy_loss_label_smoothing): with w the
 * class weights (1 without), m_i = 0 where target[i] == ignore_index (else 1), eps the smoothing,
 *   loss_i = (1 - eps) (-w[y_i] m_i log p[i, y_i]) + (eps / C) (-m_i sum_c w_c log p[i, c]);
 * the mean divides the summed loss by sum_i w[y_i] m_i (so it is NaN when every target is ignored,
 * as in torch), the sum does not, and none returns loss_i (0 for an ignored sample).
 * logits: (N, C) floating; target: (N) int64 or int32, each a class in [0, C) or ignore_index;
 * weight: (C) floating (cast to the logits' dtype) or NULL. float16/bfloat16 logits compute in
 * float32 and round once; the op is on autocast's float32 list (torch's nll_loss). On the CPU the
 * targets are checked and, when none is ignored, the mask's ops are skipped; a device's targets
 * are not read (that would synchronize). Differentiable in logits (weight is a constant, as in
 * torch, whose nll_loss has no weight gradient). The caller frees the result, a 0-dim tensor, or
 * (N) for CT_REDUCTION_NONE, of the logits' dtype. Errors (NULL, ct_last_error() naming
 * cross_entropy): CT_EINVAL for a NULL logits or target, a CPU target outside [0, C) that is not
 * ignore_index, label_smoothing outside [0, 1] or an unknown reduction; CT_ESHAPE for logits not
 * (N, C), a target not (N) or a weight not (C); CT_EDTYPE for integer logits or weight, or a
 * target not int64/int32; CT_EDEVICE for tensors on different devices. */
CT_API ct_tensor *ct_cross_entropy_ex(ct_tensor *logits, ct_tensor *target, ct_tensor *weight, int64_t ignore_index,
                                      ct_reduction reduction, double label_smoothing);
CT_API ct_tensor *ct_mse_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction);

/* ---- joining and indexing */
CT_API ct_tensor *ct_cat(int n, ct_tensor *const *ts, int dim);
CT_API ct_tensor *ct_stack(int n, ct_tensor *const *ts, int dim);
/* index: 1-D int32/int64 (another dtype is CT_EDTYPE). */
CT_API ct_tensor *ct_index_select(ct_tensor *x, int dim, ct_tensor *index);
/* out[i][j] = x[index[i][j]][j] for dim 0, etc. (torch.gather); index int64 of x's ndim. */
CT_API ct_tensor *ct_gather(ct_tensor *x, int dim, ct_tensor *index);
/* ct_embedding's padding_idx for no padding row (torch's padding_idx=None). */
#define CT_NO_PADDING_IDX INT64_MIN
/* Embedding lookup, torch.nn.functional.embedding(indices, weight, padding_idx): out[..., :] =
 * weight[indices[...], :]. weight: (V, D) floating (num_embeddings V, embedding_dim D), any
 * strides; indices: int64 or int32 of any shape (*) -> out (*, D) of weight's dtype, contiguous.
 * padding_idx: CT_NO_PADDING_IDX, or a row in [-V, V) (negative counts from the end, as torch)
 * whose gradient stays zero (its values are returned as they are). Differentiable in weight: the
 * gradient adds each output row's gradient into its row of a zero (V, D) tensor (the backends'
 * index_add kernel: deterministic on the CPU and on OpenCL), accumulating in float32 for a half
 * weight. Not in autocast's lists (torch's neither): it runs in weight's dtype. Every index is
 * checked: a CPU tensor in place, a device's by its minimum and maximum, reduced there and read
 * back (a synchronization), so no backend reads out of bounds. The caller frees the result.
 * Errors (NULL, ct_last_error() naming embedding): CT_EINVAL for a NULL argument, an index outside
 * [0, V) (naming it) or a padding_idx outside [-V, V); CT_ESHAPE for a weight that is not 2-D;
 * CT_EDTYPE for an integer weight or indices that are not int64/int32; CT_EDEVICE for weight and
 * indices on different devices. */
CT_API ct_tensor *ct_embedding(ct_tensor *weight, ct_tensor *indices, int64_t padding_idx);
/* torch.topk(x, k, dim, largest, sorted=True): the k largest (largest = 1) or smallest (0)
 * elements of x along dim, in order (largest first, or smallest first), ties to the lower index.
 * x: floating, any shape (a 0-dim x has one element) -> values of x's shape with dim's size k,
 * differentiable in x (the gradient goes to the picked elements); *indices (may be NULL) receives
 * their int64 positions along dim, which the caller frees. Composed of argmax, eq and where, so
 * every backend runs it: k rounds over x, O(k numel) work, for sampling's small k. A NaN ranks
 * above every number for the largest (torch's order); for the smallest it ranks with +inf, by
 * index, where torch puts it after +inf. The caller
 * frees the values. Errors (NULL, ct_last_error() naming topk): CT_EINVAL for a NULL x or k
 * outside [0, size of dim]; CT_ESHAPE for dim out of range; CT_EDTYPE for an integer x. */
CT_API ct_tensor *ct_topk(ct_tensor *x, int64_t k, int dim, int largest, ct_tensor **indices);
/* torch.multinomial(probs, num_samples, replacement, generator): num_samples class indices drawn
 * from each row of probs with probability probs[c] / sum(probs) (rows need not sum to 1), without
 * replacement (0: distinct indices, each later one from the classes left) or with (1).
 * probs: (C) or (N, C) floating, weights >= 0 -> int64 (num_samples) or (N, num_samples). By the
 * Gumbel-max trick (argmax of log p + Gumbel noise; its top-k without replacement), from gen's
 * Philox stream (NULL: the default generator): the same draws for the same seed on one backend,
 * torch's distribution but not its bits. No gradient. CPU rows are checked as torch checks them; a
 * device's are not read (that would synchronize). The caller frees the result. Errors (NULL,
 * ct_last_error() naming multinomial): CT_EINVAL for a NULL probs, num_samples < 1 (or > C
 * without replacement), replacement not 0 or 1, or, on the CPU, a weight that is negative, NaN
 * or infinite, a row summing to 0, or fewer non-zero weights than num_samples without
 * replacement; CT_ESHAPE for probs not (C) or (N, C) or with C = 0; CT_EDTYPE for integer probs. */
CT_API ct_tensor *ct_multinomial(ct_tensor *probs, int64_t num_samples, int replacement, ct_generator *gen);

/* ---- in-place helpers for optimizers and initializers (no autograd) */
CT_API ct_status ct_fill_(ct_tensor *t, double value);
CT_API ct_status ct_zero_(ct_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
