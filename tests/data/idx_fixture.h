/* tests/data/idx_fixture.h: building small IDX files for the data tests. Header-only (static
 * functions), included by test_idx.c and test_loader.c. */
#ifndef CUTTLE_TEST_IDX_FIXTURE_H
#define CUTTLE_TEST_IDX_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* An IDX buffer: magic (type code, ndim), big-endian dims, then payload bytes as given. *n gets
 * its size; the caller frees it. */
static inline uint8_t *idx_build(int type, int ndim, const uint32_t *dims, const void *payload, size_t payload_n, size_t *n) {
  *n = 4 + 4 * (size_t)ndim + payload_n;
  uint8_t *b = malloc(*n ? *n : 1);
  b[0] = 0, b[1] = 0, b[2] = (uint8_t)type, b[3] = (uint8_t)ndim;
  for (int d = 0; d < ndim; d++) {
    b[4 + 4 * d] = (uint8_t)(dims[d] >> 24), b[5 + 4 * d] = (uint8_t)(dims[d] >> 16);
    b[6 + 4 * d] = (uint8_t)(dims[d] >> 8), b[7 + 4 * d] = (uint8_t)dims[d];
  }
  if (payload_n) memcpy(b + 4 + 4 * ndim, payload, payload_n);
  return b;
}

/* Write n bytes to dir/name, gzipped when gz. Returns the malloc'd path. */
static inline char *idx_write(const char *dir, const char *name, const void *buf, size_t n, int gz) {
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(path, "%s/%s", dir, name);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    if (n) gzwrite(f, buf, (unsigned)n);
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    if (n) fwrite(buf, 1, n, f);
    fclose(f);
  }
  return path;
}

/* A fake Fashion-MNIST split in dir: n_img images (28x28, pixel = (sample + position) % 256) and
 * the given labels (n_lab of them). prefix "train" or "t10k"; gz selects the .gz names. */
static inline void idx_write_fake_split(const char *dir, const char *prefix, uint32_t n_img, const uint8_t *labels,
                                        uint32_t n_lab, int gz) {
  size_t np = (size_t)n_img * 784, n;
  uint8_t *px = malloc(np ? np : 1);
  for (size_t i = 0; i < np; i++) px[i] = (uint8_t)((i / 784 + i % 784) % 256);
  uint32_t idims[3] = {n_img, 28, 28}, ldims[1] = {n_lab};
  char name[128];
  uint8_t *b = idx_build(0x08, 3, idims, px, np, &n);
  snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, gz ? ".gz" : "");
  free(idx_write(dir, name, b, n, gz));
  free(b);
  b = idx_build(0x08, 1, ldims, labels, n_lab, &n);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, gz ? ".gz" : "");
  free(idx_write(dir, name, b, n, gz));
  free(b);
  free(px);
}

#endif
