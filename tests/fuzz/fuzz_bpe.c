/* tests/fuzz/fuzz_bpe.c: fuzz target for the BPE tokenizer (cuttle/tokenizer.h): ct_bpe_parse of a
 * vocab.json and a merges.txt, then ct_bpe_encode and ct_bpe_decode of a text. The input is
 * vocab.json, a NUL byte, merges.txt, a NUL byte, and the text (any bytes, NULs too); a part that is
 * missing is empty. Parsing must succeed or fail with CT_EFORMAT; encoding must succeed or fail with
 * CT_EINVAL (a byte without its token, "<|endoftext|>" missing too); every id must be below
 * ct_bpe_vocab_size and decode; and where vocab.json has the 256 one-byte tokens, decode(encode(text))
 * must be the text, byte for byte (valid UTF-8 or not). Never crash, read out of bounds or leak.
 * Built with tests/fuzz/replay_main.c under CTest over tests/fuzz/corpus/fuzz_bpe/, or with
 * -fsanitize=fuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuttle.h"

/* GPT-2's bytes_to_unicode: the character spelling byte b, as UTF-8 into out (NUL-terminated). */
static void spell_byte(int b, char out[3]) {
  int c = b, n = 0;
  if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    for (int k = 0; k < b; k++) n += !((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF));
    c = 256 + n;
  }
  if (c < 0x80) out[0] = (char)c, out[1] = 0;
  else out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3F)), out[2] = 0;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz_bpe: %s (status %d: %s)\n", what, ct_last_status(), ct_last_error());
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *vocab = (const char *)data, *merges = "", *text = "";
  size_t vn = size, mn = 0, tn = 0;
  const char *z1 = memchr(data, 0, size);
  if (z1) {
    vn = (size_t)(z1 - vocab);
    merges = z1 + 1, mn = size - vn - 1;
    const char *z2 = memchr(merges, 0, mn);
    if (z2) text = z2 + 1, tn = mn - (size_t)(z2 - merges) - 1, mn = (size_t)(z2 - merges);
  }
  ct_bpe *t = ct_bpe_parse(vocab, vn, merges, mn, "<fuzz vocab>", "<fuzz merges>");
  if (!t) {
    if (ct_last_status() != CT_EFORMAT) fail("parse failed without CT_EFORMAT");
    return 0;
  }
  int64_t V = ct_bpe_vocab_size(t);
  if (V < 0) fail("a negative vocabulary size");
  int every_byte = 1;
  for (int b = 0; b < 256 && every_byte; b++) {
    char key[3];
    spell_byte(b, key);
    every_byte = ct_bpe_token_id(t, key) >= 0;
  }
  ct_clear_error();
  int64_t *ids = NULL, count = -1;
  if (ct_bpe_encode(t, text, tn, &ids, &count) != CT_OK) {
    if (ct_last_status() != CT_EINVAL || every_byte || ids || count) fail("encode failed where it may not");
    ct_bpe_free(t);
    return 0;
  }
  if (count < 0 || (size_t)count > tn) fail("more ids than bytes");
  for (int64_t i = 0; i < count; i++)
    if (ids[i] < 0 || ids[i] >= V) fail("an id outside the vocabulary");
  size_t back_n = 0;
  char *back = ct_bpe_decode(t, ids, count, &back_n);
  if (!back) fail("decode failed on encode's ids");
  if (back[back_n] != 0) fail("decode's text is not NUL-terminated");
  if (every_byte && (back_n != tn || memcmp(back, text, tn) != 0)) fail("decode(encode(text)) is not the text");
  free(back), free(ids);
  ct_bpe_free(t);
  return 0;
}
