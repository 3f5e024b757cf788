/* src/core/refs.c: the reference counts of tensor headers and of storage, and what happens when the
 * last reference goes (the node, the gradients and the storage are released, the bytes go back to
 * their backend or their custom hook). Below both the scopes (scope.c), which hold references, and
 * the tensors (tensor.c), which make them, so that neither calls the other to drop one. */
#include "core/backend.h"

static inline void incref(int *r) { __atomic_add_fetch(r, 1, __ATOMIC_RELAXED); }
static inline int decref(int *r) { return __atomic_sub_fetch(r, 1, __ATOMIC_ACQ_REL); }

void ct__storage_retain(ct_storage *s) { incref(&s->refs); }

void ct__storage_release(ct_storage *s) {
  if (!s || decref(&s->refs) > 0) return;
  if (s->release) s->release(s);
  else if (s->data) s->backend->free(s->device.index, s->data, s->nbytes);
  free(s);
}

ct_tensor *ct_tensor_retain(ct_tensor *t) {
  if (!t) return ct__null_arg("ct_tensor_retain", "t");
  incref(&t->refs);
  return t;
}

/* Destroy when the last reference goes. Called by ct_tensor_free and by scopes. When only tape
 * nodes hold a non-leaf after this release (graph_refs, internal.h), its values can no longer be
 * read by anyone: its storage reference goes now instead of when the backward frees the graph (a
 * resnet's BatchNorm outputs, which only the following relu consumed, held 19 MiB of a resnet18
 * step's peak). A leaf keeps its storage: it is the program's (a parameter, an input). */
void ct__tensor_decref(ct_tensor *t) {
  int left = decref(&t->refs);
  if (left > 0) {
    if (t->grad_fn && t->storage && left == __atomic_load_n(&t->graph_refs, __ATOMIC_ACQUIRE)) {
      ct_storage *s = t->storage;
      t->storage = NULL;
      ct__storage_release(s);
    }
    return;
  }
  if (t->grad_fn) t->grad_fn_release(t->grad_fn);
  if (t->grad) ct__tensor_decref(t->grad);
  if (t->bw_grad) ct__tensor_decref(t->bw_grad);
  ct__storage_release(t->storage);
  free(t);
}

void ct__bump_version(ct_tensor *t) {
  if (t && t->storage) __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED);
}

uint64_t ct__version(const ct_tensor *t) { return __atomic_load_n(&t->storage->version, __ATOMIC_RELAXED); }
