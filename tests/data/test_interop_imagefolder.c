/* tests/data/test_interop_imagefolder.c: cuttle's image folder against torchvision's ImageFolder on
 * the same files. The Python side is tests/data/imagefolder_interop.py, run by $CUTTLE_PYTHON (the
 * build folder's venv, which sees Debian's python3-torchvision and python3-pil: scripts/python_env.sh
 * installs them). A missing torchvision is a failure, not a skip, unless CUTTLE_INTEROP_OPTIONAL=1.
 *
 * A folder of PNG and JPEG files (RGB and gray, several sizes, nested folders, names whose order is
 * easy to get wrong) is written here. Then:
 *  - the classes, class_to_idx and the sample order (paths and labels) are torchvision's;
 *  - every sample, decoded and brought to size by cuttle (mode, Resize, CenterCrop) and read
 *    through ct_dataset_get with Normalize(0, 1) (x = pixel / 255), equals torchvision's
 *    PILToTensor of the same transforms within 1 (of 255) everywhere; the largest difference is
 *    printed (it is 0: the same libjpeg and PIL's resampling arithmetic). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "image_fixture.h"

static char script[4096];

typedef struct {
  const char *name; /* imagefolder_interop.py's CONFIGS key */
  ct_imagefolder_opts opts;
} config;

static const config configs[] = {
    {"rgb_resize6_crop5", {.resize = 6, .crop_h = 5, .crop_w = 5}},
    {"gray_resize7x4", {.mode = CT_IMAGE_GRAY, .resize_h = 7, .resize_w = 4}},
    {"rgb_crop9x8", {.crop_h = 9, .crop_w = 8}},
    {"rgb_up11_crop11", {.resize = 11, .crop_h = 11, .crop_w = 11}},
    {"gray_resize3_crop3", {.mode = CT_IMAGE_GRAY, .resize = 3, .crop_h = 3, .crop_w = 3}},
};

static void write_folder(const char *root) {
  /* name, seed, h, w, channels, jpeg */
  static const struct {
    const char *rel;
    int h, w, c, jpeg;
  } files[] = {
      {"cat/10.png", 12, 9, 3, 0},        {"cat/2.jpg", 20, 16, 3, 1},        {"cat/sub/0.png", 5, 7, 1, 0},
      {"cat/sub-x/1.JPEG", 8, 8, 1, 1},   {"cat/sub/deep/3.png", 3, 3, 3, 0}, {"cat-2/a.png", 9, 14, 3, 0},
      {"Dog/x.jpeg", 13, 6, 3, 1},        {"Dog/y.PNG", 6, 13, 1, 0},         {"ant/only.jpg", 31, 17, 3, 1},
      {"ant/z/zz.png", 4, 11, 3, 0},
  };
  char path[4400];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    uint8_t *px = img_make((int)i + 1, files[i].h, files[i].w, files[i].c);
    snprintf(path, sizeof path, "%s/%s", root, files[i].rel);
    int ok = files[i].jpeg ? img_write_jpeg(path, px, files[i].h, files[i].w, files[i].c, 90)
                           : img_write_png(path, px, files[i].h, files[i].w, files[i].c);
    assert_true(ok);
    free(px);
  }
}

static char *slurp(const char *path) {
  size_t n = 0;
  char *s = (char *)img_read_bytes(path, &n);
  if (!s) return NULL;
  s = realloc(s, n + 1);
  s[n] = 0;
  return s;
}

static void test_same_as_torchvision(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char root[4200], out[4200], cmd[16384], path[4400];
  snprintf(root, sizeof root, "%s/root", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  write_folder(root);
  assert_int_equal(mkdir(out, 0700), 0);
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", ct_test_python(), script, root, out);
  assert_int_equal(system(cmd), 0);

  /* classes and samples */
  ct_dataset *ds = ct_assert_nonnull(ct_imagefolder_load(root, CT_SPLIT_TRAIN, &configs[0].opts));
  snprintf(path, sizeof path, "%s/classes.txt", out);
  char *classes = ct_assert_nonnull(slurp(path)), *save = NULL;
  int k = 0;
  for (char *line = strtok_r(classes, "\n", &save); line; line = strtok_r(NULL, "\n", &save), k++) {
    assert_true(k < ct_dataset_num_classes(ds));
    assert_string_equal(ct_dataset_class_name(ds, k), line);
  }
  assert_int_equal(k, ct_dataset_num_classes(ds));
  free(classes);
  snprintf(path, sizeof path, "%s/samples.txt", out);
  char *samples = ct_assert_nonnull(slurp(path));
  k = 0;
  for (char *line = strtok_r(samples, "\n", &save); line; line = strtok_r(NULL, "\n", &save), k++) {
    assert_true(k < ct_dataset_len(ds));
    char *sp = strchr(line, ' ');
    assert_non_null(sp);
    *sp = 0;
    assert_int_equal(atoll(line), ct_dataset_labels(ds)[k]);
    assert_string_equal(ct_dataset_sample_path(ds, k), sp + 1);
  }
  assert_int_equal(k, ct_dataset_len(ds));
  free(samples);
  ct_dataset_free(ds);

  /* pixels, config by config */
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    ds = ct_assert_nonnull(ct_imagefolder_load(root, CT_SPLIT_TRAIN, &configs[c].opts));
    ct_assert_ok(ct_dataset_set_normalize(ds, 1, (float[]){0.0f}, (float[]){1.0f}));
    int64_t shape[3];
    ct_dataset_sample_shape(ds, shape);
    int64_t d = shape[0] * shape[1] * shape[2], n = ct_dataset_len(ds);
    size_t bytes = 0;
    snprintf(path, sizeof path, "%s/%s.bin", out, configs[c].name);
    uint8_t *want = ct_assert_nonnull(img_read_bytes(path, &bytes));
    assert_int_equal(bytes, (size_t)(n * d));
    float *x = malloc((size_t)d * sizeof(float));
    int worst = 0;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
      ct_assert_ok(ct_dataset_get(ds, i, x, NULL));
      for (int64_t j = 0; j < d; j++) {
        int diff = abs((int)lroundf(x[j] * 255.0f) - want[i * d + j]);
        worst = diff > worst ? diff : worst;
        differ += diff != 0;
      }
    }
    printf("%s: (%lld, %lld, %lld) x %lld samples, largest difference %d/255, %lld values differ\n", configs[c].name,
           (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)n, worst, (long long)differ);
    assert_true(worst <= 1);
    free(x), free(want);
    ct_dataset_free(ds);
  }
  ct_test_rmdir(dir);
}

int main(void) {
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/data/imagefolder_interop.py", src ? src : ".");
  int rc = ct_test_require_python("numpy, torch, torchvision, PIL");
  if (rc != 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_as_torchvision),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
