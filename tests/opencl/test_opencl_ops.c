/* tests/opencl/test_opencl_ops.c: every row of the op table (tests/ops/op_cases.h) on opencl:0
 * (PoCL in CI), compared with the CPU backend on the same inputs with test_ops_cuda.c's tolerances
 * per dtype, and gradients by finite differences in float64 on the device plus the float32
 * backward against the float64 one.
 *
 * A row whose kernel the OpenCL backend does not have yet fails on the device with CT_EUNSUPPORTED:
 * that row is reported as not implemented (named, with the reason, and counted in the summary line
 * "N rows ran, M not implemented: ..."), never as passed. Any other failure fails the row. Never
 * skips: deps.sh installs PoCL, so the device exists wherever the tests run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "../ops/op_cases.h"
#include "core/internal.h"

static const ct_device DEV = {CT_OPENCL, 0};

typedef struct {
  ct_dtype dt;
  double atol, rtol;
  int required;
} dtype_tol;

static const dtype_tol TOLS[] = {
    {CT_F64, 1e-11, 1e-9, 1},
    {CT_F32, 2e-5, 2e-4, 1},
    {CT_F16, 1e-2, 1e-2, 0},
    {CT_BF16, 4e-2, 4e-2, 0},
};

static int ran, missing;
static char missing_names[4096];

static uint64_t case_seed(const op_case *c) {
  uint64_t seed = 0x5eed;
  for (const char *p = c->name; *p; p++) seed = seed * 131 + (unsigned char)*p;
  return seed;
}

static ct_tensor *run_on(const op_case *c, ct_dtype dt, ct_device dev, uint64_t seed) {
  oc_arr host[5] = {{0}};
  ct_tensor *in[5] = {0};
  ct_tensor *out = NULL;
  if (oc_make_inputs(c, dt, dev, seed, host, in)) out = c->run(in, c);
  for (int k = 0; k < c->n_in; k++) free(host[k].v), ct_tensor_free(in[k]);
  return out;
}

/* 1 when the row ran in dtype t (and matched), 0 when the device lacks its kernel. */
static int check_against_cpu(const op_case *c, const dtype_tol *t, uint64_t seed) {
  char s1[128], s2[128];
  ct_tensor *ref = run_on(c, t->dt, CT_DEVICE_CPU, seed);
  if (!ref) {
    if (!t->required) {
      ct_clear_error();
      return 1;
    }
    fprintf(stderr, "case %s (%s) failed on the CPU: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
    fail();
  }
  ct_tensor *out = run_on(c, t->dt, DEV, seed);
  if (!out && ct_last_status() == CT_EUNSUPPORTED) {
    printf("# %s (%s): not implemented on opencl:0: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
    ct_clear_error();
    ct_tensor_free(ref);
    return 0;
  }
  if (!out) fprintf(stderr, "case %s (%s) failed on opencl:0: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
  ct_assert_nonnull(out);
  assert_true(ct_tensor_device(out).kind == CT_OPENCL);
  int same = ct_tensor_ndim(out) == ct_tensor_ndim(ref);
  for (int d = 0; same && d < ct_tensor_ndim(ref); d++) same = ct_tensor_shape(out)[d] == ct_tensor_shape(ref)[d];
  if (!same) {
    fprintf(stderr, "case %s (%s): shape %s on opencl:0, %s on the CPU\n", c->name, ct_dtype_name(t->dt),
            ct_shape_str(out, s1, sizeof s1), ct_shape_str(ref, s2, sizeof s2));
    fail();
  }
  assert_int_equal(ct_tensor_dtype(out), ct_tensor_dtype(ref));
  assert_int_equal(ct_tensor_dtype(out), oc_output_dtype(c, t->dt));
  if (ct_dtype_is_floating(ct_tensor_dtype(ref))) ct_assert_close(out, ref, t->atol, t->rtol);
  else ct_assert_close(out, ref, 0, 0);
  ct_tensor_free(out), ct_tensor_free(ref);
  return 1;
}

static void test_case(void **state) {
  const op_case *c = *state;
  uint64_t seed = case_seed(c);
  for (size_t k = 0; k < sizeof TOLS / sizeof TOLS[0]; k++)
    if (!check_against_cpu(c, &TOLS[k], seed + k)) {
      missing++;
      size_t l = strlen(missing_names);
      snprintf(missing_names + l, sizeof missing_names - l, "%s%s", l ? ", " : "", c->name);
      return;
    }
  if (c->grad) oc_check_grad(c, DEV, seed + 100);
  if (c->grad) oc_check_grad_f32(c, DEV, seed + 101, 1e-3, 1e-3);
  ran++;
}

static int summary(void **state) {
  (void)state;
  printf("# opencl:0 op table: %d rows ran, %d not implemented: %s\n", ran, missing, missing ? missing_names : "none");
  return 0;
}

int main(void) {
  setenv("POCL_DEVICES", "pthread pthread", 0); /* before the first OpenCL call: PoCL reads it once */
  if (ct_device_count(CT_OPENCL) == 0) {
    fprintf(stderr, "no OpenCL device: scripts/deps.sh installs PoCL (pocl-opencl-icd); this test must not skip\n");
    return 1;
  }
  struct CMUnitTest *tests = calloc((size_t)OC_NCASES, sizeof *tests);
  if (!tests) return 1;
  for (int i = 0; i < OC_NCASES; i++)
    tests[i] = (struct CMUnitTest){.name = op_cases[i].name, .test_func = test_case, .initial_state = (void *)&op_cases[i]};
  int r = _cmocka_run_group_tests("ops_opencl", tests, (size_t)OC_NCASES, NULL, summary);
  free(tests);
  return r;
}
