/* src/autograd/node.c: recording nodes, grad mode, and the leaf accessors. */
#include <string.h>
#include "autograd/node.h"

static _Thread_local int no_grad_depth;

void ct_no_grad_begin(void) { no_grad_depth++; }
void ct_no_grad_end(void) {
  if (no_grad_depth > 0) no_grad_depth--;
}
int ct_grad_enabled(void) { return no_grad_depth == 0; }

ct_status ct__record(ct_tensor *out, const char *name, ct_backward_fn fn, int n_in, ct_tensor *const *in, ct_node **node) {
  *node = NULL;
  if (!out || no_grad_depth > 0) return CT_OK;
  int any = 0;
  for (int i = 0; i < n_in; i++) any |= in[i] && in[i]->requires_grad;
  if (!any) return CT_OK;
  ct_node *n = ct__calloc(1, sizeof *n, "a tape node");
  if (!n) return CT_ENOMEM;
  n->name = name;
  n->backward = fn;
  n->n_in = n_in;
  for (int i = 0; i < n_in; i++)
    if (in[i] && in[i]->requires_grad) {
      n->in[i] = ct_tensor_retain(in[i]);
      __atomic_add_fetch(&in[i]->graph_refs, 1, __ATOMIC_ACQ_REL); /* after the retain: refs > graph_refs meanwhile */
    }
  out->grad_fn = n;
  out->grad_fn_release = ct__node_free;
  out->requires_grad = true;
  *node = n;
  return CT_OK;
}

void ct__tensor_decref(ct_tensor *t);

ct_status ct__save_detached(ct_node *n, int i, ct_tensor *t) {
  if (!n) return CT_OK;
  if (!t) return ct_last_status();
  n->saved[i] = ct__detached(t);
  if (n->saved[i]) n->saved_version[i] = ct__version(t);
  return n->saved[i] ? CT_OK : CT_ENOMEM;
}

void ct__node_free(ct_node *n) {
  if (!n) return;
  for (int i = 0; i < CT_NODE_MAX_IN; i++) {
    if (n->in[i]) {
      __atomic_sub_fetch(&n->in[i]->graph_refs, 1, __ATOMIC_ACQ_REL); /* before the release, as record's order reversed */
      ct__tensor_decref(n->in[i]);
    }
    if (n->saved[i]) ct__tensor_decref(n->saved[i]);
  }
  free(n->extra);
  free(n);
}

ct_tensor *ct__detached(ct_tensor *t) {
  ct_tensor *v = ct__view_of(t, t->ndim, t->shape, t->stride, t->offset);
  ct__untrack(v);
  return v;
}

ct_status ct_requires_grad_(ct_tensor *t, int requires_grad) {
  if (!t) return ct__error(CT_EINVAL, "ct_requires_grad_: NULL tensor");
  if (t->grad_fn)
    return ct__error(CT_EAUTOGRAD, "ct_requires_grad_: only leaf tensors can be marked; this one comes from \"%s\" "
                     "(use ct_detach first)", t->grad_fn->name);
  if (requires_grad && !ct_dtype_is_floating(t->dtype))
    return ct__error(CT_EDTYPE, "ct_requires_grad_: only floating tensors can require grad, got %s",
                     ct_dtype_name(t->dtype));
  t->requires_grad = requires_grad != 0;
  return CT_OK;
}

int ct_requires_grad(const ct_tensor *t) {
  if (!t) return ct__null_arg("ct_requires_grad", "t"), 0;
  return t->requires_grad;
}
int ct_is_leaf(const ct_tensor *t) {
  if (!t) return ct__null_arg("ct_is_leaf", "t"), 0;
  return !t->grad_fn;
}
ct_tensor *ct_grad(ct_tensor *t) {
  if (!t) return ct__null_arg("ct_grad", "t");
  return t->grad;
}
const char *ct_grad_fn_name(const ct_tensor *t) {
  if (!t) return ct__null_arg("ct_grad_fn_name", "t");
  return t->grad_fn ? t->grad_fn->name : NULL;
}

void ct_zero_grad(ct_tensor *t) {
  if (!t) return (void)ct__null_status("ct_zero_grad", "t");
  if (t && t->grad) {
    ct__tensor_decref(t->grad);
    t->grad = NULL;
  }
}

ct_tensor *ct_detach(ct_tensor *t) {
  if (!t) return ct__null_arg("ct_detach", "t");
  return ct__view_of(t, t->ndim, t->shape, t->stride, t->offset);
}
