/* src/autograd/node.h: the tape node every differentiable op records on its output. */
#ifndef CUTTLE_NODE_H
#define CUTTLE_NODE_H

#include "core/internal.h"

#define CT_NODE_MAX_IN 8

typedef struct ct_node ct_node;
/* Given g, the gradient of the node's output (same shape and dtype as the output), write into
 * grads[i] a new tensor for each input i that requires grad (shape and dtype of that input; the
 * engine fits them if they are broadcast or promoted), or leave NULL. Runs under no-grad. */
typedef ct_status (*ct_backward_fn)(ct_node *n, ct_tensor *g, ct_tensor **grads);

struct ct_node {
  const char *name;
  ct_backward_fn backward;
  int n_in;
  ct_tensor *in[CT_NODE_MAX_IN];    /* retained inputs (NULL when not an autograd input), for their
                                       graph and metadata only (shape, dtype, device, strides): a
                                       non-leaf input loses its storage once only nodes hold it
                                       (core/refs.c), so a rule that reads an input's values saves
                                       it (ct__save_detached) */
  ct_tensor *saved[CT_NODE_MAX_IN]; /* retained tensors the rule needs (the output must not be saved:
                                       that would be a cycle; save a detached view of it instead) */
  uint64_t saved_version[CT_NODE_MAX_IN]; /* saved[i]'s storage version when saved: backward
                                             refuses a tensor written in place since (backward.c) */
  int64_t iv[16];                   /* integer parameters of the op */
  double dv[4];                     /* float parameters of the op */
  void *extra;                      /* free()d with the node */
};

/* When grad mode is on and an input requires grad: create the node on out (which then requires
 * grad) retaining the inputs, and set *node to it for the caller to fill saved/iv/dv; else set
 * *node to NULL. Returns CT_OK, or CT_ENOMEM when the node cannot be allocated: out then has no
 * graph, and the op must fail and free out (an output that silently lost its graph would train
 * wrong). */
ct_status ct__record(ct_tensor *out, const char *name, ct_backward_fn fn, int n_in, ct_tensor *const *in, ct_node **node);
/* A detached view of t into n->saved[i]; nothing when n is NULL. t NULL means the op failed to
 * make it: its status comes back. CT_ENOMEM when the view cannot be allocated; the op must then
 * fail and free its output (which frees the node). */
ct_status ct__save_detached(ct_node *n, int i, ct_tensor *t);
void ct__node_free(ct_node *n);
/* Post-accumulate-grad hooks (hooks.c): 1 when any is registered; call leaf's hooks, in the order
 * of registration, once its gradient for this backward is final. */
int ct__grad_hooks_any(void);
void ct__grad_hooks_fire(ct_tensor *leaf);
/* A detached view of t (same storage, no graph), untracked by scopes: for saving an output. NULL
 * with CT_ENOMEM when the view header cannot be allocated. */
ct_tensor *ct__detached(ct_tensor *t);

#endif
