/* tests/data/test_imagefolder.c: the image-folder dataset and the decoding under it, on folders of
 * PNG and JPEG files written here (libpng, libjpeg):
 *  - classes are the sorted folder names and samples come in torchvision ImageFolder's order
 *    (sorted(os.walk): a folder "sub-x" before "sub/deep"); other extensions are ignored;
 *  - train/val (or train/test) folders, or a seeded split by fraction;
 *  - decoding: PNG bytes exactly, JPEG close to what was written, gray and RGB (PIL's luma),
 *    resize (PIL's bilinear, hand-computed) and center crop (torchvision's offsets, zero padding);
 *  - a file that does not decode: an error naming it, or skipped and counted (batches smaller, an
 *    all-skipped batch passed over), never a crash; the same batches for 1 and 3 workers. */
#include <math.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "image_fixture.h"

static char *path_of(const char *dir, const char *rel) {
  static char p[8][4200];
  static int k;
  k = (k + 1) % 8;
  snprintf(p[k], sizeof p[k], "%s/%s", dir, rel);
  return p[k];
}

static void png_at(const char *dir, const char *rel, int seed, int h, int w, int c) {
  uint8_t *px = img_make(seed, h, w, c);
  assert_true(img_write_png(path_of(dir, rel), px, h, w, c));
  free(px);
}

static void jpeg_at(const char *dir, const char *rel, int seed, int h, int w, int c) {
  uint8_t *px = img_make(seed, h, w, c);
  assert_true(img_write_jpeg(path_of(dir, rel), px, h, w, c, 95));
  free(px);
}

/* The listing: a_cls (nested folders, mixed case extensions, ignored files), b_cls (JPEGs), C_up. */
static void test_classes_and_order(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "b_cls/img2.jpeg.png", 1, 4, 4, 3);
  jpeg_at(dir, "b_cls/img.JPG", 2, 4, 4, 3);
  jpeg_at(dir, "b_cls/img2.jpeg", 3, 4, 4, 3);
  png_at(dir, "a_cls/2.png", 4, 4, 4, 3);
  png_at(dir, "a_cls/10.png", 5, 4, 4, 3);
  png_at(dir, "a_cls/sub/0.png", 6, 4, 4, 3);
  png_at(dir, "a_cls/sub-x/1.png", 7, 4, 4, 3);
  png_at(dir, "a_cls/sub/deep/3.png", 8, 4, 4, 3);
  img_write_bytes(path_of(dir, "a_cls/notes.txt"), "x", 1);
  png_at(dir, "a_cls/x.bmp", 9, 4, 4, 3); /* torchvision would take .bmp; here it is not an image file */
  png_at(dir, "C_up/a.PNG", 10, 4, 4, 3);
  img_write_bytes(path_of(dir, "stray.png"), "x", 1); /* a file at the root is no class */
  assert_int_equal(symlink("..", path_of(dir, "a_cls/sub/loop")), 0); /* a link back up is walked once */
  ct_dataset *ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  assert_int_equal(ct_dataset_num_classes(ds), 3);
  assert_string_equal(ct_dataset_class_name(ds, 0), "C_up");
  assert_string_equal(ct_dataset_class_name(ds, 1), "a_cls");
  assert_string_equal(ct_dataset_class_name(ds, 2), "b_cls");
  static const char *const order[] = {"C_up/a.PNG",      "a_cls/10.png",      "a_cls/2.png",    "a_cls/sub/0.png",
                                      "a_cls/sub-x/1.png", "a_cls/sub/deep/3.png", "b_cls/img.JPG", "b_cls/img2.jpeg",
                                      "b_cls/img2.jpeg.png"};
  static const int64_t labels[] = {0, 1, 1, 1, 1, 1, 2, 2, 2};
  assert_int_equal(ct_dataset_len(ds), 9);
  for (int i = 0; i < 9; i++) {
    assert_string_equal(ct_dataset_sample_path(ds, i), path_of(dir, order[i]));
    assert_int_equal(ct_dataset_labels(ds)[i], labels[i]);
  }
  int64_t shape[3];
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[0], 3), assert_int_equal(shape[1], 4), assert_int_equal(shape[2], 4);
  assert_null(ct_dataset_pixels(ds)); /* decoded when read */
  assert_int_equal(ct_last_status(), CT_EUNSUPPORTED);
  assert_int_equal(ct_dataset_skipped(ds), 0);
  ct_dataset_free(ds);

  /* a class folder without images is an error naming it, as torchvision's */
  img_write_bytes(path_of(dir, "d_empty/readme.txt"), "x", 1);
  assert_null(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains(path_of(dir, "d_empty"));
  ct_test_rmdir(dir);
}

/* PNG pixels come back exactly, CHW, scaled by ToTensor; JPEG close to them. */
static void test_pixels_png_exact_jpeg_close(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "a/p.png", 3, 5, 6, 3);
  uint8_t smooth[5 * 6 * 3];
  for (int j = 0; j < 5 * 6 * 3; j++) smooth[j] = (uint8_t)(40 + 10 * (j / 18) + 5 * (j / 3 % 6) + 30 * (j % 3));
  assert_true(img_write_jpeg(path_of(dir, "b/j.jpg"), smooth, 5, 6, 3, 95));
  ct_dataset *ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  float x[3 * 5 * 6];
  int64_t y;
  ct_assert_ok(ct_dataset_get(ds, 0, x, &y));
  assert_int_equal(y, 0);
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < 5; r++)
      for (int c = 0; c < 6; c++) assert_true(x[(k * 5 + r) * 6 + c] == (float)img_pixel(3, r, c, k) / 255.0f);
  ct_assert_ok(ct_dataset_get(ds, 1, x, &y));
  assert_int_equal(y, 1);
  double worst = 0;
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < 5; r++)
      for (int c = 0; c < 6; c++) worst = fmax(worst, fabs(x[(k * 5 + r) * 6 + c] * 255.0 - smooth[(r * 6 + c) * 3 + k]));
  assert_true(worst <= 6); /* a smooth ramp at quality 95 */
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

/* Gray and RGB either way: an RGB file as gray is PIL's luma; a gray file as RGB repeats. */
static void test_gray_and_rgb(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "a/rgb.png", 1, 3, 3, 3);
  png_at(dir, "b/gray.png", 2, 3, 3, 1);
  ct_dataset *gray = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.mode = CT_IMAGE_GRAY}));
  ct_dataset *rgb = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  int64_t shape[3];
  ct_dataset_sample_shape(gray, shape);
  assert_int_equal(shape[0], 1);
  ct_dataset_sample_shape(rgb, shape);
  assert_int_equal(shape[0], 3);
  float g[9], c[27];
  ct_assert_ok(ct_dataset_get(gray, 0, g, NULL));
  for (int j = 0; j < 9; j++) {
    int r = img_pixel(1, j / 3, j % 3, 0), gg = img_pixel(1, j / 3, j % 3, 1), b = img_pixel(1, j / 3, j % 3, 2);
    assert_int_equal((int)lroundf(g[j] * 255.0f), (r * 19595 + gg * 38470 + b * 7471 + 0x8000) >> 16);
  }
  ct_assert_ok(ct_dataset_get(gray, 1, g, NULL));
  for (int j = 0; j < 9; j++) assert_int_equal((int)lroundf(g[j] * 255.0f), img_pixel(2, j / 3, j % 3, 0));
  ct_assert_ok(ct_dataset_get(rgb, 1, c, NULL));
  for (int k = 0; k < 3; k++)
    for (int j = 0; j < 9; j++) assert_int_equal((int)lroundf(c[k * 9 + j] * 255.0f), img_pixel(2, j / 3, j % 3, 0));
  ct_dataset_free(gray), ct_dataset_free(rgb);
  ct_test_rmdir(dir);
}

/* PIL's bilinear filter by hand: 1x2 -> 1x4 is [a, (3a + b)/4, (a + 3b)/4, b] rounded; 2x2 -> 1x1
 * is the mean (the support widens to 2 when halving). */
static void test_resize_by_hand(void **state) {
  (void)state;
  uint8_t px[4] = {0, 255, 100, 50};
  ct_image in = {.h = 1, .w = 2, .c = 1, .data = px}, out;
  ct_assert_ok(ct_image_resize(&in, 1, 4, &out));
  assert_int_equal(out.h, 1), assert_int_equal(out.w, 4), assert_int_equal(out.c, 1);
  assert_int_equal(out.data[0], 0), assert_int_equal(out.data[1], 64), assert_int_equal(out.data[2], 191),
      assert_int_equal(out.data[3], 255);
  ct_image_free(&out);
  in.h = 2; /* [[0, 255], [100, 50]] */
  ct_assert_ok(ct_image_resize(&in, 1, 1, &out));
  /* horizontal first: rows become 128 (127.5 rounds up) and 75; then (128 + 75) / 2 = 101.5 -> 102 */
  assert_int_equal(out.data[0], 102);
  ct_image_free(&out);
  ct_assert_ok(ct_image_resize(&in, 2, 2, &out)); /* same size: a copy */
  assert_memory_equal(out.data, px, 4);
  ct_image_free(&out);
  assert_int_equal(ct_image_resize(&in, 0, 2, &out), CT_EINVAL);
  assert_null(out.data);
}

/* Sizes: Resize((h, w)); Resize(shorter side) + CenterCrop; a crop larger than the image pads
 * with zeros at torchvision's offsets; without a size every image must match the first. */
static void test_sizes(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "a/wide.png", 1, 6, 10, 3);
  png_at(dir, "b/tall.png", 2, 9, 4, 3);
  int64_t shape[3];
  float *x = malloc(3 * 64 * 64 * sizeof(float));
  ct_dataset *ds = ct_assert_nonnull(
      ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.resize_h = 5, .resize_w = 7}));
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[1], 5), assert_int_equal(shape[2], 7);
  ct_assert_ok(ct_dataset_get(ds, 0, x, NULL));
  ct_assert_ok(ct_dataset_get(ds, 1, x, NULL));
  ct_dataset_free(ds);
  /* Resize(4): wide 6x10 -> 4x6 (int(4 * 10 / 6) = 6), tall 9x4 -> 9x4; CenterCrop(4, 3) */
  ds = ct_assert_nonnull(
      ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.resize = 4, .crop_h = 4, .crop_w = 3}));
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[1], 4), assert_int_equal(shape[2], 3);
  ct_assert_ok(ct_dataset_get(ds, 1, x, NULL));
  /* tall stays 9x4 (its shorter side is 4); rows start at round((9 - 4) / 2) = 2 (half to even),
   * columns at round(1 / 2) = 0 */
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 3; c++) assert_int_equal((int)lroundf(x[(k * 4 + r) * 3 + c] * 255), img_pixel(2, r + 2, c, k));
  ct_dataset_free(ds);
  /* CenterCrop(12, 6) of tall 9x4: pad top (12 - 9) // 2 = 1, left (6 - 4) // 2 = 1 */
  ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.crop_h = 12, .crop_w = 6}));
  ct_assert_ok(ct_dataset_get(ds, 1, x, NULL));
  for (int r = 0; r < 12; r++)
    for (int c = 0; c < 6; c++) {
      int in = r >= 1 && r < 10 && c >= 1 && c < 5;
      assert_int_equal((int)lroundf(x[r * 6 + c] * 255), in ? img_pixel(2, r - 1, c - 1, 0) : 0);
    }
  ct_dataset_free(ds);
  /* no size: the first image's (6x10); the tall one is an error naming it, from the loader too */
  ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[1], 6), assert_int_equal(shape[2], 10);
  assert_int_equal(ct_dataset_get(ds, 1, x, NULL), CT_ESHAPE);
  ct_assert_error_contains(path_of(dir, "b/tall.png"));
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 2, .num_workers = 1}));
  ct_tensor *bx, *by;
  assert_int_equal(ct_loader_next(l, &bx, &by), CT_ESHAPE);
  ct_assert_error_contains("tall.png");
  assert_null(bx);
  ct_loader_free(l);
  ct_dataset_free(ds);
  /* bad options */
  const ct_imagefolder_opts bad[] = {
      {.resize_h = 4}, {.crop_w = 4}, {.resize = 4, .resize_h = 4, .resize_w = 4}, {.resize = -1},
      {.val_fraction = 1.0}, {.val_fraction = NAN}, {.mode = (ct_image_mode)5}, {.on_error = (ct_decode_policy)9},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_null(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &bad[i]));
    assert_int_equal(ct_last_status(), CT_EINVAL);
    ct_assert_error_contains("ct_imagefolder_load");
  }
  free(x);
  ct_test_rmdir(dir);
}

/* train/val folders: each split its folder, with train's classes; test/ when there is no val/. */
static void test_split_folders(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "train/cat/0.png", 1, 4, 4, 3);
  png_at(dir, "train/cat/1.png", 2, 4, 4, 3);
  png_at(dir, "train/dog/0.png", 3, 4, 4, 3);
  png_at(dir, "train/emu/0.png", 4, 4, 4, 3);
  png_at(dir, "test/dog/9.png", 5, 4, 4, 3); /* val lacks cat and emu: fine */
  ct_dataset *tr = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  ct_dataset *te = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TEST, NULL));
  assert_int_equal(ct_dataset_len(tr), 4);
  assert_int_equal(ct_dataset_len(te), 1);
  assert_int_equal(ct_dataset_num_classes(te), 3);
  assert_int_equal(ct_dataset_labels(te)[0], 1); /* dog is train's class 1 */
  assert_string_equal(ct_dataset_sample_path(te, 0), path_of(dir, "test/dog/9.png"));
  ct_dataset_free(tr), ct_dataset_free(te);
  /* val/ wins over test/ */
  png_at(dir, "val/emu/5.png", 6, 4, 4, 3);
  te = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TEST, NULL));
  assert_int_equal(ct_dataset_labels(te)[0], 2);
  ct_dataset_free(te);
  /* a val class that train lacks */
  png_at(dir, "val/yak/5.png", 7, 4, 4, 3);
  assert_null(ct_imagefolder_load(dir, CT_SPLIT_TEST, NULL));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("yak");
  ct_test_rmdir(dir);
}

/* No split folders: a seeded fraction, as random_split: disjoint, complete, each in file order. */
static void test_split_by_fraction(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char rel[64];
  for (int i = 0; i < 20; i++) {
    snprintf(rel, sizeof rel, "%c/%02d.png", 'a' + i % 3, i);
    png_at(dir, rel, i, 3, 3, 1);
  }
  ct_imagefolder_opts o = {.val_fraction = 0.25, .split_seed = 11};
  ct_dataset *all = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  ct_dataset *tr = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &o));
  ct_dataset *te = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TEST, &o));
  assert_int_equal(ct_dataset_len(all), 20);
  assert_int_equal(ct_dataset_len(tr), 15);
  assert_int_equal(ct_dataset_len(te), 5);
  int seen[20] = {0};
  ct_dataset *parts[2] = {tr, te};
  for (int p = 0; p < 2; p++)
    for (int64_t i = 0; i < ct_dataset_len(parts[p]); i++) {
      int found = -1;
      for (int j = 0; j < 20; j++)
        if (strcmp(ct_dataset_sample_path(parts[p], i), ct_dataset_sample_path(all, j)) == 0) found = j;
      assert_true(found >= 0);
      seen[found]++;
      assert_int_equal(ct_dataset_labels(parts[p])[i], ct_dataset_labels(all)[found]);
      if (i > 0) assert_true(strcmp(ct_dataset_sample_path(parts[p], i - 1), ct_dataset_sample_path(parts[p], i)) < 0 ||
                             ct_dataset_labels(parts[p])[i - 1] < ct_dataset_labels(parts[p])[i]);
    }
  for (int j = 0; j < 20; j++) assert_int_equal(seen[j], 1);
  /* the same seed the same split; another seed another */
  ct_dataset *te2 = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TEST, &o));
  for (int i = 0; i < 5; i++) assert_string_equal(ct_dataset_sample_path(te2, i), ct_dataset_sample_path(te, i));
  ct_dataset_free(te2);
  o.split_seed = 12;
  te2 = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TEST, &o));
  int same = 1;
  for (int i = 0; i < 5; i++) same &= strcmp(ct_dataset_sample_path(te2, i), ct_dataset_sample_path(te, i)) == 0;
  assert_false(same);
  ct_dataset_free(te2);
  /* the test split of a folder without split folders needs a fraction */
  assert_null(ct_imagefolder_load(dir, CT_SPLIT_TEST, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("val_fraction");
  ct_dataset_free(all), ct_dataset_free(tr), ct_dataset_free(te);
  ct_test_rmdir(dir);
}

/* One epoch: the labels of every row, and the batch count. */
static int epoch_labels(ct_loader *l, int64_t *ys, int *batches, float *xs, int64_t d) {
  ct_tensor *x, *y;
  int n = 0, rc;
  *batches = 0;
  while ((rc = ct_loader_next(l, &x, &y)) == 1) {
    int64_t b = ct_tensor_size(y, 0);
    assert_true(b > 0);
    memcpy(ys + n, ct_tensor_data(y), (size_t)b * sizeof(int64_t));
    if (xs) memcpy(xs + n * d, ct_tensor_data(x), (size_t)(b * d) * sizeof(float));
    n += (int)b, (*batches)++;
    ct_tensor_free(x), ct_tensor_free(y);
  }
  assert_int_equal(rc, 0);
  return n;
}

/* Files that do not decode (garbage, a truncated PNG, JPEGs truncated in the scan and in the
 * headers, an empty file): errors naming them, or skipped and counted; samples 0..11 of class 0,
 * the bad ones at 3, 4, 5, 7 and 9. */
static void test_decode_errors_named_or_skipped(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char rel[64];
  for (int i = 0; i < 12; i++) {
    snprintf(rel, sizeof rel, "a/%02d.%s", i, i % 2 ? "jpg" : "png");
    if (i % 2) jpeg_at(dir, rel, i, 6, 6, 3);
    else png_at(dir, rel, i, 6, 6, 3);
  }
  size_t n = 0;
  uint8_t *good = img_read_bytes(path_of(dir, "a/00.png"), &n);
  img_write_bytes(path_of(dir, "a/04.png"), good, n / 2); /* truncated PNG */
  free(good);
  good = img_read_bytes(path_of(dir, "a/05.jpg"), &n);
  img_write_bytes(path_of(dir, "a/05.jpg"), good, n - 40); /* truncated inside the scan data */
  img_write_bytes(path_of(dir, "a/07.jpg"), good, n * 2 / 3); /* truncated in the headers */
  free(good);
  img_write_bytes(path_of(dir, "a/03.jpg"), "definitely not a JPEG", 21);
  img_write_bytes(path_of(dir, "a/09.jpg"), "", 0);
  float x[3 * 36];
  ct_dataset *ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  assert_int_equal(ct_dataset_get(ds, 4, x, NULL), CT_EFORMAT);
  ct_assert_error_contains(path_of(dir, "a/04.png"));
  assert_int_equal(ct_dataset_get(ds, 5, x, NULL), CT_EFORMAT);
  ct_assert_error_contains("truncated");
  assert_int_equal(ct_dataset_get(ds, 7, x, NULL), CT_EFORMAT);
  ct_assert_error_contains("07.jpg: not a valid JPEG");
  assert_int_equal(ct_dataset_get(ds, 3, x, NULL), CT_EFORMAT);
  ct_assert_error_contains("neither a PNG nor a JPEG");
  ct_tensor *bx, *by;
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 3, .num_workers = 2}));
  assert_int_equal(ct_loader_next(l, &bx, &by), 1);
  ct_tensor_free(bx), ct_tensor_free(by);
  assert_int_equal(ct_loader_next(l, &bx, &by), CT_EFORMAT); /* batch 1: samples 3, 4, 5 */
  ct_assert_error_contains("03.jpg");
  ct_assert_error_contains("batch 1 of epoch 0");
  assert_int_equal(ct_loader_next(l, &bx, &by), CT_EFORMAT); /* the same again, not a crash */
  ct_assert_ok(ct_loader_set_epoch(l, 0));
  ct_loader_free(l);
  assert_int_equal(ct_dataset_skipped(ds), 0);
  ct_dataset_free(ds);

  /* skipped: batch size 3 in order: [0 1 2] [-] (3, 4, 5 all bad: passed over) [6 8] [10 11] */
  ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.on_error = CT_DECODE_SKIP}));
  assert_int_equal(ct_dataset_get(ds, 4, x, NULL), CT_EFORMAT); /* get reports, whatever the policy */
  int64_t ys[3][12];
  int batches;
  static float xs[3][12 * 3 * 36];
  for (int w = 0; w < 2; w++) {
    l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 3, .num_workers = w ? 3 : 1}));
    for (int e = 0; e < 2; e++) {
      assert_int_equal(epoch_labels(l, ys[w], &batches, xs[w], 3 * 36), 7);
      assert_int_equal(batches, 3);
    }
    ct_loader_free(l);
  }
  assert_memory_equal(xs[0], xs[1], 7 * 3 * 36 * sizeof(float));
  assert_int_equal(ct_dataset_skipped(ds), 5); /* distinct files, however many epochs and loaders */
  ct_dataset_free(ds);

  /* the first file is bad and no size is given: the size comes from the next one, the bad one counted */
  img_write_bytes(path_of(dir, "a/00.png"), "\x89PNG\r\n\x1a\n garbage", 16);
  ds = ct_assert_nonnull(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.on_error = CT_DECODE_SKIP}));
  assert_int_equal(ct_dataset_skipped(ds), 1);
  ct_dataset_free(ds);
  assert_null(ct_imagefolder_load(dir, CT_SPLIT_TRAIN, NULL));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("00.png");
  ct_test_rmdir(dir);
}

/* Augmentation on an image folder: the same bits for 1 and 3 workers, with shuffling. */
static void test_loader_workers_with_augment(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char rel[64];
  for (int i = 0; i < 17; i++) {
    snprintf(rel, sizeof rel, "%c/%02d.%s", 'a' + i % 4, i, i % 3 ? "png" : "jpg");
    if (i % 3) png_at(dir, rel, i, 7 + i % 3, 8, 3);
    else jpeg_at(dir, rel, i, 8, 9, 3);
  }
  ct_dataset *ds = ct_assert_nonnull(
      ct_imagefolder_load(dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.resize = 8, .crop_h = 8, .crop_w = 8}));
  ct_assert_ok(ct_dataset_set_normalize(ds, 3, (float[]){0.5f, 0.4f, 0.3f}, (float[]){0.2f, 0.25f, 0.3f}));
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = 8, .crop_w = 8, .crop_padding = 2, .hflip_p = 0.5f}));
  static float xs[2][17 * 3 * 64];
  int64_t ys[2][17];
  int batches;
  for (int w = 0; w < 2; w++) {
    ct_loader *l = ct_assert_nonnull(ct_loader_new(
        ds, &(ct_loader_opts){.batch_size = 4, .shuffle = 1, .seed = 8, .num_workers = w ? 3 : 1, .pin_memory = 1}));
    ct_assert_ok(ct_loader_set_epoch(l, 2));
    assert_int_equal(epoch_labels(l, ys[w], &batches, xs[w], 3 * 64), 17);
    ct_loader_free(l);
  }
  assert_memory_equal(xs[0], xs[1], sizeof xs[0]);
  assert_memory_equal(ys[0], ys[1], sizeof ys[0]);
  ct_dataset_free(ds);
  ct_test_rmdir(dir);
}

static void test_image_api(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  png_at(dir, "g.png", 4, 3, 5, 1);
  ct_image im;
  ct_assert_ok(ct_image_load(path_of(dir, "g.png"), CT_IMAGE_RGB, &im));
  assert_int_equal(im.h, 3), assert_int_equal(im.w, 5), assert_int_equal(im.c, 3);
  assert_int_equal(im.data[(1 * 5 + 2) * 3 + 2], img_pixel(4, 1, 2, 0));
  ct_image_free(&im);
  ct_image_free(&im); /* a zeroed one is allowed */
  assert_int_equal(ct_image_load(path_of(dir, "none.png"), CT_IMAGE_RGB, &im), CT_EIO);
  ct_assert_error_contains("none.png");
  static const uint8_t junk[] = {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3};
  assert_int_equal(ct_image_decode(junk, sizeof junk, "j", CT_IMAGE_GRAY, &im), CT_EFORMAT);
  ct_assert_error_contains("j: not a valid JPEG");
  assert_null(im.data);
  assert_int_equal(ct_image_decode(junk, 0, NULL, CT_IMAGE_GRAY, &im), CT_EFORMAT);
  ct_assert_error_contains("<buffer>");
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classes_and_order),
      cmocka_unit_test(test_pixels_png_exact_jpeg_close),
      cmocka_unit_test(test_gray_and_rgb),
      cmocka_unit_test(test_resize_by_hand),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_split_folders),
      cmocka_unit_test(test_split_by_fraction),
      cmocka_unit_test(test_decode_errors_named_or_skipped),
      cmocka_unit_test(test_loader_workers_with_augment),
      cmocka_unit_test(test_image_api),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
