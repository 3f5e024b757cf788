/* src/data/data_internal.h: what the files of the data layer share (the dataset struct, the IDX
 * header parser, the shuffle and the random streams, the image decoding core). Not installed. */
#ifndef CUTTLE_DATA_INTERNAL_H
#define CUTTLE_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "core/internal.h"
#include "cuttle/datasets.h"

/* A dataset whose samples are made on demand (an image folder decodes files) rather than held in
 * memory. load writes sample i's pixels, (c, h, w) u8 of the dataset's stored shape, into px; it
 * returns CT_OK, or a negative status with the reason, naming the file, in msg (msgn bytes), and
 * sets no thread-local error (it runs in worker threads, and a skipped file is no error). It is
 * called from several threads at once. path gives sample i's file; destroy frees ctx. */
typedef struct {
  ct_status (*load)(const void *ctx, int64_t i, uint8_t *px, char *msg, size_t msgn);
  const char *(*path)(const void *ctx, int64_t i);
  void (*destroy)(void *ctx);
} ct__dataset_source;

struct ct_dataset {
  int64_t n;            /* samples */
  int c, h, w;          /* stored sample shape (before augmentation) */
  int64_t sample_numel; /* c * h * w */
  int oc, oh, ow;       /* the shape batches hold: (c, h, w), or (c, crop_h, crop_w) with a random crop */
  int64_t out_numel;    /* oc * oh * ow */
  int num_classes;
  float *mean, *std;    /* (c) each, the normalization, owned */
  float *lut;           /* (c, 256): lut[ch * 256 + p] = ((float)p / 255 - mean[ch]) / std[ch], so every path
                           normalizes bit-identically; owned */
  uint8_t *pixels;      /* (n, c, h, w), owned; NULL for a dataset with a source */
  int64_t *labels;      /* (n), owned */
  const char *const *class_names; /* num_classes names, or NULL (none): static, or owned_names */
  char **owned_names;   /* the names when the dataset owns them (an image folder's, freed with it), or NULL */
  const ct__dataset_source *src; /* NULL: samples are `pixels` */
  void *src_ctx;        /* owned; src->destroy frees it */
  ct_augment aug;       /* random crop and flip; all zero: none */
  int skip_bad;         /* CT_DECODE_SKIP: a sample whose load fails with CT_EFORMAT or CT_EIO is left out */
  uint8_t *bad;         /* (n) with skip_bad: 1 once sample i failed to load (atomic) */
  int64_t skipped;      /* samples marked bad (atomic) */
  int readers;          /* loaders reading the dataset (atomic): its settings are frozen while > 0 */
};

/* A dataset owning pixels (n*c*h*w u8) and labels (n int64), both malloc'd; already validated.
 * Frees both when it fails (CT_ENOMEM, also when either pointer is NULL). The normalization is
 * mean, std on every channel. */
struct ct_dataset *ct__dataset_adopt(uint8_t *pixels, int64_t *labels, int64_t n, int c, int h, int w,
                                     int num_classes, float mean, float std);

/* A dataset of n samples of shape (c, h, w) made by src (ctx: owned by the dataset from here on,
 * destroyed when this fails) with labels (malloc'd, owned from here on), normalized with mean 0 and
 * std 1. CT_ENOMEM (freeing all three) when it cannot be had. */
struct ct_dataset *ct__dataset_from_source(const ct__dataset_source *src, void *ctx, int64_t *labels, int64_t n, int c,
                                           int h, int w, int num_classes);

/* Set the per-channel normalization (n = 1 or c values) and rebuild the table; CT_ENOMEM. */
ct_status ct__dataset_normalize(struct ct_dataset *ds, int n, const float *mean, const float *std);

/* Validate the header of the IDX file in buf (n bytes) and fill every field of *out but data.
 * *data_offset receives where the data starts. Errors: CT_EFORMAT as ct_idx_parse, naming name. */
ct_status ct__idx_parse_header(const uint8_t *buf, size_t n, const char *name, ct_idx *out, size_t *data_offset);

/* Convert count big-endian elements of elem_size bytes at src into host order at dst (which may
 * equal src). */
void ct__idx_to_host(void *dst, const void *src, size_t count, size_t elem_size);

/* splitmix64 (Steele, Lea, Flood 2014): advance *state and return the next 64 random bits. */
uint64_t ct__splitmix64(uint64_t *state);

/* perm[0..n) = a permutation of 0..n-1: Fisher-Yates driven by splitmix64 seeded with seed. */
void ct__permutation(int64_t *perm, int64_t n, uint64_t seed);

/* A uniform integer in [0, k), k >= 1, from splitmix64 (Lemire's multiply-shift with rejection). */
uint64_t ct__random_below(uint64_t *state, uint64_t k);

/* The start of sample `index`'s random stream in `epoch` for a loader seeded with seed: a hash of
 * the three (splitmix64 chained), apart from the shuffle's seed + epoch. */
uint64_t ct__sample_stream(uint64_t seed, int64_t epoch, int64_t index);

/* The bytes of scratch ct__dataset_gather needs for ds as it is set now: a loaded sample (a dataset
 * with a source) plus an augmented one (with augmentation); may be 0. */
size_t ct__dataset_scratch_bytes(const struct ct_dataset *ds);

/* Make samples idx[0..count) as the loader delivers them in epoch `epoch` with seed `seed` (load or
 * read the pixels, augment, normalize) into x (count * out_numel floats) and their labels into y,
 * using scratch (ct__dataset_scratch_bytes(ds) bytes, the caller's, reused from batch to batch).
 * Samples skipped under CT_DECODE_SKIP are left out, the later ones moving up; *kept gets the rows
 * written. Returns CT_OK, or a negative status with the reason in msg (msgn bytes) and no
 * thread-local error: safe to call from any thread, each with its own scratch. */
ct_status ct__dataset_gather(const struct ct_dataset *ds, const int64_t *idx, int64_t count, uint64_t seed,
                             int64_t epoch, uint8_t *scratch, float *x, int64_t *y, int64_t *kept, char *msg,
                             size_t msgn);

/* ---- images (image.c, image_png.c, image_jpeg.c): the decoding core, without thread-local errors */

/* Decode buf (n bytes, PNG or JPEG by content) into *out (HWC u8, channels by mode) or fail with a
 * negative status and the reason in msg, which names `name`. At most max_pixels pixels. */
ct_status ct__image_decode(const uint8_t *buf, size_t n, const char *name, ct_image_mode mode, int64_t max_pixels,
                           ct_image *out, char *msg, size_t msgn);
ct_status ct__png_decode(const uint8_t *buf, size_t n, const char *name, int64_t max_pixels, ct_image *out, char *msg,
                         size_t msgn);
ct_status ct__jpeg_decode(const uint8_t *buf, size_t n, const char *name, int64_t max_pixels, ct_image *out, char *msg,
                          size_t msgn);
/* Read all of path into a malloc'd buffer; CT_EIO / CT_ENOMEM with msg. */
ct_status ct__read_file(const char *path, uint8_t **buf, size_t *n, char *msg, size_t msgn);
/* Convert img in place between 1 and 3 channels as PIL's convert("L") / convert("RGB"). */
ct_status ct__image_to_mode(ct_image *img, ct_image_mode mode, char *msg, size_t msgn);
/* PIL's bilinear resize (see ct_image_resize), no thread-local error. */
ct_status ct__image_resize(const ct_image *in, int64_t h, int64_t w, ct_image *out, char *msg, size_t msgn);
/* torchvision's CenterCrop((ch, cw)) of img (zero padding where smaller), written as CHW u8 into
 * dst (img->c * ch * cw bytes). */
void ct__image_center_crop_chw(const ct_image *img, int64_t ch, int64_t cw, uint8_t *dst);

#endif
