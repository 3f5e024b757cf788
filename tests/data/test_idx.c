/* tests/data/test_idx.c: the IDX parser and the Fashion-MNIST file checks, on small files written
 * into a temporary directory: valid files (raw and gzipped, every type code), and every malformed
 * case with its error code and message. */
#include "testutil.h"
#include <unistd.h>
#include "idx_fixture.h"

static const uint8_t pix[24] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 255};
static const uint32_t dims3[3] = {2, 3, 4};

static void expect_format_error(const uint8_t *b, size_t n, const char *needle) {
  ct_idx idx;
  ct_clear_error();
  assert_int_equal(ct_idx_parse(b, n, "bad.idx", &idx), CT_EFORMAT);
  assert_null(idx.data);
  ct_assert_error_contains("bad.idx");
  ct_assert_error_contains(needle);
}

static void test_parse_u8_images(void **state) {
  (void)state;
  size_t n;
  uint8_t *b = idx_build(0x08, 3, dims3, pix, sizeof pix, &n);
  ct_idx idx;
  ct_assert_ok(ct_idx_parse(b, n, "tiny", &idx));
  assert_int_equal(idx.magic, CT_IDX_MAGIC_IMAGES);
  assert_int_equal(idx.type, CT_IDX_U8);
  assert_int_equal(idx.ndim, 3);
  assert_int_equal(idx.shape[0], 2);
  assert_int_equal(idx.shape[1], 3);
  assert_int_equal(idx.shape[2], 4);
  assert_int_equal(idx.numel, 24);
  assert_int_equal(idx.nbytes, 24);
  assert_int_equal(idx.elem_size, 1);
  assert_memory_equal(idx.data, pix, 24);
  ct_idx_free(&idx);
  assert_null(idx.data);
  ct_idx_free(&idx); /* twice is fine */
  ct_idx_free(NULL);
  free(b);
}

static void test_parse_big_endian_types(void **state) {
  (void)state;
  uint32_t d1[1] = {2};
  size_t n;
  /* i16: 0x0102, 0xFFFE (-2) */
  const uint8_t i16[4] = {0x01, 0x02, 0xFF, 0xFE};
  uint8_t *b = idx_build(0x0B, 1, d1, i16, 4, &n);
  ct_idx idx;
  ct_assert_ok(ct_idx_parse(b, n, "i16", &idx));
  assert_int_equal(((int16_t *)idx.data)[0], 0x0102);
  assert_int_equal(((int16_t *)idx.data)[1], -2);
  ct_idx_free(&idx);
  free(b);
  /* i32: 0x01020304, -1 */
  const uint8_t i32[8] = {1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFF};
  b = idx_build(0x0C, 1, d1, i32, 8, &n);
  ct_assert_ok(ct_idx_parse(b, n, "i32", &idx));
  assert_int_equal(((int32_t *)idx.data)[0], 0x01020304);
  assert_int_equal(((int32_t *)idx.data)[1], -1);
  ct_idx_free(&idx);
  free(b);
  /* f32: 1.5 = 0x3FC00000, -2 = 0xC0000000 */
  const uint8_t f32[8] = {0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0};
  b = idx_build(0x0D, 1, d1, f32, 8, &n);
  ct_assert_ok(ct_idx_parse(b, n, "f32", &idx));
  assert_true(((float *)idx.data)[0] == 1.5f);
  assert_true(((float *)idx.data)[1] == -2.0f);
  ct_idx_free(&idx);
  free(b);
  /* f64: 0.25 = 0x3FD0000000000000; i8: -1, 5 */
  uint32_t one[1] = {1};
  const uint8_t f64[8] = {0x3F, 0xD0, 0, 0, 0, 0, 0, 0};
  b = idx_build(0x0E, 1, one, f64, 8, &n);
  ct_assert_ok(ct_idx_parse(b, n, "f64", &idx));
  assert_true(((double *)idx.data)[0] == 0.25);
  ct_idx_free(&idx);
  free(b);
  const uint8_t i8[2] = {0xFF, 5};
  b = idx_build(0x09, 1, d1, i8, 2, &n);
  ct_assert_ok(ct_idx_parse(b, n, "i8", &idx));
  assert_int_equal(((int8_t *)idx.data)[0], -1);
  assert_int_equal(((int8_t *)idx.data)[1], 5);
  ct_idx_free(&idx);
  free(b);
  assert_int_equal(ct_idx_type_size(0x0E), 8);
  assert_int_equal(ct_idx_type_size(0x0A), 0);
}

static void test_empty_dims_parse(void **state) {
  (void)state;
  uint32_t d[2] = {0, 28};
  size_t n;
  uint8_t *b = idx_build(0x08, 2, d, NULL, 0, &n);
  ct_idx idx;
  ct_assert_ok(ct_idx_parse(b, n, "empty", &idx));
  assert_int_equal(idx.numel, 0);
  ct_idx_free(&idx);
  free(b);
}

static void test_wrong_magic(void **state) {
  (void)state;
  size_t n;
  uint8_t *b = idx_build(0x08, 3, dims3, pix, sizeof pix, &n);
  b[0] = 0x12;
  expect_format_error(b, n, "wrong magic 0x12000803");
  b[0] = 0x1f, b[1] = 0x8b; /* a gzip file handed to the memory parser */
  expect_format_error(b, n, "wrong magic");
  free(b);
}

static void test_unknown_type_and_dims(void **state) {
  (void)state;
  size_t n;
  uint8_t *b = idx_build(0x0A, 3, dims3, pix, sizeof pix, &n);
  expect_format_error(b, n, "unknown type code 0x0a");
  free(b);
  b = idx_build(0x08, 0, NULL, NULL, 0, &n);
  expect_format_error(b, n, "0 dimensions");
  free(b);
  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  b = idx_build(0x08, 9, nine, pix, 1, &n);
  expect_format_error(b, n, "more than 8 dimensions");
  free(b);
}

static void test_truncated(void **state) {
  (void)state;
  size_t n;
  uint8_t *b = idx_build(0x08, 3, dims3, pix, sizeof pix, &n);
  expect_format_error(b, 0, "truncated header");
  expect_format_error(b, 3, "truncated header");
  expect_format_error(b, 4 + 8, "truncated header"); /* 3 dims need 16 bytes */
  expect_format_error(b, n - 1, "truncated data");
  expect_format_error(b, 16, "truncated data");
  free(b);
  /* sizes whose product overflows 64 bits */
  uint32_t huge[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  b = idx_build(0x0E, 3, huge, pix, 8, &n);
  expect_format_error(b, n, "truncated data");
  free(b);
}

static void test_trailing_bytes(void **state) {
  (void)state;
  size_t n;
  uint8_t *b = idx_build(0x08, 3, dims3, pix, sizeof pix, &n);
  uint8_t *longer = malloc(n + 5);
  memcpy(longer, b, n);
  memset(longer + n, 0, 5);
  expect_format_error(longer, n + 5, "5 trailing bytes");
  ct_assert_error_contains("disagrees with the header");
  free(longer);
  free(b);
}

static void test_parse_bad_arguments(void **state) {
  (void)state;
  ct_idx idx;
  assert_int_equal(ct_idx_parse(NULL, 10, "x", &idx), CT_EINVAL);
  assert_int_equal(ct_idx_parse(pix, 4, "x", NULL), CT_EINVAL);
  assert_int_equal(ct_idx_parse(NULL, 0, NULL, &idx), CT_EFORMAT);
  ct_assert_error_contains("<buffer>");
  assert_int_equal(ct_idx_load(NULL, &idx), CT_EINVAL);
}

static void test_load_raw_and_gzip(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  size_t n;
  uint8_t *b = idx_build(0x08, 3, dims3, pix, sizeof pix, &n);
  char *raw = idx_write(dir, "a-idx3-ubyte", b, n, 0);
  char *gz = idx_write(dir, "a-idx3-ubyte.gz", b, n, 1);
  ct_idx r, g;
  ct_assert_ok(ct_idx_load(raw, &r));
  ct_assert_ok(ct_idx_load(gz, &g));
  assert_int_equal(r.numel, 24);
  assert_int_equal(g.numel, 24);
  assert_int_equal(g.magic, CT_IDX_MAGIC_IMAGES);
  assert_memory_equal(r.data, pix, 24);
  assert_memory_equal(g.data, pix, 24);
  ct_idx_free(&r);
  ct_idx_free(&g);
  /* malformed on disk: the message names the file */
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, b, n);
  longer[n] = 7;
  char *bad = idx_write(dir, "trailing.gz", longer, n + 1, 1);
  assert_int_equal(ct_idx_load(bad, &r), CT_EFORMAT);
  ct_assert_error_contains("trailing.gz");
  ct_assert_error_contains("1 trailing bytes");
  assert_null(r.data);
  free(bad);
  free(longer);
  free(raw);
  free(gz);
  free(b);
  ct_test_rmdir(dir);
}

static void test_load_truncated_gzip_and_missing(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  size_t n;
  /* incompressible-ish payload so the gzip stream is long enough to cut */
  uint8_t payload[4000];
  uint32_t s = 1;
  for (size_t i = 0; i < sizeof payload; i++) s = s * 1103515245u + 12345u, payload[i] = (uint8_t)(s >> 16);
  uint32_t d[1] = {sizeof payload};
  uint8_t *b = idx_build(0x08, 1, d, payload, sizeof payload, &n);
  char *gz = idx_write(dir, "cut.gz", b, n, 1);
  FILE *f = fopen(gz, "rb");
  fseek(f, 0, SEEK_END);
  long full = ftell(f);
  fclose(f);
  assert_int_equal(truncate(gz, full / 2), 0);
  ct_idx idx;
  assert_int_equal(ct_idx_load(gz, &idx), CT_EFORMAT);
  ct_assert_error_contains("cut.gz");
  ct_assert_error_contains("gzip");
  assert_null(idx.data);
  char *missing = malloc(strlen(dir) + 32);
  sprintf(missing, "%s/nope.gz", dir);
  assert_int_equal(ct_idx_load(missing, &idx), CT_EIO);
  ct_assert_error_contains("nope.gz");
  free(missing);
  free(gz);
  free(b);
  ct_test_rmdir(dir);
}

/* ---- the Fashion-MNIST checks on fake files */

static const uint8_t labels5[5] = {9, 0, 3, 1, 9};

static void test_fashion_fake_ok_raw_names(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  idx_write_fake_split(dir, "t10k", 5, labels5, 5, 0);
  ct_dataset *ds = ct_assert_nonnull(ct_fashion_mnist_load(dir, CT_SPLIT_TEST));
  assert_int_equal(ct_dataset_len(ds), 5);
  int64_t shp[3];
  ct_dataset_sample_shape(ds, shp);
  assert_int_equal(shp[0], 1);
  assert_int_equal(shp[1], 28);
  assert_int_equal(shp[2], 28);
  assert_int_equal(ct_dataset_num_classes(ds), 10);
  assert_int_equal(ct_dataset_labels(ds)[0], 9);
  assert_int_equal(ct_dataset_labels(ds)[3], 1);
  assert_int_equal(ct_dataset_pixels(ds)[784 * 2 + 5], 7);
  float x[784];
  int64_t y;
  ct_assert_ok(ct_dataset_get(ds, 2, x, &y));
  assert_int_equal(y, 3);
  assert_true(x[5] == (7.0f / 255.0f - 0.2860f) / 0.3530f);
  assert_int_equal(ct_dataset_get(ds, 5, x, &y), CT_EINVAL);
  ct_dataset_free(ds);
  /* the training split is absent: CT_EIO naming both names tried */
  assert_null(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("train-images-idx3-ubyte.gz");
  ct_assert_error_contains("dataset-fashion-mnist");
  assert_null(ct_fashion_mnist_load(dir, (ct_split)7));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_test_rmdir(dir);
}

static void test_fashion_fake_gz(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  idx_write_fake_split(dir, "train", 5, labels5, 5, 1);
  ct_dataset *ds = ct_assert_nonnull(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_dataset_len(ds), 5);
  assert_int_equal(ct_dataset_labels(ds)[4], 9);
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

static void test_fashion_count_mismatch(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  idx_write_fake_split(dir, "train", 5, labels5, 4, 1);
  assert_null(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("image and label counts differ");
  ct_assert_error_contains("5 images");
  ct_assert_error_contains("4 labels");
  ct_test_rmdir(dir);
}

static void test_fashion_label_out_of_range(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  const uint8_t bad[5] = {1, 2, 10, 3, 4};
  idx_write_fake_split(dir, "train", 5, bad, 5, 0);
  assert_null(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("train-labels-idx1-ubyte");
  ct_assert_error_contains("label 10 of sample 2 is out of range");
  ct_test_rmdir(dir);
}

static void test_fashion_wrong_magic_and_size(void **state) {
  (void)state;
  char *dir = ct_test_tmpdir();
  /* a label file with the images' magic */
  idx_write_fake_split(dir, "train", 2, labels5, 2, 0);
  size_t n;
  uint32_t d3[3] = {2, 1, 1};
  uint8_t *b = idx_build(0x08, 3, d3, labels5, 2, &n);
  free(idx_write(dir, "train-labels-idx1-ubyte", b, n, 0));
  free(b);
  assert_null(ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("wrong magic 0x00000803");
  ct_assert_error_contains("expected 0x00000801");
  /* images that are not 28x28 */
  uint32_t d[3] = {1, 4, 6};
  b = idx_build(0x08, 3, d, pix, 24, &n);
  free(idx_write(dir, "t10k-images-idx3-ubyte", b, n, 0));
  free(b);
  uint32_t d1[1] = {1};
  b = idx_build(0x08, 1, d1, labels5, 1, &n);
  free(idx_write(dir, "t10k-labels-idx1-ubyte", b, n, 0));
  free(b);
  assert_null(ct_fashion_mnist_load(dir, CT_SPLIT_TEST));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("28x28");
  ct_assert_error_contains("4x6");
  ct_test_rmdir(dir);
}

static void test_class_names(void **state) {
  (void)state;
  assert_string_equal(ct_fashion_mnist_class_name(9), "Ankle boot");
  assert_string_equal(ct_fashion_mnist_class_name(0), "T-shirt/top");
  assert_string_equal(ct_fashion_mnist_class_name(10), "?");
  assert_string_equal(ct_fashion_mnist_class_name(-1), "?");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_u8_images),
      cmocka_unit_test(test_parse_big_endian_types),
      cmocka_unit_test(test_empty_dims_parse),
      cmocka_unit_test(test_wrong_magic),
      cmocka_unit_test(test_unknown_type_and_dims),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_trailing_bytes),
      cmocka_unit_test(test_parse_bad_arguments),
      cmocka_unit_test(test_load_raw_and_gzip),
      cmocka_unit_test(test_load_truncated_gzip_and_missing),
      cmocka_unit_test(test_fashion_fake_ok_raw_names),
      cmocka_unit_test(test_fashion_fake_gz),
      cmocka_unit_test(test_fashion_count_mismatch),
      cmocka_unit_test(test_fashion_label_out_of_range),
      cmocka_unit_test(test_fashion_wrong_magic_and_size),
      cmocka_unit_test(test_class_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
