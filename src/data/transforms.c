/* src/data/transforms.c: making a sample as a loader delivers it: its pixels (held, or loaded by
 * the dataset's source), torchvision's RandomCrop and RandomHorizontalFlip on them, then ToTensor
 * and Normalize through the per-channel table.
 *
 * Semantics borrowed from torchvision.transforms (0.14, the version Debian 12 packages):
 *  - RandomCrop(size, padding, fill=0, padding_mode="constant"): pad every side by `padding` zero
 *    pixels, draw top i in [0, H + 2p - th] and left j in [0, W + 2p - tw], cut (th, tw);
 *  - RandomHorizontalFlip(p): mirror the columns when a uniform draw in [0, 1) is below p;
 *  - ToTensor then Normalize(mean, std): (pixel / 255 - mean[c]) / std[c].
 * Crop and flip run on the u8 pixels, before normalization, as in the usual
 * Compose([RandomCrop, RandomHorizontalFlip, ToTensor, Normalize]); the padding is pixel 0, which
 * normalizes to -mean/std as torchvision's does. The draws are not torch's: they come from the
 * sample's own stream ct__sample_stream(loader seed, epoch, sample index) (shuffle.c), in this
 * order: top, left (with a crop), then the flip's draw (with hflip_p > 0). So a sample's
 * augmentation depends only on those three numbers, never on the number of workers. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "data/data_internal.h"

static int has_augment(const ct_dataset *ds) { return ds->aug.crop_h > 0 || ds->aug.hflip_p > 0; }

static int frozen(const ct_dataset *ds) { return __atomic_load_n(&ds->readers, __ATOMIC_ACQUIRE) > 0; }

ct_status ct_dataset_set_normalize(ct_dataset *ds, int n, const float *mean, const float *std) {
  if (!ds || !mean || !std)
    return ct__null_status("ct_dataset_set_normalize", !ds ? "ds" : !mean ? "mean" : "std");
  if (n != 1 && n != ds->c)
    return ct__error(CT_EINVAL, "ct_dataset_set_normalize: n = %d values, need 1 (every channel) or the dataset's %d channels",
                     n, ds->c);
  for (int i = 0; i < n; i++) {
    if (!(std[i] != 0.0f) || isnan(std[i]) || isnan(mean[i]))
      return ct__error(CT_EINVAL, "ct_dataset_set_normalize: std[%d] = %g, mean[%d] = %g: std must be nonzero and neither NaN",
                       i, std[i], i, mean[i]);
    /* the extreme samples, pixel 0 and 255, must come out finite (a std of 1e-45 would give inf) */
    if (!isfinite((0.0f - mean[i]) / std[i]) || !isfinite((1.0f - mean[i]) / std[i]))
      return ct__error(CT_EINVAL, "ct_dataset_set_normalize: std[%d] = %g, mean[%d] = %g: (pixel / 255 - mean) / std is not "
                       "finite for every pixel", i, std[i], i, mean[i]);
  }
  if (frozen(ds))
    return ct__error(CT_EINVAL, "ct_dataset_set_normalize: a loader is reading this dataset; set the normalization before ct_loader_new (or free the loader first)");
  ct_status s = ct__dataset_normalize(ds, n, mean, std);
  return s == CT_OK ? s : ct__error_prefix("ct_dataset_set_normalize");
}

ct_status ct_dataset_set_augment(ct_dataset *ds, const ct_augment *aug) {
  if (!ds) return ct__null_status("ct_dataset_set_augment", "ds");
  ct_augment a = {0};
  if (aug) a = *aug;
  if (a.crop_h < 0 || a.crop_w < 0 || a.crop_padding < 0 || (a.crop_h > 0) != (a.crop_w > 0) ||
      (a.crop_padding > 0 && a.crop_h == 0))
    return ct__error(CT_EINVAL, "ct_dataset_set_augment: crop_h=%d, crop_w=%d, crop_padding=%d: give both crop sizes >= 1 "
                     "(RandomCrop) or neither, with a padding >= 0 only with a crop",
                     a.crop_h, a.crop_w, a.crop_padding);
  if (a.crop_h > 0 && ((int64_t)a.crop_h > (int64_t)ds->h + 2 * (int64_t)a.crop_padding ||
                       (int64_t)a.crop_w > (int64_t)ds->w + 2 * (int64_t)a.crop_padding))
    return ct__error(CT_EINVAL, "ct_dataset_set_augment: crop %dx%d is larger than the padded image %lldx%lld ((%d, %d) + 2 * padding %d)",
                     a.crop_h, a.crop_w, (long long)ds->h + 2LL * a.crop_padding, (long long)ds->w + 2LL * a.crop_padding,
                     ds->h, ds->w, a.crop_padding);
  if (!(a.hflip_p >= 0.0f && a.hflip_p <= 1.0f))
    return ct__error(CT_EINVAL, "ct_dataset_set_augment: hflip_p = %g must be in [0, 1]", a.hflip_p);
  if (frozen(ds))
    return ct__error(CT_EINVAL, "ct_dataset_set_augment: a loader is reading this dataset; set the augmentation before ct_loader_new (or free the loader first)");
  ds->aug = a;
  ds->oc = ds->c;
  ds->oh = a.crop_h ? a.crop_h : ds->h;
  ds->ow = a.crop_w ? a.crop_w : ds->w;
  ds->out_numel = (int64_t)ds->oc * ds->oh * ds->ow;
  return CT_OK;
}

/* RandomCrop then RandomHorizontalFlip of src (c, h, w) into dst (c, oh, ow), drawing from st. */
static void augment(const ct_dataset *ds, const uint8_t *src, uint64_t st, uint8_t *dst) {
  const ct_augment *a = &ds->aug;
  int64_t h = ds->h, w = ds->w, th = ds->oh, tw = ds->ow, p = a->crop_padding, top = 0, left = 0;
  if (a->crop_h > 0) {
    top = (int64_t)ct__random_below(&st, (uint64_t)(h + 2 * p - th + 1));
    left = (int64_t)ct__random_below(&st, (uint64_t)(w + 2 * p - tw + 1));
  }
  int flip = 0;
  if (a->hflip_p > 0) flip = (double)(ct__splitmix64(&st) >> 11) * 0x1.0p-53 < (double)a->hflip_p;
  for (int64_t ch = 0; ch < ds->c; ch++) {
    const uint8_t *plane = src + ch * h * w;
    for (int64_t r = 0; r < th; r++) {
      int64_t sy = top + r - p;
      uint8_t *out = dst + (ch * th + r) * tw;
      if (sy < 0 || sy >= h) {
        memset(out, 0, (size_t)tw);
        continue;
      }
      for (int64_t c = 0; c < tw; c++) {
        int64_t sx = left + (flip ? tw - 1 - c : c) - p;
        out[c] = sx >= 0 && sx < w ? plane[sy * w + sx] : 0;
      }
    }
  }
}

size_t ct__dataset_scratch_bytes(const ct_dataset *ds) {
  return (size_t)(ds->src ? ds->sample_numel : 0) + (size_t)(has_augment(ds) ? ds->out_numel : 0);
}

/* Sample i into dst (out_numel floats): load (into the scratch's first sample_numel bytes) or read
 * its pixels, augment (into the rest of the scratch), normalize. A failed load's status is returned
 * with its reason in msg. */
static ct_status make_sample(const ct_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, uint8_t *scratch,
                             float *dst, char *msg, size_t msgn) {
  uint8_t *srcbuf = scratch, *augbuf = scratch + (ds->src ? ds->sample_numel : 0);
  const uint8_t *px = ds->pixels ? ds->pixels + i * ds->sample_numel : srcbuf;
  if (ds->src) {
    ct_status s = ds->src->load(ds->src_ctx, i, srcbuf, msg, msgn);
    if (s != CT_OK) return s;
  }
  if (has_augment(ds)) {
    augment(ds, px, ct__sample_stream(seed, epoch, i), augbuf);
    px = augbuf;
  }
  int64_t hw = (int64_t)ds->oh * ds->ow;
  for (int ch = 0; ch < ds->oc; ch++) {
    const float *lut = ds->lut + ch * 256;
    const uint8_t *s = px + ch * hw;
    float *d = dst + ch * hw;
    for (int64_t j = 0; j < hw; j++) d[j] = lut[s[j]];
  }
  return CT_OK;
}

ct_status ct__dataset_gather(const ct_dataset *ds, const int64_t *idx, int64_t count, uint64_t seed, int64_t epoch,
                             uint8_t *scratch, float *x, int64_t *y, int64_t *kept, char *msg, size_t msgn) {
  ct_status s = CT_OK;
  int64_t k = 0;
  for (int64_t b = 0; s == CT_OK && b < count; b++) {
    int64_t i = idx[b];
    if (ds->skip_bad && __atomic_load_n(&ds->bad[i], __ATOMIC_RELAXED)) continue; /* known bad: not decoded again */
    s = make_sample(ds, i, seed, epoch, scratch, x + k * ds->out_numel, msg, msgn);
    if (s != CT_OK && ds->skip_bad && (s == CT_EFORMAT || s == CT_EIO)) {
      struct ct_dataset *mut = (struct ct_dataset *)ds; /* the skip marks are the dataset's only shared mutable state */
      if (!__atomic_exchange_n(&mut->bad[i], 1, __ATOMIC_RELAXED)) __atomic_add_fetch(&mut->skipped, 1, __ATOMIC_RELAXED);
      s = CT_OK;
      continue;
    }
    if (s == CT_OK) y[k++] = ds->labels[i];
  }
  *kept = k;
  return s;
}

static ct_status get_sample(const char *op, const ct_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, float *x,
                            int64_t *y) {
  if (!ds) return ct__null_status(op, "ds");
  if (i < 0 || i >= ds->n)
    return ct__error(CT_EINVAL, "%s: index %lld is out of range [0, %lld)", op, (long long)i, (long long)ds->n);
  if (epoch < 0) return ct__error(CT_EINVAL, "%s: epoch %lld must be >= 0", op, (long long)epoch);
  if (x) {
    char msg[1024] = "";
    size_t sb = ct__dataset_scratch_bytes(ds);
    uint8_t *scratch = malloc(sb ? sb : 1);
    if (!scratch) return ct__error(CT_ENOMEM, "%s: sample %lld: out of memory for its %zu-byte buffers", op, (long long)i, sb);
    ct_status s = make_sample(ds, i, seed, epoch, scratch, x, msg, sizeof msg);
    free(scratch);
    if (s != CT_OK) return ct__error(s, "%s: sample %lld: %s", op, (long long)i, msg);
  }
  if (y) *y = ds->labels[i];
  return CT_OK;
}

ct_status ct_dataset_get_seeded(const ct_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, float *x, int64_t *y) {
  return get_sample("ct_dataset_get_seeded", ds, i, seed, epoch, x, y);
}

ct_status ct_dataset_get(const ct_dataset *ds, int64_t i, float *x, int64_t *y) {
  return get_sample("ct_dataset_get", ds, i, 0, 0, x, y);
}
