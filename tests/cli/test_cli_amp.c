/* tests/cli/test_cli_amp.c: `cuttle train --amp`, `--channels-last` and `--devices` as a user runs
 * them: the GradScaler's state in the metrics and the checkpoint and back on resume, a channels_last
 * run's checkpoint read by a row-major model, two PoCL devices from one process, with and without
 * --amp, and the usage errors. Runs the built binary ($CUTTLE_BINARY_DIR/cuttle); skipped (77) without Fashion-MNIST.
 * The accuracy of --amp against float32 over 2 cnn epochs is a measurement (docs/perf.md), not a
 * test: it takes minutes on the CPU. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "testutil.h"

static char cuttle[4096];
static char *tmp;

static int expect(int got, int want, const char *out) {
  if (got != want) fprintf(stderr, "exit %d, wanted %d; output:\n%s\n", got, want, out);
  return got;
}

static void bad_combinations_are_usage_errors(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --amp fp8", cuttle), 2, out), 2);
  assert_non_null(strstr(out, "--amp: unknown value"));
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --devices opencl:0,opencl:0", cuttle), 2, out), 2);
  assert_non_null(strstr(out, "twice"));
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --devices auto", cuttle), 2, out), 2);
}

/* The test accuracy in percent `cuttle eval` gives the checkpoint ck of model (on the CPU). */
static double eval_accuracy(const char *model, const char *ck) {
  char out[16384];
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s eval --model %s --device cpu --checkpoint %s", cuttle, model, ck), 0,
                          out), 0);
  const char *a = strstr(out, "test_acc ");
  assert_non_null(a);
  double acc = atof(a + 9);
  fprintf(stderr, "eval of %s: %s", ck, out);
  return acc;
}

/* --amp f16: the metrics say what the GradScaler did (pytorch#55585), the checkpoint keeps its
 * state, and a resumed run restores it. */
static void amp_f16_reports_and_keeps_the_scaler(void **state) {
  (void)state;
  char out[16384], ck[4200], metrics[4200], line[2048];
  snprintf(ck, sizeof ck, "%s/amp.safetensors", tmp);
  snprintf(metrics, sizeof metrics, "%s/amp.jsonl", tmp);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 1 --amp f16 --no-progress "
                                               "--save %s --metrics %s", cuttle, ck, metrics), 0, out), 0);
  assert_non_null(strstr(out, "autocast float16 with a GradScaler"));
  FILE *f = fopen(metrics, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  fclose(f);
  assert_non_null(strstr(line, "\"amp\": \"f16\""));
  assert_non_null(strstr(line, "\"grad_scale\": "));
  const char *taken = strstr(line, "\"steps_taken\": "), *skipped = strstr(line, "\"steps_skipped\": ");
  assert_non_null(taken);
  assert_non_null(skipped);
  /* 60000 images in batches of 128: 469 steps, each taken or skipped */
  assert_int_equal(atoll(taken + 15) + atoll(skipped + 17), 469);
  double acc = atof(strstr(line, "\"test_acc\": ") + 12);
  assert_true(acc > 0.8); /* float32 reaches about 0.85 in this epoch */

  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  ct_module_free(m);
  assert_int_equal(meta.has_grad_scaler, 1);
  assert_int_equal(meta.grad_scaler.steps_taken, atoll(taken + 15));
  assert_int_equal(meta.grad_scaler.steps_skipped, atoll(skipped + 17));
  char want[64];
  snprintf(want, sizeof want, "\"grad_scale\": %g", meta.grad_scaler.scale);
  assert_non_null(strstr(line, want));

  /* the resumed run starts from the saved counts: its totals include the first epoch's */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 2 --amp f16 --no-progress "
                                               "--resume %s --metrics %s", cuttle, ck, metrics), 0, out), 0);
  f = fopen(metrics, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(fgets(line, sizeof line, f)); /* epoch 2's line */
  fclose(f);
  taken = strstr(line, "\"steps_taken\": "), skipped = strstr(line, "\"steps_skipped\": ");
  assert_non_null(taken);
  assert_int_equal(atoll(taken + 15) + atoll(skipped + 17), 2 * 469);
}

/* --amp bf16 trains without a scaler. */
static void amp_bf16_needs_no_scaler(void **state) {
  (void)state;
  char out[16384];
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model cnn --device cpu --epochs 1 --max-steps 20 --amp bf16 "
                                               "--no-progress", cuttle), 0, out), 0);
  assert_non_null(strstr(out, "autocast bfloat16"));
  assert_null(strstr(out, "GradScaler"));
}

/* A --channels-last run's checkpoint holds the weights in logical (row-major) order: a row-major
 * model reads it and evaluates it well (weights saved as their NHWC bytes would be garbled, and the
 * accuracy near chance), and a --channels-last run resumes from it. */
static void channels_last_checkpoints_are_format_free(void **state) {
  (void)state;
  char out[16384], ck[4200];
  snprintf(ck, sizeof ck, "%s/cl.safetensors", tmp);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model cnn --device cpu --epochs 1 --channels-last --no-progress "
                                               "--save %s --max-steps 100", cuttle, ck), 0, out), 0);
  assert_non_null(strstr(out, "channels_last memory format"));
  assert_true(eval_accuracy("cnn", ck) > 60); /* percent, after 100 Adam steps; chance is 10 */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model cnn --device cpu --epochs 1 --channels-last --no-progress "
                                               "--resume %s --max-steps 5", cuttle, ck), 0, out), 0);
  assert_non_null(strstr(out, "resumed"));
}

/* --devices opencl:0,opencl:1 (two PoCL devices): one process trains on both. */
static void two_opencl_devices_from_one_process(void **state) {
  (void)state;
  char out[16384], ck[4200];
  snprintf(ck, sizeof ck, "%s/dp.safetensors", tmp);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "POCL_DEVICES='pthread pthread' %s train --model mlp --epochs 1 --max-steps 30 "
                                               "--devices opencl:0,opencl:1 --no-progress --save %s", cuttle, ck), 0, out), 0);
  assert_non_null(strstr(out, "replicated on 2 devices"));
  assert_non_null(strstr(out, "on opencl:0"));
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, NULL);
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, NULL));
  ct_module_free(m);
}

/* --devices opencl:0,opencl:1 --amp f16: each replica runs its forward in its own autocast region,
 * the losses are scaled by the GradScaler, which steps (or skips) m's optimizer after the sum: the
 * checkpoint's scaler state accounts for every step, and the model learned (77.7% after these 40
 * Adam steps when measured; float32 gets about as far). */
static void two_opencl_devices_with_amp_f16(void **state) {
  (void)state;
  char out[16384], ck[4200];
  snprintf(ck, sizeof ck, "%s/dp_amp.safetensors", tmp);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "POCL_DEVICES='pthread pthread' %s train --model mlp --epochs 1 --max-steps 40 "
                                               "--devices opencl:0,opencl:1 --amp f16 --no-progress --save %s", cuttle, ck),
                          0, out), 0);
  assert_non_null(strstr(out, "replicated on 2 devices"));
  assert_non_null(strstr(out, "autocast float16 with a GradScaler"));
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  ct_module_free(m);
  assert_int_equal(meta.has_grad_scaler, 1);
  assert_int_equal(meta.grad_scaler.steps_taken + meta.grad_scaler.steps_skipped, 40);
  assert_true(meta.grad_scaler.steps_taken >= 30); /* a skipped step halves the scale: a few at most */
  assert_true(eval_accuracy("mlp", ck) > 60); /* percent; chance is 10 */
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
  if (!ct_test_require_opencl(2)) return 1; /* sets POCL_DEVICES for the child processes too */
  const struct CMUnitTest basic[] = {cmocka_unit_test(bad_combinations_are_usage_errors)};
  int fails = cmocka_run_group_tests_name("cli amp", basic, setup, teardown);
  if (!ct_test_data_dir()) {
    printf("SKIP: the training cases need Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return fails ? fails : CT_TEST_SKIP;
  }
  const struct CMUnitTest training[] = {cmocka_unit_test(amp_f16_reports_and_keeps_the_scaler),
                                        cmocka_unit_test(amp_bf16_needs_no_scaler),
                                        cmocka_unit_test(channels_last_checkpoints_are_format_free),
                                        cmocka_unit_test(two_opencl_devices_from_one_process),
                                        cmocka_unit_test(two_opencl_devices_with_amp_f16)};
  return fails + cmocka_run_group_tests_name("cli amp training", training, setup, teardown);
}
