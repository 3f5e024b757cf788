/* tests/ops/test_layer_norm_cpu.c: layer norm on the CPU's kernels (src/backend/cpu/layer_norm.c,
 * one tape node) against the composition of mean, var and elementwise ops that the front-end runs
 * where a backend lacks them (src/ops/norm.c): the composition runs on a copy of the CPU backend
 * whose table lacks layer_norm and layer_norm_backward (every backend has them; the composition
 * stays for what they do not take). Outputs and the gradients of x, weight and bias, in float32 and
 * float64, over the last one and the last two dims (a transformer's LayerNorm(d), rows of one
 * element, and inputs big enough for the OpenMP threads), with and without weight and bias. And the
 * cases that stay composed on the CPU, and out of memory at each allocation of the kernels' forward
 * and backward. (Values against float64 references and gradcheck: the op-case table,
 * tests/ops/op_cases.h.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "composed_backend.h"

typedef struct {
  const char *name;
  int ndim, k; /* k: normalized_ndim */
  int64_t shape[3];
} ln_shape;

static const ln_shape shapes[] = {
    {"(B, T, d) over d", 3, 1, {2, 5, 16}},
    {"(N, H, W) over (H, W)", 3, 2, {4, 3, 7}},
    {"rows of one element", 2, 1, {6, 1}},
    {"(R, d), threads", 2, 1, {96, 520}}, /* over the threshold of the OpenMP threads */
};

typedef struct {
  ct_tensor *x, *w, *b, *y;
} ln_run;

/* ct_layer_norm on fresh leaves of the given values, then backward of sum(y gy) */
static ln_run run(const ln_shape *sh, ct_dtype dt, int composed, const double *xv, const double *wv, const double *bv,
                  const double *gyv, int weight, int bias) {
  const int64_t *ns = sh->shape + (sh->ndim - sh->k);
  ln_run r = {0};
  r.x = leaf(xv, sh->ndim, sh->shape, dt, composed, 1);
  if (weight) r.w = leaf(wv, sh->k, ns, dt, composed, 1);
  if (bias) r.b = leaf(bv, sh->k, ns, dt, composed, 1);
  r.y = ct_layer_norm(r.x, sh->k, r.w, r.b, 1e-5);
  node_then_backward(r.y, "layer_norm", composed, sh->name, gyv);
  return r;
}

static void run_free(ln_run *r) {
  ct_tensor *all[] = {r->x, r->w, r->b, r->y};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void check(const ln_shape *sh, ct_dtype dt, int weight, int bias, unsigned seed) {
  int f32 = dt == CT_F32;
  int64_t n = 1, D = 1;
  for (int d = 0; d < sh->ndim; d++) n *= sh->shape[d];
  for (int d = sh->ndim - sh->k; d < sh->ndim; d++) D *= sh->shape[d];
  /* an offset mean, so that x - mean matters */
  double *xv = values(n, 1.0, 5.0, f32, &seed), *gyv = values(n, -1, 1, f32, &seed);
  double *wv = values(D, 0.5, 1.5, f32, &seed), *bv = values(D, -1, 1, f32, &seed);
  ln_run k = run(sh, dt, 0, xv, wv, bv, gyv, weight, bias);
  ln_run c = run(sh, dt, 1, xv, wv, bv, gyv, weight, bias);
  printf("# %s%s%s %s\n", sh->name, weight ? " weight" : "", bias ? " bias" : "", ct_dtype_name(dt));
  double atol = f32 ? 1e-5 : 1e-12, rtol = f32 ? 1e-4 : 1e-10, gatol = f32 ? 1e-4 : 1e-11;
  assert_int_equal(ct_tensor_dtype(k.y), dt);
  ct_assert_close(k.y, c.y, atol, rtol);
  ct_assert_close(ct_grad(k.x), ct_grad(c.x), gatol, rtol);
  if (weight) ct_assert_close(ct_grad(k.w), ct_grad(c.w), gatol, rtol);
  if (bias) ct_assert_close(ct_grad(k.b), ct_grad(c.b), gatol, rtol);
  run_free(&k), run_free(&c);
  free(xv), free(gyv), free(wv), free(bv);
}

static void test_kernel_vs_composition(void **state) {
  (void)state;
  unsigned seed = 4321;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int dt = 0; dt < 2; dt++)
      for (int weight = 1; weight >= 0; weight--)
        for (int bias = 1; bias >= 0; bias--) check(&shapes[s], dt ? CT_F64 : CT_F32, weight, bias, seed++);
}

/* What the kernels do not take stays composed on the CPU: a weight whose dtype would promote the
 * output, a non-contiguous x. A half x runs on the kernels in float32 and keeps its dtype. */
static void test_composed_cases(void **state) {
  (void)state;
  int64_t xs[2] = {3, 4}, D = 4;
  double xv[12];
  for (int i = 0; i < 12; i++) xv[i] = (double)((i * 5) % 7) - 3;
  ct_tensor *x = leaf(xv, 2, xs, CT_F32, 0, 1);
  ct_tensor *w64 = ct_assert_nonnull(ct_ones(1, &D, CT_F64, CT_DEVICE_CPU));
  ct_tensor *y1 = ct_assert_nonnull(ct_layer_norm(x, 1, w64, NULL, 1e-5));
  assert_int_equal(ct_tensor_dtype(y1), CT_F64); /* float32 x, float64 weight: a float64 output, as torch */
  assert_string_not_equal(ct_grad_fn_name(y1), "layer_norm");
  ct_tensor *xt = ct_assert_nonnull(ct_transpose(x, 0, 1)); /* (4, 3), not contiguous */
  ct_tensor *y2 = ct_assert_nonnull(ct_layer_norm(xt, 1, NULL, NULL, 1e-5));
  assert_string_not_equal(ct_grad_fn_name(y2), "layer_norm");
  ct_tensor *xc = ct_assert_nonnull(ct_contiguous(xt));
  ct_tensor *y3 = ct_assert_nonnull(ct_layer_norm(xc, 1, NULL, NULL, 1e-5));
  assert_string_equal(ct_grad_fn_name(y3), "layer_norm");
  ct_assert_close(y2, y3, 1e-6, 1e-5); /* the same values either way */
  ct_tensor *xh = ct_assert_nonnull(ct_cast(x, CT_BF16));
  ct_tensor *y4 = ct_assert_nonnull(ct_layer_norm(xh, 1, NULL, NULL, 1e-5));
  assert_int_equal(ct_tensor_dtype(y4), CT_BF16);
  ct_tensor *all[] = {x, w64, y1, xt, y2, xc, y3, xh, y4};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* Out of memory at every allocation of a forward and backward on the kernels: CT_ENOMEM, nothing
 * leaked (LeakSanitizer in the sanitizer build), and a clean run afterwards as before. */
static void test_out_of_memory(void **state) {
  (void)state;
  int64_t xs[2] = {5, 8}, D = 8;
  unsigned seed = 77;
  double *xv = values(40, -2, 2, 0, &seed), *wv = values(8, 0.5, 1.5, 0, &seed);
  int64_t k = 1;
  for (;; k++) {
    ct_tensor *x = leaf(xv, 2, xs, CT_F64, 0, 1), *w = leaf(wv, 1, &D, CT_F64, 0, 1), *b = leaf(wv, 1, &D, CT_F64, 0, 1);
    ct__fault_inject_alloc(k);
    ct_tensor *y = ct_layer_norm(x, 1, w, b, 1e-5);
    const char *fn = y ? ct_grad_fn_name(y) : NULL; /* before the backward frees the node */
    int on_kernels = fn && strcmp(fn, "layer_norm") == 0;
    ct_tensor *l = y ? ct_sum(y, 0, NULL, 0) : NULL;
    ct_status s = l ? ct_backward(l) : ct_last_status();
    int fired = ct__fault_alloc_fired() > 0;
    ct__fault_inject_alloc(0);
    if (fired) {
      if (s != CT_ENOMEM) fail_msg("allocation %lld failed: status %d, %s", (long long)k, s, ct_last_error());
    } else {
      ct_assert_ok(s);
      assert_true(on_kernels);
      assert_non_null(ct_grad(x)), assert_non_null(ct_grad(w)), assert_non_null(ct_grad(b));
    }
    ct_clear_error();
    ct_tensor *all[] = {x, w, b, y, l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    if (!fired) break;
  }
  printf("# %lld allocation points\n", (long long)k - 1);
  assert_true(k > 4);
  free(xv), free(wv);
}

int main(void) {
  COMPOSED_BACKEND_WITHOUT(layer_norm, layer_norm_backward);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_vs_composition),
      cmocka_unit_test(test_composed_cases),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
