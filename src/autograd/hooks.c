/* src/autograd/hooks.c: post-accumulate-grad hooks on leaves (PyTorch's
 * Tensor.register_post_accumulate_grad_hook), which ct_backward calls once a leaf's gradient for
 * the pass is final. DDP (src/dist/ddp.c) registers one per parameter to start a bucket's
 * all-reduce while backward goes on.
 *
 * The hooks live in one process-wide list, not in the tensor (the core knows nothing of autograd):
 * an entry holds a reference on its leaf, so a leaf cannot be freed, and its address reused by
 * another tensor, while a hook is registered on it. The list is short (one entry per parameter of
 * the models that use hooks) and scanned linearly; ct_backward skips the scan when it is empty. A
 * mutex guards it, and is not held while a hook runs, so a hook may register or remove hooks. */
#include <pthread.h>
#include <stdlib.h>
#include "autograd/node.h"

void ct__tensor_decref(ct_tensor *t);

typedef struct {
  ct_tensor *leaf; /* retained */
  ct_grad_hook_fn fn;
  void *ctx;
} hook;

static struct {
  pthread_mutex_t mu;
  hook *v;
  int n, cap;
} reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static int n_hooks; /* atomic copy of reg.n, read without the lock */

int ct__grad_hooks_any(void) { return __atomic_load_n(&n_hooks, __ATOMIC_ACQUIRE) > 0; }

ct_status ct_tensor_register_post_accumulate_grad_hook(ct_tensor *leaf, ct_grad_hook_fn fn, void *ctx) {
  const char *op = "ct_tensor_register_post_accumulate_grad_hook";
  if (!leaf) return ct__null_status(op, "leaf");
  if (!fn) return ct__null_status(op, "fn");
  if (leaf->grad_fn || !leaf->requires_grad)
    return ct__error(CT_EAUTOGRAD, "%s: the tensor is %s; hooks go on leaves that require grad (ct_requires_grad_)", op,
                     leaf->grad_fn ? "not a leaf (an op's output)" : "a leaf that does not require grad");
  pthread_mutex_lock(&reg.mu);
  ct_status s = CT_OK;
  if (reg.n == reg.cap) {
    int cap = reg.cap ? 2 * reg.cap : 64;
    hook *v = ct__realloc(reg.v, (size_t)cap * sizeof *v, "the list of gradient hooks");
    if (!v) s = ct_last_status();
    else reg.v = v, reg.cap = cap;
  }
  if (s == CT_OK) {
    reg.v[reg.n++] = (hook){ct_tensor_retain(leaf), fn, ctx};
    __atomic_store_n(&n_hooks, reg.n, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&reg.mu);
  return s;
}

ct_status ct_tensor_remove_post_accumulate_grad_hook(ct_tensor *leaf, ct_grad_hook_fn fn, void *ctx) {
  const char *op = "ct_tensor_remove_post_accumulate_grad_hook";
  if (!leaf) return ct__null_status(op, "leaf");
  if (!fn) return ct__null_status(op, "fn");
  pthread_mutex_lock(&reg.mu);
  int found = -1;
  for (int i = 0; i < reg.n && found < 0; i++)
    if (reg.v[i].leaf == leaf && reg.v[i].fn == fn && reg.v[i].ctx == ctx) found = i;
  if (found >= 0) {
    for (int i = found; i + 1 < reg.n; i++) reg.v[i] = reg.v[i + 1]; /* keep the registration order */
    reg.n--;
    __atomic_store_n(&n_hooks, reg.n, __ATOMIC_RELEASE);
    if (reg.n == 0) free(reg.v), reg.v = NULL, reg.cap = 0;
  }
  pthread_mutex_unlock(&reg.mu);
  if (found < 0)
    return ct__error(CT_EINVAL, "%s: no hook with this function and ctx is registered on this tensor", op);
  ct__tensor_decref(leaf); /* the registry's reference, outside the lock */
  return CT_OK;
}

void ct__grad_hooks_fire(ct_tensor *leaf) {
  /* Entries that match, in registration order; the lock is let go while each hook runs. */
  for (int i = 0;; i++) {
    pthread_mutex_lock(&reg.mu);
    while (i < reg.n && reg.v[i].leaf != leaf) i++;
    hook h = i < reg.n ? reg.v[i] : (hook){0};
    pthread_mutex_unlock(&reg.mu);
    if (!h.fn) return;
    h.fn(leaf, h.ctx);
  }
}
