/* tests/ops/op_device.h: the one harness that runs the op table (op_cases.h) on a device and
 * compares every row with the CPU backend on the same inputs (ggml's test-backend-ops idea), used
 * by tests/cuda/test_ops_cuda.c and tests/opencl/test_opencl_ops.c.
 *
 * Each row runs in each dtype of OD_TOLS on the CPU and on the device from the same seed; the
 * device's output must have the CPU's shape and dtype and be within atol + rtol |cpu| of it
 * (integer and bool outputs equal). Then its gradients are checked by finite differences in
 * float64 on the device, and the float32 backward against the float64 one. A row whose kernel the
 * device's backend lacks fails there with CT_EUNSUPPORTED: it is reported as not implemented
 * (named, and counted in the summary line "N rows ran, M not implemented: ..."), never as passed.
 *
 * Tolerances: float64 1e-11 / 1e-9 (the two sides differ only in the order of sums); float32
 * 2e-5 / 2e-4 (twice what each side is allowed against the float64 reference in test_ops_cpu.c);
 * float16 and bfloat16 8u, absolute and relative, with u = 2^-11 and 2^-8 their unit roundoffs
 * (each side is allowed 4u against the float64 reference in test_ops_cpu.c, for the roundings of
 * ops composed of several half ops). Every row must run in all four dtypes. Their backward, in
 * the half dtype, is checked against the float64 backward on the device within 16u, as on the
 * CPU. */
#ifndef CUTTLE_TEST_OP_DEVICE_H
#define CUTTLE_TEST_OP_DEVICE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "op_cases.h"

typedef struct {
  ct_dtype dt;
  double atol, rtol;
  int required; /* 0: a row the CPU does not run in this dtype is skipped, not failed */
} od_tol;

static const od_tol OD_TOLS[] = {
    {CT_F64, 1e-11, 1e-9, 1},
    {CT_F32, 2e-5, 2e-4, 1},
    {CT_F16, 8.0 / 2048, 8.0 / 2048, 1},
    {CT_BF16, 8.0 / 256, 8.0 / 256, 1},
};

static ct_device od_dev;
static int od_ran, od_missing;
static char od_missing_names[4096];

static uint64_t od_case_seed(const op_case *c) {
  uint64_t seed = 0x5eed;
  for (const char *p = c->name; *p; p++) seed = seed * 131 + (unsigned char)*p;
  return seed;
}

/* Run c on dev with inputs of dtype dt drawn from seed; the output (or NULL), inputs freed. */
static ct_tensor *od_run_on(const op_case *c, ct_dtype dt, ct_device dev, uint64_t seed) {
  oc_arr host[5] = {{0}};
  ct_tensor *in[5] = {0};
  ct_tensor *out = NULL;
  if (oc_make_inputs(c, dt, dev, seed, host, in)) out = c->run(in, c);
  for (int k = 0; k < c->n_in; k++) free(host[k].v), ct_tensor_free(in[k]);
  return out;
}

/* 1 when the row ran in t's dtype on the device and matched the CPU (or the CPU does not run it
 * and t is optional), 0 when the device's backend lacks its kernel. */
static int od_check_against_cpu(const op_case *c, const od_tol *t, uint64_t seed) {
  char s1[128], s2[128], dn[32];
  ct_device_str(od_dev, dn, sizeof dn);
  ct_tensor *ref = od_run_on(c, t->dt, CT_DEVICE_CPU, seed);
  if (!ref) {
    if (!t->required) {
      ct_clear_error();
      return 1;
    }
    fprintf(stderr, "case %s (%s) failed on the CPU: %s\n", c->name, ct_dtype_name(t->dt), ct_last_error());
    fail();
  }
  ct_tensor *out = od_run_on(c, t->dt, od_dev, seed);
  if (!out && ct_last_status() == CT_EUNSUPPORTED) {
    printf("# %s (%s): not implemented on %s: %s\n", c->name, ct_dtype_name(t->dt), dn, ct_last_error());
    ct_clear_error();
    ct_tensor_free(ref);
    return 0;
  }
  if (!out) fprintf(stderr, "case %s (%s) failed on %s: %s\n", c->name, ct_dtype_name(t->dt), dn, ct_last_error());
  ct_assert_nonnull(out);
  assert_true(ct_device_eq(ct_tensor_device(out), od_dev));
  int same = ct_tensor_ndim(out) == ct_tensor_ndim(ref);
  for (int d = 0; same && d < ct_tensor_ndim(ref); d++) same = ct_tensor_shape(out)[d] == ct_tensor_shape(ref)[d];
  if (!same) {
    fprintf(stderr, "case %s (%s): shape %s on %s, %s on the CPU\n", c->name, ct_dtype_name(t->dt),
            ct_shape_str(out, s1, sizeof s1), dn, ct_shape_str(ref, s2, sizeof s2));
    fail();
  }
  assert_int_equal(ct_tensor_dtype(out), ct_tensor_dtype(ref));
  assert_int_equal(ct_tensor_dtype(out), oc_output_dtype(c, t->dt));
  if (ct_dtype_is_floating(ct_tensor_dtype(ref))) ct_assert_close(out, ref, t->atol, t->rtol);
  else ct_assert_close(out, ref, 0, 0);
  ct_tensor_free(out), ct_tensor_free(ref);
  return 1;
}

static void od_test_case(void **state) {
  const op_case *c = *state;
  uint64_t seed = od_case_seed(c);
  for (size_t k = 0; k < sizeof OD_TOLS / sizeof OD_TOLS[0]; k++)
    if (!od_check_against_cpu(c, &OD_TOLS[k], seed + k)) {
      od_missing++;
      size_t l = strlen(od_missing_names);
      snprintf(od_missing_names + l, sizeof od_missing_names - l, "%s%s", l ? ", " : "", c->name);
      return;
    }
  if (c->grad) oc_check_grad(c, od_dev, seed + 100);
  if (c->grad) oc_check_grad_f32(c, od_dev, seed + 101, 1e-3, 1e-3);
  if (c->grad) oc_check_grad_dtype(c, od_dev, seed + 102, CT_F16, 16.0 / 2048, 16.0 / 2048);
  if (c->grad) oc_check_grad_dtype(c, od_dev, seed + 103, CT_BF16, 16.0 / 256, 16.0 / 256);
  od_ran++;
}

static int od_summary(void **state) {
  (void)state;
  char dn[32];
  printf("# %s op table: %d rows ran, %d not implemented: %s\n", ct_device_str(od_dev, dn, sizeof dn), od_ran, od_missing,
         od_missing ? od_missing_names : "none");
  return 0;
}

/* Run every row of the table on dev as the cmocka group `group`; returns the group's status. */
static int od_run_table(ct_device dev, const char *group) {
  od_dev = dev;
  struct CMUnitTest *tests = calloc((size_t)OC_NCASES, sizeof *tests);
  if (!tests) return 1;
  for (int i = 0; i < OC_NCASES; i++)
    tests[i] = (struct CMUnitTest){.name = op_cases[i].name, .test_func = od_test_case, .initial_state = (void *)&op_cases[i]};
  int r = _cmocka_run_group_tests(group, tests, (size_t)OC_NCASES, NULL, od_summary);
  free(tests);
  return r;
}

#endif
