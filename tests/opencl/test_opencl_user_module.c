/* tests/opencl/test_opencl_user_module.c: a module the user defines, moved to opencl:0 with
 * ct_module_to (issue 19), against the same module on the CPU. The module is residual_bn_new of
 * tests/support/residual_module.h: user modules two levels deep, a BatchNorm1d with its buffers in
 * the inner one. Before the move its running statistics and num_batches_tracked are set to values
 * that are not the defaults, so that a buffer left behind or reset would show.
 * - Every named tensor (parameters, running_mean, running_var and the int64 num_batches_tracked)
 *   lives on opencl:0 afterwards, under the handles it had, with its dtype and its values.
 * - A forward in training mode gives the CPU's output and updates the running statistics as the
 *   CPU's; num_batches_tracked counts on the device.
 * - One SGD step with momentum (the optimizer made over the moved module) gives the CPU's
 *   parameters and momentum buffers.
 * - A forward in eval mode (normalizing with the running statistics) gives the CPU's.
 * - ct_module_to back to the CPU keeps the handles and the values bit for bit, and the module
 *   runs there.
 * One batch of 8 and one step: PoCL compiles each kernel on its first use, which is most of the
 * time this takes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "residual_module.h"

static const ct_device D0 = {CT_OPENCL, 0};

enum { NT = 11 }; /* residual_bn_new's named tensors */

/* Every named tensor of m lives on dev. */
static void assert_all_on(ct_module *m, ct_device dev) {
  ct_named_tensor nt[NT];
  assert_int_equal(ct_module_named_tensors(m, 1, nt, NT), NT);
  for (int i = 0; i < NT; i++) {
    char d[32];
    if (!ct_device_eq(ct_tensor_device(nt[i].tensor), dev))
      fprintf(stderr, "%s is on %s\n", nt[i].name, ct_device_str(ct_tensor_device(nt[i].tensor), d, sizeof d));
    assert_true(ct_device_eq(ct_tensor_device(nt[i].tensor), dev));
  }
}

/* a's named tensors (any device) against b's, within atol + rtol |b|; their names and dtypes equal. */
static void assert_modules_close(ct_module *a, ct_module *b, double atol, double rtol) {
  ct_named_tensor na[NT], nb[NT];
  assert_int_equal(ct_module_named_tensors(a, 1, na, NT), NT);
  assert_int_equal(ct_module_named_tensors(b, 1, nb, NT), NT);
  for (int i = 0; i < NT; i++) {
    assert_string_equal(na[i].name, nb[i].name);
    assert_int_equal(ct_tensor_dtype(na[i].tensor), ct_tensor_dtype(nb[i].tensor));
    ct_assert_close(na[i].tensor, nb[i].tensor, atol, rtol);
  }
}

static void test_user_module_on_opencl(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(11), g2 = ct_generator_new(11), gx = ct_generator_new(12);
  ct_module *cpu = ct_assert_nonnull(residual_bn_new(CT_DEVICE_CPU, &g));
  ct_module *dev = ct_assert_nonnull(residual_bn_new(CT_DEVICE_CPU, &g2));
  /* running statistics and a count that are not the defaults, the same in both */
  ct_tensor *rm = ct_assert_nonnull(ct_randn(1, (int64_t[]){32}, 0.2, 0.5, CT_F32, CT_DEVICE_CPU, &gx));
  ct_tensor *rv = ct_assert_nonnull(ct_rand(1, (int64_t[]){32}, 0.5, 1.5, CT_F32, CT_DEVICE_CPU, &gx));
  for (int k = 0; k < 2; k++) {
    ct_module *m = k ? dev : cpu;
    ct_assert_ok(ct_copy_(ct_module_tensor(m, "block.bn.running_mean"), rm));
    ct_assert_ok(ct_copy_(ct_module_tensor(m, "block.bn.running_var"), rv));
    ct_assert_ok(ct_fill_(ct_module_tensor(m, "block.bn.num_batches_tracked"), 5));
  }
  ct_tensor_free(rm), ct_tensor_free(rv);

  ct_named_tensor before[NT];
  assert_int_equal(ct_module_named_tensors(dev, 1, before, NT), NT);
  ct_assert_ok(ct_module_to(dev, D0));
  assert_all_on(dev, D0);
  ct_named_tensor after[NT];
  assert_int_equal(ct_module_named_tensors(dev, 1, after, NT), NT);
  for (int i = 0; i < NT; i++) assert_ptr_equal(after[i].tensor, before[i].tensor); /* the handles stay valid */
  assert_int_equal(ct_tensor_dtype(ct_module_tensor(dev, "block.bn.num_batches_tracked")), CT_I64);
  assert_modules_close(dev, cpu, 0, 0); /* the values came along, buffers too */

  /* training mode: batch statistics, running statistics updated in place on the device */
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){8, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, &gx));
  ct_tensor *t = ct_assert_nonnull(ct_randint(1, (int64_t[]){8}, 0, 10, CT_I64, CT_DEVICE_CPU, &gx));
  ct_tensor *xd = ct_assert_nonnull(ct_to(x, D0, 0)), *td = ct_assert_nonnull(ct_to(t, D0, 0));
  ct_optim_opts oo = {.kind = CT_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
  ct_optimizer *oc = ct_assert_nonnull(ct_optimizer_new(cpu, &oo)), *od = ct_assert_nonnull(ct_optimizer_new(dev, &oo));
  ct_scope_begin();
  ct_tensor *yc = ct_assert_nonnull(ct_module_forward(cpu, x)), *yd = ct_assert_nonnull(ct_module_forward(dev, xd));
  assert_true(ct_device_eq(ct_tensor_device(yd), D0));
  ct_assert_close(yd, yc, 1e-5, 1e-5);
  assert_int_equal((int64_t)ct_item(ct_module_tensor(dev, "block.bn.num_batches_tracked")), 6);
  assert_modules_close(dev, cpu, 1e-6, 1e-6); /* the running statistics equal the CPU's; no parameter moved yet */
  /* one step on each */
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_cross_entropy(yc, t, CT_REDUCTION_MEAN, 0))));
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_cross_entropy(yd, td, CT_REDUCTION_MEAN, 0))));
  ct_assert_ok(ct_optimizer_step(oc));
  ct_assert_ok(ct_optimizer_step(od));
  ct_scope_end();
  assert_all_on(dev, D0);
  assert_modules_close(dev, cpu, 1e-5, 1e-5);
  ct_named_tensor sc[8], sd[8];
  assert_int_equal(ct_optimizer_named_state(oc, sc, 8), 8); /* a momentum buffer per parameter */
  assert_int_equal(ct_optimizer_named_state(od, sd, 8), 8);
  for (int i = 0; i < 8; i++) {
    assert_string_equal(sd[i].name, sc[i].name);
    assert_true(ct_device_eq(ct_tensor_device(sd[i].tensor), D0));
    ct_assert_close(sd[i].tensor, sc[i].tensor, 1e-5, 1e-5);
  }
  /* the step changed the parameters: the comparison above compared something */
  ct_generator g3 = ct_generator_new(11);
  ct_module *init = ct_assert_nonnull(residual_bn_new(CT_DEVICE_CPU, &g3));
  double *a = ct_test_values(ct_module_tensor(dev, "block.fc.weight"));
  double *b = ct_test_values(ct_module_tensor(init, "block.fc.weight"));
  double moved = 0;
  for (int j = 0; j < 32 * 32; j++) moved = fmax(moved, fabs(a[j] - b[j]));
  free(a), free(b);
  ct_module_free(init);
  assert_true(moved > 1e-4);

  /* eval mode: the running statistics normalize (the outputs agree), and the batch count stays */
  ct_module_train(cpu, 0), ct_module_train(dev, 0);
  ct_scope_begin();
  yc = ct_assert_nonnull(ct_module_forward(cpu, x)), yd = ct_assert_nonnull(ct_module_forward(dev, xd));
  ct_assert_close(yd, yc, 1e-5, 1e-5);
  assert_int_equal((int64_t)ct_item(ct_module_tensor(dev, "block.bn.num_batches_tracked")), 6);
  ct_scope_end();

  /* and back: the same handles, the device's values bit for bit, a forward on the CPU */
  ct_tensor *was[NT];
  for (int i = 0; i < NT; i++) was[i] = ct_assert_nonnull(ct_to(after[i].tensor, CT_DEVICE_CPU, CT_COPY));
  ct_assert_ok(ct_module_to(dev, CT_DEVICE_CPU));
  assert_all_on(dev, CT_DEVICE_CPU);
  for (int i = 0; i < NT; i++) {
    assert_ptr_equal(ct_module_tensor(dev, after[i].name), after[i].tensor);
    ct_assert_close(after[i].tensor, was[i], 0, 0);
    ct_tensor_free(was[i]);
  }
  ct_scope_begin();
  yc = ct_assert_nonnull(ct_module_forward(cpu, x)), yd = ct_assert_nonnull(ct_module_forward(dev, x));
  assert_true(ct_device_eq(ct_tensor_device(yd), CT_DEVICE_CPU));
  ct_assert_close(yd, yc, 1e-5, 1e-5);
  ct_scope_end();

  ct_optimizer_free(oc), ct_optimizer_free(od);
  ct_tensor_free(x), ct_tensor_free(t), ct_tensor_free(xd), ct_tensor_free(td);
  ct_module_free(cpu), ct_module_free(dev);
}

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_user_module_on_opencl)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
