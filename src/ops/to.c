/* src/ops/to.c: ct_to and ct_copy_, the two ops that move a tensor between devices. They are ops
 * because ct_to records its backward (a copy back) on the tape and both build on shape.c (contiguous,
 * and ct__copy_within for what ct_copy_ does on one device), which calls nothing here; the bytes
 * move through the core's ct__copy_between, which counts them in the ledger. */
#include "autograd/node.h"
#include "core/backend.h"
#include "ops/ops_internal.h"

static ct_status bw_to(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  grads[0] = ct_to(g, n->in[0]->device, 0);
  return grads[0] ? CT_OK : ct_last_status();
}

ct_tensor *ct_to(ct_tensor *t, ct_device dev, int flags) {
  if (!t) return ct__null_arg("ct_to", "t");
  if (flags & ~(CT_COPY | CT_NON_BLOCKING))
    CT_FAIL_NULL(CT_EINVAL, "ct_to: unknown flags 0x%x (use 0, CT_COPY, CT_NON_BLOCKING or both)", (unsigned)flags);
  if (!ct__check_device("ct_to", dev)) return NULL;
  if (ct_device_eq(t->device, dev) && !(flags & CT_COPY)) return ct__retain_tracked(t);
  ct_tensor *src = ct_contiguous(t);
  if (!src) return NULL;
  /* A non-blocking copy to the host lands in memory pinned by the source device's backend, so it can
   * be asynchronous (as in torch); where that backend cannot pin, ct_empty_pinned_for gives ordinary
   * memory and the copy blocks. */
  int d2h_async = dev.kind == CT_CPU && t->device.kind != CT_CPU && (flags & CT_NON_BLOCKING);
  ct_tensor *out = d2h_async ? ct_empty_pinned_for(t->device, t->ndim, t->shape, t->dtype)
                             : ct__alloc(t->ndim, t->shape, t->dtype, dev);
  ct_status s = out ? ct__copy_between("ct_to", out, src, flags & CT_NON_BLOCKING) : ct_last_status();
  ct_tensor_free(src);
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  ct_node *n;
  if (ct__record(out, "to", bw_to, 1, &t, &n) != CT_OK) return ct_tensor_free(out), NULL;
  return out;
}

ct_status ct_copy_(ct_tensor *dst, ct_tensor *src) {
  if (!dst || !src) return ct__error(CT_EINVAL, "ct_copy_: NULL tensor");
  ct_tensor *moved = NULL;
  if (!ct_device_eq(dst->device, src->device)) {
    src = moved = ct_to(src, dst->device, 0); /* the explicit copy the caller asked for, counted */
    if (!src) return ct__error_prefix("ct_copy_");
  }
  ct_status s = ct__copy_within(dst, src);
  ct_tensor_free(moved);
  return s;
}
