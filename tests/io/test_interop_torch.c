/* tests/io/test_interop_torch.c: checkpoints shared with PyTorch, both ways, checked by running
 * the same cnn on the same input in both frameworks:
 *  - a cuttle checkpoint (model + Adam state) loads into torch's nn.Sequential with
 *    load_state_dict (strict) once the "optimizer." keys are dropped, and gives cuttle's output;
 *  - a state_dict PyTorch saved with safetensors.torch loads into cuttle's cnn and gives torch's
 *    output.
 * Runs only where $CUTTLE_PYTHON (default python3) imports torch and safetensors; else skipped. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static const char *python(void) {
  const char *p = getenv("CUTTLE_PYTHON");
  return p && *p ? p : "python3";
}

static char script[4096];

/* x[i] = sin(0.01 i), (4, 1, 28, 28), as torch_interop.py's fixed_input() */
static ct_tensor *fixed_input(void) {
  static float v[4 * 28 * 28];
  for (int i = 0; i < 4 * 28 * 28; i++) v[i] = (float)sin(0.01 * i);
  return ct_from_host(v, 4, (int64_t[]){4, 1, 28, 28}, CT_F32, CT_DEVICE_CPU);
}

static ct_tensor *forward(ct_module *m) {
  ct_tensor *x = fixed_input();
  ct_module_train(m, 0);
  ct_no_grad_begin();
  ct_tensor *y = ct_module_forward(m, x);
  ct_no_grad_end();
  ct_tensor_free(x);
  return y;
}

static void cuttle_checkpoint_loads_in_torch(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir(), ck[4200], out[4200], cmd[16384];
  snprintf(ck, sizeof ck, "%s/cuttle.safetensors", dir);
  snprintf(out, sizeof out, "%s/torch_out.safetensors", dir);
  ct_generator gen = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CT_DEVICE_CPU, &gen));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  ct_assert_ok(ct_optimizer_init_state(opt));
  ct_assert_ok(ct_checkpoint_save(ck, m, opt, &(ct_checkpoint_meta){.epoch = 1, .rng = gen}));
  snprintf(cmd, sizeof cmd, "%s %s load %s %s", python(), script, ck, out);
  assert_int_equal(system(cmd), 0);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(out));
  ct_tensor *theirs = ct_assert_nonnull(ct_safetensors_get(f, "output", CT_DEVICE_CPU));
  ct_tensor *ours = ct_assert_nonnull(forward(m));
  ct_assert_close(ours, theirs, 1e-5, 1e-4);
  ct_tensor_free(theirs), ct_tensor_free(ours);
  ct_safetensors_close(f);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

static void torch_state_dict_loads_in_cuttle(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir(), ck[4200], cmd[16384];
  snprintf(ck, sizeof ck, "%s/torch.safetensors", dir);
  snprintf(cmd, sizeof cmd, "%s %s save %s", python(), script, ck);
  assert_int_equal(system(cmd), 0);
  /* the file holds "expected" beside the weights: read it, then load the weights alone */
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(ck));
  ct_tensor *expected = ct_assert_nonnull(ct_safetensors_get(f, "expected", CT_DEVICE_CPU));
  int n = ct_safetensors_count(f);
  const char **names = calloc((size_t)n, sizeof *names);
  ct_tensor **ts = calloc((size_t)n, sizeof *ts);
  int k = 0;
  for (int i = 0; i < n; i++) {
    ct_safetensors_info info;
    ct_assert_ok(ct_safetensors_info_at(f, i, &info));
    if (strcmp(info.name, "expected") == 0) continue;
    names[k] = info.name;
    ts[k++] = ct_assert_nonnull(ct_safetensors_get(f, info.name, CT_DEVICE_CPU));
  }
  char weights[4200];
  snprintf(weights, sizeof weights, "%s/weights.safetensors", dir);
  ct_assert_ok(ct_safetensors_save(weights, k, names, ts, 0, NULL));
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_checkpoint_load(weights, m, NULL, NULL));
  ct_tensor *ours = ct_assert_nonnull(forward(m));
  ct_assert_close(ours, expected, 1e-5, 1e-4);
  for (int i = 0; i < k; i++) ct_tensor_free(ts[i]);
  free(ts), free(names);
  ct_tensor_free(ours), ct_tensor_free(expected);
  ct_safetensors_close(f);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

int main(void) {
  char probe[8192];
  snprintf(probe, sizeof probe, "%s -c 'import torch, safetensors' >/dev/null 2>&1", python());
  if (system(probe) != 0) {
    printf("SKIP: %s cannot import torch and safetensors (set CUTTLE_PYTHON to an interpreter that can)\n", python());
    return CT_TEST_SKIP;
  }
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/torch_interop.py", src ? src : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(cuttle_checkpoint_loads_in_torch),
                                     cmocka_unit_test(torch_state_dict_loads_in_cuttle)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
