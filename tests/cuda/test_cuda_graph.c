/* tests/cuda/test_cuda_graph.c: graphs of a device's work (cuttle/cuda.h, ct_device_graph_*) on
 * cuda:0. Every test skips, saying why, without a CUDA device; the CPU's side (CT_EUNSUPPORTED,
 * the argument errors) is in tests/api/test_api_errors.c, and the training loop's rehearsal of the
 * captured step runs on the CPU and on PoCL in tests/cli/test_cli_graph.c.
 * - A capture runs nothing; each replay computes from what the static input holds then, into the
 *   output made inside the capture, which stays readable after the graph is freed.
 * - Inside a capture, a read back (ct_item), a copy from the host and ct_synchronize fail with a
 *   message naming the capture; the capture still ends, without a graph (capture_end names the
 *   first refused op), and the device works afterwards.
 * - One capture at a time; ending without a capture is an error.
 * - A whole training step of the cnn (forward, cross-entropy, backward, capturable Adam,
 *   zero_grad), captured once and replayed on four batches copied into static tensors, gives the
 *   parameters that four eager steps give (cuDNN's and cuBLAS's kernels are the same, so within
 *   float32 rounding of non-deterministic reductions), and the optimizer's count on the device
 *   counts the replays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const ct_device GPU = {CT_CUDA, 0};
#define SKIP_WITHOUT_GPU CT_TEST_SKIP_WITHOUT_GPU

/* every element of t (any device) equals v */
static void assert_all(ct_tensor *t, double v) {
  double *h = ct_test_values(t);
  for (int64_t i = 0; i < ct_tensor_numel(t); i++)
    if (h[i] != v) fail_msg("element %lld is %g, want %g", (long long)i, h[i], v);
  free(h);
}

static void test_replay_reads_the_static_input(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  assert_true(ct_device_can_capture(GPU));
  int64_t n = 1000;
  ct_tensor *x = ct_assert_nonnull(ct_full(1, &n, 1.0, CT_F32, GPU));
  ct_tensor *y0 = ct_assert_nonnull(ct_zeros(1, &n, CT_F32, GPU)); /* made before: replays overwrite it in place */
  ct_assert_ok(ct_synchronize(GPU));
  ct_assert_ok(ct_device_graph_capture_begin(GPU));
  ct_tensor *t = ct_mul_scalar(x, 2.0);
  ct_tensor *y = t ? ct_add_scalar(t, 1.0) : NULL; /* made inside: the graph's output */
  ct_status cs = y ? ct_copy_(y0, y) : ct_last_status();
  ct_tensor_free(t);
  ct_device_graph *g = ct_device_graph_capture_end(GPU);
  ct_assert_ok(cs);
  ct_assert_nonnull(y);
  ct_assert_nonnull(g);
  assert_all(y0, 0.0); /* the capture ran nothing */
  ct_assert_ok(ct_device_graph_replay(g));
  assert_all(y, 3.0), assert_all(y0, 3.0);
  ct_tensor *five = ct_assert_nonnull(ct_full(1, &n, 5.0, CT_F32, GPU));
  ct_assert_ok(ct_copy_(x, five)); /* a new value in the static input */
  for (int i = 0; i < 3; i++) ct_assert_ok(ct_device_graph_replay(g));
  assert_all(y, 11.0), assert_all(y0, 11.0);
  ct_device_graph_free(g);
  assert_all(y, 11.0); /* the output outlives the graph */
  /* the freed pool's memory is the cache's again: new tensors work and read right */
  ct_tensor *z = ct_assert_nonnull(ct_add_scalar(y, 1.0));
  assert_all(z, 12.0);
  ct_tensor_free(z), ct_tensor_free(five), ct_tensor_free(y), ct_tensor_free(y0), ct_tensor_free(x);
}

static void test_synchronizations_inside_fail_clearly(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  int64_t n = 4;
  ct_tensor *x = ct_assert_nonnull(ct_full(1, &n, 2.0, CT_F32, GPU));
  ct_tensor *s = ct_assert_nonnull(ct_sum(x, 0, NULL, 0));
  ct_assert_ok(ct_device_graph_capture_begin(GPU));
  assert_true(isnan(ct_item(s)));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("graph capture");
  float host[4] = {1, 2, 3, 4};
  assert_null(ct_from_host(host, 1, &n, CT_F32, GPU));
  ct_assert_error_contains("graph capture");
  assert_int_equal(ct_synchronize(GPU), CT_EINVAL);
  ct_assert_error_contains("graph capture");
  assert_int_equal(ct_device_graph_capture_begin(GPU), CT_EINVAL); /* one at a time */
  /* the capture ends, but a graph without the refused ops is no graph: NULL, naming the first */
  assert_null(ct_device_graph_capture_end(GPU));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("ct_item was refused");
  assert_null(ct_device_graph_capture_end(GPU)); /* none runs now */
  assert_int_equal(ct_last_status(), CT_EINVAL);
  /* the device goes on */
  assert_true(ct_item(s) == 8.0);
  ct_tensor *d = ct_assert_nonnull(ct_from_host(host, 1, &n, CT_F32, GPU));
  ct_tensor *e = ct_assert_nonnull(ct_add(d, x));
  ct_tensor *es = ct_assert_nonnull(ct_sum(e, 0, NULL, 0));
  assert_true(ct_item(es) == 18.0);
  ct_tensor_free(es), ct_tensor_free(e), ct_tensor_free(d), ct_tensor_free(s), ct_tensor_free(x);
}

/* ---- the training step */

typedef struct {
  ct_module *m;
  ct_optimizer *opt;
} trainer;

static trainer make_trainer(void) {
  ct_generator g = ct_generator_new(11);
  trainer t;
  t.m = ct_assert_nonnull(ct_model_new("cnn", GPU, &g));
  t.opt = ct_assert_nonnull(ct_optimizer_new(t.m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .capturable = 1}));
  return t;
}

/* forward, mean cross-entropy, backward, the optimizer's step, zero_grad; the loss kept in *loss */
static ct_status step(trainer *t, ct_tensor *x, ct_tensor *y, ct_tensor *loss) {
  ct_scope_begin();
  ct_tensor *l = ct_cross_entropy(ct_module_forward(t->m, x), y, CT_REDUCTION_MEAN, 0);
  ct_status s = l ? ct_backward(l) : ct_last_status();
  if (s == CT_OK) s = ct_optimizer_step(t->opt);
  ct_optimizer_zero_grad(t->opt);
  if (s == CT_OK && loss) s = ct_copy_(loss, l);
  ct_scope_end();
  return s;
}

/* batch k: 64 random images and labels, the same on every call */
static void batch(int k, ct_tensor **x, ct_tensor **y) {
  ct_generator g = ct_generator_new(500 + (uint64_t)k);
  *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){64, 1, 28, 28}, 0, 1, CT_F32, GPU, &g));
  *y = ct_assert_nonnull(ct_randint(1, (int64_t[]){64}, 0, 10, CT_I64, GPU, &g));
}

static void test_training_step_replayed_matches_eager(void **state) {
  (void)state;
  SKIP_WITHOUT_GPU();
  ct_scope_begin();
  trainer a = make_trainer(), b = make_trainer();
  ct_tensor *x, *y;
  for (int k = 0; k < 3; k++) { /* the warm-up, on both */
    batch(k, &x, &y);
    ct_assert_ok(step(&a, x, y, NULL));
    ct_assert_ok(step(&b, x, y, NULL));
  }
  ct_tensor *sx, *sy, *loss_a = ct_assert_nonnull(ct_zeros(0, NULL, CT_F32, GPU));
  ct_tensor *loss_b = ct_assert_nonnull(ct_zeros(0, NULL, CT_F32, GPU));
  batch(3, &sx, &sy); /* the static batch, holding batch 3 */
  ct_assert_ok(ct_device_graph_capture_begin(GPU));
  ct_status cs = step(&b, sx, sy, loss_b);
  ct_device_graph *g = ct_device_graph_capture_end(GPU);
  ct_assert_ok(cs);
  ct_assert_nonnull(g);
  for (int k = 3; k < 7; k++) {
    batch(k, &x, &y);
    ct_assert_ok(step(&a, x, y, loss_a));
    ct_assert_ok(ct_copy_(sx, x));
    ct_assert_ok(ct_copy_(sy, y));
    ct_assert_ok(ct_device_graph_replay(g));
    double la = ct_item(loss_a), lb = ct_item(loss_b);
    print_message("# step %d: loss eager %.7f, replayed %.7f\n", k, la, lb);
    assert_true(fabs(la - lb) <= 1e-4 * fabs(la));
  }
  assert_int_equal(ct_optimizer_steps(a.opt), 7);
  assert_int_equal(ct_optimizer_steps(b.opt), 7); /* 3 eager, 4 replays: the count lives on the device */
  ct_named_tensor pa[16], pb[16];
  int n = ct_module_named_tensors(a.m, 0, pa, 16);
  assert_int_equal(n, ct_module_named_tensors(b.m, 0, pb, 16));
  for (int i = 0; i < n; i++) ct_assert_close(pb[i].tensor, pa[i].tensor, 1e-5, 1e-3);
  ct_device_graph_free(g);
  ct_optimizer_free(a.opt), ct_optimizer_free(b.opt);
  ct_module_free(a.m), ct_module_free(b.m);
  ct_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_reads_the_static_input),
      cmocka_unit_test(test_synchronizations_inside_fail_clearly),
      cmocka_unit_test(test_training_step_replayed_matches_eager),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  if (r == 0 && ct_device_count(CT_CUDA) == 0) return CT_TEST_SKIP;
  return r;
}
