/* tests/cuda/test_ops_cuda.c: every row of the op table (tests/ops/op_cases.h) on cuda:0, compared
 * with the CPU backend on the same inputs, with a tolerance per dtype (TF32 off, so float32 matmul
 * and convolution round like the CPU's), and gradients by finite differences in float64 on the GPU.
 * Exits 77 (skipped, the reason printed) when cuttle was built without CUDA or no GPU is visible.
 *
 * Tolerances (|gpu - cpu| <= atol + rtol |cpu|): float64 1e-11 / 1e-9 (both sides differ only in the
 * order of sums); float32 2e-5 / 2e-4 (twice what each side is allowed against the float64
 * reference in test_ops_cpu.c); float16 and bfloat16, where both backends support the row, 1e-2 /
 * 1e-2 and 4e-2 / 4e-2 (a few units of the last place of 11- and 8-bit mantissas). Integer and bool
 * outputs (comparisons, argmax, indices) must be equal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "../ops/op_cases.h" /* the one table of op cases (tests/ops) */
#include "core/internal.h"

static const ct_device GPU = {CT_CUDA, 0};

typedef struct {
  ct_dtype dt;
  double atol, rtol;
  int required; /* 0: a row the CPU does not run in this dtype is skipped, not failed */
} dtype_tol;

static const dtype_tol TOLS[] = {
    {CT_F64, 1e-11, 1e-9, 1},
    {CT_F32, 2e-5, 2e-4, 1},
    {CT_F16, 1e-2, 1e-2, 0},
    {CT_BF16, 4e-2, 4e-2, 0},
};

static uint64_t case_seed(const op_case *c) {
  uint64_t seed = 0x5eed;
  for (const char *p = c->name; *p; p++) seed = seed * 131 + (unsigned char)*p;
  return seed;
}

/* Run c on dev with inputs of dtype dt drawn from seed; the output (or NULL), inputs freed. */
static ct_tensor *run_on(const op_case *c, ct_dtype dt, ct_device dev, uint64_t seed) {
  oc_arr host[5] = {{0}};
  ct_tensor *in[5] = {0};
  ct_tensor *out = NULL;
  if (oc_make_inputs(c, dt, dev, seed, host, in)) out = c->run(in, c);
  for (int k = 0; k < c->n_in; k++) free(host[k].v), ct_tensor_free(in[k]);
  return out;
}

static void check_against_cpu(const op_case *c, const dtype_tol *t, uint64_t seed) {
  char s1[128], s2[128];
  ct_tensor *ref = run_on(c, t->dt, CT_DEVICE_CPU, seed);
  if (!ref) {
    if (!t->required) {
      printf("# %s (%s): not run on the CPU either (%s)\n", c->name, ct_dtype_name(t->dt), ct_last_error());
      ct_clear_error();
      return;
    }
    fprintf(stderr, "case %s (%s) failed on the CPU: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
    fail();
  }
  ct_tensor *out = run_on(c, t->dt, GPU, seed);
  if (!out) fprintf(stderr, "case %s (%s) failed on cuda:0: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
  ct_assert_nonnull(out);
  assert_true(ct_tensor_device(out).kind == CT_CUDA);
  int same = ct_tensor_ndim(out) == ct_tensor_ndim(ref);
  for (int d = 0; same && d < ct_tensor_ndim(ref); d++) same = ct_tensor_shape(out)[d] == ct_tensor_shape(ref)[d];
  if (!same) {
    fprintf(stderr, "case %s (%s): shape %s on cuda:0, %s on the CPU\n", c->name, ct_dtype_name(t->dt),
            ct_shape_str(out, s1, sizeof s1), ct_shape_str(ref, s2, sizeof s2));
    fail();
  }
  assert_int_equal(ct_tensor_dtype(out), ct_tensor_dtype(ref));
  assert_int_equal(ct_tensor_dtype(out), oc_output_dtype(c, t->dt));
  if (ct_dtype_is_floating(ct_tensor_dtype(ref))) ct_assert_close(out, ref, t->atol, t->rtol);
  else ct_assert_close(out, ref, 0, 0);
  ct_tensor_free(out), ct_tensor_free(ref);
}

static void test_case(void **state) {
  const op_case *c = *state;
  uint64_t seed = case_seed(c);
  for (size_t k = 0; k < sizeof TOLS / sizeof TOLS[0]; k++) check_against_cpu(c, &TOLS[k], seed + k);
  if (c->grad) oc_check_grad(c, GPU, seed + 100);
  if (c->grad) oc_check_grad_f32(c, GPU, seed + 101, 1e-3, 1e-3);
}

int main(void) {
  int n = ct_device_count(CT_CUDA);
  if (n == 0) {
#ifdef CUTTLE_WITH_CUDA
    printf("# skipped: the CUDA backend is built but no GPU is visible\n");
#else
    printf("# skipped: cuttle was built without the CUDA backend\n");
#endif
    return CT_TEST_SKIP;
  }
  ct_set_allow_tf32(0); /* float32 matmul / convolution in full float32, like the CPU */
  struct CMUnitTest *tests = calloc((size_t)OC_NCASES, sizeof *tests);
  if (!tests) return 1;
  for (int i = 0; i < OC_NCASES; i++)
    tests[i] = (struct CMUnitTest){.name = op_cases[i].name, .test_func = test_case, .initial_state = (void *)&op_cases[i]};
  int r = _cmocka_run_group_tests("ops_cuda", tests, (size_t)OC_NCASES, NULL, NULL);
  free(tests);
  return r;
}
