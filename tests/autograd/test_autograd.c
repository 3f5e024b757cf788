/* tests/autograd/test_autograd.c: the tape and the backward pass: accumulation, zero_grad,
 * no-grad mode, detach, leaves, a freed graph, shared gradients, a small MLP against gradcheck,
 * a deep chain, and gradcheck's own ability to catch a wrong gradient. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static ct_tensor *leaf(int n, const double *v, int64_t len, ct_dtype dt) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, 1, &len, CT_F64, CT_DEVICE_CPU));
  ct_tensor *t = ct_assert_nonnull(ct_cast(h, dt));
  ct_tensor_free(h);
  if (n) ct_assert_ok(ct_requires_grad_(t, 1));
  return t;
}

static void expect_grad(ct_tensor *t, const double *want) {
  ct_tensor *g = ct_assert_nonnull(ct_grad(t));
  double *v = ct_test_values(g);
  for (int64_t i = 0; i < ct_tensor_numel(t); i++) {
    if (fabs(v[i] - want[i]) > 1e-6) fprintf(stderr, "grad[%lld] = %g, want %g\n", (long long)i, v[i], want[i]);
    assert_true(fabs(v[i] - want[i]) <= 1e-6);
  }
  free(v);
}

static ct_status backward_sum(ct_tensor *y) {
  ct_tensor *s = ct_sum(y, 0, NULL, 0);
  ct_status st = s ? ct_backward(s) : ct_last_status();
  ct_tensor_free(s);
  return st;
}

static void test_accumulation_and_zero_grad(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){1, 2, 3}, 3, CT_F32), *w = leaf(1, (double[]){-1, 0.5, 2}, 3, CT_F32);
  assert_null(ct_grad(x));
  for (int k = 0; k < 2; k++) {
    ct_tensor *y = ct_mul(x, w);
    ct_assert_ok(backward_sum(y));
    ct_tensor_free(y);
  }
  expect_grad(x, (double[]){-2, 1, 4}); /* grads add across backward calls */
  expect_grad(w, (double[]){2, 4, 6});
  ct_zero_grad(x);
  assert_null(ct_grad(x));
  ct_tensor *y = ct_mul(x, x);
  ct_assert_ok(backward_sum(y));
  expect_grad(x, (double[]){2, 4, 6});
  ct_tensor_free(y), ct_tensor_free(x), ct_tensor_free(w);
}

/* Two leaves that receive the same upstream gradient (add passes g through to both) must not end
 * up sharing one gradient tensor: a later accumulation into one would change the other. */
static void test_shared_upstream_gradient(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){1, 2, 3}, 3, CT_F64), *y = leaf(1, (double[]){4, 5, 6}, 3, CT_F64);
  for (int k = 0; k < 2; k++) {
    ct_tensor *z = ct_add(x, y);
    ct_assert_ok(backward_sum(z));
    ct_tensor_free(z);
  }
  expect_grad(x, (double[]){2, 2, 2});
  expect_grad(y, (double[]){2, 2, 2});
  ct_zero_grad(x), ct_zero_grad(y);
  /* within one pass: x gets g from the add and 3 from the mul; y only g */
  ct_tensor *z = ct_add(x, y), *w = ct_mul_scalar(x, 3), *sz = ct_sum(z, 0, NULL, 0), *sw = ct_sum(w, 0, NULL, 0);
  ct_tensor *L = ct_add(sz, sw);
  ct_assert_ok(ct_backward(L));
  expect_grad(x, (double[]){4, 4, 4});
  expect_grad(y, (double[]){1, 1, 1});
  /* x used twice in one op */
  ct_zero_grad(x);
  ct_tensor *d = ct_add(x, x);
  ct_assert_ok(backward_sum(d));
  expect_grad(x, (double[]){2, 2, 2});
  ct_tensor *all[] = {x, y, z, w, sz, sw, L, d};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_no_grad_detach_leaf(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){1, 2}, 2, CT_F32);
  assert_true(ct_is_leaf(x));
  assert_true(ct_requires_grad(x));
  assert_null(ct_grad_fn_name(x));
  assert_true(ct_grad_enabled());
  ct_no_grad_begin();
  ct_no_grad_begin();
  assert_false(ct_grad_enabled());
  ct_tensor *y = ct_mul(x, x);
  ct_no_grad_end();
  assert_false(ct_grad_enabled()); /* nested */
  ct_no_grad_end();
  assert_true(ct_grad_enabled());
  assert_false(ct_requires_grad(y));
  assert_null(ct_grad_fn_name(y));
  ct_tensor *z = ct_mul(x, x);
  assert_true(ct_requires_grad(z));
  assert_false(ct_is_leaf(z));
  assert_string_equal(ct_grad_fn_name(z), "mul");
  ct_tensor *e = ct_exp(z);
  assert_string_equal(ct_grad_fn_name(e), "exp");
  ct_tensor *dz = ct_assert_nonnull(ct_detach(z));
  assert_false(ct_requires_grad(dz));
  assert_true(ct_is_leaf(dz));
  assert_ptr_equal(ct_tensor_data(dz), ct_tensor_data(z)); /* shares storage */
  ct_tensor *u = ct_mul(dz, x); /* gradient flows to x only through the second operand */
  ct_assert_ok(backward_sum(u));
  expect_grad(x, (double[]){1, 4});
  /* ops on tensors that do not require grad record nothing */
  ct_tensor *p = leaf(0, (double[]){1, 2}, 2, CT_F32), *q = ct_exp(p);
  assert_false(ct_requires_grad(q));
  ct_tensor *sq = ct_sum(q, 0, NULL, 0);
  assert_int_equal(ct_backward(sq), CT_EAUTOGRAD);
  ct_tensor *all[] = {x, y, z, e, dz, u, p, q, sq};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_freed_graph(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){1, 2}, 2, CT_F32);
  ct_tensor *y = ct_mul(x, x), *s = ct_sum(y, 0, NULL, 0);
  ct_assert_ok(ct_backward(s));
  assert_int_equal(ct_backward(s), CT_EAUTOGRAD); /* the graph was freed by the first */
  expect_grad(x, (double[]){2, 4});               /* and nothing was added */
  ct_tensor_free(y), ct_tensor_free(s), ct_tensor_free(x);
}

/* A 2-layer MLP with cross-entropy: gradients of every parameter against finite differences. */
typedef struct {
  ct_tensor *x, *target;
} mlp_ctx;

static ct_tensor *mlp_loss(ct_tensor *const *p, void *vctx) {
  mlp_ctx *c = vctx;
  ct_tensor *h = ct_linear(c->x, p[0], p[1]);
  ct_tensor *a = ct_tanh(h);
  ct_tensor *o = ct_linear(a, p[2], p[3]);
  ct_tensor *l = ct_cross_entropy(o, c->target, CT_REDUCTION_MEAN, 0.05);
  ct_tensor_free(h), ct_tensor_free(a), ct_tensor_free(o);
  return l;
}

static void test_mlp_gradcheck(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(11);
  mlp_ctx c;
  c.x = ct_randn(2, (int64_t[]){4, 5}, 0, 1, CT_F64, CT_DEVICE_CPU, &g);
  c.target = ct_randint(1, (int64_t[]){4}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  ct_tensor *p[4] = {ct_randn(2, (int64_t[]){6, 5}, 0, 0.5, CT_F64, CT_DEVICE_CPU, &g),
                     ct_randn(1, (int64_t[]){6}, 0, 0.5, CT_F64, CT_DEVICE_CPU, &g),
                     ct_randn(2, (int64_t[]){3, 6}, 0, 0.5, CT_F64, CT_DEVICE_CPU, &g),
                     ct_randn(1, (int64_t[]){3}, 0, 0.5, CT_F64, CT_DEVICE_CPU, &g)};
  for (int i = 0; i < 4; i++) ct_assert_ok(ct_requires_grad_(ct_assert_nonnull(p[i]), 1));
  ct_assert_ok(ct_gradcheck(mlp_loss, &c, 4, p, 1e-6, 1e-6, 1e-4));
  for (int i = 0; i < 4; i++) ct_tensor_free(p[i]);
  ct_tensor_free(c.x), ct_tensor_free(c.target);
}

/* gradcheck must catch a wrong gradient: detach cuts the path through one factor. */
static ct_tensor *wrong_grad(ct_tensor *const *p, void *ctx) {
  (void)ctx;
  ct_tensor *d = ct_detach(p[0]);
  ct_tensor *r = ct_mul(p[0], d); /* value x^2, analytic gradient x instead of 2x */
  ct_tensor_free(d);
  return r;
}

static void test_gradcheck_catches_errors(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){1, -2, 3}, 3, CT_F64);
  assert_int_equal(ct_gradcheck(wrong_grad, NULL, 1, &x, 1e-6, 1e-5, 1e-3), CT_EAUTOGRAD);
  ct_assert_error_contains("analytic");
  ct_tensor *f = leaf(1, (double[]){1}, 1, CT_F32);
  assert_int_equal(ct_gradcheck(wrong_grad, NULL, 1, &f, 1e-6, 1e-5, 1e-3), CT_EINVAL); /* f32 input */
  ct_tensor_free(x), ct_tensor_free(f);
}

/* 10000 chained ops: backward is iterative and freeing the graph must not recurse either. */
static void test_deep_chain(void **state) {
  (void)state;
  ct_tensor *x = leaf(1, (double[]){0.5}, 1, CT_F64);
  ct_tensor *y = ct_tensor_retain(x);
  const int n = 10000;
  for (int i = 0; i < n; i++) {
    ct_tensor *z = ct_mul_scalar(y, 1.0001);
    ct_tensor_free(y);
    y = ct_assert_nonnull(z);
  }
  ct_tensor *s = ct_sum(y, 0, NULL, 0);
  ct_assert_ok(ct_backward(s));
  double *g = ct_test_values(ct_grad(x));
  assert_true(fabs(g[0] - pow(1.0001, n)) < 1e-9 * pow(1.0001, n));
  free(g);
  ct_tensor_free(s), ct_tensor_free(y);
  /* a deep graph that is dropped without a backward pass */
  y = ct_tensor_retain(x);
  for (int i = 0; i < n; i++) {
    ct_tensor *z = ct_add_scalar(y, 1);
    ct_tensor_free(y);
    y = ct_assert_nonnull(z);
  }
  ct_tensor_free(y);
  ct_tensor_free(x);
}

/* Gradients of broadcast and promoted operands come back in their own shapes and dtypes. */
static void test_broadcast_and_promoted_grads(void **state) {
  (void)state;
  ct_tensor *a = leaf(1, (double[]){1, 2, 3}, 3, CT_F32);
  ct_tensor *b = ct_assert_nonnull(ct_scalar(2, CT_F64, CT_DEVICE_CPU));
  ct_assert_ok(ct_requires_grad_(b, 1));
  ct_tensor *m = ct_reshape(a, 2, (int64_t[]){3, 1});
  ct_tensor *y = ct_mul(m, b); /* (3, 1) f32 */
  ct_tensor *e = ct_expand(y, 2, (int64_t[]){3, 4});
  ct_assert_ok(backward_sum(e));
  expect_grad(a, (double[]){8, 8, 8});
  expect_grad(b, (double[]){24});
  assert_int_equal(ct_tensor_dtype(ct_grad(a)), CT_F32);
  assert_int_equal(ct_tensor_dtype(ct_grad(b)), CT_F64);
  assert_int_equal(ct_tensor_ndim(ct_grad(b)), 0);
  ct_tensor_free(a), ct_tensor_free(b), ct_tensor_free(m), ct_tensor_free(y), ct_tensor_free(e);
}

/* A training-step shape: everything made inside a scope, the graph freed with it. */
static void test_scope_owns_graph(void **state) {
  (void)state;
  ct_tensor *w = leaf(1, (double[]){0.5, -0.5}, 2, CT_F32);
  for (int step = 0; step < 3; step++) {
    ct_scope_begin();
    ct_tensor *x = ct_full(1, (int64_t[]){2}, 1.0, CT_F32, CT_DEVICE_CPU);
    ct_tensor *l = ct_mse_loss(ct_mul(w, x), ct_zeros(1, (int64_t[]){2}, CT_F32, CT_DEVICE_CPU), CT_REDUCTION_SUM);
    ct_assert_ok(ct_backward(l));
    ct_scope_end();
  }
  expect_grad(w, (double[]){3, -3});
  ct_tensor_free(w);
}

/* cat of more tensors than a tape node holds (it concatenates in groups): values and gradients. */
/* CPU bytes held by tensors now */
static size_t held(void) {
  ct_memory_stats ms;
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &ms));
  return ms.allocated;
}

/* An activation whose values no backward rule saved goes when the program drops it, though the tape
 * still holds it as an input (core/refs.c): b = 2a feeds relu or sigmoid (directly, or through a
 * reshape), whose derivatives read their output only (core/ops.def), so their nodes keep y alone
 * and freeing b frees b's bytes; a view the program still holds keeps them until it goes too; and
 * the gradients are right either way (2 [2a > 0] and 2 s (1 - s), s = sigmoid(2a)). silu's
 * derivative reads x: its node keeps b. */
static void test_unsaved_activation_freed(void **state) {
  (void)state;
  int64_t n = 1 << 18; /* 1 MiB of float32: above the allocator's rounding */
  ct_generator g = ct_generator_new(3);
  ct_tensor *a = ct_assert_nonnull(ct_randn(1, &n, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_assert_ok(ct_requires_grad_(a, 1));
  ct_tensor *(*ops[3])(ct_tensor *) = {ct_relu, ct_sigmoid, ct_silu};
  for (int k = 0; k < 6; k++) {
    int op = k / 2, view = k % 2;
    size_t h0 = held();
    ct_tensor *b = ct_assert_nonnull(ct_mul_scalar(a, 2.0));
    ct_tensor *v = view ? ct_assert_nonnull(ct_reshape(b, 2, (int64_t[]){512, 512})) : NULL;
    ct_tensor *c = ct_assert_nonnull(ops[op](view ? v : b));
    size_t h1 = held();
    ct_tensor_free(b);
    if (view) { /* the program's view shares b's bytes: they stay until it goes too */
      assert_int_equal(held(), h1);
      ct_tensor_free(v);
    }
    size_t h2 = held();
    if (op == 2) assert_int_equal(h2, h1);            /* silu keeps x: b's bytes stay */
    else assert_true(h2 + (size_t)n * sizeof(float) <= h1); /* b's bytes went */
    assert_true(h2 >= h0 + (size_t)n * sizeof(float)); /* c's stay */
    ct_tensor *s = ct_assert_nonnull(ct_sum(c, 0, NULL, 0));
    ct_assert_ok(ct_backward(s));
    double *av = ct_test_values(a), *gv = ct_test_values(ct_grad(a));
    for (int64_t i = 0; i < n; i++) {
      double x = (double)(float)(2.0 * av[i]), sg = 1.0 / (1.0 + exp(-x));
      double want = op == 0 ? (x > 0 ? 2.0 : 0.0) : op == 1 ? 2.0 * sg * (1.0 - sg) : 2.0 * sg * (1.0 + x * (1.0 - sg));
      if (fabs(gv[i] - want) > 1e-5) fail_msg("op %d, element %lld: gradient %.9g, want %.9g", op, (long long)i, gv[i], want);
    }
    free(av), free(gv);
    ct_zero_grad(a);
    ct_tensor_free(s), ct_tensor_free(c);
  }
  ct_tensor_free(a);
}

static void test_cat_many(void **state) {
  (void)state;
  ct_tensor *ts[11];
  for (int i = 0; i < 11; i++) ts[i] = leaf(1, (double[]){i, 10 + i}, 2, CT_F64);
  ct_tensor *c = ct_assert_nonnull(ct_cat(11, ts, 0));
  assert_int_equal(ct_tensor_numel(c), 22);
  double *v = ct_test_values(c);
  for (int i = 0; i < 11; i++) assert_true(v[2 * i] == i && v[2 * i + 1] == 10 + i);
  free(v);
  ct_tensor *w = ct_arange(0, 22, 1, CT_F64, CT_DEVICE_CPU), *p = ct_mul(c, w);
  ct_assert_ok(backward_sum(p));
  for (int i = 0; i < 11; i++) expect_grad(ts[i], (double[]){2 * i, 2 * i + 1});
  for (int i = 0; i < 11; i++) ct_tensor_free(ts[i]);
  ct_tensor_free(c), ct_tensor_free(w), ct_tensor_free(p);
}

/* A tensor a node saved for its gradient and then written in place (ct_fill_, ct_copy_, an
 * optimizer step) makes backward fail, naming the op, instead of computing a gradient from the new
 * values (torch's version counter). The same graph without the write goes through, and a write to
 * a tensor no node saved, or to one whose node already ran, changes nothing. */
static void test_saved_tensor_written_in_place(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(5);
  int64_t s[2] = {3, 4};
  for (int how = 0; how < 4; how++) {
    ct_scope_begin();
    ct_tensor *x = ct_assert_nonnull(ct_randn(2, s, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
    ct_tensor *w = ct_assert_nonnull(ct_randn(2, s, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
    ct_tensor *other = ct_assert_nonnull(ct_zeros(2, s, CT_F64, CT_DEVICE_CPU));
    ct_assert_ok(ct_requires_grad_(w, 1));
    ct_tensor *y = ct_assert_nonnull(ct_mul(x, w)); /* saves x and w: dy/dw = x */
    ct_tensor *e = ct_assert_nonnull(ct_exp(y));    /* saves its output's values */
    ct_tensor *l = ct_assert_nonnull(ct_sum(e, 0, NULL, 0));
    ct_no_grad_begin();
    if (how == 0) ct_assert_ok(ct_fill_(x, 2));         /* mul's saved input */
    if (how == 1) ct_assert_ok(ct_copy_(w, other));     /* mul's saved parameter */
    if (how == 2) ct_assert_ok(ct_fill_(other, 1));     /* saved by no node: backward is fine */
    ct_no_grad_end();
    ct_status st = ct_backward(l);
    if (how < 2) {
      assert_int_equal(st, CT_EAUTOGRAD);
      assert_non_null(strstr(ct_last_error(), "mul saved a float64 tensor of shape (3, 4)"));
      assert_non_null(strstr(ct_last_error(), "written in place"));
    } else {
      ct_assert_ok(st);
      ct_assert_ok(ct_fill_(x, 0)); /* after backward: nothing left to check */
    }
    ct_scope_end();
  }
  /* an optimizer step between forward and backward */
  ct_module *m = ct_assert_nonnull(ct_linear_new(4, 2, 1, CT_DEVICE_CPU, &g));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.1}));
  ct_scope_begin();
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, s, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
  ct_tensor *l1 = ct_assert_nonnull(ct_sum(ct_module_forward(m, x), 0, NULL, 0));
  ct_tensor *l2 = ct_assert_nonnull(ct_sum(ct_module_forward(m, x), 0, NULL, 0));
  ct_assert_ok(ct_backward(l1));
  ct_assert_ok(ct_optimizer_step(opt)); /* the weight l2's graph saved changes */
  assert_int_equal(ct_backward(l2), CT_EAUTOGRAD);
  assert_non_null(strstr(ct_last_error(), "written in place"));
  ct_scope_end();
  ct_optimizer_free(opt);
  ct_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saved_tensor_written_in_place),
      cmocka_unit_test(test_accumulation_and_zero_grad), cmocka_unit_test(test_shared_upstream_gradient),
      cmocka_unit_test(test_no_grad_detach_leaf),        cmocka_unit_test(test_freed_graph),
      cmocka_unit_test(test_mlp_gradcheck),              cmocka_unit_test(test_gradcheck_catches_errors),
      cmocka_unit_test(test_deep_chain),                 cmocka_unit_test(test_broadcast_and_promoted_grads),
      cmocka_unit_test(test_scope_owns_graph),           cmocka_unit_test(test_cat_many),
      cmocka_unit_test(test_unsaved_activation_freed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
