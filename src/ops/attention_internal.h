/* src/ops/attention_internal.h: scaled dot-product attention composed of matmul, where, softmax
 * and dropout (torch's math reference), which ct_scaled_dot_product_attention runs where the
 * backend has no fused kernel, and which the tests and `cuttle bench attention` compare the fused
 * kernels with. Not a public API. */
#ifndef CUTTLE_OPS_ATTENTION_INTERNAL_H
#define CUTTLE_OPS_ATTENTION_INTERNAL_H

#include "cuttle.h"

/* softmax(q k^T scale + mask) v with is_causal's top-left tril and dropout from the default
 * generator, on tensors ct_scaled_dot_product_attention has checked (q (B, H, Tq, D), k, v, mask
 * NULL or bool or additive of q's dtype broadcasting to (B, H, Tq, Tk), scale already resolved).
 * Holds the (B, H, Tq, Tk) scores and probabilities: O(T^2) memory. The caller frees the result;
 * NULL with the failing op's error. */
ct_tensor *ct__sdpa_composed(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, double dropout_p, int is_causal,
                             double scale);

#endif
