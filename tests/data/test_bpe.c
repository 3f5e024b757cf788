/* tests/data/test_bpe.c: the byte-level BPE tokenizer (cuttle/tokenizer.h) on vocabularies written
 * here: a hand-made one (the 256 bytes as ids 0..255, "<|endoftext|>" and 12 merges) whose ids are
 * worked out by hand for pre-tokenization (contractions, runs of spaces, numbers, U+180E, the
 * special token, invalid UTF-8) and for the merges' ranks; decode(encode(x)) == x on ASCII,
 * accents, CJK, emoji and random bytes; the merges of random vocabularies, listed in any order,
 * against a direct transcription of GPT2Tokenizer.bpe; and every error with its code and message.
 * (tests/io/test_interop_bpe.c compares with transformers' GPT2Tokenizer itself.) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* ---- writing vocabularies: GPT-2's bytes_to_unicode, written out again here */

static int b2u(int b) {
  int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (printable) return b;
  int n = 0;
  for (int c = 0; c < b; c++) n += !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF));
  return 256 + n;
}

/* The token spelling the bytes s[0 .. n), as UTF-8 (raw = 1) or as a JSON string body with \u
 * escapes for everything past ASCII. Appends to out (NUL-terminated). */
static void spell(const char *s, size_t n, int raw, char *out) {
  char *o = out + strlen(out);
  for (size_t i = 0; i < n; i++) {
    int c = b2u((unsigned char)s[i]);
    if (c < 0x80) {
      if (!raw && (c == '"' || c == '\\')) *o++ = '\\';
      *o++ = (char)c;
    } else if (!raw) {
      o += sprintf(o, "\\u%04x", c);
    } else {
      *o++ = (char)(0xC0 | c >> 6), *o++ = (char)(0x80 | (c & 0x3F));
    }
  }
  *o = 0;
}

/* A vocabulary: the 256 one-byte tokens (id = byte; those in `without` left out and the ids after
 * them moved down), then extra[] (byte strings), ids in that order. */
static char *vocab_json(const char *const *extra, int n_extra, const char *without) {
  char *j = calloc(1, 1 << 16);
  strcat(j, "{\n");
  int id = 0;
  for (int b = 0; b < 256; b++) {
    if (without && b && strchr(without, b)) continue;
    char c = (char)b;
    strcat(j, "\"");
    spell(&c, 1, 0, j);
    sprintf(j + strlen(j), "\": %d,\n", id++);
  }
  for (int k = 0; k < n_extra; k++) {
    strcat(j, "\"");
    if (strcmp(extra[k], "<|endoftext|>") == 0) strcat(j, extra[k]);
    else spell(extra[k], strlen(extra[k]), 0, j);
    sprintf(j + strlen(j), "\": %d%s\n", id++, k + 1 < n_extra ? "," : "");
  }
  if (n_extra == 0) j[strlen(j) - 2] = '\n', j[strlen(j) - 1] = 0; /* no trailing comma */
  strcat(j, "}\n");
  return j;
}

/* merges.txt for pairs of byte strings, in rank order. */
static char *merges_txt(const char *const (*pairs)[2], int n) {
  char *m = calloc(1, 1 << 14);
  strcat(m, "#version: 0.2\n");
  for (int k = 0; k < n; k++) {
    spell(pairs[k][0], strlen(pairs[k][0]), 1, m);
    strcat(m, " ");
    spell(pairs[k][1], strlen(pairs[k][1]), 1, m);
    strcat(m, "\n");
  }
  return m;
}

/* ---- the hand-made vocabulary */

static const char *const hand_extra[] = {"<|endoftext|>", "ll", "ell", "hell", "hello", "he", " t", " the", "aa", "  ",
                                         "'s", "12", " \xE1"};
/* ids 256 .. 268 */
enum { EOT = 256, LL, ELL, HELL, HELLO, HE, SP_T, SP_THE, AA, SP_SP, APOS_S, N12, SP_E1 };
static const char *const hand_merges[][2] = {{"l", "l"},   {"e", "ll"}, {"h", "ell"}, {"hell", "o"}, {"h", "e"}, {" ", "t"},
                                             {" t", "he"}, {"a", "a"},  {" ", " "},   {"'", "s"},    {"1", "2"}, {" ", "\xE1"}};

static ct_bpe *hand(void) {
  char *v = vocab_json(hand_extra, 13, NULL), *m = merges_txt(hand_merges, 12);
  ct_bpe *t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), m, strlen(m), NULL, NULL));
  free(v), free(m);
  return t;
}

/* encode(text) gives want; decode gives text back unless the ids hold an unknown byte's unk. */
static void expect_ids_rt(const ct_bpe *t, const char *text, size_t n, int round, const int64_t *want, int64_t want_n) {
  int64_t *ids = NULL, count = -1;
  ct_assert_ok(ct_bpe_encode(t, text, n, &ids, &count));
  int same = count == want_n;
  for (int64_t i = 0; same && i < count; i++) same = ids[i] == want[i];
  if (!same) {
    printf("text \"%.*s\": ids", (int)n, text);
    for (int64_t i = 0; i < count; i++) printf(" %lld", (long long)ids[i]);
    printf(", expected");
    for (int64_t i = 0; i < want_n; i++) printf(" %lld", (long long)want[i]);
    printf("\n");
  }
  assert_true(same);
  size_t back_n = 0;
  char *back = ct_assert_nonnull(ct_bpe_decode(t, ids, count, &back_n));
  free(ids);
  if (round) {
    assert_int_equal(back_n, n);
    assert_memory_equal(back, text, n);
  }
  free(back);
}

#define IDS(...) (const int64_t[]){__VA_ARGS__}, (int64_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define EXPECT(t, text, ...) expect_ids_rt(t, text, strlen(text), 1, IDS(__VA_ARGS__))

static void test_hand_vocabulary(void **state) {
  (void)state;
  ct_bpe *t = hand();
  assert_int_equal(ct_bpe_vocab_size(t), 269);
  assert_int_equal(ct_bpe_token_id(t, "<|endoftext|>"), EOT);
  assert_int_equal(ct_bpe_token_id(t, "\xc4\xa0the"), SP_THE); /* "Ġthe" */
  assert_int_equal(ct_bpe_token_id(t, "\xc4\xa0"), ' ');
  /* "hello": (l,l) rank 0, then (e,ll) 1, (h,ell) 2, (hell,o) 3; (h,e) rank 4 never gets its turn */
  EXPECT(t, "hello the world", HELLO, SP_THE, ' ', 'w', 'o', 'r', 'l', 'd');
  /* "help": (h,e) is the only pair listed; " the": (h,e) 4, then (Ġ,t) 5, then (Ġt,he) 6 */
  EXPECT(t, "help", HE, 'l', 'p');
  EXPECT(t, " the", SP_THE);
  EXPECT(t, "hell", HELL);
  /* a pair of equal symbols merges left to right: "aaa" is [aa, a] */
  EXPECT(t, "aaa", AA, 'a');
  EXPECT(t, "aaaa", AA, AA);
  EXPECT(t, "aaaaa", AA, AA, 'a');
  /* contractions are lower case only: 'S is punctuation then a letter */
  EXPECT(t, "it's", 'i', 't', APOS_S);
  EXPECT(t, "IT'S", 'I', 'T', '\'', 'S');
  /* runs of spaces: all but the last before a word; all of them at the end */
  EXPECT(t, "a b", 'a', ' ', 'b');
  EXPECT(t, "a  b", 'a', ' ', ' ', 'b');
  EXPECT(t, "a   b", 'a', SP_SP, ' ', 'b');
  EXPECT(t, "a   ", 'a', SP_SP, ' ');
  EXPECT(t, "a\n\n b", 'a', '\n', '\n', ' ', 'b');
  /* numbers: " ?\p{N}+" */
  EXPECT(t, "x12345", 'x', N12, '3', '4', '5');
  EXPECT(t, "x 12", 'x', ' ', N12); /* " 12" is one pre-token: [Ġ, 12] */
  /* U+180E (E1 A0 8E) is no white space to Python's regex module: " \u180e" is one pre-token, whose
   * (Ġ, 0xE1) merges; PCRE2's own \s would have cut it after the space */
  EXPECT(t, "e \xe1\xa0\x8ex", 'e', SP_E1, 0xA0, 0x8E, 'x');
  /* U+3000 is: the ideographic space before a letter is a pre-token of its own */
  EXPECT(t, "e \xe3\x80\x80x", 'e', ' ', 0xE3, 0x80, 0x80, 'x');
  /* multi-byte characters are their bytes */
  EXPECT(t, "\xc3\xa9", 0xC3, 0xA9);
  /* the special token, anywhere, and a prefix of it as text */
  EXPECT(t, "a<|endoftext|>b", 'a', EOT, 'b');
  EXPECT(t, "<|endoftext|><|endoftext|>", EOT, EOT);
  EXPECT(t, "x <|endoftext|> y", 'x', ' ', EOT, ' ', 'y');
  EXPECT(t, "<|endo", '<', '|', 'e', 'n', 'd', 'o');
  /* invalid UTF-8 is its bytes, in place */
  EXPECT(t, "a\xff b", 'a', 0xFF, ' ', 'b');
  EXPECT(t, "hello\xc3", HELLO, 0xC3);
  expect_ids_rt(t, "a\0b", 3, 1, IDS('a', 0, 'b'));
  /* empty text: no ids, an array to free all the same */
  int64_t *ids = NULL, count = -1;
  ct_assert_ok(ct_bpe_encode(t, "", 0, &ids, &count));
  assert_int_equal(count, 0);
  assert_non_null(ids);
  free(ids);
  ct_assert_ok(ct_bpe_encode(t, NULL, 0, &ids, &count));
  assert_int_equal(count, 0);
  free(ids);
  size_t n = 99;
  char *s = ct_assert_nonnull(ct_bpe_decode(t, NULL, 0, &n));
  assert_int_equal(n, 0);
  assert_string_equal(s, "");
  free(s);
  /* decode of the special token gives its text */
  s = ct_assert_nonnull(ct_bpe_decode(t, (int64_t[]){HELLO, EOT, SP_THE}, 3, NULL));
  assert_string_equal(s, "hello<|endoftext|> the");
  free(s);
  ct_bpe_free(t);
  ct_bpe_free(NULL);
}

static void round_trip(const ct_bpe *t, const char *text, size_t n) {
  int64_t *ids = NULL, count = -1;
  ct_assert_ok(ct_bpe_encode(t, text, n, &ids, &count));
  assert_true(count >= 1 && (size_t)count <= n);
  size_t back_n = 0;
  char *back = ct_assert_nonnull(ct_bpe_decode(t, ids, count, &back_n));
  assert_int_equal(back_n, n);
  assert_memory_equal(back, text, n);
  assert_int_equal(back[n], 0);
  free(back), free(ids);
}

static void test_round_trip(void **state) {
  (void)state;
  ct_bpe *t = hand();
  static const char *const texts[] = {
      "hello the world, it's 12:34 and they'll say we've   seen   it all.\n\n\tTabs\r\nand CRLF  ",
      "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x89" "cole \xc3\x9c" "ber Stra\xc3\x9f" "e",
      "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
      "emoji \xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 done!",
      "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xd7\xa2\xd7\x91\xd7\xa8\xd7\x99\xd7\xaa \xe2\x85\xa7 x\xc2\xb2",
      "   leading and trailing   ",
  };
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) round_trip(t, texts[k], strlen(texts[k]));
  /* random bytes, valid UTF-8 or not */
  srand(7);
  char buf[512];
  for (int r = 0; r < 200; r++) {
    size_t n = 1 + (size_t)(rand() % 500);
    for (size_t i = 0; i < n; i++) buf[i] = (char)(r % 2 ? rand() % 256 : " abcehlt'12\n\xe1\xa0\x8e"[rand() % 16]);
    round_trip(t, buf, n);
  }
  /* a long pre-token: 100000 letters, and as many spaces */
  size_t big = 100000;
  char *long_text = malloc(2 * big);
  for (size_t i = 0; i < big; i++) long_text[i] = "hellothe"[i % 8], long_text[big + i] = ' ';
  round_trip(t, long_text, 2 * big);
  free(long_text);
  ct_bpe_free(t);
}

/* ---- random merges in any order against GPT2Tokenizer.bpe transcribed */

typedef struct {
  char tok[64][32]; /* extra tokens, ids 256 + k */
  int n;
  int pair[64][2]; /* merges in rank order: ids of the parts */
  int n_merges;
} rand_vocab;

static int id_of(const rand_vocab *v, const char *s) {
  if (strlen(s) == 1) return (unsigned char)s[0];
  for (int k = 0; k < v->n; k++)
    if (strcmp(v->tok[k], s) == 0) return 256 + k;
  return -1;
}

static const char *str_of(const rand_vocab *v, int id, char one[2]) {
  if (id < 256) return one[0] = (char)id, one[1] = 0, one;
  return v->tok[id - 256];
}

/* GPT2Tokenizer.bpe: the pair of lowest rank, merged at every place left to right, until none. */
static int reference_bpe(const rand_vocab *v, const char *word, int *out) {
  char sym[64][32], next[64][32];
  int n = (int)strlen(word);
  for (int i = 0; i < n; i++) sym[i][0] = word[i], sym[i][1] = 0;
  while (n > 1) {
    int best = -1;
    for (int i = 0; i + 1 < n; i++) {
      int a = id_of(v, sym[i]), b = id_of(v, sym[i + 1]);
      for (int r = 0; r < v->n_merges && (best < 0 || r < best); r++)
        if (v->pair[r][0] == a && v->pair[r][1] == b) best = r;
    }
    if (best < 0) break;
    char one[2], two[2];
    const char *first = str_of(v, v->pair[best][0], one), *second = str_of(v, v->pair[best][1], two);
    int m = 0;
    for (int i = 0; i < n;) {
      if (i < n - 1 && strcmp(sym[i], first) == 0 && strcmp(sym[i + 1], second) == 0) {
        snprintf(next[m++], 32, "%s%s", first, second);
        i += 2;
      } else {
        strcpy(next[m++], sym[i++]);
      }
    }
    memcpy(sym, next, sizeof sym);
    n = m;
  }
  for (int i = 0; i < n; i++) out[i] = id_of(v, sym[i]);
  return n;
}

static void test_random_merges_against_reference(void **state) {
  (void)state;
  srand(11);
  int words = 0;
  for (int trial = 0; trial < 30; trial++) {
    rand_vocab v = {.n = 0};
    /* tokens over {a, b, c}, each the concatenation of two earlier ones */
    while (v.n < 24) {
      char one[2], two[2];
      int a = rand() % (3 + v.n), b = rand() % (3 + v.n);
      a = a < 3 ? 'a' + a : 256 + a - 3, b = b < 3 ? 'a' + b : 256 + b - 3;
      char cat[64];
      snprintf(cat, sizeof cat, "%s%s", str_of(&v, a, one), str_of(&v, b, two));
      if (strlen(cat) >= 16 || id_of(&v, cat) >= 0) continue;
      strcpy(v.tok[v.n++], cat);
      v.pair[v.n_merges][0] = a, v.pair[v.n_merges][1] = b, v.n_merges++;
    }
    /* every other trial lists the merges in a shuffled order: a merge may rank before the merges
     * that make its parts, which a heap of pairs taken one at a time would get wrong */
    if (trial % 2)
      for (int i = v.n_merges - 1; i > 0; i--) {
        int j = rand() % (i + 1), tmp[2] = {v.pair[i][0], v.pair[i][1]};
        v.pair[i][0] = v.pair[j][0], v.pair[i][1] = v.pair[j][1], v.pair[j][0] = tmp[0], v.pair[j][1] = tmp[1];
      }
    const char *extra[64];
    for (int k = 0; k < v.n; k++) extra[k] = v.tok[k];
    const char *pairs[64][2];
    char ones[64][2][2];
    for (int r = 0; r < v.n_merges; r++)
      for (int s = 0; s < 2; s++) pairs[r][s] = str_of(&v, v.pair[r][s], ones[r][s]);
    char *vj = vocab_json(extra, v.n, NULL), *mt = merges_txt((const char *const(*)[2])pairs, v.n_merges);
    ct_bpe *t = ct_assert_nonnull(ct_bpe_parse(vj, strlen(vj), mt, strlen(mt), NULL, NULL));
    free(vj), free(mt);
    for (int w = 0; w < 200; w++, words++) {
      char word[32];
      int n = 1 + rand() % 24;
      for (int i = 0; i < n; i++) word[i] = (char)('a' + rand() % 3);
      word[n] = 0;
      int want[64];
      int want_n = reference_bpe(&v, word, want);
      int64_t *ids = NULL, count = 0;
      ct_assert_ok(ct_bpe_encode(t, word, (size_t)n, &ids, &count));
      int same = count == want_n;
      for (int i = 0; same && i < want_n; i++) same = ids[i] == want[i];
      if (!same) printf("trial %d word %s: cuttle gives %lld ids, the reference %d\n", trial, word, (long long)count, want_n);
      assert_true(same);
      free(ids);
    }
    ct_bpe_free(t);
  }
  printf("# %d random words in 30 random vocabularies: the reference's ids\n", words);
}

/* ---- missing byte tokens: GPT2Tokenizer's unk ("<|endoftext|>"), or an error without it */

static void test_missing_byte_tokens(void **state) {
  (void)state;
  const char *eot[] = {"<|endoftext|>"};
  char *v = vocab_json(eot, 1, "z"), *m = merges_txt(NULL, 0);
  ct_bpe *t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), m, strlen(m), NULL, NULL));
  free(v);
  assert_int_equal(ct_bpe_vocab_size(t), 256);
  /* the ids after 'z' moved down by one: "<|endoftext|>" is 255 */
  expect_ids_rt(t, "azb", 3, 0, IDS('a', 255, 'b'));
  ct_bpe_free(t);
  v = vocab_json(NULL, 0, "z");
  t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), m, strlen(m), NULL, NULL));
  free(v), free(m);
  int64_t *ids = (int64_t *)1, count = 5;
  assert_int_equal(ct_bpe_encode(t, "lazy", 4, &ids, &count), CT_EINVAL);
  assert_null(ids);
  assert_int_equal(count, 0);
  ct_assert_error_contains("ct_bpe_encode");
  ct_assert_error_contains("byte 0x7a at offset 2");
  ct_bpe_free(t);
}

/* ---- errors */

static void expect_parse_error(const char *vocab, const char *merges, const char *needle) {
  ct_clear_error();
  assert_null(ct_bpe_parse(vocab, strlen(vocab), merges, strlen(merges), "v.json", "m.txt"));
  if (ct_last_status() != CT_EFORMAT || !strstr(ct_last_error(), needle))
    printf("expected CT_EFORMAT with \"%s\", got %d: %s\n", needle, ct_last_status(), ct_last_error());
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("ct_bpe_parse");
  ct_assert_error_contains(needle);
}

static void test_vocab_errors(void **state) {
  (void)state;
  const char *m = "#version: 0.2\n";
  expect_parse_error("{\n\"a\": 0,\n\"b\" 1}", m, "v.json line 3: not valid JSON");
  expect_parse_error("", m, "v.json line 1: not valid JSON");
  expect_parse_error("[1, 2]", m, "v.json line 1: not a JSON object");
  expect_parse_error("{\"a\": 0}\n\n x", m, "v.json line 3: data after the JSON object");
  expect_parse_error("{\"a\": \"x\"}", m, "the id of \"a\" must be a whole number in [0, 1)");
  expect_parse_error("{\"a\": 0, \"b\": 2}", m, "the id of \"b\" must be a whole number in [0, 2)");
  expect_parse_error("{\"a\": 0, \"b\": 0.5}", m, "the id of \"b\"");
  expect_parse_error("{\"a\": -1}", m, "the id of \"a\"");
  expect_parse_error("{\"a\": 0, \"b\": 0}", m, "id 0 belongs to both \"a\" and \"b\"");
  expect_parse_error("{\"a\": 0, \"a\": 1}", m, "the key \"a\" occurs twice");
  expect_parse_error("{\"a\xff\": 0}", m, "is not valid UTF-8");
  /* an empty object is a vocabulary of no tokens */
  ct_bpe *t = ct_assert_nonnull(ct_bpe_parse("{}", 2, "", 0, NULL, NULL));
  assert_int_equal(ct_bpe_vocab_size(t), 0);
  ct_bpe_free(t);
}

static void test_merges_errors(void **state) {
  (void)state;
  char *v = vocab_json(hand_extra, 13, NULL);
  expect_parse_error(v, "l l\n", "m.txt line 1: expected the header \"#version: 0.2\"");
  expect_parse_error(v, "#version: 0.2\nl l\ne ll\nh ell x\n",
                     "m.txt line 4: a merge is two tokens separated by a space, this line has 3");
  expect_parse_error(v, "#version: 0.2\nl\n", "m.txt line 2: a merge is two tokens separated by a space, this line has 1");
  expect_parse_error(v, "#version: 0.2\nl l\nq \xe2\x82\xac\n",
                     "m.txt line 3: the merge's token \"\xe2\x82\xac\" is not in the vocabulary");
  expect_parse_error(v, "#version: 0.2\nl \xff\n", "m.txt line 2: not valid UTF-8");
  expect_parse_error(v, "#version: 0.2\nl l\nl o\n",
                     "m.txt line 3: the merge of \"l\" and \"o\" makes a token that is not in the vocabulary");
  /* as GPT2Tokenizer reads it: blank lines, white space and \r\n are fine; what follows the last
   * newline is no merge (here a malformed one); a merge listed twice takes its later rank */
  const char *loose = "#version: 0.2\r\n\nh e\r\n \t \nl  l\nnot a merge";
  ct_bpe *t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), loose, strlen(loose), NULL, NULL));
  EXPECT(t, "hello", HE, LL, 'o');
  ct_bpe_free(t);
  const char *twice = "#version: 0.2\nh e\ne ll\nl l\nh e\n";
  t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), twice, strlen(twice), NULL, NULL));
  EXPECT(t, "hell", 'h', ELL); /* (h,e) ranks last (its later line): (l,l), then (e,ll) take the e first */
  ct_bpe_free(t);
  /* no merges: at most one line, or just the header */
  t = ct_assert_nonnull(ct_bpe_parse(v, strlen(v), "h e", 3, NULL, NULL));
  EXPECT(t, "he", 'h', 'e');
  ct_bpe_free(t);
  free(v);
}

static void test_load_and_argument_errors(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char vp[4200], mp[4200], missing[4200];
  snprintf(vp, sizeof vp, "%s/vocab.json", dir);
  snprintf(mp, sizeof mp, "%s/merges.txt", dir);
  snprintf(missing, sizeof missing, "%s/absent.json", dir);
  char *v = vocab_json(hand_extra, 13, NULL), *m = merges_txt(hand_merges, 12);
  FILE *f = fopen(vp, "wb");
  fputs(v, f), fclose(f);
  f = fopen(mp, "wb");
  fputs(m, f), fclose(f);
  free(v), free(m);
  ct_bpe *t = ct_assert_nonnull(ct_bpe_load(vp, mp));
  EXPECT(t, "hello the", HELLO, SP_THE);

  ct_clear_error();
  assert_null(ct_bpe_load(missing, mp));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("ct_bpe_load: cannot open");
  ct_assert_error_contains(missing);
  assert_null(ct_bpe_load(vp, missing));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains(missing);
  assert_null(ct_bpe_load(dir, mp)); /* a directory */
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains(dir);
  /* a malformed file is named by its path */
  f = fopen(missing, "wb");
  fputs("{\"a\": 0,\n\"b\" 1}", f), fclose(f);
  assert_null(ct_bpe_load(missing, mp));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains(missing);
  ct_assert_error_contains("line 2");
  assert_null(ct_bpe_load(vp, missing));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("absent.json line 1: expected the header");
  remove(missing);

  /* decode: ids outside the vocabulary */
  assert_null(ct_bpe_decode(t, (int64_t[]){HELLO, 269}, 2, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("ct_bpe_decode: id 269 (at position 1) is not in the vocabulary (ids 0 .. 268)");
  assert_null(ct_bpe_decode(t, (int64_t[]){-1}, 1, NULL));
  ct_assert_error_contains("id -1 (at position 0)");
  assert_null(ct_bpe_decode(t, (int64_t[]){1}, -1, NULL));
  ct_assert_error_contains("count -1");
  assert_null(ct_bpe_decode(t, NULL, 2, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_bpe_decode(NULL, (int64_t[]){1}, 1, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  /* token ids */
  assert_int_equal(ct_bpe_token_id(t, "hellos"), -1);
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("\"hellos\" is not a token of the vocabulary");
  assert_int_equal(ct_bpe_token_id(t, "hello"), HELLO);
  assert_int_equal(ct_bpe_token_id(t, "hell\xc3\xb2"), -1);
  assert_int_equal(ct_bpe_token_id(t, "hellos") + ct_bpe_token_id(t, NULL) + ct_bpe_token_id(NULL, "a"), -3);
  assert_int_equal(ct_bpe_vocab_size(NULL), -1);
  /* NULL arguments */
  int64_t *ids = NULL, count = 0;
  assert_int_equal(ct_bpe_encode(NULL, "a", 1, &ids, &count), CT_EINVAL);
  assert_int_equal(ct_bpe_encode(t, "a", 1, NULL, &count), CT_EINVAL);
  assert_int_equal(ct_bpe_encode(t, "a", 1, &ids, NULL), CT_EINVAL);
  assert_int_equal(ct_bpe_encode(t, NULL, 1, &ids, &count), CT_EINVAL);
  ct_assert_error_contains("text is NULL with n 1");
  assert_null(ct_bpe_load(NULL, mp));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_bpe_load(vp, NULL));
  assert_null(ct_bpe_parse(NULL, 3, "", 0, NULL, NULL));
  ct_assert_error_contains("vocab_json is NULL");
  assert_null(ct_bpe_parse("{}", 2, NULL, 5, NULL, NULL));
  ct_assert_error_contains("merges_txt is NULL");
  ct_bpe *empty = ct_assert_nonnull(ct_bpe_parse("{}", 2, NULL, 0, NULL, NULL));
  ct_bpe_free(empty);
  ct_bpe_free(t);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_vocabulary),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_random_merges_against_reference),
      cmocka_unit_test(test_missing_byte_tokens),
      cmocka_unit_test(test_vocab_errors),
      cmocka_unit_test(test_merges_errors),
      cmocka_unit_test(test_load_and_argument_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
