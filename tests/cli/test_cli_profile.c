/* tests/cli/test_cli_profile.c: `cuttle train --profile host|sync` (cuttle/profiler.h) as a user
 * runs it: the steps after the first are profiled, the report gives their wall time per step beside
 * the kernels' share and a table with the training step's kernels on the run's device; a bad mode
 * is a usage error; a run of one step says that nothing was profiled. Needs Fashion-MNIST (77
 * without it); the opencl:0 case runs on PoCL wherever the OpenCL backend is built. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char cuttle[4096];

static void host_profile_of_the_mlp(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --max-steps 4 --workers 0 --no-progress "
                                                "--profile host", cuttle), 0);
  assert_non_null(strstr(out, "profile (--profile host, cpu): 3 steps after the first"));
  assert_non_null(strstr(out, "ms per step of wall time"));
  assert_non_null(strstr(out, "ms of kernel calls and copies on cpu ("));
  /* the mlp's step: three Linear layers forward and backward, cross-entropy, Adam */
  const char *kernels[] = {"\nmatmul ", "\nadam_step ", "\nsoftmax ", "total: "};
  for (int i = 0; i < 4; i++) {
    if (!strstr(out, kernels[i])) fprintf(stderr, "no \"%s\" in:\n%s\n", kernels[i] + 1, out);
    assert_non_null(strstr(out, kernels[i]));
  }
  /* Adam: one call per parameter tensor per step, 6 tensors x 3 steps */
  const char *row = strstr(out, "\nadam_step ");
  char op[64], dev[32];
  long long calls = -1;
  assert_int_equal(sscanf(row, "\nadam_step %63s %31s %lld", op, dev, &calls), 3);
  assert_string_equal(dev, "cpu");
  assert_int_equal(calls, 18);
}

/* --profile-trace FILE writes the profiled calls as a Chrome trace; without --profile it is a
 * usage error */
static void trace_of_the_mlp(void **state) {
  (void)state;
  static char out[1 << 16];
  char *dir = ct_test_tmpdir(), path[4200];
  assert_non_null(dir);
  snprintf(path, sizeof path, "%s/t.json", dir);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --max-steps 3 --workers 0 --no-progress "
                                                "--profile host --profile-trace %s", cuttle, path), 0);
  assert_non_null(strstr(out, "trace: "));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  assert_non_null(strstr(text, "{\"traceEvents\": ["));
  assert_non_null(strstr(text, "\"name\": \"adam_step\""));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --max-steps 1 --profile-trace %s", cuttle, path), 2);
  assert_non_null(strstr(out, "--profile-trace needs --profile"));
  ct_test_rmdir(dir);
}

static void bad_mode_and_nothing_profiled(void **state) {
  (void)state;
  static char out[1 << 14];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --max-steps 1 --profile everything", cuttle), 2);
  assert_non_null(strstr(out, "--profile: unknown value \"everything\": use host or sync"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --max-steps 1 --workers 0 --no-progress "
                                                "--profile sync", cuttle), 0);
  assert_non_null(strstr(out, "no step after the first ran, nothing profiled"));
}

#ifdef CUTTLE_WITH_OPENCL
static void sync_profile_on_opencl(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --device opencl:0 --max-steps 3 --workers 0 "
                                                "--no-progress --profile sync", cuttle), 0);
  assert_non_null(strstr(out, "profile (--profile sync, opencl:0): 2 steps after the first"));
  assert_non_null(strstr(out, "(each call waited for (sync))"));
  const char *row = strstr(out, "\nmatmul ");
  assert_non_null(row);
  char op[64], dev[32];
  assert_int_equal(sscanf(row, "\nmatmul %63s %31s", op, dev), 2);
  assert_string_equal(dev, "opencl:0");
}
#endif

int main(void) {
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  if (!ct_test_data_dir()) {
    printf("SKIP: needs Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_profile_of_the_mlp),
      cmocka_unit_test(bad_mode_and_nothing_profiled),
      cmocka_unit_test(trace_of_the_mlp),
#ifdef CUTTLE_WITH_OPENCL
      cmocka_unit_test(sync_profile_on_opencl),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
