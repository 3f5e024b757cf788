/* src/autograd/backward.c: the backward pass. Two passes over the graph reachable from the root:
 * the first counts, for every tensor, how many consumers will send it a gradient; the second walks
 * in reverse topological order (a tensor is processed once all its consumers are), calls each
 * node's rule, and accumulates. Afterwards the graph is freed, as PyTorch does without
 * retain_graph. Iterative, so deep graphs cannot overflow the C stack. */
#include <string.h>
#include "autograd/node.h"
#include "ops/ops_internal.h"
#include "ops/memory_format.h"

void ct__tensor_decref(ct_tensor *t);

typedef struct {
  ct_tensor **v;
  size_t n, cap;
} tvec;

/* Room for n more entries; CT_ENOMEM (a unchanged) when it cannot grow. */
static ct_status tvec_reserve(tvec *a, size_t n) {
  if (a->n + n <= a->cap) return CT_OK;
  size_t cap = a->cap ? 2 * a->cap : 64;
  while (cap < a->n + n) cap *= 2;
  ct_tensor **v = ct__realloc(a->v, cap * sizeof *v, "the backward pass's list of tensors");
  if (!v) return CT_ENOMEM;
  a->v = v, a->cap = cap;
  return CT_OK;
}

/* Push into room made by tvec_reserve. */
static void tvec_push(tvec *a, ct_tensor *t) {
  CT_ASSERT(a->n < a->cap);
  a->v[a->n++] = t;
}

static int shared(const ct_tensor *t) {
  return __atomic_load_n(&t->refs, __ATOMIC_ACQUIRE) > 1 || __atomic_load_n(&t->storage->refs, __ATOMIC_ACQUIRE) > 1;
}

/* Add g into *slot (taking g's reference), untracked from scopes.
 * A leaf's .grad outlives the backward and is summed into in place by later backward calls and
 * read flat by the optimizers, so it must be dense and its own: a shared gradient (add hands one g
 * to both inputs) or a strided one is copied first, into the leaf's memory format (row-major, or
 * channels_last for a channels_last leaf; the fused optimizers take only row-major ones).
 * An intermediate slot takes the first gradient as it is, shared or transposed, without a copy;
 * a second contribution is added in place when the slot owns a dense tensor, and out of place
 * otherwise (PyTorch's InputBuffer does the same). */
static ct_status accumulate(ct_tensor **slot, ct_tensor *g, const ct_tensor *leaf) {
  ct__untrack(g);
  if (!*slot) {
    /* dense in the leaf's own memory format (a channels_last weight gets a channels_last .grad,
     * PyTorch's gradient layout contract) */
    ct_memory_format fmt = leaf ? ct_tensor_suggest_memory_format(leaf) : CT_CONTIGUOUS_FORMAT;
    if (leaf && (shared(g) || !ct_tensor_is_contiguous_format(g, fmt))) {
      ct_tensor *c = ct__alloc_format(g->ndim, g->shape, g->dtype, g->device, fmt);
      ct_status s = c ? CT_KERNEL_CALL(g->storage->backend, copy, __func__, g, c, g) : ct_last_status();
      ct__tensor_decref(g);
      if (!c) return s;
      ct__untrack(c);
      if (s != CT_OK) return ct__tensor_decref(c), s;
      g = c;
    }
    *slot = g;
    return CT_OK;
  }
  ct_status s;
  if (leaf || (!shared(*slot) && ct__non_overlapping_and_dense(*slot))) s = ct__add_into(*slot, g);
  else {
    ct_tensor *sum = ct__alloc((*slot)->ndim, (*slot)->shape, (*slot)->dtype, (*slot)->device);
    s = sum ? ct__binary_into(CT_BINARY_ADD, sum, *slot, g) : ct_last_status();
    if (sum) ct__untrack(sum);
    if (s == CT_OK) ct__tensor_decref(*slot), *slot = sum;
    else if (sum) ct__tensor_decref(sum);
  }
  ct__tensor_decref(g);
  return s;
}

/* 1 when g, the last gradient part for the leaf in, goes straight into its existing .grad: g of
 * another floating dtype (a half, from the backward of an autocast cast of a float32 parameter),
 * of in's shape, with no other part pending and no hook to fire. The general path would make a
 * full-size float32 copy of g only to add it in place (issue 11: the largest single temporary of
 * a cnn step under autocast); the backends' add takes operands of mixed dtypes and rounds
 * a + b once into the grad's dtype, as the copy and the add did. */
static int add_straight_to_grad(const ct_tensor *in, const ct_tensor *g) {
  if (in->grad_fn || in->bw_grad || in->bw_pending != 1 || !in->grad || g->dtype == in->grad->dtype) return 0;
  if (!ct_dtype_is_floating(g->dtype) || !ct_dtype_is_floating(in->grad->dtype) || ct__grad_hooks_any()) return 0;
  if (g->ndim != in->ndim || in->grad->ndim != in->ndim) return 0;
  for (int d = 0; d < g->ndim; d++)
    if (g->shape[d] != in->shape[d] || in->grad->shape[d] != in->shape[d]) return 0;
  return 1;
}

/* t has been processed (its gradient accumulated or its node run, and every input's part sent):
 * its node goes now, with the references it held on its inputs and saved tensors, and so does t
 * itself when the pass holds its last reference, since nothing can observe it again (PyTorch frees
 * a graph as it goes too). So an autocast cast of a weight, kept only by the views and nodes between
 * the parameter and its use, is freed once its gradient has passed instead of at the end of the
 * pass (issue 11); an activation lives until its own node has run, as before. */
static void done_with(tvec *visited, ct_tensor *t) {
  if (t->grad_fn) ct__node_free(t->grad_fn), t->grad_fn = NULL, t->requires_grad = false; /* a 2nd backward is an error */
  t->bw_pending = 0;
  if (__atomic_load_n(&t->refs, __ATOMIC_ACQUIRE) == 1 && t->bw_mark > 0) {
    visited->v[t->bw_mark - 1] = NULL;
    t->bw_mark = 0;
    ct__tensor_decref(t);
  }
}

/* The first pass: list in visited (with a reference each) every tensor reachable from root, and
 * count in each its bw_pending, the consumers that will send it a gradient. Ends with room in
 * work for the second pass. */
static ct_status count_consumers(ct_tensor *root, tvec *visited, tvec *work) {
  ct_status st = tvec_reserve(visited, 1);
  if (st == CT_OK) st = tvec_reserve(work, 1);
  if (st == CT_OK) {
    root->bw_mark = 1; /* a tensor's mark is its index in visited plus one */
    tvec_push(visited, ct_tensor_retain(root));
    tvec_push(work, root);
  }
  while (st == CT_OK && work->n) {
    ct_tensor *t = work->v[--work->n];
    if (!t->grad_fn) continue;
    /* room for every input first, so that a failure leaves no input marked but unlisted */
    int n_in = t->grad_fn->n_in;
    if ((st = tvec_reserve(visited, (size_t)n_in)) != CT_OK || (st = tvec_reserve(work, (size_t)n_in)) != CT_OK) break;
    for (int i = 0; i < n_in; i++) {
      ct_tensor *in = t->grad_fn->in[i];
      if (!in) continue;
      if (!in->bw_mark) {
        in->bw_mark = (int)visited->n + 1;
        tvec_push(visited, ct_tensor_retain(in));
        tvec_push(work, in);
      }
      in->bw_pending++;
    }
  }
  /* The second pass pushes each tensor once, when its last consumer is done: visited.n entries. */
  if (st == CT_OK) st = tvec_reserve(work, visited->n);
  return st;
}

/* Send the gradients grads[i] that node n's rule made (st: how the rule went) to n's inputs, each
 * freed here, and push every input whose last consumer this was onto work. Returns st, or the
 * first error of a send. */
static ct_status send_to_inputs(ct_node *n, ct_tensor **grads, tvec *work, ct_status st) {
  for (int i = 0; i < n->n_in; i++) {
    ct_tensor *in = n->in[i];
    if (!in) continue;
    if (grads[i] && st == CT_OK && add_straight_to_grad(in, grads[i])) {
      st = ct__add_into(in->grad, grads[i]);
      ct_tensor_free(grads[i]), grads[i] = NULL;
    } else if (grads[i] && st == CT_OK) {
      ct_tensor *fit = ct__sum_to(grads[i], in->ndim, in->shape, in->dtype);
      ct_tensor_free(grads[i]); /* before accumulate, so that fit is not needlessly seen as shared */
      grads[i] = NULL;
      if (!fit) st = ct_last_status();
      else st = accumulate(&in->bw_grad, fit, NULL);
    }
    if (grads[i]) ct_tensor_free(grads[i]);
    if (--in->bw_pending == 0) tvec_push(work, in);
  }
  return st;
}

/* CT_OK when every tensor n saved for its rule still holds the values it saved (its storage's
 * version unchanged), else CT_EAUTOGRAD naming the op: the rule would compute a wrong gradient
 * from the new values, silently. torch.autograd's check, SavedVariable::unpack. */
static ct_status saved_intact(const ct_node *n) {
  for (int i = 0; i < CT_NODE_MAX_IN; i++) {
    const ct_tensor *t = n->saved[i];
    if (!t) continue;
    uint64_t now = ct__version(t);
    if (now == n->saved_version[i]) continue;
    char sh[160];
    return ct__error(CT_EAUTOGRAD,
                     "backward: %s saved a %s tensor of shape %s for its gradient, and it was written in place since "
                     "(version %llu, saved at version %llu): a ct_copy_, ct_fill_, ct_zero_, optimizer step, checkpoint "
                     "load, collective or batch norm's running-statistics update wrote it between the forward and "
                     "backward; run backward before changing the tensors the forward read, or "
                     "change a copy (torch: \"one of the variables needed for gradient computation has been modified "
                     "by an inplace operation\")",
                     n->name, ct_dtype_name(t->dtype), ct_shape_str((ct_tensor *)t, sh, sizeof sh),
                     (unsigned long long)now, (unsigned long long)n->saved_version[i]);
  }
  return CT_OK;
}

/* The second pass's step for t, whose consumers have all sent their parts: a leaf accumulates its
 * gradient into .grad, any other tensor runs its node's rule and sends the results on. */
static ct_status process_tensor(tvec *visited, tvec *work, ct_tensor *t) {
  ct_status st = CT_OK;
  ct_tensor *g = t->bw_grad;
  t->bw_grad = NULL;
  ct_node *n = t->grad_fn;
  if (!n) {
    if (g) st = accumulate(&t->grad, g, t);
    /* every consumer has sent its part: t->grad is final for this pass */
    if (g && st == CT_OK && ct__grad_hooks_any()) ct__grad_hooks_fire(t);
    done_with(visited, t);
    return st;
  }
  ct_tensor *grads[CT_NODE_MAX_IN] = {0};
  if (g) st = saved_intact(n);
  if (g && st == CT_OK) st = n->backward(n, g, grads);
  if (g) {
    ct__tensor_decref(g);
    /* a node runs once per pass and the graph is freed after it: its saved tensors go now, as
     * in PyTorch, so that the detached ones (an autocast cast of a weight, an argmax) do not
     * add to the peak of the rest of the pass */
    for (int i = 0; i < CT_NODE_MAX_IN; i++)
      if (n->saved[i]) ct__tensor_decref(n->saved[i]), n->saved[i] = NULL;
  }
  st = send_to_inputs(n, grads, work, st);
  if (st == CT_OK) done_with(visited, t);
  return st;
}

/* Free the graph: drop every node reached, then the references count_consumers took. */
static void free_graph(tvec *visited) {
  for (size_t i = 0; i < visited->n; i++) {
    ct_tensor *t = visited->v[i];
    if (!t) continue; /* released by done_with */
    t->bw_mark = 0;
    t->bw_pending = 0;
    if (t->bw_grad) ct__tensor_decref(t->bw_grad), t->bw_grad = NULL;
    if (t->grad_fn) ct__node_free(t->grad_fn), t->grad_fn = NULL, t->requires_grad = false; /* a 2nd backward is an error */
  }
  for (size_t i = 0; i < visited->n; i++)
    if (visited->v[i]) ct__tensor_decref(visited->v[i]);
  free(visited->v);
}

ct_status ct_backward(ct_tensor *root) {
  if (!root) return ct__error(CT_EINVAL, "ct_backward: NULL root");
  if (!root->requires_grad)
    return ct__error(CT_EAUTOGRAD, "ct_backward: the root does not require grad and has no graph (did a parameter "
                     "require grad, and was grad mode on?)");
  if (ct_tensor_numel(root) != 1) {
    char shp[128];
    return ct__error(CT_EAUTOGRAD, "ct_backward: the root must be a one-element tensor, got shape %s (reduce it with "
                     "ct_sum or ct_mean first)", ct_shape_str(root, shp, sizeof shp));
  }
  tvec visited = {0}, work = {0};
  ct_status st = count_consumers(root, &visited, &work);

  ct_no_grad_begin();
  ct_tensor *seed = NULL;
  if (st == CT_OK && !(seed = ct_ones(root->ndim, root->shape, root->dtype, root->device))) st = ct_last_status();
  if (seed) {
    ct__untrack(seed);
    root->bw_grad = seed;
    tvec_push(&work, root);
  }
  while (st == CT_OK && work.n) {
    ct_tensor *t = work.v[--work.n];
    st = process_tensor(&visited, &work, t);
  }
  ct_no_grad_end();

  free_graph(&visited);
  free(work.v);
  return st;
}
