/* tests/optim/test_capturable.c: ct_optim_opts.capturable (torch.optim's capturable=True), the
 * optimizer a replayed graph steps (cuttle/cuda.h). Its count lives on the parameters' device and
 * the fused kernels compute the bias corrections from it, so:
 * - on the CPU, its updates are the ordinary optimizer's bit for bit (the same formula on the same
 *   count), for Adam, AdamW and SGD with momentum (whose first step is read from the count);
 * - on opencl:0 (PoCL in CI), within float32 rounding of the ordinary optimizer's, since the kernel
 *   computes the corrections itself;
 * - ct_optimizer_steps reads the device's count; ct_optimizer_set_steps writes it, and the next
 *   update uses it; the count follows the parameters when the model moves to another device;
 * - a parameter the fused kernel cannot take (float16) fails the step with CT_EUNSUPPORTED and
 *   changes nothing. */
#include "testutil.h"

typedef struct {
  ct_optim_kind kind;
  double weight_decay, momentum;
  int nesterov;
  const char *name;
} recipe;

static const recipe recipes[] = {
    {CT_OPTIM_ADAM, 0, 0, 0, "adam"},
    {CT_OPTIM_ADAM, 0.01, 0, 0, "adam+l2"},
    {CT_OPTIM_ADAMW, 0.05, 0, 0, "adamw"},
    {CT_OPTIM_SGD, 0, 0.9, 0, "sgd+momentum"},
    {CT_OPTIM_SGD, 1e-3, 0.9, 1, "sgd+nesterov"},
};

/* A Linear(6, 5) on dev from a fixed seed, so two of them start equal. */
static ct_module *model(ct_device dev) {
  ct_generator g = ct_generator_new(7);
  return ct_assert_nonnull(ct_linear_new(6, 5, 1, dev, &g));
}

/* Gradients of sum((m(x) - k)^2) for a batch that changes with the step k. */
static void backward(ct_module *m, ct_device dev, int k) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(100 + (uint64_t)k);
  ct_tensor *x = ct_assert_nonnull(ct_randn(2, (int64_t[]){4, 6}, 0, 1, CT_F32, dev, &g));
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
  ct_tensor *d = ct_assert_nonnull(ct_add_scalar(y, -(double)k));
  ct_tensor *l = ct_assert_nonnull(ct_sum(ct_mul(d, d), 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  ct_scope_end();
}

static ct_optimizer *optimizer(ct_module *m, const recipe *r, int capturable) {
  ct_optim_opts o = {.kind = r->kind, .lr = 0.05, .weight_decay = r->weight_decay, .momentum = r->momentum,
                     .nesterov = r->nesterov, .capturable = capturable};
  return ct_assert_nonnull(ct_optimizer_new(m, &o));
}

/* Steps k0 .. k1 - 1 on both models. */
static void steps(ct_module *a, ct_optimizer *oa, ct_module *b, ct_optimizer *ob, ct_device dev, int k0, int k1) {
  for (int k = k0; k < k1; k++) {
    backward(a, dev, k), backward(b, dev, k);
    ct_assert_ok(ct_optimizer_step(oa));
    ct_assert_ok(ct_optimizer_step(ob));
    ct_optimizer_zero_grad(oa), ct_optimizer_zero_grad(ob);
  }
}

static void compare(ct_module *a, ct_module *b, double tol) {
  ct_named_tensor pa[4], pb[4];
  int n = ct_module_named_tensors(a, 0, pa, 4);
  assert_int_equal(n, ct_module_named_tensors(b, 0, pb, 4));
  for (int i = 0; i < n; i++) ct_assert_close(pb[i].tensor, pa[i].tensor, tol, tol);
}

static void run(ct_device dev, double tol) {
  for (size_t r = 0; r < sizeof recipes / sizeof *recipes; r++) {
    ct_module *a = model(dev), *b = model(dev);
    ct_optimizer *oa = optimizer(a, &recipes[r], 0), *ob = optimizer(b, &recipes[r], 1);
    assert_int_equal(ct_optimizer_steps(ob), 0);
    steps(a, oa, b, ob, dev, 0, 6);
    print_message("# %s on %s: 6 steps\n", recipes[r].name, dev.kind == CT_CPU ? "cpu" : "opencl:0");
    compare(a, b, tol);
    assert_int_equal(ct_optimizer_steps(oa), 6);
    assert_int_equal(ct_optimizer_steps(ob), 6); /* read from the device */
    /* a resumed count: both continue from step 40, whose bias corrections differ from step 7's */
    ct_optimizer_set_steps(oa, 40), ct_optimizer_set_steps(ob, 40);
    assert_int_equal(ct_optimizer_steps(ob), 40);
    steps(a, oa, b, ob, dev, 6, 8);
    compare(a, b, tol);
    assert_int_equal(ct_optimizer_steps(ob), 42);
    ct_optimizer_free(oa), ct_optimizer_free(ob);
    ct_module_free(a), ct_module_free(b);
  }
}

static void test_cpu_bit_for_bit(void **state) {
  (void)state;
  run(CT_DEVICE_CPU, 0);
}

static void test_opencl_close(void **state) {
  (void)state;
  ct_device d = {CT_OPENCL, 0};
  if (!ct_device_available(d)) {
    print_message("# no opencl:0 here (cuttle built without OpenCL, or no device); the CPU case ran\n");
    return;
  }
  run(d, 2e-6);
}

/* Made on the CPU, the model moved to opencl:0 before the first step (ct_module_to, as a user
 * does): the count follows the parameters, and the updates are the ordinary optimizer's. */
static void test_count_follows_the_parameters(void **state) {
  (void)state;
  ct_device d = {CT_OPENCL, 0};
  if (!ct_device_available(d)) {
    print_message("# no opencl:0 here; nothing to move to\n");
    return;
  }
  ct_module *a = model(CT_DEVICE_CPU), *b = model(CT_DEVICE_CPU);
  ct_optimizer *oa = optimizer(a, &recipes[0], 0), *ob = optimizer(b, &recipes[0], 1);
  ct_assert_ok(ct_module_to(a, d));
  ct_assert_ok(ct_module_to(b, d));
  steps(a, oa, b, ob, d, 0, 3);
  compare(a, b, 2e-6);
  assert_int_equal(ct_optimizer_steps(ob), 3);
  ct_optimizer_free(oa), ct_optimizer_free(ob);
  ct_module_free(a), ct_module_free(b);
}

/* The count advances only when a step succeeds, and a float16 parameter cannot be updated
 * capturably: the step fails before any parameter changes. */
static ct_tensor *identity(ct_module *self, ct_tensor *x) {
  (void)self;
  return x;
}

static void test_unfusable_parameter_fails_cleanly(void **state) {
  (void)state;
  ct_module *m = ct_assert_nonnull(ct_module_new("half", identity, NULL, NULL));
  ct_tensor *w = ct_assert_nonnull(ct_full(1, (int64_t[]){3}, 1.5, CT_F16, CT_DEVICE_CPU));
  ct_assert_ok(ct_module_register_parameter(m, "w", w));
  ct_scope_begin();
  ct_assert_ok(ct_backward(ct_sum(ct_cast(w, CT_F32), 0, NULL, 0))); /* a float16 gradient of ones */
  ct_scope_end();
  assert_non_null(ct_grad(w));
  ct_optim_opts o = {.kind = CT_OPTIM_ADAM, .capturable = 1};
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &o));
  assert_int_equal(ct_optimizer_step(opt), CT_EUNSUPPORTED);
  ct_assert_error_contains("capturable needs the fused update");
  assert_int_equal(ct_optimizer_steps(opt), 0);
  double v[3];
  ct_assert_ok(ct_to_host(w, v, sizeof v, CT_F64));
  assert_true(v[0] == 1.5 && v[1] == 1.5 && v[2] == 1.5);
  ct_optimizer_free(opt);
  ct_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_bit_for_bit),
      cmocka_unit_test(test_opencl_close),
      cmocka_unit_test(test_count_follows_the_parameters),
      cmocka_unit_test(test_unfusable_parameter_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
