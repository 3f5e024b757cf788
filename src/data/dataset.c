/* src/data/dataset.c: a dataset of u8 images and int64 labels, normalized on read: its struct,
 * constructors and accessors (src/data/transforms.c makes the samples).
 *
 * Pixels stay u8 in memory (47 MB for Fashion-MNIST's training set instead of 188 MB as float32),
 * or are made on demand by a source (an image folder decodes files); normalization happens when
 * samples are gathered into a batch, through a 256-entry table per channel, so the calling thread
 * and every worker produce the same bits. */
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

/* A zeroed dataset of n samples of shape (c, h, w) with its normalization tables (mean, std on
 * every channel); NULL when out of memory. */
static ct_dataset *dataset_new(int64_t n, int c, int h, int w, int num_classes, float mean, float std) {
  ct_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return NULL;
  ds->n = n, ds->c = c, ds->h = h, ds->w = w, ds->sample_numel = (int64_t)c * h * w;
  ds->oc = c, ds->oh = h, ds->ow = w, ds->out_numel = ds->sample_numel;
  ds->num_classes = num_classes;
  if (ct__dataset_normalize(ds, 1, &mean, &std) != CT_OK) {
    free(ds);
    return NULL;
  }
  return ds;
}

ct_dataset *ct__dataset_adopt(uint8_t *pixels, int64_t *labels, int64_t n, int c, int h, int w, int num_classes,
                              float mean, float std) {
  ct_dataset *ds = pixels && labels ? dataset_new(n, c, h, w, num_classes, mean, std) : NULL;
  if (!ds) {
    free(pixels), free(labels);
    CT_FAIL_NULL(CT_ENOMEM, "dataset: out of memory for %lld samples of (%d, %d, %d)", (long long)n, c, h, w);
  }
  ds->pixels = pixels, ds->labels = labels;
  return ds;
}

ct_dataset *ct__dataset_from_source(const ct__dataset_source *src, void *ctx, int64_t *labels, int64_t n, int c, int h,
                                    int w, int num_classes) {
  ct_dataset *ds = labels ? dataset_new(n, c, h, w, num_classes, 0.0f, 1.0f) : NULL;
  if (!ds) {
    free(labels);
    src->destroy(ctx);
    CT_FAIL_NULL(CT_ENOMEM, "dataset: out of memory for %lld samples", (long long)n);
  }
  ds->src = src, ds->src_ctx = ctx, ds->labels = labels;
  return ds;
}

ct_status ct__dataset_normalize(ct_dataset *ds, int n, const float *mean, const float *std) {
  float *m = malloc((size_t)ds->c * sizeof(float)), *s = malloc((size_t)ds->c * sizeof(float));
  float *lut = malloc((size_t)ds->c * 256 * sizeof(float));
  if (!m || !s || !lut) {
    free(m), free(s), free(lut);
    return ct__error(CT_ENOMEM, "dataset: out of memory for the normalization of %d channels", ds->c);
  }
  for (int ch = 0; ch < ds->c; ch++) {
    m[ch] = mean[n == 1 ? 0 : ch], s[ch] = std[n == 1 ? 0 : ch];
    for (int p = 0; p < 256; p++) lut[ch * 256 + p] = ((float)p / 255.0f - m[ch]) / s[ch];
  }
  free(ds->mean), free(ds->std), free(ds->lut);
  ds->mean = m, ds->std = s, ds->lut = lut;
  return CT_OK;
}

void ct_dataset_free(ct_dataset *ds) {
  if (!ds) return;
  if (ds->src) ds->src->destroy(ds->src_ctx);
  if (ds->owned_names)
    for (int i = 0; i < ds->num_classes; i++) free(ds->owned_names[i]);
  free(ds->owned_names);
  free(ds->pixels);
  free(ds->labels);
  free(ds->mean), free(ds->std), free(ds->lut);
  free(ds->bad);
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
  out[0] = ds->oc, out[1] = ds->oh, out[2] = ds->ow;
}
int ct_dataset_num_classes(const ct_dataset *ds) {
  NULL_DS("ct_dataset_num_classes", -1);
  return ds->num_classes;
}
const uint8_t *ct_dataset_pixels(const ct_dataset *ds) {
  NULL_DS("ct_dataset_pixels", NULL);
  if (!ds->pixels)
    CT_FAIL_NULL(CT_EUNSUPPORTED, "ct_dataset_pixels: this dataset decodes its %lld samples from files when they are read "
                 "and holds no pixels in memory; read samples with ct_dataset_get or a loader", (long long)ds->n);
  return ds->pixels;
}
const int64_t *ct_dataset_labels(const ct_dataset *ds) {
  NULL_DS("ct_dataset_labels", NULL);
  return ds->labels;
}

const char *ct_dataset_class_name(const ct_dataset *ds, int64_t label) {
  NULL_DS("ct_dataset_class_name", NULL);
  if (label < 0 || label >= ds->num_classes)
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_class_name: label %lld is out of range [0, %d)", (long long)label, ds->num_classes);
  return ds->class_names ? ds->class_names[label] : "";
}

const char *ct_dataset_sample_path(const ct_dataset *ds, int64_t i) {
  NULL_DS("ct_dataset_sample_path", NULL);
  if (i < 0 || i >= ds->n)
    CT_FAIL_NULL(CT_EINVAL, "ct_dataset_sample_path: index %lld is out of range [0, %lld)", (long long)i, (long long)ds->n);
  if (!ds->src)
    CT_FAIL_NULL(CT_EUNSUPPORTED, "ct_dataset_sample_path: this dataset holds its samples in memory; only an image folder's come from files");
  return ds->src->path(ds->src_ctx, i);
}

int64_t ct_dataset_skipped(const ct_dataset *ds) {
  NULL_DS("ct_dataset_skipped", -1);
  return __atomic_load_n(&ds->skipped, __ATOMIC_RELAXED);
}
