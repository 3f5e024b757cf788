/* tests/data/test_fmnist_folder.c: Fashion-MNIST exported as a folder of PNG files reads as the IDX
 * loader reads it (issue 19: "Fashion-MNIST exported as a folder of PNG files ... trains through
 * the image-folder path"). A subset of the training set (the first PER_CLASS images of each class,
 * ordered by class so that ImageFolder's order is the IDX order) is written twice here: as IDX
 * files, read by ct_fashion_mnist_load, and as root/<label>/<index>.png grayscale 28x28 PNGs, read
 * by ct_imagefolder_load in GRAY mode. With the same loader seed the first batches are the same:
 * bit for bit with ToTensor alone (pixels identical), with Fashion-MNIST's Normalize, and with
 * --augment's crop and flip (the draws depend on the seed, the epoch and the index alone). Skipped
 * (77) without the data set. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "testutil.h"
#include "image_fixture.h"

#define PER_CLASS 6
#define N_SUB (10 * PER_CLASS)

static char *tmp;

static void put_be32(FILE *f, uint32_t v) {
  uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  fwrite(b, 1, 4, f);
}

/* The subset's pixels (N_SUB x 784) and labels, from the installed training set. */
static void pick_subset(uint8_t *px, uint8_t *lab) {
  ct_dataset *full = ct_assert_nonnull(ct_fashion_mnist_load(NULL, CT_SPLIT_TRAIN));
  const uint8_t *all = ct_dataset_pixels(full);
  const int64_t *labels = ct_dataset_labels(full);
  int n = 0;
  for (int c = 0; c < 10; c++) {
    int taken = 0;
    for (int64_t i = 0; i < ct_dataset_len(full) && taken < PER_CLASS; i++)
      if (labels[i] == c) {
        memcpy(px + (size_t)n * 784, all + i * 784, 784);
        lab[n++] = (uint8_t)c, taken++;
      }
  }
  assert_int_equal(n, N_SUB);
  ct_dataset_free(full);
}

/* The subset as IDX files in dir (train-images-idx3-ubyte, train-labels-idx1-ubyte) and as PNGs
 * in dir/png/<label>/<index>.png. */
static void write_both(const char *dir, const uint8_t *px, const uint8_t *lab) {
  char path[4200];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  put_be32(f, 0x803), put_be32(f, N_SUB), put_be32(f, 28), put_be32(f, 28);
  fwrite(px, 1, (size_t)N_SUB * 784, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
  assert_non_null(f = fopen(path, "wb"));
  put_be32(f, 0x801), put_be32(f, N_SUB);
  fwrite(lab, 1, N_SUB, f);
  fclose(f);
  for (int i = 0; i < N_SUB; i++) {
    snprintf(path, sizeof path, "%s/png/%d/%03d.png", dir, lab[i], i);
    assert_true(img_write_png(path, px + (size_t)i * 784, 28, 28, 1));
  }
}

/* The first batch of each, with the same loader options: x within tol (0: bit for bit), y equal. */
static void same_first_batch(ct_dataset *a, ct_dataset *b, double tol) {
  ct_loader_opts lo = {.batch_size = 16, .shuffle = 1, .seed = 42, .num_workers = 2};
  ct_loader *la = ct_assert_nonnull(ct_loader_new(a, &lo)), *lb = ct_assert_nonnull(ct_loader_new(b, &lo));
  for (int epoch = 0; epoch < 2; epoch++) {
    ct_assert_ok(ct_loader_set_epoch(la, epoch));
    ct_assert_ok(ct_loader_set_epoch(lb, epoch));
    ct_tensor *xa, *ya, *xb, *yb;
    assert_int_equal(ct_loader_next(la, &xa, &ya), 1);
    assert_int_equal(ct_loader_next(lb, &xb, &yb), 1);
    assert_int_equal(ct_tensor_numel(xa), 16 * 784);
    assert_int_equal(ct_tensor_numel(xb), 16 * 784);
    const float *fa = ct_tensor_data(xa), *fb = ct_tensor_data(xb);
    for (int k = 0; k < 16 * 784; k++)
      if (tol == 0 ? memcmp(&fa[k], &fb[k], sizeof(float)) != 0 : fabs((double)fa[k] - fb[k]) > tol) {
        fprintf(stderr, "epoch %d, value %d: IDX %.9g, PNG folder %.9g\n", epoch, k, fa[k], fb[k]);
        fail();
      }
    assert_memory_equal(ct_tensor_data(ya), ct_tensor_data(yb), 16 * sizeof(int64_t));
    ct_tensor_free(xa), ct_tensor_free(ya), ct_tensor_free(xb), ct_tensor_free(yb);
  }
  ct_loader_free(la);
  ct_loader_free(lb);
}

static void png_folder_reads_as_idx(void **state) {
  (void)state;
  static uint8_t px[N_SUB * 784], lab[N_SUB];
  pick_subset(px, lab);
  write_both(tmp, px, lab);
  char root[4200];
  snprintf(root, sizeof root, "%s/png", tmp);
  ct_dataset *idx = ct_assert_nonnull(ct_fashion_mnist_load(tmp, CT_SPLIT_TRAIN));
  ct_dataset *png = ct_assert_nonnull(ct_imagefolder_load(root, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.mode = CT_IMAGE_GRAY}));
  assert_int_equal(ct_dataset_len(png), N_SUB);
  int64_t s[3];
  ct_dataset_sample_shape(png, s);
  assert_true(s[0] == 1 && s[1] == 28 && s[2] == 28);
  assert_int_equal(ct_dataset_num_classes(png), 10);
  /* ToTensor alone: the pixels, bit for bit */
  float zero = 0, one = 1, mean = CT_FASHION_MNIST_MEAN, std = CT_FASHION_MNIST_STD;
  ct_assert_ok(ct_dataset_set_normalize(idx, 1, &zero, &one));
  ct_assert_ok(ct_dataset_set_normalize(png, 1, &zero, &one));
  same_first_batch(idx, png, 0);
  /* Fashion-MNIST's Normalize, as `cuttle train` sees the IDX files */
  ct_assert_ok(ct_dataset_set_normalize(idx, 1, &mean, &std));
  ct_assert_ok(ct_dataset_set_normalize(png, 1, &mean, &std));
  same_first_batch(idx, png, 1e-6);
  /* --augment's RandomCrop(28, padding=4) and RandomHorizontalFlip(0.5): the same draws */
  ct_augment aug = {.crop_h = 28, .crop_w = 28, .crop_padding = 4, .hflip_p = 0.5f};
  ct_assert_ok(ct_dataset_set_augment(idx, &aug));
  ct_assert_ok(ct_dataset_set_augment(png, &aug));
  same_first_batch(idx, png, 1e-6);
  ct_dataset_free(idx);
  ct_dataset_free(png);
}

int main(void) {
  if (!ct_test_data_dir()) {
    printf("SKIP: needs Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return 77;
  }
  tmp = ct_test_tmpdir();
  if (!tmp) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(png_folder_reads_as_idx)};
  int fails = cmocka_run_group_tests_name("fashion-mnist as a PNG folder", tests, NULL, NULL);
  ct_test_rmdir(tmp);
  return fails;
}
