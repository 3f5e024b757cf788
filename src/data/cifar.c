/* src/data/cifar.c: CIFAR-10 and CIFAR-100 from their binary files.
 *
 * Source: Krizhevsky, "Learning Multiple Layers of Features from Tiny Images" (2009), and the data
 * set's page https://www.cs.toronto.edu/~kriz/cifar.html, section "Binary version": a file is a
 * sequence of records, each 1 label byte (CIFAR-10) or a coarse and a fine label byte (CIFAR-100),
 * then 3072 pixel bytes: the red plane, the green plane, the blue plane of a 32x32 image, each
 * row-major, so a record's pixels are already a (3, 32, 32) CHW sample. CIFAR-10's training set is
 * data_batch_1.bin .. data_batch_5.bin, its test set test_batch.bin; CIFAR-100's are train.bin and
 * test.bin. The class names are the ones of batches.meta.txt, coarse_label_names.txt and
 * fine_label_names.txt in the archives (also torchvision's CIFAR10.classes / CIFAR100.classes). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "data/data_internal.h"

static const char *const cifar10_names[CT_CIFAR10_CLASSES] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
};

static const char *const cifar100_coarse_names[CT_CIFAR100_COARSE_CLASSES] = {
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables", "household_electrical_devices",
    "household_furniture", "insects", "large_carnivores", "large_man-made_outdoor_things", "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates", "people", "reptiles", "small_mammals",
    "trees", "vehicles_1", "vehicles_2",
};

static const char *const cifar100_fine_names[CT_CIFAR100_CLASSES] = {
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle",
    "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle",
    "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur",
    "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard",
    "lamp", "lawn_mower", "leopard", "lion", "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain",
    "mouse", "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket",
    "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider",
    "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television", "tiger", "tractor",
    "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman", "worm",
};

#define CIFAR10_URL "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
#define CIFAR100_URL "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"

/* Validate a file's bytes: a whole number >= 1 of records, every label in range. label_bytes 1:
 * CIFAR-10 (label < 10); 2: CIFAR-100 (coarse < 20, fine < 100). Writes the error with ct__error. */
static ct_status check(const uint8_t *buf, size_t n, const char *name, int label_bytes, int64_t *records) {
  size_t rec = (size_t)label_bytes + CT_CIFAR_RECORD_PIXELS;
  const char *set = label_bytes == 1 ? "CIFAR-10" : "CIFAR-100";
  if (n == 0) return ct__error(CT_EFORMAT, "%s: the file is empty; a %s binary file holds %zu-byte records", name, set, rec);
  if (n % rec != 0) {
    size_t other = label_bytes == 1 ? rec + 1 : rec - 1;
    return ct__error(CT_EFORMAT,
                     "%s: %zu bytes is not a whole number of %zu-byte %s records (%d label byte%s + 3072 pixel bytes): "
                     "%zu records and %zu bytes over; the file is truncated, or not %s's binary version%s",
                     name, n, rec, set, label_bytes, label_bytes == 1 ? "" : "s", n / rec, n % rec, set,
                     n % other == 0 ? (label_bytes == 1 ? " (its size fits CIFAR-100's 3074-byte records)"
                                                        : " (its size fits CIFAR-10's 3073-byte records)")
                                    : " (the Python version is a pickle)");
  }
  int64_t count = (int64_t)(n / rec);
  for (int64_t r = 0; r < count; r++) {
    const uint8_t *p = buf + (size_t)r * rec;
    if (label_bytes == 1 && p[0] >= CT_CIFAR10_CLASSES)
      return ct__error(CT_EFORMAT, "%s: record %lld (byte offset %zu) has label %u; CIFAR-10 has 10 classes (0..9)", name,
                       (long long)r, (size_t)r * rec, (unsigned)p[0]);
    if (label_bytes == 2 && (p[0] >= CT_CIFAR100_COARSE_CLASSES || p[1] >= CT_CIFAR100_CLASSES))
      return ct__error(CT_EFORMAT,
                       "%s: record %lld (byte offset %zu) has coarse label %u and fine label %u; CIFAR-100 has 20 coarse "
                       "(0..19) and 100 fine (0..99) classes",
                       name, (long long)r, (size_t)r * rec, (unsigned)p[0], (unsigned)p[1]);
  }
  *records = count;
  return CT_OK;
}

ct_status ct_cifar_check(const uint8_t *buf, size_t n, const char *name, int label_bytes, int64_t *records) {
  if (records) *records = 0;
  if ((!buf && n > 0) || !records)
    return ct__error(CT_EINVAL, "ct_cifar_check: %s is NULL", !records ? "records" : "buf");
  if (label_bytes != 1 && label_bytes != 2)
    return ct__error(CT_EINVAL, "ct_cifar_check: label_bytes = %d; 1 is CIFAR-10, 2 is CIFAR-100", label_bytes);
  ct_status s = check(buf, n, name ? name : "<buffer>", label_bytes, records);
  return s == CT_OK ? s : ct__error_prefix("ct_cifar_check");
}

/* dir itself when it holds `probe`, else dir/sub when that does: into out. */
static void find_dir(const char *dir, const char *sub, const char *probe, char *out, size_t outn) {
  char p[4096];
  struct stat st;
  snprintf(out, outn, "%s", dir);
  snprintf(p, sizeof p, "%s/%s", dir, probe);
  if (stat(p, &st) == 0) return;
  snprintf(p, sizeof p, "%s/%s/%s", dir, sub, probe);
  if (stat(p, &st) == 0) snprintf(out, outn, "%s/%s", dir, sub);
}

/* The files of one split, checked and concatenated: pixels (N, 3, 32, 32) and the labels chosen
 * (label_bytes 2: the coarse one when coarse, else the fine one). */
static ct_dataset *load(const char *op, const char *dir, const char *sub, const char *url, int nfiles,
                        const char *const *files, int label_bytes, int coarse, int num_classes, const float *mean,
                        const float *std, const char *const *names) {
  char base[4096], path[4400];
  find_dir(dir, sub, files[0], base, sizeof base);
  size_t rec = (size_t)label_bytes + CT_CIFAR_RECORD_PIXELS;
  uint8_t *pixels = NULL;
  int64_t *labels = NULL, n = 0;
  for (int f = 0; f < nfiles; f++) {
    snprintf(path, sizeof path, "%s/%s", base, files[f]);
    uint8_t *buf = NULL;
    size_t len = 0;
    char msg[1024];
    struct stat st;
    ct_status s = CT_OK;
    int64_t count = 0;
    if (stat(path, &st) != 0 && errno == ENOENT)
      s = ct__error(CT_EIO, "%s: %s does not exist: pass the folder of the binary version's files (download %s and unpack it; "
                    "the folder is %s)", op, path, url, sub);
    else if ((s = ct__read_file(path, &buf, &len, msg, sizeof msg)) != CT_OK)
      s = ct__error(s, "%s: %s", op, msg);
    else if ((s = check(buf, len, path, label_bytes, &count)) != CT_OK)
      ct__error_prefix("%s", op);
    uint8_t *np = NULL;
    int64_t *nl = NULL;
    if (s == CT_OK) {
      np = realloc(pixels, (size_t)(n + count) * CT_CIFAR_RECORD_PIXELS);
      if (np) pixels = np;
      nl = np ? realloc(labels, (size_t)(n + count) * sizeof(int64_t)) : NULL;
      if (nl) labels = nl;
      if (!np || !nl) s = ct__error(CT_ENOMEM, "%s: out of memory for %lld images", op, (long long)(n + count));
    }
    for (int64_t r = 0; s == CT_OK && r < count; r++) {
      const uint8_t *p = buf + (size_t)r * rec;
      labels[n + r] = label_bytes == 1 ? p[0] : coarse ? p[0] : p[1];
      memcpy(pixels + (size_t)(n + r) * CT_CIFAR_RECORD_PIXELS, p + label_bytes, CT_CIFAR_RECORD_PIXELS);
    }
    free(buf);
    if (s != CT_OK) {
      free(pixels), free(labels);
      return NULL;
    }
    n += count;
  }
  ct_dataset *ds = ct__dataset_adopt(pixels, labels, n, 3, 32, 32, num_classes, 0.0f, 1.0f);
  if (!ds) return ct__error_prefix("%s", op), NULL;
  if (ct__dataset_normalize(ds, 3, mean, std) != CT_OK) {
    ct_dataset_free(ds);
    return ct__error_prefix("%s", op), NULL;
  }
  ds->class_names = names;
  return ds;
}

ct_dataset *ct_cifar10_load(const char *dir, ct_split split) {
  if (!dir) return ct__null_arg("ct_cifar10_load", "dir");
  if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_TEST)
    CT_FAIL_NULL(CT_EINVAL, "ct_cifar10_load: split %d is neither CT_SPLIT_TRAIN (0) nor CT_SPLIT_TEST (1)", (int)split);
  static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                      "data_batch_5.bin"};
  static const char *const test[] = {"test_batch.bin"};
  static const float mean[3] = CT_CIFAR10_MEAN, std[3] = CT_CIFAR10_STD;
  int tr = split == CT_SPLIT_TRAIN;
  return load("ct_cifar10_load", dir, "cifar-10-batches-bin", CIFAR10_URL, tr ? 5 : 1, tr ? train : test, 1, 0,
              CT_CIFAR10_CLASSES, mean, std, cifar10_names);
}

ct_dataset *ct_cifar100_load(const char *dir, ct_split split, ct_cifar100_label labels) {
  if (!dir) return ct__null_arg("ct_cifar100_load", "dir");
  if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_TEST)
    CT_FAIL_NULL(CT_EINVAL, "ct_cifar100_load: split %d is neither CT_SPLIT_TRAIN (0) nor CT_SPLIT_TEST (1)", (int)split);
  if (labels != CT_CIFAR100_FINE && labels != CT_CIFAR100_COARSE)
    CT_FAIL_NULL(CT_EINVAL, "ct_cifar100_load: labels %d is neither CT_CIFAR100_FINE (0) nor CT_CIFAR100_COARSE (1)", (int)labels);
  static const char *const train[] = {"train.bin"}, *const test[] = {"test.bin"};
  static const float mean[3] = CT_CIFAR100_MEAN, std[3] = CT_CIFAR100_STD;
  int coarse = labels == CT_CIFAR100_COARSE;
  return load("ct_cifar100_load", dir, "cifar-100-binary", CIFAR100_URL, 1, split == CT_SPLIT_TRAIN ? train : test, 2,
              coarse, coarse ? CT_CIFAR100_COARSE_CLASSES : CT_CIFAR100_CLASSES, mean, std,
              coarse ? cifar100_coarse_names : cifar100_fine_names);
}
