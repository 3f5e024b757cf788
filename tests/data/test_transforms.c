/* tests/data/test_transforms.c: torchvision's Normalize, RandomCrop and RandomHorizontalFlip on a
 * dataset, through ct_dataset_get_seeded and the loader:
 *  - against hand-computed images where the draw is forced (flip with p = 1, a crop the size of the
 *    padded image, which has one place), and where it is not, every output is one of the
 *    (2p + 1)^2 shifted windows of the zero-padded image, each window and both flips occur, with
 *    frequencies near uniform;
 *  - per-channel Normalize, bit for bit (pixel / 255 - mean[c]) / std[c] in float32;
 *  - the loader's batches are each sample's ct_dataset_get_seeded(seed, epoch): the same bits for 0,
 *    1 and 3 workers, another draw in the next epoch, and with the distributed sampler too;
 *  - the settings are frozen while a loader reads the dataset; bad arguments. */
#include <math.h>
#include <string.h>
#include "testutil.h"

#define N 64
#define C 2
#define H 3
#define W 4
#define D (C * H * W)

/* Sample i, channel c, row r, column x: 1 + ((i * 13 + c * 50 + r * W + x) % 200), never 0, so the
 * zero padding is told from the image. Label i. */
static uint8_t px_of(int i, int c, int r, int x) { return (uint8_t)(1 + (i * 13 + c * 50 + r * W + x) % 200); }

static ct_dataset *make_ds(void) {
  static uint8_t px[N * D];
  int64_t lb[N];
  for (int i = 0; i < N; i++) {
    lb[i] = i;
    for (int c = 0; c < C; c++)
      for (int r = 0; r < H; r++)
        for (int x = 0; x < W; x++) px[((i * C + c) * H + r) * W + x] = px_of(i, c, r, x);
  }
  ct_dataset *ds = ct_assert_nonnull(ct_dataset_from_u8(px, lb, N, C, H, W, N, 0.0f, 1.0f));
  /* mean 0, std 1/255: x = pixel exactly, so tests compare pixel values */
  ct_assert_ok(ct_dataset_set_normalize(ds, 1, (float[]){0.0f}, (float[]){1.0f / 255.0f}));
  return ds;
}

static void test_normalize_per_channel(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  const float mean[C] = {0.25f, 0.5f}, std[C] = {0.2f, 0.4f};
  ct_assert_ok(ct_dataset_set_normalize(ds, C, mean, std));
  float x[D];
  ct_assert_ok(ct_dataset_get(ds, 5, x, NULL));
  for (int c = 0; c < C; c++)
    for (int j = 0; j < H * W; j++) assert_true(x[c * H * W + j] == ((float)px_of(5, c, j / W, j % W) / 255.0f - mean[c]) / std[c]);
  /* one value for every channel */
  ct_assert_ok(ct_dataset_set_normalize(ds, 1, (float[]){0.5f}, (float[]){0.25f}));
  ct_assert_ok(ct_dataset_get(ds, 5, x, NULL));
  assert_true(x[H * W] == ((float)px_of(5, 1, 0, 0) / 255.0f - 0.5f) / 0.25f);
  assert_int_equal(ct_dataset_set_normalize(ds, 3, (float[]){0, 0, 0}, (float[]){1, 1, 1}), CT_EINVAL);
  ct_assert_error_contains("2 channels");
  assert_int_equal(ct_dataset_set_normalize(ds, 2, (float[]){0, 0}, (float[]){1, 0}), CT_EINVAL);
  assert_int_equal(ct_dataset_set_normalize(ds, 1, (float[]){NAN}, (float[]){1}), CT_EINVAL);
  ct_dataset_free(ds);
}

static void test_flip_always(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.hflip_p = 1.0f}));
  float x[D];
  for (int e = 0; e < 3; e++) {
    ct_assert_ok(ct_dataset_get_seeded(ds, 9, 123, e, x, NULL));
    for (int c = 0; c < C; c++)
      for (int r = 0; r < H; r++)
        for (int k = 0; k < W; k++) assert_int_equal((int)lroundf(x[(c * H + r) * W + k]), px_of(9, c, r, W - 1 - k));
  }
  /* p = 0: never */
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.hflip_p = 0.0f}));
  ct_assert_ok(ct_dataset_get_seeded(ds, 9, 123, 0, x, NULL));
  assert_int_equal((int)lroundf(x[0]), px_of(9, 0, 0, 0));
  ct_dataset_free(ds);
}

/* A crop the size of the padded image has one place: the image framed by p zero pixels. */
static void test_crop_of_the_padded_size(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  const int p = 2, th = H + 2 * p, tw = W + 2 * p;
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = th, .crop_w = tw, .crop_padding = p}));
  int64_t shape[3];
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[0], C), assert_int_equal(shape[1], th), assert_int_equal(shape[2], tw);
  float x[C * (H + 4) * (W + 4)];
  ct_assert_ok(ct_dataset_get_seeded(ds, 3, 7, 1, x, NULL));
  for (int c = 0; c < C; c++)
    for (int r = 0; r < th; r++)
      for (int k = 0; k < tw; k++) {
        int inside = r >= p && r < p + H && k >= p && k < p + W;
        assert_int_equal((int)lroundf(x[(c * th + r) * tw + k]), inside ? px_of(3, c, r - p, k - p) : 0);
      }
  ct_dataset_free(ds);
}

/* Which window (top, left) of the padded image and which flip produced out (C, H, W), or -1. */
static int which_window(const float *out, int i, int p, int *flipped) {
  for (int top = 0; top <= 2 * p; top++)
    for (int left = 0; left <= 2 * p; left++)
      for (int f = 0; f < 2; f++) {
        int same = 1;
        for (int c = 0; c < C && same; c++)
          for (int r = 0; r < H && same; r++)
            for (int k = 0; k < W && same; k++) {
              int sy = top + r - p, sx = left + (f ? W - 1 - k : k) - p;
              int want = sy >= 0 && sy < H && sx >= 0 && sx < W ? px_of(i, c, sy, sx) : 0;
              same = (int)lroundf(out[(c * H + r) * W + k]) == want;
            }
        if (same) return *flipped = f, top * (2 * p + 1) + left;
      }
  return -1;
}

/* RandomCrop(size=(H, W), padding=1) + RandomHorizontalFlip(0.5): every output is a window of the
 * padded image, flipped or not; over 64 samples x 40 epochs the 9 windows and the flips come out
 * about uniformly (expected 284 a window: a generous band), and epochs differ. */
static void test_random_crop_and_flip(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  const int p = 1;
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = H, .crop_w = W, .crop_padding = p, .hflip_p = 0.5f}));
  int windows[9] = {0}, flips = 0, total = 0, changed = 0;
  float x[D], prev[D];
  for (int e = 0; e < 40; e++)
    for (int i = 0; i < N; i++) {
      ct_assert_ok(ct_dataset_get_seeded(ds, i, 99, e, x, NULL));
      int f = 0, w = which_window(x, i, p, &f);
      assert_true(w >= 0);
      windows[w]++, flips += f, total++;
      if (i == 0 && e > 0) changed += memcmp(x, prev, sizeof x) != 0;
      if (i == 0) memcpy(prev, x, sizeof x);
    }
  for (int w = 0; w < 9; w++) assert_true(windows[w] > 200 && windows[w] < 370);
  assert_true(flips > total / 2 - 150 && flips < total / 2 + 150);
  assert_true(changed > 25); /* sample 0 changes between most epochs (9 * 2 outcomes) */
  /* the draws depend on the seed */
  float a[D], b[D];
  int differ = 0;
  for (int i = 0; i < N; i++) {
    ct_assert_ok(ct_dataset_get_seeded(ds, i, 1, 0, a, NULL));
    ct_assert_ok(ct_dataset_get_seeded(ds, i, 2, 0, b, NULL));
    differ += memcmp(a, b, sizeof a) != 0;
  }
  assert_true(differ > N / 2);
  ct_dataset_free(ds);
}

/* A 1x1 crop without padding picks one pixel; all 12 places occur. */
static void test_small_crop(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = 1, .crop_w = 1}));
  int seen[H * W] = {0};
  float x[C];
  for (int e = 0; e < 200; e++) {
    ct_assert_ok(ct_dataset_get_seeded(ds, 0, 5, e, x, NULL));
    int found = -1;
    for (int j = 0; j < H * W; j++)
      if ((int)lroundf(x[0]) == px_of(0, 0, j / W, j % W) && (int)lroundf(x[1]) == px_of(0, 1, j / W, j % W)) found = j;
    assert_true(found >= 0);
    seen[found]++;
  }
  for (int j = 0; j < H * W; j++) assert_true(seen[j] > 0);
  ct_dataset_free(ds);
}

/* One epoch's rows, in order, with their labels (the sample indices). */
static int run_epoch(ct_loader *l, float *xs, int64_t *ys, int64_t d) {
  ct_tensor *x, *y;
  int n = 0, rc;
  while ((rc = ct_loader_next(l, &x, &y)) == 1) {
    int64_t b = ct_tensor_size(x, 0);
    memcpy(xs + n * d, ct_tensor_data(x), (size_t)(b * d) * sizeof(float));
    memcpy(ys + n, ct_tensor_data(y), (size_t)b * sizeof(int64_t));
    n += (int)b;
    ct_tensor_free(x), ct_tensor_free(y);
  }
  assert_int_equal(rc, 0);
  return n;
}

/* The loader's rows are ct_dataset_get_seeded(loader seed, epoch) of their samples, bit for bit,
 * for 0, 1 and 3 workers, with a crop that changes the shape; the next epoch draws again. */
static void test_loader_same_batches_any_workers(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = 2, .crop_w = 3, .crop_padding = 2, .hflip_p = 0.5f}));
  const int64_t d = C * 2 * 3;
  static float xs[3][2][N * C * 2 * 3];
  static int64_t ys[3][2][N];
  const int workers[3] = {0, 1, 3};
  for (int k = 0; k < 3; k++) {
    ct_loader *l = ct_assert_nonnull(
        ct_loader_new(ds, &(ct_loader_opts){.batch_size = 5, .shuffle = 1, .seed = 42, .num_workers = workers[k]}));
    for (int e = 0; e < 2; e++) assert_int_equal(run_epoch(l, xs[k][e], ys[k][e], d), N);
    ct_loader_free(l);
  }
  for (int k = 1; k < 3; k++)
    for (int e = 0; e < 2; e++) {
      assert_memory_equal(xs[k][e], xs[0][e], sizeof xs[0][e]);
      assert_memory_equal(ys[k][e], ys[0][e], sizeof ys[0][e]);
    }
  float want[C * 2 * 3];
  int differ = 0;
  for (int e = 0; e < 2; e++)
    for (int r = 0; r < N; r++) {
      ct_assert_ok(ct_dataset_get_seeded(ds, ys[0][e][r], 42, e, want, NULL));
      assert_memory_equal(xs[0][e] + r * d, want, sizeof want);
    }
  for (int r = 0; r < N; r++) { /* the same sample in epochs 0 and 1 */
    int r1 = 0;
    while (ys[0][1][r1] != ys[0][0][r]) r1++;
    differ += memcmp(xs[0][0] + r * d, xs[0][1] + r1 * d, (size_t)d * sizeof(float)) != 0;
  }
  assert_true(differ > N / 2);
  ct_dataset_free(ds);
}

/* With the distributed sampler each rank's rows are still their samples' draws. */
static void test_loader_ranks(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.crop_h = H, .crop_w = W, .crop_padding = 1, .hflip_p = 0.5f}));
  static float xs[N * D];
  int64_t ys[N];
  float want[D];
  for (int rank = 0; rank < 2; rank++) {
    ct_loader *l = ct_assert_nonnull(ct_loader_new(
        ds, &(ct_loader_opts){.batch_size = 4, .shuffle = 1, .seed = 3, .num_workers = 2, .rank = rank, .world_size = 2}));
    ct_assert_ok(ct_loader_set_epoch(l, 5));
    int n = run_epoch(l, xs, ys, D);
    assert_int_equal(n, N / 2);
    for (int r = 0; r < n; r++) {
      ct_assert_ok(ct_dataset_get_seeded(ds, ys[r], 3, 5, want, NULL));
      assert_memory_equal(xs + r * D, want, sizeof want);
    }
    ct_loader_free(l);
  }
  ct_dataset_free(ds);
}

static void test_frozen_while_read_and_errors(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, NULL));
  assert_int_equal(ct_dataset_set_augment(ds, &(ct_augment){.hflip_p = 0.5f}), CT_EINVAL);
  ct_assert_error_contains("a loader is reading this dataset");
  assert_int_equal(ct_dataset_set_normalize(ds, 1, (float[]){0}, (float[]){1}), CT_EINVAL);
  ct_loader *l2 = ct_assert_nonnull(ct_loader_new(ds, NULL));
  ct_loader_free(l);
  assert_int_equal(ct_dataset_set_augment(ds, &(ct_augment){.hflip_p = 0.5f}), CT_EINVAL); /* l2 still reads */
  ct_loader_free(l2);
  ct_assert_ok(ct_dataset_set_augment(ds, &(ct_augment){.hflip_p = 0.5f}));
  ct_assert_ok(ct_dataset_set_augment(ds, NULL)); /* off */
  int64_t shape[3];
  ct_dataset_sample_shape(ds, shape);
  assert_int_equal(shape[1], H);
  const ct_augment bad[] = {
      {.crop_h = 2},                                  /* one size */
      {.crop_padding = 1},                            /* padding without a crop */
      {.crop_h = H + 3, .crop_w = W, .crop_padding = 1}, /* larger than padded */
      {.crop_h = -1, .crop_w = 1},
      {.hflip_p = 1.5f},
      {.hflip_p = NAN},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(ct_dataset_set_augment(ds, &bad[i]), CT_EINVAL);
    ct_assert_error_contains("ct_dataset_set_augment");
  }
  float x[D];
  assert_int_equal(ct_dataset_get_seeded(ds, N, 0, 0, x, NULL), CT_EINVAL);
  assert_int_equal(ct_dataset_get_seeded(ds, 0, 0, -1, x, NULL), CT_EINVAL);
  ct_dataset_free(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_normalize_per_channel),
      cmocka_unit_test(test_flip_always),
      cmocka_unit_test(test_crop_of_the_padded_size),
      cmocka_unit_test(test_random_crop_and_flip),
      cmocka_unit_test(test_small_crop),
      cmocka_unit_test(test_loader_same_batches_any_workers),
      cmocka_unit_test(test_loader_ranks),
      cmocka_unit_test(test_frozen_while_read_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
