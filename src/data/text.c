/* src/data/text.c: texts as token ids for language modelling (cuttle/text.h): nanoGPT's 90/10
 * split and its random windows, drawn from Philox by (seed, step) so that any number of workers,
 * threads or ranks make the same batches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "cuttle/text.h"

struct ct_text {
  int64_t *ids, n, vocab;
  char label[256];
};

static ct_text *text_new(int64_t n, int64_t vocab, const char *label) {
  ct_text *t = ct__calloc(1, sizeof *t, "a text");
  if (!t) return NULL;
  t->ids = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!t->ids) return free(t), ct__error(CT_ENOMEM, "out of memory holding %lld tokens", (long long)n), NULL;
  t->n = n, t->vocab = vocab;
  snprintf(t->label, sizeof t->label, "%s", label ? label : "text");
  return t;
}

ct_text *ct_text_from_bytes(const void *data, size_t n, const char *label) {
  if (!data && n) return ct__null_arg("ct_text_from_bytes", "data");
  if (n > (size_t)INT64_MAX / sizeof(int64_t)) CT_FAIL_NULL(CT_ENOMEM, "ct_text_from_bytes: %zu bytes is too many", n);
  ct_text *t = text_new((int64_t)n, 256, label);
  for (size_t i = 0; t && i < n; i++) t->ids[i] = ((const unsigned char *)data)[i];
  return t;
}

ct_text *ct_text_from_file(const char *path) {
  const char *op = "ct_text_from_file";
  if (!path) return ct__null_arg(op, "path");
  size_t len = 0;
  char *buf = ct__slurp_file(op, path, &len);
  if (!buf) return NULL;
  ct_text *t = ct_text_from_bytes(buf, len, path);
  free(buf);
  return t;
}

ct_text *ct_text_from_ids(const int64_t *ids, int64_t n, int64_t vocab_size, const char *label) {
  const char *op = "ct_text_from_ids";
  if ((!ids && n) || n < 0) return ct__null_arg(op, "ids");
  if (vocab_size < 1) CT_FAIL_NULL(CT_EINVAL, "%s: vocab_size must be >= 1, got %lld", op, (long long)vocab_size);
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      CT_FAIL_NULL(CT_EINVAL, "%s: id %lld at position %lld is outside the vocabulary [0, %lld)", op, (long long)ids[i],
                   (long long)i, (long long)vocab_size);
  ct_text *t = text_new(n, vocab_size, label);
  if (t && n) memcpy(t->ids, ids, sizeof(int64_t) * (size_t)n);
  return t;
}

void ct_text_free(ct_text *t) {
  if (!t) return;
  free(t->ids);
  free(t);
}

/* The split's tokens: [*start, *start + *len); 0 for an unknown split. */
static int span(const ct_text *t, ct_text_split split, int64_t *start, int64_t *len) {
  int64_t cut = (int64_t)((double)t->n * 0.9); /* floor(0.9 n), as int(0.9 * len(data)) */
  switch (split) {
    case CT_TEXT_ALL: *start = 0, *len = t->n; return 1;
    case CT_TEXT_TRAIN: *start = 0, *len = cut; return 1;
    case CT_TEXT_VAL: *start = cut, *len = t->n - cut; return 1;
    default: return 0;
  }
}

static const char *split_name(ct_text_split s) { return s == CT_TEXT_TRAIN ? "training" : s == CT_TEXT_VAL ? "validation" : "whole"; }

int64_t ct_text_length(const ct_text *t, ct_text_split split) {
  int64_t s, n;
  if (!t) return ct__null_status("ct_text_length", "t"), -1;
  if (!span(t, split, &s, &n)) return ct__error(CT_EINVAL, "ct_text_length: unknown split %d", (int)split), -1;
  return n;
}

int64_t ct_text_vocab_size(const ct_text *t) {
  if (!t) return ct__null_status("ct_text_vocab_size", "t"), -1;
  return t->vocab;
}

/* x and y (rows, T) on dev from the windows starting at starts[] */
static ct_status make_pair(const ct_text *t, const int64_t *starts, int64_t rows, int64_t T, ct_device dev, ct_tensor **x,
                           ct_tensor **y) {
  int64_t *hx = malloc(sizeof(int64_t) * (size_t)(rows * T)), *hy = malloc(sizeof(int64_t) * (size_t)(rows * T));
  ct_status s = hx && hy ? CT_OK : ct__error(CT_ENOMEM, "out of memory for a batch of %lld x %lld tokens", (long long)rows,
                                               (long long)T);
  for (int64_t b = 0; s == CT_OK && b < rows; b++) {
    memcpy(hx + b * T, t->ids + starts[b], sizeof(int64_t) * (size_t)T);
    memcpy(hy + b * T, t->ids + starts[b] + 1, sizeof(int64_t) * (size_t)T);
  }
  int64_t shape[2] = {rows, T};
  if (s == CT_OK) *x = ct_from_host(hx, 2, shape, CT_I64, dev);
  if (s == CT_OK && *x) *y = ct_from_host(hy, 2, shape, CT_I64, dev);
  if (s == CT_OK && (!*x || !*y)) {
    s = ct_last_status();
    ct_tensor_free(*x), ct_tensor_free(*y);
    *x = *y = NULL;
  }
  free(hx), free(hy);
  return s;
}

ct_status ct_text_batch(const ct_text *t, ct_text_split split, int64_t B, int64_t T, uint64_t seed, int64_t step, ct_device dev,
                        ct_tensor **x, ct_tensor **y) {
  const char *op = "ct_text_batch";
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!t || !x || !y) return ct__null_status(op, !t ? "t" : !x ? "x" : "y");
  int64_t start, len;
  if (!span(t, split, &start, &len)) return ct__error(CT_EINVAL, "%s: unknown split %d", op, (int)split);
  if (B < 1 || T < 1 || step < 0 || B > ((int64_t)1 << 31) || T > ((int64_t)1 << 31))
    return ct__error(CT_EINVAL, "%s: need B >= 1, T >= 1 and step >= 0, got %lld, %lld and %lld", op, (long long)B,
                     (long long)T, (long long)step);
  if (len < T + 1)
    return ct__error(CT_ESHAPE, "%s: %s's %s split has %lld tokens, fewer than one window of %lld (n_positions + 1)", op,
                     t->label, split_name(split), (long long)len, (long long)(T + 1));
  int64_t *starts = malloc(sizeof(int64_t) * (size_t)B);
  if (!starts) return ct__error(CT_ENOMEM, "%s: out of memory", op);
  uint64_t range = (uint64_t)(len - T); /* starts in [0, len - T - 1] */
  for (int64_t b = 0; b < B; b++) {
    uint32_t w[4];
    ct__philox(seed, (uint64_t)step * (uint64_t)B + (uint64_t)b, 0x7465787400000000ull /* "text" */, w);
    uint64_t r = ((uint64_t)w[0] << 32 | w[1]) % range; /* bias below 2^-32 for any text */
    starts[b] = start + (int64_t)r;
  }
  ct_status s = make_pair(t, starts, B, T, dev, x, y);
  free(starts);
  if (s != CT_OK) ct__error_prefix("%s", op);
  return s;
}

int64_t ct_text_num_windows(const ct_text *t, ct_text_split split, int64_t T) {
  int64_t start, len;
  if (!t) return ct__null_status("ct_text_num_windows", "t"), -1;
  if (!span(t, split, &start, &len) || T < 1)
    return ct__error(CT_EINVAL, "ct_text_num_windows: need a known split and T >= 1, got %d and %lld", (int)split, (long long)T), -1;
  return len < T + 1 ? 0 : (len - 1) / T; /* i = kT with kT + T + 1 <= len */
}

ct_status ct_text_windows(const ct_text *t, ct_text_split split, int64_t T, int64_t first, int64_t count, ct_device dev,
                          ct_tensor **x, ct_tensor **y) {
  const char *op = "ct_text_windows";
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!t || !x || !y) return ct__null_status(op, !t ? "t" : !x ? "x" : "y");
  int64_t n = ct_text_num_windows(t, split, T), start, len;
  if (n < 0) return ct__error_prefix("%s", op);
  span(t, split, &start, &len);
  if (count < 1 || first < 0 || first > n - count)
    return ct__error(CT_EINVAL, "%s: windows %lld .. %lld asked of %s's %s split, which has %lld of %lld tokens", op,
                     (long long)first, (long long)(first + count - 1), t->label, split_name(split), (long long)n,
                     (long long)(T + 1));
  int64_t *starts = malloc(sizeof(int64_t) * (size_t)count);
  if (!starts) return ct__error(CT_ENOMEM, "%s: out of memory", op);
  for (int64_t k = 0; k < count; k++) starts[k] = start + (first + k) * T;
  ct_status s = make_pair(t, starts, count, T, dev, x, y);
  free(starts);
  if (s != CT_OK) ct__error_prefix("%s", op);
  return s;
}
