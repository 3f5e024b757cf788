/* tests/data/test_cifar.c: the CIFAR-10 and CIFAR-100 readers on small files written here in the
 * binary format (https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version"; no package ships
 * the data): records read in file order across data_batch_1..5, CHW pixels as written, labels,
 * per-channel normalization, class names, the parent-folder lookup, batches through the loader,
 * and every malformed file an error naming the file and the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "testutil.h"

/* Pixel k of record r of a file `salt`: distinct enough to catch a shifted or swapped record. */
static uint8_t pixel(int salt, int r, int k) { return (uint8_t)((salt * 101 + r * 31 + k * 7) % 256); }

/* Write `records` records of label_bytes label bytes (labels[r * label_bytes + j]) to dir/name. */
static void write_file(const char *dir, const char *name, int salt, int records, int label_bytes, const uint8_t *labels) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (int r = 0; r < records; r++) {
    fwrite(labels + r * label_bytes, 1, (size_t)label_bytes, f);
    for (int k = 0; k < 3072; k++) fputc(pixel(salt, r, k), f);
  }
  fclose(f);
}

static void write_raw(const char *dir, const char *name, const void *bytes, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) fwrite(bytes, 1, n, f);
  fclose(f);
}

/* CIFAR-10 in dir: data_batch_b.bin holds b records (1..5: 15 in all), test_batch.bin 4; labels
 * (b + r) % 10, test r % 10. */
static void write_cifar10(const char *dir) {
  char name[64];
  uint8_t labels[8];
  for (int b = 1; b <= 5; b++) {
    for (int r = 0; r < b; r++) labels[r] = (uint8_t)((b + r) % 10);
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_file(dir, name, b, b, 1, labels);
  }
  for (int r = 0; r < 4; r++) labels[r] = (uint8_t)(r % 10);
  write_file(dir, "test_batch.bin", 0, 4, 1, labels);
}

static void test_cifar10_reads_records_in_order(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  write_cifar10(dir);
  ct_dataset *ds = ct_assert_nonnull(ct_cifar10_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_dataset_len(ds), 15);
  assert_int_equal(ct_dataset_num_classes(ds), 10);
  int64_t shape[3];
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[0], 3), assert_int_equal(shape[1], 32), assert_int_equal(shape[2], 32);
  const uint8_t *px = ct_assert_nonnull((void *)ct_dataset_pixels(ds));
  const int64_t *lb = ct_dataset_labels(ds);
  int i = 0;
  for (int b = 1; b <= 5; b++)
    for (int r = 0; r < b; r++, i++) {
      assert_int_equal(lb[i], (b + r) % 10);
      for (int k = 0; k < 3072; k++) assert_int_equal(px[i * 3072 + k], pixel(b, r, k)); /* already CHW */
    }
  /* per-channel normalization with CIFAR-10's mean and std: plane k / 1024 is channel k */
  static const float mean[3] = CT_CIFAR10_MEAN, stdv[3] = CT_CIFAR10_STD;
  float x[3072];
  int64_t y;
  ct_assert_ok(ct_dataset_get(ds, 7, x, &y));
  assert_int_equal(y, lb[7]);
  for (int k = 0; k < 3072; k++) {
    int c = k / 1024;
    float want = ((float)px[7 * 3072 + k] / 255.0f - mean[c]) / stdv[c];
    assert_true(x[k] == want);
  }
  assert_string_equal(ct_dataset_class_name(ds, 0), "airplane");
  assert_string_equal(ct_dataset_class_name(ds, 9), "truck");
  assert_null(ct_dataset_class_name(ds, 10));
  ct_dataset_free(ds);

  ds = ct_assert_nonnull(ct_cifar10_load(dir, CT_SPLIT_TEST));
  assert_int_equal(ct_dataset_len(ds), 4);
  assert_int_equal(ct_dataset_pixels(ds)[3 * 3072 + 5], pixel(0, 3, 5));
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

/* The archive unpacks to cifar-10-batches-bin/: its parent works as well. */
static void test_cifar10_parent_folder(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  write_cifar10(sub);
  ct_dataset *ds = ct_assert_nonnull(ct_cifar10_load(dir, CT_SPLIT_TEST));
  assert_int_equal(ct_dataset_len(ds), 4);
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

static void test_cifar10_batches(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  write_cifar10(dir);
  ct_dataset *ds = ct_assert_nonnull(ct_cifar10_load(dir, CT_SPLIT_TRAIN));
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 4, .num_workers = 2}));
  ct_tensor *x, *y;
  int batches = 0, samples = 0;
  while (ct_loader_next(l, &x, &y) == 1) {
    assert_int_equal(ct_tensor_ndim(x), 4);
    assert_int_equal(ct_tensor_size(x, 1), 3);
    assert_int_equal(ct_tensor_size(x, 2), 32);
    assert_int_equal(ct_tensor_size(x, 3), 32);
    const int64_t *yy = ct_tensor_data(y);
    for (int64_t b = 0; b < ct_tensor_size(y, 0); b++) assert_int_equal(yy[b], ct_dataset_labels(ds)[samples + b]);
    samples += (int)ct_tensor_size(x, 0), batches++;
    ct_tensor_free(x), ct_tensor_free(y);
  }
  assert_int_equal(batches, 4);
  assert_int_equal(samples, 15);
  ct_loader_free(l);
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

static void test_cifar100_fine_and_coarse(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  uint8_t labels[2 * 6] = {0, 99, 19, 0, 4, 30, 7, 72, 11, 1, 18, 58};
  write_file(dir, "train.bin", 1, 6, 2, labels);
  write_file(dir, "test.bin", 2, 3, 2, labels);
  ct_dataset *fine = ct_assert_nonnull(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_FINE));
  ct_dataset *coarse = ct_assert_nonnull(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_COARSE));
  assert_int_equal(ct_dataset_len(fine), 6);
  assert_int_equal(ct_dataset_num_classes(fine), 100);
  assert_int_equal(ct_dataset_num_classes(coarse), 20);
  for (int r = 0; r < 6; r++) {
    assert_int_equal(ct_dataset_labels(coarse)[r], labels[2 * r]);
    assert_int_equal(ct_dataset_labels(fine)[r], labels[2 * r + 1]);
    for (int k = 0; k < 3072; k += 97) assert_int_equal(ct_dataset_pixels(fine)[r * 3072 + k], pixel(1, r, k));
  }
  assert_string_equal(ct_dataset_class_name(fine, 0), "apple");
  assert_string_equal(ct_dataset_class_name(fine, 99), "worm");
  assert_string_equal(ct_dataset_class_name(coarse, 19), "vehicles_2");
  static const float mean[3] = CT_CIFAR100_MEAN, stdv[3] = CT_CIFAR100_STD;
  float x[3072];
  ct_assert_ok(ct_dataset_get(fine, 2, x, NULL));
  assert_true(x[2048] == ((float)pixel(1, 2, 2048) / 255.0f - mean[2]) / stdv[2]);
  ct_dataset_free(fine), ct_dataset_free(coarse);
  ct_dataset *test = ct_assert_nonnull(ct_cifar100_load(dir, CT_SPLIT_TEST, CT_CIFAR100_FINE));
  assert_int_equal(ct_dataset_len(test), 3);
  ct_dataset_free(test);
  ct_test_rmdir(dir);
}

/* Load and expect failure with status st and every needle in the message. */
static void expect_fail(ct_dataset *ds, ct_status st, const char *a, const char *b, const char *c) {
  if (ds) ct_dataset_free(ds);
  assert_null(ds);
  assert_int_equal(ct_last_status(), st);
  const char *needles[3] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (needles[i]) ct_assert_error_contains(needles[i]);
}

static void test_malformed_files(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4200];
  /* missing: names the path and where to download */
  snprintf(path, sizeof path, "%s/test_batch.bin", dir);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TEST), CT_EIO, path, "cifar-10-binary.tar.gz", "ct_cifar10_load");
  expect_fail(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_FINE), CT_EIO, "train.bin", "cifar-100-binary.tar.gz", NULL);

  /* a size that is not a whole number of records */
  uint8_t *junk = calloc(3074 * 3, 1);
  write_raw(dir, "test_batch.bin", junk, 3073 * 2 + 10);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TEST), CT_EFORMAT, path, "not a whole number of 3073-byte", "10 bytes over");
  /* empty */
  write_raw(dir, "test_batch.bin", junk, 0);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TEST), CT_EFORMAT, path, "empty", NULL);
  /* a CIFAR-100 file under CIFAR-10's name */
  write_raw(dir, "test_batch.bin", junk, 3074 * 3);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TEST), CT_EFORMAT, path, "CIFAR-100's 3074-byte", NULL);
  /* a label out of range, in the second record */
  memset(junk, 0, 3073 * 2);
  junk[3073] = 10;
  write_raw(dir, "test_batch.bin", junk, 3073 * 2);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TEST), CT_EFORMAT, path, "record 1", "label 10");
  /* the training set stops at a bad fourth file, named */
  write_cifar10(dir);
  write_raw(dir, "data_batch_4.bin", junk, 3000);
  expect_fail(ct_cifar10_load(dir, CT_SPLIT_TRAIN), CT_EFORMAT, "data_batch_4.bin", "3000 bytes", NULL);
  /* CIFAR-100: coarse >= 20, fine >= 100 */
  memset(junk, 0, 3074 * 2);
  junk[3074] = 20;
  write_raw(dir, "train.bin", junk, 3074 * 2);
  snprintf(path, sizeof path, "%s/train.bin", dir);
  expect_fail(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_FINE), CT_EFORMAT, path, "coarse label 20", "record 1");
  junk[3074] = 0, junk[1] = 100;
  write_raw(dir, "train.bin", junk, 3074 * 2);
  expect_fail(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_COARSE), CT_EFORMAT, "fine label 100", "record 0", NULL);
  /* a CIFAR-10 file as CIFAR-100's */
  write_raw(dir, "train.bin", junk, 3073 * 2);
  expect_fail(ct_cifar100_load(dir, CT_SPLIT_TRAIN, CT_CIFAR100_FINE), CT_EFORMAT, "3074-byte", "CIFAR-10's 3073-byte", NULL);
  /* not a folder */
  expect_fail(ct_cifar10_load("/nonexistent-cuttle-dir", CT_SPLIT_TRAIN), CT_EIO, "/nonexistent-cuttle-dir/data_batch_1.bin", NULL, NULL);
  free(junk);
  ct_test_rmdir(dir);
}

static void test_check_buffer(void **state) {
  (void)state;
  uint8_t buf[3074 * 2] = {0};
  int64_t n = -1;
  ct_assert_ok(ct_cifar_check(buf, 3073 * 2, "mem", 1, &n));
  assert_int_equal(n, 2);
  ct_assert_ok(ct_cifar_check(buf, 3074 * 2, NULL, 2, &n));
  assert_int_equal(n, 2);
  assert_int_equal(ct_cifar_check(buf, 3073, "mem", 2, &n), CT_EFORMAT);
  ct_assert_error_contains("mem: 3073 bytes");
  assert_int_equal(n, 0);
  assert_int_equal(ct_cifar_check(buf, 3074, NULL, 1, &n), CT_EFORMAT);
  ct_assert_error_contains("<buffer>");
  assert_int_equal(ct_cifar_check(buf, 0, "mem", 1, &n), CT_EFORMAT);
  assert_int_equal(ct_cifar_check(buf, 3073, "mem", 3, &n), CT_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cifar10_reads_records_in_order),
      cmocka_unit_test(test_cifar10_parent_folder),
      cmocka_unit_test(test_cifar10_batches),
      cmocka_unit_test(test_cifar100_fine_and_coarse),
      cmocka_unit_test(test_malformed_files),
      cmocka_unit_test(test_check_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
