/* src/data/data_internal.h: what the files of the data layer share (the dataset struct, the IDX
 * header parser, the shuffle). Not installed. */
#ifndef CUTTLE_DATA_INTERNAL_H
#define CUTTLE_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "core/internal.h"

struct ct_dataset {
  int64_t n;            /* samples */
  int c, h, w;          /* sample shape */
  int64_t sample_numel; /* c * h * w */
  int num_classes;
  float mean, std;
  float lut[256];   /* lut[p] = ((float)p / 255 - mean) / std, so every path normalizes bit-identically */
  uint8_t *pixels;  /* (n, c, h, w), owned */
  int64_t *labels;  /* (n), owned */
};

/* A dataset owning pixels (n*c*h*w u8) and labels (n int64), both malloc'd; already validated.
 * Frees both when it fails (CT_ENOMEM, also when either pointer is NULL). */
struct ct_dataset *ct__dataset_adopt(uint8_t *pixels, int64_t *labels, int64_t n, int c, int h, int w,
                                     int num_classes, float mean, float std);

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

/* Normalize the pixels of samples idx[0..count) of ds into x (count * sample_numel floats) and
 * copy their labels into y (count entries). Pure: touches nothing but x and y. */
void ct__dataset_gather(const struct ct_dataset *ds, const int64_t *idx, int64_t count, float *x, int64_t *y);

#endif
