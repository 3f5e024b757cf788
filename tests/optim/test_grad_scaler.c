/* tests/optim/test_grad_scaler.c: the GradScaler (src/optim/grad_scaler.c) against the algorithm of
 * torch.amp.GradScaler and torch's _amp_update_scale_.
 *
 * - A scripted run of 12 iterations on a Linear(3, 2) with SGD (lr 0.5), init_scale 8 and
 *   growth_interval 3, whose loss sum(W * CW) + sum(b * Cb) makes the unscaled gradients exactly CW
 *   and Cb. At chosen iterations one gradient holds inf, -inf or NaN. Each iteration checks the skip
 *   decision, the scale and growth tracker after update against a table worked out by hand, the
 *   gradients after unscale_ (exactly CW and Cb), and the parameters: unchanged on a skipped step,
 *   p - 0.5 C otherwise. The same run on cpu and on opencl:0 (PoCL), where it also checks with the
 *   ledger that unscale_ makes no synchronization and a step exactly one.
 * - PyTorch's defaults; the disabled scaler; the errors PyTorch raises (unscale_ twice, unscale_
 *   after step, step twice, update with nothing recorded); NULL and bad options; state get/set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"

static const ct_device D0 = {CT_OPENCL, 0};

enum { ITERS = 12 };

/* What goes wrong at each iteration: 0 nothing, 1 +inf in CW, 2 -inf in Cb, 3 NaN in CW. */
static const int poison[ITERS] = {0, 0, 0, 1, 0, 0, 0, 0, 3, 2, 0, 0};
/* The scale and growth tracker after each update, by hand from _amp_update_scale_ with init_scale 8,
 * growth_interval 3, growth_factor 2 and backoff_factor 0.5. */
static const double want_scale[ITERS] = {8, 8, 16, 8, 8, 8, 16, 16, 8, 4, 4, 4};
static const int64_t want_tracker[ITERS] = {1, 2, 0, 0, 1, 2, 0, 1, 0, 0, 1, 2};

/* a and b hold the same state (field by field: the struct has padding). */
static void assert_state_equal(const ct_grad_scaler_state *a, const ct_grad_scaler_state *b) {
  assert_true(a->scale == b->scale);
  assert_true(a->growth_factor == b->growth_factor);
  assert_true(a->backoff_factor == b->backoff_factor);
  assert_int_equal(a->growth_interval, b->growth_interval);
  assert_int_equal(a->growth_tracker, b->growth_tracker);
  assert_int_equal(a->steps_taken, b->steps_taken);
  assert_int_equal(a->steps_skipped, b->steps_skipped);
  assert_int_equal(a->last_step_skipped, b->last_step_skipped);
}

/* The host values of t as floats (6 at most). */
static void host_values(ct_tensor *t, float *out, int n) {
  double *v = ct_test_values(t);
  assert_non_null(v);
  for (int i = 0; i < n; i++) out[i] = (float)v[i];
  free(v);
}

static void scripted_run(ct_device dev) {
  ct_generator gen = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_linear_new(3, 2, 1, dev, &gen));
  ct_named_tensor p[2];
  assert_int_equal(ct_module_named_tensors(m, 0, p, 2), 2);
  ct_tensor *W = strcmp(p[0].name, "weight") == 0 ? p[0].tensor : p[1].tensor;
  ct_tensor *b = W == p[0].tensor ? p[1].tensor : p[0].tensor;
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.5}));
  ct_grad_scaler *gs =
      ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = 8, .growth_interval = 3}));
  int64_t taken = 0, skipped = 0;
  for (int it = 0; it < ITERS; it++) {
    float cw[6] = {0.25f, -1.5f, 2.0f, 0.75f, -0.5f, 3.0f}, cb[2] = {-1.25f, 0.5f};
    cw[0] += (float)it, cb[1] -= 0.25f * (float)it;
    if (poison[it] == 1) cw[4] = INFINITY;
    if (poison[it] == 2) cb[1] = -INFINITY;
    if (poison[it] == 3) cw[2] = NAN;
    ct_tensor *CW = ct_assert_nonnull(ct_from_host(cw, 2, (int64_t[]){2, 3}, CT_F32, dev));
    ct_tensor *Cb = ct_assert_nonnull(ct_from_host(cb, 1, (int64_t[]){2}, CT_F32, dev));
    float w0[6], b0[2], w1[6], b1[2];
    host_values(W, w0, 6), host_values(b, b0, 2);

    ct_optimizer_zero_grad(opt);
    ct_tensor *wc = ct_mul(W, CW), *bc = ct_mul(b, Cb), *sw = ct_sum(wc, 0, NULL, 0), *sb = ct_sum(bc, 0, NULL, 0);
    ct_tensor *loss = ct_assert_nonnull(ct_add(sw, sb));
    ct_tensor *scaled = ct_assert_nonnull(ct_grad_scaler_scale(gs, loss));
    assert_true(ct_device_eq(ct_tensor_device(scaled), dev));
    ct_assert_ok(ct_backward(scaled));

    /* Even iterations call unscale_ first (as before clipping), odd ones leave it to step. */
    ct_ledger_reset();
    if (it % 2 == 0) {
      ct_assert_ok(ct_grad_scaler_unscale_(gs, opt));
      assert_int_equal(ct_ledger_get().syncs, 0);
      float gw[6], gb[2];
      host_values(ct_grad(W), gw, 6), host_values(ct_grad(b), gb, 2);
      for (int i = 0; i < 6; i++)
        if (isnan(cw[i])) assert_true(isnan(gw[i]));
        else assert_true(gw[i] == cw[i]);
      for (int i = 0; i < 2; i++) assert_true(gb[i] == cb[i]);
      ct_ledger_reset();
    }
    int stepped = ct_grad_scaler_step(gs, opt);
    assert_int_equal(stepped, poison[it] == 0);
    if (dev.kind == CT_OPENCL) assert_int_equal(ct_ledger_get().syncs, 1);
    ct_assert_ok(ct_grad_scaler_update(gs));
    if (dev.kind == CT_OPENCL) assert_int_equal(ct_ledger_get().syncs, 1);

    taken += stepped, skipped += !stepped;
    assert_int_equal(ct_grad_scaler_last_step_skipped(gs), !stepped);
    assert_int_equal(ct_grad_scaler_steps_taken(gs), taken);
    assert_int_equal(ct_grad_scaler_steps_skipped(gs), skipped);
    assert_true(ct_grad_scaler_scale_value(gs) == want_scale[it]);
    ct_grad_scaler_state st;
    ct_assert_ok(ct_grad_scaler_state_get(gs, &st));
    assert_int_equal(st.growth_tracker, want_tracker[it]);

    host_values(W, w1, 6), host_values(b, b1, 2);
    for (int i = 0; i < 6; i++) assert_true(w1[i] == (stepped ? w0[i] - 0.5f * cw[i] : w0[i]));
    for (int i = 0; i < 2; i++) assert_true(b1[i] == (stepped ? b0[i] - 0.5f * cb[i] : b0[i]));
    ct_tensor *ts[] = {CW, Cb, wc, bc, sw, sb, loss, scaled};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) ct_tensor_free(ts[k]);
  }
  assert_int_equal(taken, 9);
  assert_int_equal(skipped, 3);
  ct_grad_scaler_free(gs);
  ct_optimizer_free(opt);
  ct_module_free(m);
}

static void test_scripted_cpu(void **state) {
  (void)state;
  scripted_run(CT_DEVICE_CPU);
}

static void test_scripted_opencl(void **state) {
  (void)state;
  scripted_run(D0);
}

/* A Linear(2, 1) on the CPU whose gradients come from a backward of scale(sum(W) + sum(b)), so
 * every gradient is the scale. */
static void backward_once(ct_grad_scaler *gs, ct_module *m) {
  ct_named_tensor p[2];
  assert_int_equal(ct_module_named_tensors(m, 0, p, 2), 2);
  ct_tensor *a = ct_sum(p[0].tensor, 0, NULL, 0), *c = ct_sum(p[1].tensor, 0, NULL, 0), *l = ct_add(a, c);
  ct_tensor *s = ct_assert_nonnull(ct_grad_scaler_scale(gs, l));
  ct_assert_ok(ct_backward(s));
  ct_tensor_free(a), ct_tensor_free(c), ct_tensor_free(l), ct_tensor_free(s);
}

static void test_defaults_are_pytorchs(void **state) {
  (void)state;
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){0}));
  ct_grad_scaler_state st;
  ct_assert_ok(ct_grad_scaler_state_get(gs, &st));
  assert_true(st.scale == 65536.0);
  assert_true(ct_grad_scaler_scale_value(gs) == 65536.0);
  assert_true(st.growth_factor == 2.0);
  assert_true(st.backoff_factor == 0.5);
  assert_int_equal(st.growth_interval, 2000);
  assert_int_equal(st.growth_tracker, 0);
  assert_int_equal(ct_grad_scaler_steps_taken(gs), 0);
  assert_int_equal(ct_grad_scaler_steps_skipped(gs), 0);
  assert_int_equal(ct_grad_scaler_last_step_skipped(gs), 0);
  ct_tensor *x = ct_scalar(1.5, CT_F32, CT_DEVICE_CPU), *y = ct_assert_nonnull(ct_grad_scaler_scale(gs, x));
  assert_true(ct_item(y) == 1.5 * 65536.0);
  ct_tensor_free(x), ct_tensor_free(y);
  ct_grad_scaler_free(gs);
}

static void test_misuse_is_an_error(void **state) {
  (void)state;
  ct_generator gen = ct_generator_new(1);
  ct_module *m = ct_assert_nonnull(ct_linear_new(2, 1, 1, CT_DEVICE_CPU, &gen));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD}));
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = 4}));
  assert_int_equal(ct_grad_scaler_update(gs), CT_EINVAL); /* nothing recorded */
  ct_assert_error_contains("no inf checks");
  backward_once(gs, m);
  ct_assert_ok(ct_grad_scaler_unscale_(gs, opt));
  /* The gradients are unscaled once, not twice: d(sum)/dp is 1. */
  ct_named_tensor p[2];
  ct_module_named_tensors(m, 0, p, 2);
  assert_true(ct_item(ct_grad(p[1].tensor)) == 1.0);
  assert_int_equal(ct_grad_scaler_unscale_(gs, opt), CT_EINVAL);
  ct_assert_error_contains("already been called");
  assert_int_equal(ct_grad_scaler_step(gs, opt), 1);
  assert_true(ct_item(ct_grad(p[1].tensor)) == 1.0);
  assert_int_equal(ct_grad_scaler_step(gs, opt), CT_EINVAL);
  ct_assert_error_contains("already been called");
  assert_int_equal(ct_grad_scaler_unscale_(gs, opt), CT_EINVAL);
  ct_assert_error_contains("after step");
  ct_assert_ok(ct_grad_scaler_update(gs));
  assert_int_equal(ct_optimizer_steps(opt), 1);
  ct_grad_scaler_free(gs);
  ct_optimizer_free(opt);
  ct_module_free(m);
}

static void test_disabled_passes_through(void **state) {
  (void)state;
  ct_generator gen = ct_generator_new(1);
  ct_module *m = ct_assert_nonnull(ct_linear_new(2, 1, 1, CT_DEVICE_CPU, &gen));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD}));
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.disabled = 1}));
  assert_true(ct_grad_scaler_scale_value(gs) == 1.0);
  backward_once(gs, m);
  ct_named_tensor p[2];
  ct_module_named_tensors(m, 0, p, 2);
  assert_true(ct_item(ct_grad(p[1].tensor)) == 1.0);
  ct_assert_ok(ct_grad_scaler_unscale_(gs, opt));
  assert_true(ct_item(ct_grad(p[1].tensor)) == 1.0);
  assert_int_equal(ct_grad_scaler_step(gs, opt), 1);
  ct_assert_ok(ct_grad_scaler_update(gs));
  assert_true(ct_grad_scaler_scale_value(gs) == 1.0);
  assert_int_equal(ct_optimizer_steps(opt), 1);
  ct_grad_scaler_free(gs);
  ct_optimizer_free(opt);
  ct_module_free(m);
}

static void test_bad_options_and_state(void **state) {
  (void)state;
  assert_null(ct_grad_scaler_new(NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  const ct_grad_scaler_opts bad[] = {{.init_scale = -1}, {.init_scale = INFINITY}, {.init_scale = NAN},
                                     {.growth_factor = 1.0}, {.growth_factor = 0.5}, {.backoff_factor = 1.0},
                                     {.backoff_factor = -0.5}, {.growth_interval = -3}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ct_clear_error();
    assert_null(ct_grad_scaler_new(&bad[i]));
    assert_int_equal(ct_last_status(), CT_EINVAL);
  }
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){0}));
  ct_grad_scaler_state st = {.scale = 1024, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 10,
                             .growth_tracker = 7, .steps_taken = 100, .steps_skipped = 5, .last_step_skipped = 1};
  ct_assert_ok(ct_grad_scaler_state_set(gs, &st));
  ct_grad_scaler_state back;
  ct_assert_ok(ct_grad_scaler_state_get(gs, &back));
  assert_state_equal(&st, &back);
  assert_true(ct_grad_scaler_scale_value(gs) == 1024);
  assert_int_equal(ct_grad_scaler_steps_taken(gs), 100);
  assert_int_equal(ct_grad_scaler_steps_skipped(gs), 5);
  assert_int_equal(ct_grad_scaler_last_step_skipped(gs), 1);
  ct_grad_scaler_state wrong = st;
  wrong.scale = 0;
  assert_int_equal(ct_grad_scaler_state_set(gs, &wrong), CT_EINVAL);
  wrong = st, wrong.growth_tracker = -1;
  assert_int_equal(ct_grad_scaler_state_set(gs, &wrong), CT_EINVAL);
  ct_assert_ok(ct_grad_scaler_state_get(gs, &back));
  assert_state_equal(&st, &back); /* unchanged by the failed sets */
  ct_grad_scaler_free(gs);
}

/* A strided gradient (a transposed view) takes the composed path of unscale_ (sum(g * 0) is NaN
 * exactly when g holds an inf or NaN) instead of the backend's fused kernel; the path of 16-bit
 * gradients too. */
static void test_composed_path_for_strided_gradients(void **state) {
  (void)state;
  ct_generator gen = ct_generator_new(2);
  ct_module *m = ct_assert_nonnull(ct_linear_new(3, 2, 0, CT_DEVICE_CPU, &gen));
  ct_named_tensor p[1];
  assert_int_equal(ct_module_named_tensors(m, 0, p, 1), 1);
  ct_tensor *W = p[0].tensor;
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.5}));
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = 16}));
  const float bad[3] = {0, INFINITY, NAN};
  for (int k = 0; k < 3; k++) {
    /* gT (3, 2) holds scale * c; W's gradient is its (2, 3) transpose, not contiguous. */
    float c[6] = {0.5f, -1.0f, 2.25f, 4.0f, -0.75f, 1.5f}, gT[6];
    c[3] = k ? bad[k] : c[3];
    for (int i = 0; i < 6; i++) gT[i] = (float)ct_grad_scaler_scale_value(gs) * c[i];
    ct_tensor *t = ct_assert_nonnull(ct_from_host(gT, 2, (int64_t[]){3, 2}, CT_F32, CT_DEVICE_CPU));
    ct_optimizer_zero_grad(opt);
    W->grad = ct_assert_nonnull(ct_transpose(t, 0, 1));
    ct__untrack(W->grad);
    assert_false(ct_tensor_is_contiguous(W->grad));
    ct_tensor_free(t);
    ct_assert_ok(ct_grad_scaler_unscale_(gs, opt));
    double *g = ct_test_values(W->grad);
    for (int r = 0; r < 2; r++)
      for (int q = 0; q < 3; q++) {
        float want = c[q * 2 + r];
        if (isnan(want)) assert_true(isnan(g[r * 3 + q]));
        else assert_true(g[r * 3 + q] == want);
      }
    free(g);
    assert_int_equal(ct_grad_scaler_step(gs, opt), k == 0);
    ct_assert_ok(ct_grad_scaler_update(gs));
  }
  assert_true(ct_grad_scaler_scale_value(gs) == 4.0); /* 16, then two backoffs */
  assert_int_equal(ct_grad_scaler_steps_skipped(gs), 2);
  ct_grad_scaler_free(gs);
  ct_optimizer_free(opt);
  ct_module_free(m);
}

/* The scaler's state goes into a checkpoint's metadata and comes back exactly. */
static void test_checkpoint_round_trip(void **state) {
  (void)state;
  ct_generator gen = ct_generator_new(4);
  ct_module *m = ct_assert_nonnull(ct_linear_new(2, 2, 1, CT_DEVICE_CPU, &gen));
  ct_grad_scaler *gs = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){.growth_interval = 7}));
  ct_grad_scaler_state st = {.scale = 1024, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 7,
                             .growth_tracker = 5, .steps_taken = 40, .steps_skipped = 3, .last_step_skipped = 1};
  ct_assert_ok(ct_grad_scaler_state_set(gs, &st));
  ct_checkpoint_meta meta = {.epoch = 2, .has_grad_scaler = 1};
  ct_assert_ok(ct_grad_scaler_state_get(gs, &meta.grad_scaler));
  char *dir = ct_test_tmpdir(), path[4200];
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  ct_assert_ok(ct_checkpoint_save(path, m, NULL, &meta));
  ct_checkpoint_meta back;
  ct_assert_ok(ct_checkpoint_load(path, m, NULL, &back));
  assert_int_equal(back.has_grad_scaler, 1);
  ct_grad_scaler *gs2 = ct_assert_nonnull(ct_grad_scaler_new(&(ct_grad_scaler_opts){0}));
  ct_assert_ok(ct_grad_scaler_state_set(gs2, &back.grad_scaler));
  ct_grad_scaler_state got;
  ct_assert_ok(ct_grad_scaler_state_get(gs2, &got));
  assert_state_equal(&got, &st);
  /* A checkpoint saved without a scaler loads with has_grad_scaler 0. */
  ct_assert_ok(ct_checkpoint_save(path, m, NULL, &(ct_checkpoint_meta){.epoch = 1}));
  ct_assert_ok(ct_checkpoint_load(path, m, NULL, &back));
  assert_int_equal(back.has_grad_scaler, 0);
  ct_test_rmdir(dir);
  ct_grad_scaler_free(gs2);
  ct_grad_scaler_free(gs);
  ct_module_free(m);
}

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scripted_cpu),          cmocka_unit_test(test_scripted_opencl),
      cmocka_unit_test(test_defaults_are_pytorchs), cmocka_unit_test(test_misuse_is_an_error),
      cmocka_unit_test(test_disabled_passes_through), cmocka_unit_test(test_bad_options_and_state),
      cmocka_unit_test(test_composed_path_for_strided_gradients), cmocka_unit_test(test_checkpoint_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
