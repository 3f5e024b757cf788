/* src/ops/ops_internal.h: the helpers several op families share (broadcasting, dtype promotion,
 * the raw sum, writing into an existing tensor), and those autograd's engine calls. They live in
 * one small file so that the families (elementwise.c, reduce.c, matmul.c) need not import each
 * other for them. Not installed; only src/ includes it. */
#ifndef CUTTLE_OPS_INTERNAL_H
#define CUTTLE_OPS_INTERNAL_H

#include "core/backend.h"

/* The NumPy broadcast of two shapes into (nd, out); 0 with CT_ESHAPE naming them when impossible. */
int ct__broadcast_shape(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb, int *nd, int64_t *out);
/* torch.result_type of two tensors (0-dim tensors weigh less). */
ct_dtype ct__result_type(const ct_tensor *a, const ct_tensor *b);

/* x summed over the dims with red[d] set, those dims kept with size 1, into a new tensor of dtype
 * dt: the kernel of ct_sum without its checks and without a tape node. NULL with the error set. */
ct_tensor *ct__sum_keepdim(ct_tensor *x, const int *red, ct_dtype dt);

/* out = op(a, b) in place, with b broadcast to out's shape (same device). */
ct_status ct__binary_into(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b);
/* acc += g in place (same device; g broadcasts to acc): how the backward pass accumulates. */
ct_status ct__add_into(ct_tensor *acc, ct_tensor *g);
/* dst = src in place, src broadcast to dst's shape, both on one device: ct_copy_ without its move
 * between devices and its NULL checks (ops/shape.c), with ct_copy_'s messages. Equal shapes
 * allocate nothing. */
ct_status ct__copy_within(ct_tensor *dst, ct_tensor *src);

/* g summed over broadcast dims down to shape (ndim, shape) and cast to dt: how an op's gradient
 * fits an input that was broadcast or promoted. Returns g itself (one more reference) when it fits.
 * Records nothing: the backward pass calls it under no-grad. */
ct_tensor *ct__sum_to(ct_tensor *g, int ndim, const int64_t *shape, ct_dtype dt);

/* The dtype an op computes a floating dtype in: float16 and bfloat16 in float32 (mixed
 * precision's rule: half storage, float32 arithmetic and accumulation, one rounding at the end),
 * any other dtype in itself. */
ct_dtype ct__compute_dtype(ct_dtype dt);
/* y cast to dt, y's reference released: how an op that computed in ct__compute_dtype(dt) returns
 * its result in dt (the cast is on the tape, so the gradient comes back in y's dtype). y itself
 * when it already has dt; NULL (the error kept) when y is NULL or the cast fails. */
ct_tensor *ct__cast_result(ct_tensor *y, ct_dtype dt);

#endif
