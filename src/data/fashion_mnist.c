/* src/data/fashion_mnist.c: the Fashion-MNIST dataset from its four IDX files.
 *
 * Source: Xiao, Rasul and Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine
 * Learning Algorithms" (2017), https://github.com/zalandoresearch/fashion-mnist; the files follow
 * MNIST's IDX layout: images magic 0x00000803, (N, 28, 28) u8; labels magic 0x00000801, (N) u8 in
 * [0, 10). Debian's dataset-fashion-mnist package installs them gzipped in CT_FASHION_MNIST_DIR. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "data/data_internal.h"

static const char *const class_names[CT_FASHION_MNIST_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

const char *ct_fashion_mnist_class_name(int64_t label) {
  return label >= 0 && label < CT_FASHION_MNIST_CLASSES ? class_names[label] : "?";
}

/* Find "<dir>/<base>.gz", else "<dir>/<base>", and load it, checking its magic. */
static ct_status load_file(const char *dir, const char *base, uint32_t magic, ct_idx *out, char *path, size_t pathn) {
  char gz[4096];
  snprintf(gz, sizeof gz, "%s/%s.gz", dir, base);
  snprintf(path, pathn, "%s/%s", dir, base);
  if (access(gz, F_OK) == 0) {
    snprintf(path, pathn, "%s", gz);
  } else if (access(path, F_OK) != 0) {
    return ct__error(CT_EIO,
                     "ct_fashion_mnist_load: neither %s nor %s exists; install Debian's dataset-fashion-mnist package "
                     "(apt-get install dataset-fashion-mnist) or pass the directory holding the IDX files",
                     gz, path);
  }
  ct_status s = ct_idx_load(path, out);
  if (s != CT_OK) return s;
  if (out->magic != magic) {
    s = ct__error(CT_EFORMAT, "%s: wrong magic 0x%08x for Fashion-MNIST %s (expected 0x%08x)", path,
                  (unsigned)out->magic, magic == CT_IDX_MAGIC_IMAGES ? "images" : "labels", (unsigned)magic);
    ct_idx_free(out);
    return s;
  }
  return CT_OK;
}

ct_dataset *ct_fashion_mnist_load(const char *data_dir, ct_split split) {
  if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_TEST)
    CT_FAIL_NULL(CT_EINVAL, "ct_fashion_mnist_load: split %d is neither CT_SPLIT_TRAIN (0) nor CT_SPLIT_TEST (1)", (int)split);
  if (!data_dir) data_dir = getenv("CUTTLE_DATA_DIR");
  if (!data_dir || !*data_dir) data_dir = CT_FASHION_MNIST_DIR;
  const char *prefix = split == CT_SPLIT_TRAIN ? "train" : "t10k";
  char base[64], ipath[4096], lpath[4096];
  ct_idx im, lb;
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
  if (load_file(data_dir, base, CT_IDX_MAGIC_IMAGES, &im, ipath, sizeof ipath) != CT_OK)
    return ct__error_prefix("ct_fashion_mnist_load"), NULL;
  snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
  if (load_file(data_dir, base, CT_IDX_MAGIC_LABELS, &lb, lpath, sizeof lpath) != CT_OK) {
    ct_idx_free(&im);
    return ct__error_prefix("ct_fashion_mnist_load"), NULL;
  }
  ct_status s = CT_OK;
  if (im.shape[1] != 28 || im.shape[2] != 28) {
    s = ct__error(CT_EFORMAT, "%s: Fashion-MNIST images are 28x28, this file holds %lldx%lld", ipath,
                  (long long)im.shape[1], (long long)im.shape[2]);
  } else if (im.shape[0] != lb.shape[0]) {
    s = ct__error(CT_EFORMAT, "Fashion-MNIST: image and label counts differ: %s holds %lld images, %s holds %lld labels",
                  ipath, (long long)im.shape[0], lpath, (long long)lb.shape[0]);
  }
  int64_t n = lb.shape[0];
  int64_t *labels = NULL;
  if (s == CT_OK) {
    labels = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!labels) s = ct__error(CT_ENOMEM, "%s: out of memory for %lld labels", lpath, (long long)n);
  }
  for (int64_t i = 0; s == CT_OK && i < n; i++) {
    uint8_t v = ((const uint8_t *)lb.data)[i];
    if (v >= CT_FASHION_MNIST_CLASSES)
      s = ct__error(CT_EFORMAT, "%s: label %u of sample %lld is out of range: Fashion-MNIST has %d classes (0..9)", lpath,
                    (unsigned)v, (long long)i, CT_FASHION_MNIST_CLASSES);
    else
      labels[i] = v;
  }
  ct_idx_free(&lb);
  if (s != CT_OK) {
    free(labels);
    ct_idx_free(&im);
    return ct__error_prefix("ct_fashion_mnist_load"), NULL;
  }
  uint8_t *pixels = im.data; /* ownership moves to the dataset */
  im.data = NULL;
  ct_dataset *ds = ct__dataset_adopt(pixels, labels, n, 1, 28, 28, CT_FASHION_MNIST_CLASSES, CT_FASHION_MNIST_MEAN,
                                     CT_FASHION_MNIST_STD);
  if (ds) ds->class_names = class_names;
  return ds;
}
