/* cuttle/autograd.h: reverse-mode automatic differentiation on a tape.
 *
 * An op whose input requires grad (and grad mode is on) records a node on its output that holds
 * references to the inputs and to what the backward rule needs. ct_backward walks the nodes from a
 * scalar in reverse topological order, accumulates into the .grad of the leaves that require grad,
 * and then frees the graph (PyTorch's retain_graph=False). The output tensor owns its node, so the
 * graph also goes away when the tensors of a step are released (by ct_tensor_free or a scope). */
#ifndef CUTTLE_AUTOGRAD_H
#define CUTTLE_AUTOGRAD_H

#include "cuttle/export.h"

#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Mark a leaf tensor as requiring grad (floating dtypes only; errors: CT_EDTYPE, CT_EAUTOGRAD for
 * a non-leaf). */
CT_API ct_status ct_requires_grad_(ct_tensor *t, int requires_grad);
CT_API int ct_requires_grad(const ct_tensor *t); /* 0 with CT_EINVAL for NULL, as ct_is_leaf */
/* 1 for a tensor created by the user rather than by a recorded op. */
CT_API int ct_is_leaf(const ct_tensor *t);
/* The accumulated gradient of a leaf (borrowed: owned by t), or NULL before any backward. */
CT_API ct_tensor *ct_grad(ct_tensor *t);
/* Drop the accumulated gradient (set_to_none, PyTorch's default in zero_grad). ct_grad, ct_zero_grad,
 * ct_grad_fn_name and ct_detach set CT_EINVAL for a NULL t (and return NULL). */
CT_API void ct_zero_grad(ct_tensor *t);
/* The name of the op that produced t ("add", "matmul"), or NULL for a leaf. */
CT_API const char *ct_grad_fn_name(const ct_tensor *t);
/* A new tensor sharing t's storage, cut from the graph (torch.detach). */
CT_API ct_tensor *ct_detach(ct_tensor *t);

/* Backpropagate from root, a one-element floating tensor, with seed gradient 1.
 * Errors: CT_EAUTOGRAD when root has no graph or more than one element, or when a tensor an op
 * saved for its gradient was written in place after the forward (ct_copy_, ct_fill_, ct_zero_, an
 * optimizer step, a collective: the message names the op; torch's "modified by an inplace
 * operation", from its version counter; writes through ct_tensor_data's pointer or DLPack are not
 * seen); CT_ENOMEM (or a backend's error) when a gradient cannot be computed. The graph is freed in every case. After a failure,
 * each leaf's .grad is either as it was or holds part of this pass's contribution: zero the
 * gradients (ct_zero_grad, ct_optimizer_zero_grad) before running the step again. */
CT_API ct_status ct_backward(ct_tensor *root);

/* Post-accumulate-grad hooks, as PyTorch's Tensor.register_post_accumulate_grad_hook: during
 * ct_backward, once every contribution of the pass has been summed into leaf's .grad, fn(leaf, ctx)
 * runs on the thread of ct_backward, under no-grad, with ct_grad(leaf) final for this pass (and
 * holding what earlier passes accumulated, when the gradients were not zeroed). It runs once per
 * pass in which the leaf receives a gradient, not in a pass that does not reach it, and not for the
 * part of a pass that failed. Several hooks on one leaf run in the order of registration. A hook
 * cannot fail the backward: one that can fail keeps its error for its owner to report
 * (DistributedDataParallel registers one per parameter, src/dist/ddp.c, and reports in
 * ct_ddp_sync_grads). The registry keeps a reference on leaf until the hook is removed, so the leaf
 * outlives it; ctx stays the caller's. Registering the same (fn, ctx) twice makes it run twice.
 * Errors: CT_EINVAL (leaf or fn NULL), CT_EAUTOGRAD (leaf is an op's output, or does not require
 * grad), CT_ENOMEM. */
typedef void (*ct_grad_hook_fn)(ct_tensor *leaf, void *ctx);
CT_API ct_status ct_tensor_register_post_accumulate_grad_hook(ct_tensor *leaf, ct_grad_hook_fn fn, void *ctx);

/* Remove one hook registered on leaf with this fn and ctx (PyTorch's handle.remove()), and drop the
 * registry's reference on leaf. Errors: CT_EINVAL (leaf or fn NULL, or no such hook). */
CT_API ct_status ct_tensor_remove_post_accumulate_grad_hook(ct_tensor *leaf, ct_grad_hook_fn fn, void *ctx);

/* Grad mode is per thread and on by default. ct_no_grad_begin turns it off until the matching
 * ct_no_grad_end (they nest), like `with torch.no_grad():`. */
CT_API void ct_no_grad_begin(void);
CT_API void ct_no_grad_end(void);
CT_API int ct_grad_enabled(void);

/* Compare analytic gradients with central finite differences in float64 (torch.autograd.gradcheck).
 * fn maps the n inputs (f64 leaves that require grad) to one output tensor; the check reduces the
 * output to sum(out * w) for a fixed random w. Returns CT_OK, or CT_EAUTOGRAD with the worst element
 * in the message when |analytic - numeric| > atol + rtol |numeric|. */
typedef ct_tensor *(*ct_gradcheck_fn)(ct_tensor *const *inputs, void *ctx);
CT_API ct_status ct_gradcheck(ct_gradcheck_fn fn, void *ctx, int n, ct_tensor *const *inputs, double eps, double atol,
                       double rtol);

#ifdef __cplusplus
}
#endif
#endif
