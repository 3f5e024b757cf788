/* cuttle/text.h: a text as token ids for language modelling, split and batched as nanoGPT's
 * shakespeare_char recipe does (data/shakespeare_char/prepare.py: the first 90% of the tokens for
 * training, the last 10% for validation; train.py's get_batch: random windows of block_size + 1
 * tokens, the inputs and the targets shifted by one). The tokens are a file's bytes (a byte model,
 * vocabulary 256) or ids a tokenizer made. Draws come from a seeded Philox stream indexed by the
 * step, so the batches of a step are the same whatever the threads, workers or ranks. */
#ifndef CUTTLE_TEXT_H
#define CUTTLE_TEXT_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/status.h"
#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_text ct_text;

/* Which tokens: all of them, the first 90% (training) or the last 10% (validation); the split's
 * boundary is floor(0.9 n). */
typedef enum { CT_TEXT_ALL = 0, CT_TEXT_TRAIN, CT_TEXT_VAL } ct_text_split;

/* The bytes of the file at path as tokens (vocabulary 256). The caller frees the text. Errors
 * (NULL): CT_EINVAL for a NULL path; CT_EIO naming the file when it cannot be read; CT_ENOMEM. */
CT_API ct_text *ct_text_from_file(const char *path);
/* n bytes (copied) as tokens, vocabulary 256; label names them in messages (NULL: "text").
 * Errors (NULL): CT_EINVAL for a NULL data with n > 0; CT_ENOMEM. */
CT_API ct_text *ct_text_from_bytes(const void *data, size_t n, const char *label);
/* n token ids (copied), each in [0, vocab_size). Errors (NULL): CT_EINVAL for a NULL ids with
 * n > 0, vocab_size < 1 or an id outside [0, vocab_size) (naming it and its position); CT_ENOMEM. */
CT_API ct_text *ct_text_from_ids(const int64_t *ids, int64_t n, int64_t vocab_size, const char *label);
CT_API void ct_text_free(ct_text *t); /* nothing for NULL */

/* Tokens in a split; -1 with CT_EINVAL for a NULL t or an unknown split. */
CT_API int64_t ct_text_length(const ct_text *t, ct_text_split split);
/* The vocabulary size (256 for bytes); -1 with CT_EINVAL for NULL. */
CT_API int64_t ct_text_vocab_size(const ct_text *t);

/* A training batch: B windows of the split, window b starting at s_b drawn uniformly from
 * [0, len - T - 1] (Philox(seed) at counter step * B + b: the same batch for the same seed and step
 * anywhere), x (B, T) = tokens[s_b : s_b + T] and y (B, T) = tokens[s_b + 1 : s_b + T + 1], int64 on
 * dev; *x and *y are new tensors the caller frees. Errors (both NULL): CT_EINVAL for a NULL
 * argument, an unknown split, B < 1, T < 1 or step < 0; CT_ESHAPE naming the text and the split
 * when it has fewer than T + 1 tokens (one window); CT_EDEVICE; CT_ENOMEM. */
CT_API ct_status ct_text_batch(const ct_text *t, ct_text_split split, int64_t B, int64_t T, uint64_t seed, int64_t step,
                               ct_device dev, ct_tensor **x, ct_tensor **y);

/* The number of consecutive windows of T + 1 tokens in a split, starting at i = 0, T, 2T, ... while
 * i + T + 1 <= len (how `cuttle eval` scores a whole text); -1 with CT_EINVAL for a NULL t, an
 * unknown split or T < 1. */
CT_API int64_t ct_text_num_windows(const ct_text *t, ct_text_split split, int64_t T);
/* Consecutive windows first .. first + count - 1 of that sequence: x (count, T) = tokens[i : i + T]
 * and y = tokens[i + 1 : i + T + 1] with i = k T, int64 on dev, new tensors the caller frees.
 * Errors (both NULL): CT_EINVAL for a NULL argument, an unknown split, T < 1, count < 1, or a
 * window range past ct_text_num_windows (naming both); CT_EDEVICE; CT_ENOMEM. */
CT_API ct_status ct_text_windows(const ct_text *t, ct_text_split split, int64_t T, int64_t first, int64_t count,
                                 ct_device dev, ct_tensor **x, ct_tensor **y);

#ifdef __cplusplus
}
#endif
#endif
