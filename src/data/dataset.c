/* src/data/dataset.c: an in-memory dataset of u8 images and int64 labels, normalized on read.
 *
 * Pixels stay u8 in memory (47 MB for Fashion-MNIST's training set instead of 188 MB as float32);
 * normalization happens when samples are gathered into a batch, through a 256-entry table, so the
 * calling thread and every worker produce the same bits. */
#include <string.h>
#include "data/data_internal.h"

ct_dataset *ct_dataset_from_u8(const uint8_t *images, const int64_t *labels, int64_t n, int c, int h, int w,
                               int num_classes, float mean, float std) {
  if (n < 0 || c < 1 || h < 1 || w < 1 || num_classes < 1)
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_from_u8: need n >= 0, c, h, w >= 1 and num_classes >= 1; got n=%lld, (c, h, w) = (%d, %d, %d), num_classes=%d",
                 (long long)n, c, h, w, num_classes);
  if (!(std != 0.0f) || std != std || mean != mean)
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_from_u8: std must be nonzero and mean, std not NaN; got mean=%g, std=%g", mean, std);
  if (n > 0 && (!images || !labels))
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_from_u8: %s is NULL with n = %lld", images ? "labels" : "images", (long long)n);
  int64_t sample, total;
  if (!ct__checked_numel("ct_dataset_from_u8", 3, (int64_t[]){c, h, w}, &sample) ||
      __builtin_mul_overflow(sample, n, &total) || (uint64_t)total > SIZE_MAX)
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_from_u8: n * c * h * w overflows");
  for (int64_t i = 0; i < n; i++)
    if (labels[i] < 0 || labels[i] >= num_classes)
      CT_FAIL_NULL(CT_EINVAL, "ct_dataset_from_u8: label %lld of sample %lld is out of range [0, %d)", (long long)labels[i],
                   (long long)i, num_classes);
  uint8_t *px = malloc(total > 0 ? (size_t)total : 1);
  int64_t *lb = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  if (px && total > 0) memcpy(px, images, (size_t)total);
  if (lb && n > 0) memcpy(lb, labels, (size_t)n * sizeof(int64_t));
  return ct__dataset_adopt(px, lb, n, c, h, w, num_classes, mean, std);
}

ct_dataset *ct__dataset_adopt(uint8_t *pixels, int64_t *labels, int64_t n, int c, int h, int w, int num_classes,
                              float mean, float std) {
  ct_dataset *ds = pixels && labels ? calloc(1, sizeof *ds) : NULL;
  if (!ds) {
    free(pixels), free(labels);
    CT_FAIL_NULL(CT_ENOMEM, "dataset: out of memory for %lld samples of (%d, %d, %d)", (long long)n, c, h, w);
  }
  ds->n = n, ds->c = c, ds->h = h, ds->w = w, ds->sample_numel = (int64_t)c * h * w;
  ds->num_classes = num_classes, ds->mean = mean, ds->std = std;
  for (int p = 0; p < 256; p++) ds->lut[p] = ((float)p / 255.0f - mean) / std;
  ds->pixels = pixels, ds->labels = labels;
  return ds;
}

void ct_dataset_free(ct_dataset *ds) {
  if (!ds) return;
  free(ds->pixels);
  free(ds->labels);
  free(ds);
}

/* The accessors' answer for a NULL dataset: the sentinel, with CT_EINVAL set. */
#define NULL_DS(op, sentinel) \
  if (!ds) return ct__null_arg(op, "ds"), (sentinel)
int64_t ct_dataset_len(const ct_dataset *ds) {
  NULL_DS("ct_dataset_len", -1);
  return ds->n;
}
void ct_dataset_sample_shape(const ct_dataset *ds, int64_t out[3]) {
  if (!ds || !out) return (void)ct__null_status("ct_dataset_sample_shape", !ds ? "ds" : "out");
  out[0] = ds->c, out[1] = ds->h, out[2] = ds->w;
}
int ct_dataset_num_classes(const ct_dataset *ds) {
  NULL_DS("ct_dataset_num_classes", -1);
  return ds->num_classes;
}
const uint8_t *ct_dataset_pixels(const ct_dataset *ds) {
  NULL_DS("ct_dataset_pixels", NULL);
  return ds->pixels;
}
const int64_t *ct_dataset_labels(const ct_dataset *ds) {
  NULL_DS("ct_dataset_labels", NULL);
  return ds->labels;
}

void ct__dataset_gather(const ct_dataset *ds, const int64_t *idx, int64_t count, float *x, int64_t *y) {
  int64_t d = ds->sample_numel;
  for (int64_t b = 0; b < count; b++) {
    const uint8_t *src = ds->pixels + idx[b] * d;
    float *dst = x + b * d;
    for (int64_t j = 0; j < d; j++) dst[j] = ds->lut[src[j]];
    y[b] = ds->labels[idx[b]];
  }
}

ct_status ct_dataset_get(const ct_dataset *ds, int64_t i, float *x, int64_t *y) {
  if (!ds) return ct__error(CT_EINVAL, "ct_dataset_get: ds is NULL");
  if (i < 0 || i >= ds->n)
    return ct__error(CT_EINVAL, "ct_dataset_get: index %lld is out of range [0, %lld)", (long long)i, (long long)ds->n);
  if (x) {
    const uint8_t *src = ds->pixels + i * ds->sample_numel;
    for (int64_t j = 0; j < ds->sample_numel; j++) x[j] = ds->lut[src[j]];
  }
  if (y) *y = ds->labels[i];
  return CT_OK;
}
