/* src/core/scope.c: scopes, the autorelease pools that own the temporaries of a training step.
 *
 * Each thread has a stack of scopes. A scope is an array of tensor references; duplicates are
 * allowed (ct_to may hand out the same tensor twice). While a scope is open, every tensor header
 * created on this thread is recorded in the innermost one, which then holds the creation reference.
 * Removal searches from the end, because the most recent tensors are the ones freed early. */
#include <string.h>
#include "core/internal.h"

typedef struct scope {
  ct_tensor **items;
  size_t n, cap;
} scope;

static _Thread_local scope *stack;
static _Thread_local int depth, stack_cap;

void ct__tensor_decref(ct_tensor *t); /* tensor.c */

static void push(scope *s, ct_tensor *t) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    ct_tensor **items = realloc(s->items, cap * sizeof *items);
    CT_ASSERT(items); /* a few KB; treated as fatal like any allocator failure of bookkeeping */
    s->items = items, s->cap = cap;
  }
  s->items[s->n++] = t;
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

void ct_scope_begin(void) {
  if (depth == stack_cap) {
    int cap = stack_cap ? 2 * stack_cap : 8;
    scope *ns = realloc(stack, (size_t)cap * sizeof *ns);
    CT_ASSERT(ns);
    stack = ns, stack_cap = cap;
  }
  memset(&stack[depth++], 0, sizeof(scope));
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
    free(stack);
    stack = NULL, stack_cap = 0;
  }
}

void ct__scope_track(ct_tensor *t) {
  if (depth == 0) return;
  push(&stack[depth - 1], t);
  t->scope_refs++;
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
  if (depth >= 2) push(&stack[depth - 2], t);
  else t->scope_refs--;
  return t;
}

void ct__untrack(ct_tensor *t) {
  if (t && t->scope_refs > 0) ct__scope_release_one(t);
}
