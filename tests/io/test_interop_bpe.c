/* tests/io/test_interop_bpe.c: cuttle's BPE tokenizer (cuttle/tokenizer.h) against Hugging Face's.
 * tests/io/bpe_interop.py (run by $CUTTLE_PYTHON, the build folder's venv: scripts/python_env.sh
 * installs transformers, which brings tokenizers) trains a byte-level BPE vocabulary of 700 tokens
 * with tokenizers' ByteLevelBPETokenizer, saves it in GPT-2's format (vocab.json, merges.txt), and
 * encodes test texts with transformers.GPT2Tokenizer: punctuation, numbers, contractions, newlines,
 * runs of spaces, other white space (U+00A0, U+3000, U+2028, U+0085, U+180E), accents, CJK, emoji,
 * "<|endoftext|>" between documents, and this repository's README.md. ct_bpe_load reads the same
 * files; its ids must equal GPT2Tokenizer's, and ct_bpe_decode must give each text back byte for
 * byte. Prints each text's token count. A missing transformers is a failure, not a skip, unless
 * CUTTLE_INTEROP_OPTIONAL=1. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char script[4200], src_dir[4096];

/* The whole file (its length in *n), or NULL when it does not exist. */
static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  *n = fread(buf, 1, (size_t)len, f);
  buf[*n] = 0;
  fclose(f);
  return buf;
}

static void same_ids_as_gpt2tokenizer(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char cmd[9000], vocab[4200], merges[4200], path[4200];
  snprintf(cmd, sizeof cmd, "'%s' '%s' write '%s' '%s'", ct_test_python(), script, dir, src_dir);
  assert_int_equal(system(cmd), 0);
  snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
  snprintf(merges, sizeof merges, "%s/merges.txt", dir);
  ct_bpe *t = ct_assert_nonnull(ct_bpe_load(vocab, merges));
  assert_int_equal(ct_bpe_vocab_size(t), 700);
  assert_int_equal(ct_bpe_token_id(t, "<|endoftext|>"), 0);
  int texts = 0;
  int64_t total = 0;
  for (int k = 0;; k++) {
    size_t n = 0, idn = 0;
    snprintf(path, sizeof path, "%s/text_%d.txt", dir, k);
    char *text = read_all(path, &n);
    if (!text) break;
    snprintf(path, sizeof path, "%s/ids_%d.txt", dir, k);
    char *idtext = ct_assert_nonnull(read_all(path, &idn));
    int64_t want_n = 0;
    for (size_t i = 0; i < idn; i++) want_n += idtext[i] == '\n';
    int64_t *want = malloc((size_t)(want_n + 1) * sizeof *want);
    char *p = idtext;
    for (int64_t i = 0; i < want_n; i++) want[i] = strtoll(p, &p, 10);
    int64_t *ids = NULL, count = -1;
    ct_assert_ok(ct_bpe_encode(t, text, n, &ids, &count));
    int64_t first_diff = -1;
    for (int64_t i = 0; i < (count < want_n ? count : want_n) && first_diff < 0; i++)
      if (ids[i] != want[i]) first_diff = i;
    if (first_diff < 0 && count != want_n) first_diff = count < want_n ? count : want_n;
    printf("# text %d: %zu bytes, %lld ids from cuttle, %lld from GPT2Tokenizer: %s\n", k, n, (long long)count,
           (long long)want_n, first_diff < 0 ? "equal" : "DIFFERENT");
    if (first_diff >= 0)
      printf("#   first difference at %lld: cuttle %lld, GPT2Tokenizer %lld\n", (long long)first_diff,
             (long long)(first_diff < count ? ids[first_diff] : -1), (long long)(first_diff < want_n ? want[first_diff] : -1));
    assert_int_equal(first_diff, -1);
    size_t back_n = 0;
    char *back = ct_assert_nonnull(ct_bpe_decode(t, ids, count, &back_n));
    assert_int_equal(back_n, n);
    assert_memory_equal(back, text, n);
    total += count, texts++;
    free(back), free(ids), free(want), free(idtext), free(text);
  }
  printf("# %d texts, %lld tokens, every id equal to GPT2Tokenizer's, each decoded back to its bytes\n", texts,
         (long long)total);
  assert_true(texts >= 4);
  ct_bpe_free(t);
  ct_test_rmdir(dir);
}

int main(void) {
  int rc = ct_test_require_python("tokenizers, transformers");
  if (rc != 0) return rc;
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(src_dir, sizeof src_dir, "%s", src ? src : ".");
  snprintf(script, sizeof script, "%s/tests/io/bpe_interop.py", src_dir);
  const struct CMUnitTest tests[] = {cmocka_unit_test(same_ids_as_gpt2tokenizer)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
