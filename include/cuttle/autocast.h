/* cuttle/autocast.h: automatic mixed precision for the forward pass (torch.autocast).
 *
 * Inside an autocast region, the ops that gain from a lower precision run in it and the ops that
 * need float32's range run in float32, whatever dtype their inputs come in; the caller keeps its
 * parameters in float32 and writes no cast. The policy is PyTorch's (torch.autocast, and the op
 * lists of aten/src/ATen/autocast_mode.cpp and autocast_mode.h, PyTorch 2.x), whose lists differ
 * by device: a CUDA or OpenCL region follows torch's CUDA lists, a CPU region its CPU lists.
 *  - lower precision (the region's dtype, float16 or bfloat16): ct_matmul (batched too),
 *    ct_linear, ct_conv2d, ct_conv2d_relu_max_pool2d;
 *  - float32 on every device: ct_cross_entropy, ct_cross_entropy_ex, ct_mse_loss (torch's
 *    cross_entropy_loss, nll_loss, mse_loss);
 *  - float32 in CUDA and OpenCL regions only: ct_softmax, ct_log_softmax, ct_sum (torch's
 *    fp32_set_opt_dtype list), ct_norm (fp32_append_dtype), ct_exp, ct_log, ct_layer_norm (the fp32
 *    list). torch's CPU lists leave them out, so in a CPU region they run in their inputs' dtype;
 *  - the widest input type: ct_add, ct_cat and ct_where with mixed inputs (float32 when any
 *    floating input is float32, or when float16 meets bfloat16);
 *  - every other op runs in its inputs' dtype, with the ordinary promotion (ct_promote_types).
 *    That includes ct_mean, the activations, the pools, ct_embedding, ct_topk, and ct_batch_norm, which is in none of
 *    torch's lists: a half input with float32 weight, bias and running statistics gives a half
 *    output, normalized in float32, and float32 gradients for the float32 weight and bias (torch's
 *    mixed-type batch norm; ct_batch_norm in cuttle/ops.h).
 * As in PyTorch, only floating inputs are cast, float64 inputs never are, an op's output dtype
 * follows from its cast inputs (so ct_softmax of a float16 tensor gives float32 in a CUDA or OpenCL
 * region, and float16 in a CPU one), and an op runs
 * under the policy only when its inputs live on a device of the region's kind: autocast on CT_CPU
 * leaves ops on OpenCL or CUDA tensors alone, as torch.autocast("cpu") leaves CUDA tensors. The ops
 * an autocast op is made of run without autocast (torch excludes its Autocast dispatch key inside
 * an autocast kernel), so ct_linear's bias add is in the lower precision, not re-promoted.
 *
 * The cast cache. Within a region, the cast of a float32 leaf tensor that requires grad (a
 * parameter) to the lower precision is made once and reused by every later op of the region, as
 * torch.autocast caches those casts. The cache keeps the cast values; each use of them records its
 * own cast node on the tape, so backward through any use accumulates float32 gradients into the
 * float32 parameter, and the graphs of two forward passes that share a cached cast stay
 * independent (ct_backward frees the nodes it walks: with one shared node, the second backward
 * would silently miss the parameter). The cache holds its own references (to the parameter and to
 * the cast values, neither owned by a scope, so a ct_scope_end inside the region frees neither) and
 * drops them when the outermost region on the thread ends. Casts of other tensors (activations,
 * non-leaves) are made afresh each time. A cast cached while grad mode is off (ct_no_grad_begin)
 * still records its node when used later with grad mode on (torch's cache can hand out a cast
 * without a graph there). As in PyTorch, a parameter changed in place inside the region (an
 * optimizer step) is seen by later ops of the region only through its stale cast: end the region
 * before the step. Run backward outside the region, as torch recommends; it gives float32
 * gradients (inside, it works too, but runs the backward ops under the region's policy).
 *
 * Regions are per thread (torch's autocast state is thread-local): a thread started inside a region
 * does not inherit it. Each thread must end the regions it began; a thread that exits inside one
 * leaks the cached casts. */
#ifndef CUTTLE_AUTOCAST_H
#define CUTTLE_AUTOCAST_H

#include "cuttle/export.h"

#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open an autocast region for the devices of one kind, on this thread, until the matching
 * ct_autocast_end (with torch.autocast(device_type, dtype, enabled): ...). Regions nest, up to 64
 * deep on a thread: the innermost region of a kind decides for that kind, and regions of other
 * kinds are unaffected. enabled 0 opens a region where autocast is off for that kind (torch's
 * autocast(enabled=False) inside an autocast region: float32 code in a mixed-precision model);
 * any other value turns it on. dtype is the lower precision: CT_F16 (torch's default on CUDA) or
 * CT_BF16 (its default on the CPU); it is checked even when enabled is 0.
 * Errors: CT_EINVAL for a kind that is not a ct_device_kind or a 65th nested region; CT_EDTYPE for
 * a dtype other than CT_F16 and CT_BF16. On error no region was opened. */
CT_API ct_status ct_autocast_begin(ct_device_kind kind, ct_dtype dtype, int enabled);

/* Close the innermost autocast region of this thread, whatever its kind, restoring the state
 * before its ct_autocast_begin. Ending the outermost region drops the cast cache (see the top of
 * this file). Errors: CT_EINVAL when no region is open on this thread. */
CT_API ct_status ct_autocast_end(void);

/* 1 when autocast is on for devices of kind on this thread (the innermost region of that kind was
 * opened with enabled != 0), else 0 (torch.is_autocast_enabled(device_type)). 0 with CT_EINVAL for
 * a kind that is not a ct_device_kind. */
CT_API int ct_autocast_enabled(ct_device_kind kind);

/* The lower-precision dtype of autocast for devices of kind on this thread: that of the innermost
 * region of that kind, or the default outside any, as torch.get_autocast_dtype(device_type):
 * PyTorch's CT_BF16 for the CPU and CT_F16 for CUDA, and CT_F16 for OpenCL, whose GPUs compute in
 * float16 (cl_khr_fp16) far more often than in bfloat16. CT_DTYPE_COUNT with CT_EINVAL for a kind
 * that is not a ct_device_kind. */
CT_API ct_dtype ct_autocast_dtype(ct_device_kind kind);

#ifdef __cplusplus
}
#endif
#endif
