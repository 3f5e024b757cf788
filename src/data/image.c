/* src/data/image.c: decoded images: reading a file, telling PNG from JPEG, converting between gray
 * and RGB, PIL's bilinear resize and torchvision's center crop, and the public ct_image_* calls.
 *
 * Borrowed semantics (the ones torchvision's ImageFolder and transforms get from PIL 9):
 *  - convert("L") from RGB: L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16 (PIL's Convert.c, L24);
 *    convert("RGB") from L repeats the value;
 *  - Image.resize(size, BILINEAR) (PIL's Resample.c): for each axis, output pixel xx has center
 *    (xx + 0.5) * scale in the input (scale = in / out), a triangle filter of support
 *    max(scale, 1) (so downscaling averages, it antialiases), taps normalized to sum 1, then turned
 *    into 22-bit fixed point; the horizontal pass runs first into an 8-bit image, then the
 *    vertical one; each output is clip8((2^21 + sum pixel * coefficient) >> 22). Integer
 *    arithmetic after the coefficients, so the bytes are PIL's;
 *  - CenterCrop((ch, cw)) (torchvision.transforms.functional.center_crop): where the image is
 *    smaller than the crop, pad with zeros, left/top (crop - size) // 2 and right/bottom the rest;
 *    then the window starts at int(round((size - crop) / 2.0)), Python's round (half to even).
 * The core functions (ct__*) report into a caller's buffer and set no thread-local error, since
 * they run in loader workers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "data/data_internal.h"

#define PRECISION_BITS (32 - 8 - 2)

ct_status ct__read_file(const char *path, uint8_t **buf, size_t *n, char *msg, size_t msgn) {
  *buf = NULL, *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(msg, msgn, "%s: cannot open: %s", path, strerror(errno)), CT_EIO;
  size_t cap = 1 << 16, len = 0;
  uint8_t *b = malloc(cap);
  for (;;) {
    if (b && len == cap) {
      uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
      if (!nb) free(b);
      b = nb, cap *= 2;
    }
    if (!b) {
      fclose(f);
      return snprintf(msg, msgn, "%s: out of memory reading the file (%zu bytes so far)", path, len), CT_ENOMEM;
    }
    size_t got = fread(b + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int err = ferror(f) ? errno : 0;
  fclose(f);
  if (err) {
    free(b);
    return snprintf(msg, msgn, "%s: read error: %s", path, strerror(err)), CT_EIO;
  }
  *buf = b, *n = len;
  return CT_OK;
}

ct_status ct__image_to_mode(ct_image *img, ct_image_mode mode, char *msg, size_t msgn) {
  int64_t np = img->h * img->w;
  if (mode == CT_IMAGE_GRAY && img->c == 3) {
    uint8_t *p = img->data;
    for (int64_t i = 0; i < np; i++)
      p[i] = (uint8_t)((p[3 * i] * 19595 + p[3 * i + 1] * 38470 + p[3 * i + 2] * 7471 + 0x8000) >> 16);
    img->c = 1;
  } else if (mode == CT_IMAGE_RGB && img->c == 1) {
    uint8_t *rgb = malloc((size_t)(np > 0 ? np * 3 : 1));
    if (!rgb) return snprintf(msg, msgn, "out of memory for a %lldx%lld RGB image", (long long)img->h, (long long)img->w), CT_ENOMEM;
    for (int64_t i = 0; i < np; i++) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = img->data[i];
    free(img->data);
    img->data = rgb, img->c = 3;
  }
  return CT_OK;
}

ct_status ct__image_decode(const uint8_t *buf, size_t n, const char *name, ct_image_mode mode, int64_t max_pixels,
                           ct_image *out, char *msg, size_t msgn) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  memset(out, 0, sizeof *out);
  ct_status s;
  if (n >= 8 && memcmp(buf, png_sig, 8) == 0) {
    s = ct__png_decode(buf, n, name, max_pixels, out, msg, msgn);
  } else if (n >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF) {
    s = ct__jpeg_decode(buf, n, name, max_pixels, out, msg, msgn);
  } else {
    snprintf(msg, msgn, "%s: neither a PNG nor a JPEG file (%zu bytes; the first bytes are not a PNG signature or a JPEG start-of-image marker)",
             name, n);
    return CT_EFORMAT;
  }
  if (s == CT_OK) s = ct__image_to_mode(out, mode, msg, msgn);
  if (s != CT_OK) ct_image_free(out);
  return s;
}

/* One axis of PIL's bilinear resample: for each of out outputs, the first input tap (bounds[2o]),
 * the tap count (bounds[2o + 1]) and ksize fixed-point coefficients. Exactly Resample.c's
 * precompute_coeffs and normalize_coeffs_8bpc, with no fused multiply-adds. */
typedef struct {
  int ksize;
  int *bounds;
  int32_t *kk;
} axis;

static double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

__attribute__((optimize("fp-contract=off"))) static int make_axis(int64_t in, int64_t out, axis *a) {
  double scale = (double)(float)in / (double)out, filterscale = scale < 1.0 ? 1.0 : scale;
  double support = 1.0 * filterscale;
  int ksize = (int)ceil(support) * 2 + 1;
  double *pre = malloc((size_t)out * ksize * sizeof(double));
  a->ksize = ksize;
  a->bounds = malloc((size_t)out * 2 * sizeof(int));
  a->kk = malloc((size_t)out * ksize * sizeof(int32_t));
  if (!pre || !a->bounds || !a->kk) {
    free(pre), free(a->bounds), free(a->kk);
    a->bounds = NULL, a->kk = NULL;
    return 0;
  }
  for (int64_t xx = 0; xx < out; xx++) {
    double center = 0.0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5);
    if (xmax > in) xmax = (int)in;
    xmax -= xmin;
    double *k = pre + xx * ksize;
    int x;
    for (x = 0; x < xmax; x++) {
      double w = triangle((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (x = 0; x < xmax; x++)
      if (ww != 0.0) k[x] /= ww;
    for (; x < ksize; x++) k[x] = 0;
    a->bounds[xx * 2] = xmin, a->bounds[xx * 2 + 1] = xmax;
  }
  for (int64_t i = 0; i < out * ksize; i++)
    a->kk[i] = pre[i] < 0 ? (int32_t)(-0.5 + pre[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + pre[i] * (1 << PRECISION_BITS));
  free(pre);
  return 1;
}

static uint8_t clip8(int32_t v) {
  int32_t s = v >> PRECISION_BITS;
  return (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
}

ct_status ct__image_resize(const ct_image *in, int64_t h, int64_t w, ct_image *out, char *msg, size_t msgn) {
  memset(out, 0, sizeof *out);
  int c = in->c;
  int need_h = w != in->w, need_v = h != in->h;
  axis ax = {0}, ay = {0};
  uint8_t *tmp = NULL, *dst = malloc((size_t)(h * w * c));
  int ok = dst && (!need_h || make_axis(in->w, w, &ax)) && (!need_v || make_axis(in->h, h, &ay));
  if (ok && need_h && need_v) ok = (tmp = malloc((size_t)(in->h * w * c))) != NULL;
  if (!ok) {
    free(dst), free(tmp), free(ax.bounds), free(ax.kk), free(ay.bounds), free(ay.kk);
    snprintf(msg, msgn, "out of memory resizing a %lldx%lld image to %lldx%lld", (long long)in->h, (long long)in->w,
             (long long)h, (long long)w);
    return CT_ENOMEM;
  }
  const uint8_t *src = in->data;
  if (need_h) { /* (in->h, in->w) -> (in->h, w), into tmp (or dst when it is the only pass) */
    uint8_t *hd = need_v ? tmp : dst;
    for (int64_t y = 0; y < in->h; y++)
      for (int64_t xx = 0; xx < w; xx++) {
        int xmin = ax.bounds[xx * 2], xmax = ax.bounds[xx * 2 + 1];
        const int32_t *k = ax.kk + xx * ax.ksize;
        for (int ch = 0; ch < c; ch++) {
          int32_t ss = 1 << (PRECISION_BITS - 1);
          const uint8_t *row = src + (y * in->w + xmin) * c + ch;
          for (int x = 0; x < xmax; x++) ss += row[x * c] * k[x];
          hd[(y * w + xx) * c + ch] = clip8(ss);
        }
      }
    src = hd;
  }
  if (need_v) { /* (in->h, w) -> (h, w) */
    for (int64_t yy = 0; yy < h; yy++) {
      int ymin = ay.bounds[yy * 2], ymax = ay.bounds[yy * 2 + 1];
      const int32_t *k = ay.kk + yy * ay.ksize;
      for (int64_t xx = 0; xx < w * c; xx++) {
        int32_t ss = 1 << (PRECISION_BITS - 1);
        for (int y = 0; y < ymax; y++) ss += src[(ymin + y) * w * c + xx] * k[y];
        dst[yy * w * c + xx] = clip8(ss);
      }
    }
  }
  if (!need_h && !need_v) memcpy(dst, in->data, (size_t)(h * w * c));
  free(tmp), free(ax.bounds), free(ax.kk), free(ay.bounds), free(ay.kk);
  out->h = h, out->w = w, out->c = c, out->data = dst;
  return CT_OK;
}

/* Python's int(round(d / 2.0)) for an integer d >= 0: half to even. */
static int64_t half_round_even(int64_t d) {
  int64_t k = d / 2;
  return d % 2 == 0 ? k : (k % 2 == 0 ? k : k + 1);
}

void ct__image_center_crop_chw(const ct_image *img, int64_t ch, int64_t cw, uint8_t *dst) {
  /* torchvision pads (left/top (crop - size) // 2) where the crop is larger, then cuts at
   * round((padded - crop) / 2), which is 0 in a padded dimension. In image coordinates the window
   * starts at off = top - pad, which may be negative. */
  int64_t pt = ch > img->h ? (ch - img->h) / 2 : 0, pl = cw > img->w ? (cw - img->w) / 2 : 0;
  int64_t ph = ch > img->h ? ch : img->h, pw = cw > img->w ? cw : img->w;
  int64_t oy = half_round_even(ph - ch) - pt, ox = half_round_even(pw - cw) - pl;
  int c = img->c;
  for (int k = 0; k < c; k++)
    for (int64_t r = 0; r < ch; r++) {
      int64_t sy = oy + r;
      uint8_t *d = dst + (k * ch + r) * cw;
      for (int64_t x = 0; x < cw; x++) {
        int64_t sx = ox + x;
        d[x] = sy >= 0 && sy < img->h && sx >= 0 && sx < img->w ? img->data[(sy * img->w + sx) * c + k] : 0;
      }
    }
}

/* ---- the public calls */

ct_status ct_image_decode(const uint8_t *buf, size_t n, const char *name, ct_image_mode mode, ct_image *out) {
  if (out) memset(out, 0, sizeof *out);
  if ((!buf && n > 0) || !out) return ct__null_status("ct_image_decode", !out ? "out" : "buf");
  if (mode != CT_IMAGE_RGB && mode != CT_IMAGE_GRAY)
    return ct__error(CT_EINVAL, "ct_image_decode: mode %d is neither CT_IMAGE_RGB (0) nor CT_IMAGE_GRAY (1)", (int)mode);
  char msg[1024];
  static const uint8_t none[1] = {0};
  ct_status s = ct__image_decode(buf ? buf : none, n, name ? name : "<buffer>", mode, CT_IMAGE_MAX_PIXELS, out, msg, sizeof msg);
  return s == CT_OK ? s : ct__error(s, "ct_image_decode: %s", msg);
}

ct_status ct_image_load(const char *path, ct_image_mode mode, ct_image *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return ct__null_status("ct_image_load", !out ? "out" : "path");
  if (mode != CT_IMAGE_RGB && mode != CT_IMAGE_GRAY)
    return ct__error(CT_EINVAL, "ct_image_load: mode %d is neither CT_IMAGE_RGB (0) nor CT_IMAGE_GRAY (1)", (int)mode);
  char msg[1024];
  uint8_t *buf;
  size_t n;
  ct_status s = ct__read_file(path, &buf, &n, msg, sizeof msg);
  if (s == CT_OK) s = ct__image_decode(buf, n, path, mode, CT_IMAGE_MAX_PIXELS, out, msg, sizeof msg);
  free(buf);
  return s == CT_OK ? s : ct__error(s, "ct_image_load: %s", msg);
}

ct_status ct_image_resize(const ct_image *in, int64_t h, int64_t w, ct_image *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!in || !out) return ct__null_status("ct_image_resize", !in ? "in" : "out");
  if (!in->data || in->h < 1 || in->w < 1 || (in->c != 1 && in->c != 3) || in->h > CT_IMAGE_MAX_PIXELS ||
      in->w > CT_IMAGE_MAX_PIXELS || in->h * in->w > CT_IMAGE_MAX_PIXELS)
    return ct__error(CT_EINVAL, "ct_image_resize: the input is not a decoded image (h=%lld, w=%lld, c=%d, data %s)",
                     (long long)in->h, (long long)in->w, in->c, in->data ? "set" : "NULL");
  if (h < 1 || w < 1 || h > CT_IMAGE_MAX_PIXELS || w > CT_IMAGE_MAX_PIXELS || h * w > CT_IMAGE_MAX_PIXELS)
    return ct__error(CT_EINVAL, "ct_image_resize: size (%lld, %lld) must be >= 1 with at most %lld pixels", (long long)h,
                     (long long)w, (long long)CT_IMAGE_MAX_PIXELS);
  char msg[256];
  ct_status s = ct__image_resize(in, h, w, out, msg, sizeof msg);
  return s == CT_OK ? s : ct__error(s, "ct_image_resize: %s", msg);
}

void ct_image_free(ct_image *img) {
  if (!img) return;
  free(img->data);
  memset(img, 0, sizeof *img);
}
