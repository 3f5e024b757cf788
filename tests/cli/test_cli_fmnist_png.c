/* tests/cli/test_cli_fmnist_png.c: Fashion-MNIST exported as a folder of PNG files trains through
 * the image-folder path to the IDX loader's accuracy, with the same seed and the same epochs
 * (issue 19, section 5).
 *
 * tests/data/export_fmnist_png.py writes the whole data set (60000 + 10000 images) as
 * root/{train,test}/<label>_<name>/<index>.png, and the same images as IDX files in ImageFolder's
 * class-by-class order. Three `cuttle train --model mlp --epochs 3 --seed 0` runs:
 *  - `--data imagefolder:root --gray --normalize 0.2860/0.3530` (Fashion-MNIST's Normalize);
 *  - `--data-dir` the class-ordered IDX files: the same samples in the same order, so the same
 *    batches: its loss and accuracy must be the folder run's exactly (the PNGs decode to the IDX
 *    bytes, and decoding in the workers changes nothing);
 *  - the installed IDX files, in their own order: the shuffled batches differ, so the accuracy
 *    must agree within TOL points (3 epochs of the mlp spread by under 0.5 points over seeds and
 *    orders on this data, docs/perf-history.md).
 * Skipped (77) without the data set. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define TOL 1.0 /* accuracy points between the folder run and the installed IDX order */

static char cuttle[4096], *tmp;

/* The last "epoch N: train_loss L  test_acc A%" of a run's output: 0, or -1 without one. */
static int last_epoch(const char *out, char *loss, double *acc) {
  const char *p = out, *q, *hit = NULL;
  while ((q = strstr(p, "train_loss "))) hit = q, p = q + 1;
  if (!hit || sscanf(hit, "train_loss %31s test_acc %lf%%", loss, acc) != 2) return -1;
  return 0;
}

/* One 3-epoch mlp run with `data` options: its last epoch's loss (text) and accuracy. */
static void train(const char *data, char *loss, double *acc) {
  static char out[1 << 15];
  int rc = ct_test_run(out, sizeof out, "%s train --model mlp --epochs 3 --seed 0 --batch-size 128 --workers 2 "
                       "--device cpu --no-progress %s", cuttle, data);
  if (rc != 0) fprintf(stderr, "train %s: exit %d, said:\n%s\n", data, rc, out);
  assert_int_equal(rc, 0);
  assert_int_equal(last_epoch(out, loss, acc), 0);
  fprintf(stderr, "%s: train_loss %s test_acc %.2f%%\n", data, loss, *acc);
}

static void png_folder_trains_to_idx_accuracy(void **state) {
  (void)state;
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  char out[4096], data[8400];
  assert_non_null(src);
  assert_int_equal(ct_test_run(out, sizeof out, "'%s' '%s/tests/data/export_fmnist_png.py' '%s' '%s/png' --sorted-idx "
                               "'%s/idx'", ct_test_python(), src, ct_test_data_dir(), tmp, tmp), 0);
  assert_non_null(strstr(out, "train: 60000 images"));
  assert_non_null(strstr(out, "test: 10000 images"));

  char loss_png[32], loss_sorted[32], loss_idx[32];
  double acc_png, acc_sorted, acc_idx;
  snprintf(data, sizeof data, "--data imagefolder:%s/png --gray --normalize 0.2860/0.3530", tmp);
  train(data, loss_png, &acc_png);
  snprintf(data, sizeof data, "--data-dir %s/idx", tmp);
  train(data, loss_sorted, &acc_sorted);
  snprintf(data, sizeof data, "--data-dir %s", ct_test_data_dir());
  train(data, loss_idx, &acc_idx);

  assert_string_equal(loss_png, loss_sorted); /* the same batches: the same numbers */
  assert_true(acc_png == acc_sorted);
  assert_true(fabs(acc_png - acc_idx) <= TOL);
  assert_true(acc_png > 80); /* it learned: 3 epochs of the mlp reach about 87.5% */
}

int main(void) {
  if (!ct_test_data_dir()) {
    printf("SKIP: needs Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return 77;
  }
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  if (!(tmp = ct_test_tmpdir())) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(png_folder_trains_to_idx_accuracy)};
  int fails = cmocka_run_group_tests_name("fashion-mnist as a PNG folder, trained", tests, NULL, NULL);
  ct_test_rmdir(tmp);
  return fails;
}
