/* tests/data/image_fixture.h: writing small PNG (libpng's simplified API) and JPEG (libjpeg) files
 * and image folders for the data tests. Header-only (static functions), included by
 * test_imagefolder.c and test_interop_imagefolder.c. */
#ifndef CUTTLE_TEST_IMAGE_FIXTURE_H
#define CUTTLE_TEST_IMAGE_FIXTURE_H

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>

/* Pixel (r, x, channel k) of test image `seed`: a smooth ramp plus a pattern, so resizing and
 * lossy coding have something to do. */
static inline uint8_t img_pixel(int seed, int r, int x, int k) {
  return (uint8_t)((seed * 37 + r * 11 + x * 5 + k * 70 + ((r ^ x) & 3) * 9) % 256);
}

/* An (h, w, c) HWC image of img_pixel(seed); the caller frees it. */
static inline uint8_t *img_make(int seed, int h, int w, int c) {
  uint8_t *p = malloc((size_t)h * w * c);
  for (int r = 0; r < h; r++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++) p[(r * w + x) * c + k] = img_pixel(seed, r, x, k);
  return p;
}

/* mkdir -p of the folder part of path (everything before the last slash). */
static inline void img_mkdirs(const char *path) {
  char p[8192];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0700) != 0 && errno != EEXIST) fprintf(stderr, "mkdir %s: %s\n", p, strerror(errno));
      *s = '/';
    }
}

/* Write data (h, w, c: 1 gray, 3 RGB) as a PNG at path (folders made). Returns 1 on success. */
static inline int img_write_png(const char *path, const uint8_t *data, int h, int w, int c) {
  img_mkdirs(path);
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = (png_uint_32)w, im.height = (png_uint_32)h;
  im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  int ok = png_image_write_to_file(&im, path, 0, data, 0, NULL);
  png_image_free(&im);
  return ok;
}

/* Write data (h, w, c: 1 or 3) as a baseline JPEG of the given quality at path (folders made). */
static inline int img_write_jpeg(const char *path, const uint8_t *data, int h, int w, int c, int quality) {
  img_mkdirs(path);
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr err;
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = (JSAMPROW)(data + (size_t)ci.next_scanline * w * c);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  fclose(f);
  return 1;
}

/* Write n raw bytes at path (folders made). */
static inline void img_write_bytes(const char *path, const void *bytes, size_t n) {
  img_mkdirs(path);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  if (n) fwrite(bytes, 1, n, f);
  fclose(f);
}

/* The bytes of the file at path (malloc'd, *n its size), or NULL. */
static inline uint8_t *img_read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

#endif
