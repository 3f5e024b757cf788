/* src/core/scope.c: scopes, the autorelease pools that own the temporaries of a training step.
 *
 * Each thread has a stack of scopes. A scope is an array of tensor references; duplicates are
 * allowed (ct_to may hand out the same tensor twice). While a scope is open, every tensor header
 * created on this thread is recorded in the innermost one, which then holds the creation reference.
 * Removal searches from the end, because the most recent tensors are the ones freed early.
 * A scope drops its references through refs.c; the tensors (tensor.c) record into it, never the
 * other way round. */
#include <string.h>
#include "core/internal.h"

typedef struct scope {
  ct_tensor **items;
  size_t n, cap;
} scope;

/* The first levels live in place, so that opening a scope never allocates in programs that nest
 * fewer than INLINE_DEPTH of them; deeper stacks move to the heap. */
#define INLINE_DEPTH 8
static _Thread_local scope inline_stack[INLINE_DEPTH];
static _Thread_local scope *stack;
static _Thread_local int depth, stack_cap;

static ct_status push(scope *s, ct_tensor *t) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    ct_tensor **items = ct__realloc(s->items, cap * sizeof *items, "a scope's list of tensors");
    if (!items) return CT_ENOMEM;
    s->items = items, s->cap = cap;
  }
  s->items[s->n++] = t;
  return CT_OK;
}

/* Remove one reference to t from s; 1 when found. */
static int take(scope *s, ct_tensor *t) {
  for (size_t i = s->n; i-- > 0;) {
    if (s->items[i] == t) {
      s->items[i] = s->items[--s->n]; /* order does not matter: release order is irrelevant */
      return 1;
    }
  }
  return 0;
}

ct_status ct_scope_begin(void) {
  if (!stack) stack = inline_stack, stack_cap = INLINE_DEPTH;
  if (depth == stack_cap) {
    int cap = 2 * stack_cap;
    scope *ns = stack == inline_stack ? ct__malloc((size_t)cap * sizeof *ns, "the stack of scopes")
                                      : ct__realloc(stack, (size_t)cap * sizeof *ns, "the stack of scopes");
    if (!ns) return CT_ENOMEM;
    if (stack == inline_stack) memcpy(ns, inline_stack, sizeof inline_stack);
    stack = ns, stack_cap = cap;
  }
  memset(&stack[depth++], 0, sizeof(scope));
  return CT_OK;
}

void ct_scope_end(void) {
  if (depth == 0) return;
  scope s = stack[--depth];
  for (size_t i = 0; i < s.n; i++) {
    s.items[i]->scope_refs--;
    ct__tensor_decref(s.items[i]);
  }
  free(s.items);
  if (depth == 0) {
    if (stack != inline_stack) free(stack);
    stack = NULL, stack_cap = 0;
  }
}

ct_status ct__scope_track(ct_tensor *t) {
  if (depth == 0) return CT_OK;
  ct_status s = push(&stack[depth - 1], t);
  if (s == CT_OK) t->scope_refs++;
  return s;
}

ct_tensor *ct__retain_tracked(ct_tensor *t) {
  if (!t) return NULL;
  ct_tensor_retain(t);
  if (ct__scope_track(t) != CT_OK) {
    ct__tensor_decref(t);
    return NULL;
  }
  return t;
}

void ct__scope_release_one(ct_tensor *t) {
  for (int d = depth; d-- > 0;)
    if (take(&stack[d], t)) {
      t->scope_refs--;
      return;
    }
}

ct_tensor *ct_scope_keep(ct_tensor *t) {
  if (!t || depth == 0 || !take(&stack[depth - 1], t)) return t;
  if (depth < 2) {
    t->scope_refs--;
    return t;
  }
  if (push(&stack[depth - 2], t) != CT_OK) {
    stack[depth - 1].items[stack[depth - 1].n++] = t; /* back where it was: take just made room */
    return NULL;
  }
  return t;
}

void ct__untrack(ct_tensor *t) {
  if (t && t->scope_refs > 0) ct__scope_release_one(t);
}
