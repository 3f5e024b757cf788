/* tests/opencl/test_opencl_device.c: the OpenCL device on PoCL (two devices: POCL_DEVICES is set
 * before the first OpenCL call): enumeration, names and properties, device choice, copies between
 * the host and opencl:0 and between opencl:0 and opencl:1 with their ledger counts, the caching
 * allocator's figures and an out-of-memory request the process survives, a module moved to the
 * device and back, and a few steps of mlp training matching the CPU's losses. Never skips: deps.sh
 * installs PoCL, so the devices exist wherever the tests run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static const ct_device D0 = {CT_OPENCL, 0}, D1 = {CT_OPENCL, 1};

static void test_enumeration_and_props(void **state) {
  (void)state;
  assert_true(ct_device_count(CT_OPENCL) >= 2);
  ct_device d;
  char buf[32];
  ct_assert_ok(ct_device_parse("opencl:1", &d));
  assert_int_equal(d.kind, CT_OPENCL);
  assert_int_equal(d.index, 1);
  assert_string_equal(ct_device_str(d, buf, sizeof buf), "opencl:1");
  ct_assert_ok(ct_device_parse("opencl", &d));
  assert_true(ct_device_eq(d, D0));
  ct_assert_ok(ct_device_parse("gpu:2", &d));
  assert_true(ct_device_eq(d, CT_DEVICE_CUDA(2)));
  assert_int_equal(ct_device_parse("opencl:x", &d), CT_EINVAL);
  ct_assert_error_contains("\"opencl:N\"");
  ct_device_props p;
  ct_assert_ok(ct_device_props_get(D0, &p));
  assert_true(strlen(p.name) > 0);
  assert_true(strlen(p.vendor) > 0);
  assert_true(strlen(p.driver_version) > 0);
  assert_int_equal(p.device_type, CT_DEVICE_TYPE_CPU); /* PoCL's pthread device */
  assert_true(p.cores >= 1);
  assert_true(p.total_memory > 0 && p.max_alloc > 0 && p.max_alloc <= p.total_memory);
  assert_int_equal(p.fp64, 1);
  assert_int_equal(ct_device_props_get(CT_DEVICE_OPENCL(99), &p), CT_EDEVICE);
  ct_assert_error_contains("opencl:99");
  /* a CPU-type OpenCL device is used only when named: the choice still falls back to the CPU */
  assert_true(ct_device_eq(ct_try_gpu(0), CT_DEVICE_CPU));
  ct_device all[4];
  assert_int_equal(ct_try_all_gpus(all, 4), 1);
  assert_true(ct_device_eq(all[0], CT_DEVICE_CPU));
}

static void fill_values(float *v, int n, float scale) {
  for (int i = 0; i < n; i++) v[i] = scale * (float)(i % 17) - 3.5f + 0.25f * (float)i;
}

static void test_copies_and_ledger(void **state) {
  (void)state;
  enum { N = 1000 };
  float h[N], back[N];
  fill_values(h, N, 1.0f);
  int64_t shape[2] = {40, 25};
  ct_tensor *x = ct_assert_nonnull(ct_from_host(h, 2, shape, CT_F32, CT_DEVICE_CPU));
  ct_ledger_reset();
  ct_tensor *d = ct_assert_nonnull(ct_to(x, D0, 0));
  assert_int_equal(ct_tensor_device(d).kind, CT_OPENCL);
  assert_null(ct_tensor_data(d)); /* device memory is never handed out as a host pointer */
  ct_tensor *b = ct_assert_nonnull(ct_to(d, CT_DEVICE_CPU, 0));
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.h2d_bytes, N * 4);
  assert_int_equal(l.d2h_copies, 1);
  assert_int_equal(l.d2h_bytes, N * 4);
  ct_assert_ok(ct_to_host(b, back, sizeof back, CT_F32));
  assert_memory_equal(h, back, sizeof h);
  /* a strided view on the device: the transpose comes back in the transposed order */
  ct_tensor *t = ct_assert_nonnull(ct_transpose(d, 0, 1));
  ct_tensor *tc = ct_assert_nonnull(ct_contiguous(t));
  ct_assert_ok(ct_to_host(tc, back, sizeof back, CT_F32));
  for (int i = 0; i < 25; i++)
    for (int j = 0; j < 40; j++) assert_true(back[i * 40 + j] == h[j * 25 + i]);
  /* between the two PoCL devices: staged through the host, two copies in the ledger */
  ct_ledger_reset();
  ct_tensor *d1 = ct_assert_nonnull(ct_to(d, D1, 0));
  assert_true(ct_device_eq(ct_tensor_device(d1), D1));
  l = ct_ledger_get();
  assert_int_equal(l.d2h_copies, 1);
  assert_int_equal(l.h2d_copies, 1);
  assert_int_equal(l.h2d_bytes, N * 4);
  ct_tensor *d10 = ct_assert_nonnull(ct_to(d1, D0, 0));
  ct_tensor *diff = ct_assert_nonnull(ct_sub(d10, d));
  ct_tensor *ad = ct_assert_nonnull(ct_abs(diff));
  ct_tensor *s = ct_assert_nonnull(ct_sum(ad, 0, NULL, 0));
  assert_true(ct_item(s) == 0.0);
  /* ops on one device, results read on the other */
  ct_tensor *y1 = ct_assert_nonnull(ct_mul(d1, d1));
  ct_assert_ok(ct_to_host(y1, back, sizeof back, CT_F32));
  for (int i = 0; i < N; i++) assert_true(back[i] == h[i] * h[i]);
  /* mixing devices in one op is an error naming both */
  assert_null(ct_add(d, d1));
  ct_assert_error_contains("opencl:1");
  ct_assert_ok(ct_synchronize(D0));
  ct_assert_ok(ct_synchronize(D1));
  ct_tensor *all[] = {x, d, b, t, tc, d1, d10, diff, ad, s, y1};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_allocator_and_oom(void **state) {
  (void)state;
  ct_memory_stats before, st;
  ct_assert_ok(ct_empty_cache(D0));
  ct_assert_ok(ct_memory_stats_get(D0, &before));
  int64_t shape[1] = {1 << 18}; /* 1 MiB of float32 */
  ct_tensor *a = ct_assert_nonnull(ct_zeros(1, shape, CT_F32, D0));
  ct_assert_ok(ct_memory_stats_get(D0, &st));
  assert_true(st.allocated >= before.allocated + ((size_t)1 << 20));
  assert_true(st.reserved >= st.allocated);
  assert_true(st.peak_allocated >= st.allocated);
  uint64_t mallocs = st.num_device_mallocs;
  ct_tensor_free(a);
  ct_assert_ok(ct_memory_stats_get(D0, &st));
  assert_int_equal(st.allocated, before.allocated);
  assert_true(st.reserved >= before.reserved + ((size_t)1 << 20)); /* cached, not returned */
  a = ct_assert_nonnull(ct_zeros(1, shape, CT_F32, D0)); /* served from the cache */
  ct_assert_ok(ct_memory_stats_get(D0, &st));
  assert_int_equal(st.num_device_mallocs, mallocs);
  ct_tensor_free(a);
  ct_assert_ok(ct_empty_cache(D0));
  ct_assert_ok(ct_memory_stats_get(D0, &st));
  assert_int_equal(st.reserved, before.reserved);
  ct_assert_ok(ct_reset_peak_memory_stats(D0));
  ct_assert_ok(ct_memory_stats_get(D0, &st));
  assert_int_equal(st.peak_allocated, st.allocated);
  /* more than one buffer may hold: CT_ENOMEM with the figures, and the device still works */
  ct_device_props p;
  ct_assert_ok(ct_device_props_get(D0, &p));
  int64_t huge[1] = {(int64_t)(p.max_alloc / 4) + 1};
  assert_null(ct_empty(1, huge, CT_F32, D0));
  assert_int_equal(ct_last_status(), CT_ENOMEM);
  ct_assert_error_contains("opencl:0");
  ct_assert_error_contains("per buffer");
  ct_tensor *ok = ct_assert_nonnull(ct_full(1, shape, 2.0, CT_F32, D0));
  ct_tensor *sum = ct_assert_nonnull(ct_sum(ok, 0, NULL, 0));
  assert_true(ct_item(sum) == 2.0 * (1 << 18));
  ct_tensor_free(sum), ct_tensor_free(ok);
}

static void test_module_round_trip(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_linear_new(5, 3, 1, CT_DEVICE_CPU, &g));
  ct_named_tensor before[2], after[2];
  assert_int_equal(ct_module_named_tensors(m, 1, before, 2), 2);
  double *w0 = ct_test_values(before[0].tensor), *b0 = ct_test_values(before[1].tensor);
  ct_assert_ok(ct_module_to(m, D0));
  assert_int_equal(ct_module_named_tensors(m, 1, after, 2), 2);
  assert_int_equal(ct_tensor_device(after[0].tensor).kind, CT_OPENCL);
  float xv[10];
  fill_values(xv, 10, 0.1f);
  ct_tensor *xh = ct_assert_nonnull(ct_from_host(xv, 2, (int64_t[]){2, 5}, CT_F32, CT_DEVICE_CPU));
  ct_tensor *xd = ct_assert_nonnull(ct_to(xh, D0, 0));
  ct_tensor *yd = ct_assert_nonnull(ct_module_forward(m, xd));
  assert_int_equal(ct_tensor_device(yd).kind, CT_OPENCL);
  ct_assert_ok(ct_module_to(m, CT_DEVICE_CPU));
  ct_tensor *yh = ct_assert_nonnull(ct_module_forward(m, xh));
  ct_tensor *yd_h = ct_assert_nonnull(ct_to(yd, CT_DEVICE_CPU, 0));
  ct_assert_close(yd_h, yh, 1e-6, 1e-5);
  assert_int_equal(ct_module_named_tensors(m, 1, after, 2), 2);
  double *w1 = ct_test_values(after[0].tensor), *b1 = ct_test_values(after[1].tensor);
  assert_memory_equal(w0, w1, 15 * sizeof *w0);
  assert_memory_equal(b0, b1, 3 * sizeof *b0);
  free(w0), free(b0), free(w1), free(b1);
  ct_tensor_free(xh), ct_tensor_free(xd), ct_tensor_free(yd), ct_tensor_free(yh), ct_tensor_free(yd_h);
  ct_module_free(m);
}

/* Losses of `steps` Adam steps of the mlp on dev from seed 3, on a fixed random batch. */
static void mlp_losses(ct_device dev, int steps, double *loss) {
  ct_generator g = ct_generator_new(3), gd = ct_generator_new(11);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", dev, &g));
  ct_optimizer *o = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3}));
  int64_t xs[4] = {16, 1, 28, 28}, ts[1] = {16};
  ct_tensor *x = ct_assert_nonnull(ct_rand(4, xs, 0, 1, CT_F32, dev, &gd));
  ct_tensor *t = ct_assert_nonnull(ct_randint(1, ts, 0, 10, CT_I64, dev, &gd));
  for (int i = 0; i < steps; i++) {
    ct_optimizer_zero_grad(o);
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    ct_tensor *l = ct_assert_nonnull(ct_cross_entropy(y, t, CT_REDUCTION_MEAN, 0));
    ct_assert_ok(ct_backward(l));
    ct_assert_ok(ct_optimizer_step(o));
    loss[i] = ct_item(l);
    ct_tensor_free(l), ct_tensor_free(y);
  }
  ct_tensor_free(x), ct_tensor_free(t);
  ct_optimizer_free(o);
  ct_module_free(m);
}

static void test_mlp_training_matches_cpu(void **state) {
  (void)state;
  double lc[5], ld[5];
  mlp_losses(CT_DEVICE_CPU, 5, lc);
  mlp_losses(D0, 5, ld);
  for (int i = 0; i < 5; i++) {
    printf("# step %d: loss cpu %.7f opencl:0 %.7f\n", i, lc[i], ld[i]);
    assert_true(isfinite(ld[i]));
    assert_true(fabs(ld[i] - lc[i]) <= 1e-4 * (1 + fabs(lc[i])));
  }
  assert_true(ld[4] < ld[0]); /* it learns */
}

/* Philox gives the CPU's numbers for the same seed on the device: uniform and randint bit for bit,
 * normal within float rounding (Box-Muller's log and cos may round differently in OpenCL C), in
 * float32 and float64, and dropout in training keeps the same elements. */
static void test_random_matches_cpu(void **state) {
  (void)state;
  const ct_device dev = CT_DEVICE_OPENCL(0);
  int64_t shape[] = {37, 29}; /* not a multiple of 4: the last Philox block is partial */
  for (int k = 0; k < 2; k++) {
    ct_dtype dt = k ? CT_F64 : CT_F32;
    ct_generator gc = ct_generator_new(42), gd = ct_generator_new(42);
    ct_tensor *uc = ct_assert_nonnull(ct_rand(2, shape, -1, 3, dt, CT_DEVICE_CPU, &gc));
    ct_tensor *ud = ct_assert_nonnull(ct_rand(2, shape, -1, 3, dt, dev, &gd));
    ct_tensor *nc = ct_assert_nonnull(ct_randn(2, shape, 0.5, 2, dt, CT_DEVICE_CPU, &gc));
    ct_tensor *nd = ct_assert_nonnull(ct_randn(2, shape, 0.5, 2, dt, dev, &gd));
    ct_tensor *ic = ct_assert_nonnull(ct_randint(2, shape, -5, 1000, CT_I64, CT_DEVICE_CPU, &gc));
    ct_tensor *id = ct_assert_nonnull(ct_randint(2, shape, -5, 1000, CT_I64, dev, &gd));
    ct_tensor *x = ct_assert_nonnull(ct_ones(2, shape, dt, CT_DEVICE_CPU));
    ct_tensor *xd = ct_assert_nonnull(ct_to(x, dev, 0));
    ct_tensor *dc = ct_assert_nonnull(ct_dropout(x, 0.3, 1, &gc));
    ct_tensor *dd = ct_assert_nonnull(ct_dropout(xd, 0.3, 1, &gd));
    ct_assert_close(ud, uc, 0, 0);
    ct_assert_close(nd, nc, k ? 1e-12 : 1e-5, k ? 1e-12 : 1e-5);
    ct_assert_close(id, ic, 0, 0);
    ct_assert_close(dd, dc, 0, 0);
    ct_tensor *all[] = {uc, ud, nc, nd, ic, id, x, xd, dc, dd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
  }
}

int main(void) {
  if (!ct_test_require_opencl(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enumeration_and_props), cmocka_unit_test(test_copies_and_ledger),
      cmocka_unit_test(test_allocator_and_oom),     cmocka_unit_test(test_module_round_trip),
      cmocka_unit_test(test_mlp_training_matches_cpu), cmocka_unit_test(test_random_matches_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
