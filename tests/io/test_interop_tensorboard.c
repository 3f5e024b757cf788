/* tests/io/test_interop_tensorboard.c: cuttle's event files read by TensorBoard itself and compared
 * with PyTorch's SummaryWriter. The Python side is tests/io/tensorboard_interop.py, run by
 * $CUTTLE_PYTHON (the build folder's venv: scripts/python_env.sh installs tensorboard from PyPI
 * beside Debian's PyTorch). A missing torch or tensorboard is a failure, not a skip, unless
 * CUTTLE_INTEROP_OPTIONAL=1.
 *  - "read": TensorBoard's EventAccumulator (tensorboard.backend.event_processing) loads a run whose
 *    training was resumed (a second writer with purge_step = 25 in the same directory) and a single
 *    run; every scalar it returns equals the value, step and wall time this test logged (the values
 *    as float32, which simple_value holds), written to expected.jsonl as the --metrics JSON lines
 *    of `cuttle train` are, and the events the resumption superseded are gone. The text reads back.
 *  - "torch": PyTorch's SummaryWriter logs the single run's calls (add_scalar and add_text with the
 *    same steps and wall times); every record after the first (file_version, stamped with the
 *    clock) is byte for byte cuttle's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char script[4096];

/* tensorboard_interop.py's TEXT */
static const char *const TEXT = "| option | value |\n|---|---|\n| lr | 0.001 |\n| model | cnn \xc3\xbc |";

static void expect(FILE *f, const char *run, const char *tag, double v, int64_t step, double wall) {
  fprintf(f, "{\"run\": \"%s\", \"tag\": \"%s\", \"step\": %lld, \"value\": %.17g, \"wall_time\": %.17g}\n", run, tag,
          (long long)step, v, wall);
}

static int run_py(const char *mode, const char *dir) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", ct_test_python(), script, mode, dir);
  return system(cmd);
}

/* Writes DIR/single (tensorboard_interop.py's sequence()), DIR/purged and DIR/expected.jsonl. */
static void write_runs(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/expected.jsonl", dir);
  FILE *ex = fopen(path, "w");
  assert_non_null(ex);

  snprintf(path, sizeof path, "%s/single", dir);
  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new(path));
  for (int s = 0; s < 20; s++) {
    double wall = 1700000000.0 + s * 0.5;
    double loss = 2.0 / (s + 1) + 0.001 * s, ips = 1000.0 + 37.25 * s;
    ct_assert_ok(ct_summary_writer_add_scalar(w, "train/loss", loss, s, wall));
    ct_assert_ok(ct_summary_writer_add_scalar(w, "train/images_per_s", ips, s, wall));
    expect(ex, "single", "train/loss", loss, s, wall);
    expect(ex, "single", "train/images_per_s", ips, s, wall);
  }
  ct_assert_ok(ct_summary_writer_add_text(w, "options", TEXT, 0, 1700000100.0));
  ct_assert_ok(ct_summary_writer_add_scalar(w, "test/accuracy", 0.8125, 3, 1700000200.0));
  expect(ex, "single", "test/accuracy", 0.8125, 3, 1700000200.0);
  ct_assert_ok(ct_summary_writer_close(w));
  ct_summary_writer_free(w);

  /* a run of 40 steps that crashed, resumed from its checkpoint at step 25 */
  snprintf(path, sizeof path, "%s/purged", dir);
  w = ct_assert_nonnull(ct_summary_writer_new(path));
  for (int s = 0; s < 40; s++) {
    ct_assert_ok(ct_summary_writer_add_scalar(w, "train/loss", 5.0 - 0.1 * s, s, 1700000000.0 + s));
    ct_assert_ok(ct_summary_writer_add_scalar(w, "train/lr", 1e-3 * (1.0 - s / 40.0), s, 1700000000.0 + s));
    if (s < 25) {
      expect(ex, "purged", "train/loss", 5.0 - 0.1 * s, s, 1700000000.0 + s);
      expect(ex, "purged", "train/lr", 1e-3 * (1.0 - s / 40.0), s, 1700000000.0 + s);
    }
  }
  ct_summary_writer_free(w);
  w = ct_assert_nonnull(ct_summary_writer_new_opts(path, &(ct_summary_writer_opts){.purge_step = 25}));
  for (int s = 25; s < 40; s++) {
    ct_assert_ok(ct_summary_writer_add_scalar(w, "train/loss", 3.0 - 0.01 * s, s, 1700001000.0 + s));
    expect(ex, "purged", "train/loss", 3.0 - 0.01 * s, s, 1700001000.0 + s);
  }
  ct_summary_writer_free(w);
  fclose(ex);
}

static void test_tensorboard_reads(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  write_runs(dir);
  assert_int_equal(run_py("read", dir), 0);
  ct_test_rmdir(dir);
}

static void test_same_bytes_as_pytorch(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  write_runs(dir);
  assert_int_equal(run_py("torch", dir), 0);
  ct_test_rmdir(dir);
}

int main(void) {
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/tensorboard_interop.py", src ? src : ".");
  int rc = ct_test_require_python("torch, tensorboard");
  if (rc != 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tensorboard_reads),
      cmocka_unit_test(test_same_bytes_as_pytorch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
