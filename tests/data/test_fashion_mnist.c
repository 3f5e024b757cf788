/* tests/data/test_fashion_mnist.c: the real Fashion-MNIST files (Debian's dataset-fashion-mnist in
 * CUTTLE_DATA_DIR). Exits 77 (skipped) when they are absent. Checks the counts, shapes, label range,
 * the first training label (9, ankle boot), the class balance, the pixel statistics the
 * normalization constants come from, and a full epoch through the loader with 3 workers. */
#include <math.h>
#include <stdio.h>
#include "testutil.h"

static const char *dir;

static void check_split(ct_dataset *ds, int64_t n) {
  assert_int_equal(ct_dataset_len(ds), n);
  int64_t shp[3];
  ct_dataset_sample_shape(ds, shp);
  assert_int_equal(shp[0], 1);
  assert_int_equal(shp[1], 28);
  assert_int_equal(shp[2], 28);
  int64_t counts[10] = {0};
  const int64_t *y = ct_dataset_labels(ds);
  for (int64_t i = 0; i < n; i++) {
    assert_true(y[i] >= 0 && y[i] < 10);
    counts[y[i]]++;
  }
  for (int k = 0; k < 10; k++) assert_int_equal(counts[k], n / 10); /* Fashion-MNIST is balanced */
}

static void test_train(void **state) {
  (void)state;
  ct_dataset *ds = ct_assert_nonnull(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  check_split(ds, 60000);
  assert_int_equal(ct_dataset_labels(ds)[0], 9); /* ankle boot */
  assert_string_equal(ct_fashion_mnist_class_name(ct_dataset_labels(ds)[0]), "Ankle boot");
  /* the normalization constants are the training set's mean and std of x/255 */
  const uint8_t *px = ct_dataset_pixels(ds);
  double s = 0, s2 = 0;
  int64_t np = 60000LL * 784;
  for (int64_t i = 0; i < np; i++) {
    double v = px[i] / 255.0;
    s += v, s2 += v * v;
  }
  double mean = s / np, std = sqrt(s2 / np - mean * mean);
  assert_true(fabs(mean - 0.2860) < 5e-4);
  assert_true(fabs(std - 0.3530) < 5e-4);
  ct_dataset_free(ds);
}

static void test_test_split(void **state) {
  (void)state;
  ct_dataset *ds = ct_assert_nonnull(ct_fashion_mnist_load(dir, CT_SPLIT_TEST));
  check_split(ds, 10000);
  ct_dataset_free(ds);
}

static void test_loader_epoch(void **state) {
  (void)state;
  ct_dataset *ds = ct_assert_nonnull(ct_fashion_mnist_load(dir, CT_SPLIT_TEST));
  ct_loader *l = ct_assert_nonnull(
      ct_loader_new(ds, &(ct_loader_opts){.batch_size = 256, .shuffle = 1, .seed = 1, .num_workers = 3}));
  assert_int_equal(ct_loader_len(l), 40);
  int64_t seen = 0, batches = 0, counts[10] = {0};
  double sum = 0;
  ct_tensor *x, *y;
  while (ct_loader_next(l, &x, &y) == 1) {
    int64_t b = ct_tensor_size(x, 0);
    assert_int_equal(ct_tensor_size(x, 1), 1);
    assert_int_equal(ct_tensor_size(x, 2), 28);
    assert_int_equal(ct_tensor_size(x, 3), 28);
    const float *xv = ct_tensor_data(x);
    const int64_t *yv = ct_tensor_data(y);
    for (int64_t i = 0; i < b * 784; i++) {
      assert_true(xv[i] >= -0.8103f && xv[i] <= 2.0227f);
      sum += xv[i];
    }
    for (int64_t i = 0; i < b; i++) counts[yv[i]]++;
    seen += b, batches++;
    ct_tensor_free(x);
    ct_tensor_free(y);
  }
  assert_int_equal(batches, 40);
  assert_int_equal(seen, 10000);
  for (int k = 0; k < 10; k++) assert_int_equal(counts[k], 1000);
  /* the test split's normalized mean is near 0 (its pixel mean is close to the training one) */
  assert_true(fabs(sum / (10000.0 * 784)) < 0.05);
  ct_loader_free(l);
  ct_dataset_free(ds);
}

int main(void) {
  dir = ct_test_data_dir();
  if (!dir) {
    printf("skipped: Fashion-MNIST not found (set CUTTLE_DATA_DIR or apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train),
      cmocka_unit_test(test_test_split),
      cmocka_unit_test(test_loader_epoch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
