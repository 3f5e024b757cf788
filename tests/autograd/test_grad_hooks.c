/* tests/autograd/test_grad_hooks.c: post-accumulate-grad hooks (PyTorch's
 * Tensor.register_post_accumulate_grad_hook), on which DDP's overlap of communication with backward
 * rests: a hook runs once per backward for each leaf it is on, after every contribution of the pass
 * has been summed into .grad (a leaf used twice is not reported after its first part); not for a
 * leaf the pass does not reach; in registration order; never after its removal; and the registry's
 * reference keeps a leaf alive until the hook is removed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static ct_tensor *leaf(const double *v, int64_t len) {
  ct_tensor *t = ct_assert_nonnull(ct_from_host(v, 1, &len, CT_F64, CT_DEVICE_CPU));
  ct_assert_ok(ct_requires_grad_(t, 1));
  return t;
}

typedef struct {
  int calls;
  double seen[8]; /* grad[0] at each call */
  int order[8];   /* the id of each call, for the order test */
  int id;
  int *log, *nlog; /* shared call log */
} rec;

static void record(ct_tensor *t, void *ctx) {
  rec *r = ctx;
  ct_tensor *g = ct_grad(t);
  assert_non_null(g);
  assert_false(ct_grad_enabled()); /* hooks run under no-grad */
  if (r->calls < 8) r->seen[r->calls] = ((const double *)ct_tensor_data(g))[0];
  r->calls++;
  if (r->log) r->log[(*r->nlog)++] = r->id;
}

static ct_status backward_sum(ct_tensor *y) {
  ct_tensor *s = ct_sum(y, 0, NULL, 0);
  ct_status st = s ? ct_backward(s) : ct_last_status();
  ct_tensor_free(s);
  return st;
}

/* y = x * w + x * x: x gets two contributions; its hook must see their sum (w + 2x), once. */
static void test_fires_once_with_the_final_gradient(void **state) {
  (void)state;
  ct_tensor *x = leaf((double[]){3, 1}, 2), *w = leaf((double[]){5, 2}, 2);
  rec rx = {0}, rw = {0};
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(x, record, &rx));
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(w, record, &rw));
  for (int k = 0; k < 2; k++) {
    ct_tensor *a = ct_mul(x, w), *b = ct_mul(x, x), *y = ct_add(a, b);
    ct_assert_ok(backward_sum(y));
    ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(y);
  }
  assert_int_equal(rx.calls, 2);
  assert_int_equal(rw.calls, 2);
  /* d/dx = w + 2x = 11 for the first element; the second pass accumulates onto the first */
  assert_true(rx.seen[0] == 11 && rx.seen[1] == 22);
  assert_true(rw.seen[0] == 3 && rw.seen[1] == 6);
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(x, record, &rx));
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(w, record, &rw));
  /* removed: a third pass calls nothing, and removing again is an error */
  ct_tensor *y = ct_mul(x, w);
  ct_assert_ok(backward_sum(y));
  assert_int_equal(rx.calls, 2);
  assert_int_equal(ct_tensor_remove_post_accumulate_grad_hook(x, record, &rx), CT_EINVAL);
  ct_tensor_free(y), ct_tensor_free(x), ct_tensor_free(w);
}

/* A leaf the pass does not reach gets no call; hooks on one leaf run in registration order. */
static void test_unreached_and_order(void **state) {
  (void)state;
  ct_tensor *x = leaf((double[]){1, 2}, 2), *unused = leaf((double[]){4}, 1);
  int log[16], nlog = 0;
  rec r1 = {.id = 1, .log = log, .nlog = &nlog}, r2 = {.id = 2, .log = log, .nlog = &nlog}, ru = {0};
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(x, record, &r1));
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(x, record, &r2));
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(unused, record, &ru));
  ct_tensor *y = ct_mul(x, x);
  ct_assert_ok(backward_sum(y));
  assert_int_equal(nlog, 2);
  assert_true(log[0] == 1 && log[1] == 2);
  assert_int_equal(ru.calls, 0);
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(x, record, &r1));
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(x, record, &r2));
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(unused, record, &ru));
  ct_tensor_free(y), ct_tensor_free(x), ct_tensor_free(unused);
}

/* The registry holds a reference: the user's free leaves the leaf alive (ASan would see a use after
 * free in the backward below otherwise), and the removal releases it (LeakSanitizer would see it). */
static void test_registry_keeps_the_leaf(void **state) {
  (void)state;
  ct_tensor *x = leaf((double[]){2}, 1);
  rec r = {0};
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(x, record, &r));
  ct_tensor *y = ct_mul(x, x);
  ct_tensor_free(x); /* the graph and the registry still hold it */
  ct_assert_ok(backward_sum(y));
  ct_tensor_free(y);
  assert_int_equal(r.calls, 1);
  assert_true(r.seen[0] == 4);
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(x, record, &r)); /* the last reference */
}

/* A hook may remove itself (the registry's lock is not held while it runs). */
static void remove_self(ct_tensor *t, void *ctx) {
  rec *r = ctx;
  r->calls++;
  ct_assert_ok(ct_tensor_remove_post_accumulate_grad_hook(t, remove_self, ctx));
}

static void test_hook_removes_itself(void **state) {
  (void)state;
  ct_tensor *x = leaf((double[]){1}, 1);
  rec r = {0};
  ct_assert_ok(ct_tensor_register_post_accumulate_grad_hook(x, remove_self, &r));
  for (int k = 0; k < 2; k++) {
    ct_tensor *y = ct_mul(x, x);
    ct_assert_ok(backward_sum(y));
    ct_tensor_free(y);
  }
  assert_int_equal(r.calls, 1);
  ct_tensor_free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fires_once_with_the_final_gradient),
      cmocka_unit_test(test_unreached_and_order),
      cmocka_unit_test(test_registry_keeps_the_leaf),
      cmocka_unit_test(test_hook_removes_itself),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
