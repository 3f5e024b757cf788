/* tests/cli/test_cli_graph.c: `cuttle train --cuda-graph` without a GPU.
 *
 * The capture itself runs only on CUDA (the kit's train_*_graph steps). Here the same static-copy
 * step is rehearsed (CUTTLE_GRAPH_REHEARSAL=1, tools/cuttle/graph_step.h): the batch copied into
 * static tensors, the loss summed in place, the optimizer capturable, under sync-debug's error
 * mode, so that a synchronization inside the step, which a capture cannot hold, fails the run:
 * - on the CPU, two mlp epochs give exactly the eager run's losses and accuracies (the capturable
 *   optimizer computes the same bits), and the report counts the replays: 468 full batches an
 *   epoch, 3 of the first epoch's the eager warm-up, each epoch's last batch of 96 eager, and two
 *   captures (the cosine schedule's new lr in epoch 2 captures again);
 * - on opencl:0 (PoCL), five cnn steps give the eager run's parameters and Adam state within float32
 *   rounding, with no synchronization inside the steps (the run would fail: a ct_item put into the
 *   step fails it with sync-debug's message);
 * - resnet18's step on opencl:0 (batch norm, residuals) holds no synchronization either;
 * - the options a captured step cannot hold are refused before training, saying why, and a device
 *   that cannot capture is refused without the rehearsal. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char cuttle[4096];
static char *tmp;

/* The "epoch E: train_loss L  test_acc A%" part of out, into line (n bytes). */
static void epoch_line(const char *out, int e, char *line, size_t n) {
  char want[32];
  snprintf(want, sizeof want, "epoch %d: train_loss", e);
  const char *p = strstr(out, want);
  assert_non_null(p);
  const char *end = strstr(p, "%");
  assert_non_null(end);
  snprintf(line, n, "%.*s", (int)(end - p + 1), p);
}

static void cpu_epoch_matches_eager(void **state) {
  (void)state;
  char eager[16384], graph[16384], a[128], b[128];
  const char *common = "train --model mlp --epochs 2 --device cpu --no-progress --seed 3 --workers 1";
  assert_int_equal(ct_test_run(eager, sizeof eager, "%s %s", cuttle, common), 0);
  assert_int_equal(ct_test_run(graph, sizeof graph, "CUTTLE_GRAPH_REHEARSAL=1 %s %s --cuda-graph", cuttle, common), 0);
  for (int e = 1; e <= 2; e++) {
    epoch_line(eager, e, a, sizeof a), epoch_line(graph, e, b, sizeof b);
    print_message("# eager: %s\n# graph: %s\n", a, b);
    assert_string_equal(a, b);
  }
  /* 60000 / 128: 468 full batches and one of 96 an epoch; the cosine schedule's second lr
   * captures the step again */
  assert_non_null(strstr(graph, "5 eager steps, captured 2 time(s), 933 replays (rehearsed"));
}

/* The tensors of checkpoint path (parameters and the optimizer's state), in float64 (malloc'd, *n
 * values in all). */
static double *params(const char *path, int64_t *n) {
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  double *all = NULL;
  *n = 0;
  for (int i = 0; i < ct_safetensors_count(f); i++) {
    ct_safetensors_info info;
    ct_assert_ok(ct_safetensors_info_at(f, i, &info));
    ct_tensor *t = ct_assert_nonnull(ct_safetensors_get(f, info.name, CT_DEVICE_CPU));
    int64_t k = ct_tensor_numel(t);
    all = realloc(all, (size_t)(*n + k) * sizeof *all);
    assert_non_null(all);
    ct_assert_ok(ct_to_host(t, all + *n, (size_t)k * sizeof *all, CT_F64));
    *n += k;
    ct_tensor_free(t);
  }
  ct_safetensors_close(f);
  return all;
}

static void opencl_steps_match_eager(void **state) {
  (void)state;
  if (!ct_test_require_opencl(1)) fail();
  char out[16384], a[4200], b[4200];
  snprintf(a, sizeof a, "%s/eager.safetensors", tmp), snprintf(b, sizeof b, "%s/graph.safetensors", tmp);
  const char *common = "train --model cnn --epochs 1 --device opencl:0 --no-progress --seed 3 --workers 1 --max-steps 5";
  assert_int_equal(ct_test_run(out, sizeof out, "%s %s --save %s", cuttle, common, a), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "CUTTLE_GRAPH_REHEARSAL=1 %s %s --cuda-graph --save %s", cuttle, common, b), 0);
  assert_non_null(strstr(out, "3 eager steps, captured 1 time(s), 2 replays (rehearsed"));
  int64_t na, nb;
  double *pa = params(a, &na), *pb = params(b, &nb), worst = 0;
  assert_int_equal(na, nb);
  assert_true(na == 3 * 421642); /* the cnn's parameters, Adam's exp_avg and exp_avg_sq */
  for (int64_t i = 0; i < na; i++) {
    double d = fabs(pa[i] - pb[i]) / (1e-6 + fabs(pa[i]));
    if (d > worst) worst = d;
  }
  print_message("# cnn on opencl:0, 5 steps: worst relative difference of the %lld values %.3e\n", (long long)na, worst);
  assert_true(worst < 1e-4);
  free(pa), free(pb);
}

/* resnet18's step (batch norm and its running statistics, residual additions, the adaptive pool)
 * has no synchronization either: the rehearsal under sync-debug's error mode goes through. */
static void opencl_resnet18_step_holds_no_sync(void **state) {
  (void)state;
  if (!ct_test_require_opencl(1)) fail();
  char out[16384];
  assert_int_equal(ct_test_run(out, sizeof out,
                               "CUTTLE_GRAPH_REHEARSAL=1 %s train --model resnet18 --device opencl:0 --batch-size 16 "
                               "--max-steps 5 --no-progress --workers 1 --cuda-graph",
                               cuttle),
                   0);
  assert_non_null(strstr(out, "3 eager steps, captured 1 time(s), 2 replays (rehearsed"));
}

static void refusals_say_why(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --cuda-graph --amp f16", cuttle), 2);
  assert_non_null(strstr(out, "cannot hold --amp f16"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --cuda-graph --accumulate 2", cuttle), 2);
  assert_non_null(strstr(out, "cannot hold --accumulate"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --cuda-graph --devices cpu,cpu", cuttle), 2);
  assert_non_null(strstr(out, "cannot hold --devices"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --cuda-graph --nproc 2", cuttle), 2);
  assert_non_null(strstr(out, "cannot hold --nproc"));
}

/* A device that cannot capture, without the rehearsal (after the data is read). */
static void cpu_cannot_capture(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --cuda-graph --epochs 1", cuttle), 1);
  assert_non_null(strstr(out, "cpu cannot capture graphs"));
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  tmp = ct_test_tmpdir();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest basic[] = {cmocka_unit_test(refusals_say_why)};
  int fails = cmocka_run_group_tests_name("cli graph", basic, setup, teardown);
  if (!ct_test_data_dir()) {
    printf("SKIP: the training cases need Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return fails ? fails : CT_TEST_SKIP;
  }
  const struct CMUnitTest training[] = {cmocka_unit_test(cpu_cannot_capture), cmocka_unit_test(cpu_epoch_matches_eager),
                                        cmocka_unit_test(opencl_steps_match_eager),
                                        cmocka_unit_test(opencl_resnet18_step_holds_no_sync)};
  return fails + cmocka_run_group_tests_name("cli graph training", training, setup, teardown);
}
