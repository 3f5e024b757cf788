/* src/data/bpe.c: GPT-2's byte-level BPE tokenizer (cuttle/tokenizer.h), after transformers'
 * GPT2Tokenizer (src/transformers/models/gpt2/tokenization_gpt2.py, 4.46): bytes_to_unicode, the
 * pre-tokenization pattern (matched with PCRE2 in UTF + UCP mode), the merges by rank, the ids of
 * vocab.json (read with cJSON).
 *
 * Tokens are kept as the byte strings they spell (each character of a vocab.json key mapped back
 * through bytes_to_unicode), so BPE runs on a pre-token's bytes and a merge is a pair of ids. The
 * merges of a pre-token run in GPT2Tokenizer.bpe's rounds (the pair of lowest rank, merged at each
 * place left to right, then again), found with a heap of candidate pairs rather than a scan per
 * round: O(L log L) for a pre-token of L bytes, where the scan was O(L^2). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "core/internal.h"
#include "cuttle/tokenizer.h"

/* GPT2Tokenizer's unk, bos and eos token. */
#define EOT "<|endoftext|>"

/* GPT-2's pattern (tokenization_gpt2.py), \s written as the White_Space class of Python's regex
 * module (PCRE2's \s also matches U+180E) and \S as its complement. */
#define WS "\\t-\\r\\x20\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
                                   "])|[" WS "]+";

/* An open-addressing table from a byte string to the id whose string it is (strings kept by the
 * tokenizer: off/len per id). */
typedef struct {
  int32_t *slot; /* id, or -1 for an empty slot */
  size_t mask;
} strmap;

/* (left id, right id) -> rank and the merged token's id. */
typedef struct {
  uint64_t key; /* left << 32 | right; UINT64_MAX for an empty slot */
  int32_t rank, merged;
} merge_slot;

struct ct_bpe {
  int64_t size;             /* the number of tokens; their ids are 0 .. size - 1 */
  int32_t *bytes_len;       /* per id: the length of the bytes it spells */
  int64_t *bytes_off;       /* into bytes */
  char *bytes;              /* what each token spells (decode) */
  int32_t *key_len;         /* per id: its vocab.json key (UTF-8) */
  int64_t *key_off;
  char *keys;
  strmap by_bytes;           /* byte-level tokens by the bytes they spell (encode) */
  strmap by_key;             /* every token by its key (ct_bpe_token_id) */
  merge_slot *merges;
  size_t merges_mask;
  int32_t byte_id[256]; /* the one-byte tokens; -1 when missing */
  int32_t eot;          /* "<|endoftext|>"'s id, -1 when missing */
  pcre2_code *re;
};

/* ---- bytes_to_unicode */

/* byte -> code point, and code point (< 324) -> byte or -1. */
static int32_t b2u[256];
static int16_t u2b[324];

static void bytes_to_unicode(void) {
  static int done;
  if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return;
  int32_t map[256];
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? b : 256 + n++;
  }
  /* the same values whichever thread writes them first */
  for (int c = 0; c < 324; c++) __atomic_store_n(&u2b[c], (int16_t)-1, __ATOMIC_RELAXED);
  for (int b = 0; b < 256; b++) {
    __atomic_store_n(&b2u[b], map[b], __ATOMIC_RELAXED);
    __atomic_store_n(&u2b[map[b]], (int16_t)b, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

/* One UTF-8 character of s[0 .. n) (n >= 1): its code point, its length in *len; -1 for an invalid
 * sequence (overlong, a surrogate, past U+10FFFF, truncated). */
static int32_t utf8_next(const unsigned char *s, size_t n, int *len) {
  unsigned c = s[0];
  int k;
  uint32_t cp, min;
  if (c < 0x80) return *len = 1, (int32_t)c;
  if ((c & 0xE0) == 0xC0) k = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) k = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) k = 4, cp = c & 0x07, min = 0x10000;
  else return -1;
  if ((size_t)k > n) return -1;
  for (int i = 1; i < k; i++) {
    if ((s[i] & 0xC0) != 0x80) return -1;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *len = k;
  return (int32_t)cp;
}

/* The bytes that the UTF-8 string s (n bytes) spells through bytes_to_unicode, into out (n bytes
 * suffice): their number; -1 when s is not valid UTF-8, -2 when a character is not one of the 256. */
static int64_t unmap(const char *s, size_t n, char *out) {
  const unsigned char *u = (const unsigned char *)s;
  int64_t m = 0;
  int bad = 0;
  for (size_t i = 0; i < n;) {
    int len;
    int32_t cp = utf8_next(u + i, n - i, &len);
    if (cp < 0) return -1;
    if (cp >= 324 || u2b[cp] < 0) bad = 1;
    else out[m++] = (char)u2b[cp];
    i += (size_t)len;
  }
  return bad ? -2 : m;
}

/* ---- tables */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

static ct_status strmap_init(strmap *m, size_t n) {
  size_t cap = pow2_at_least(2 * n + 1);
  m->slot = ct__malloc(cap * sizeof *m->slot, "the tokenizer's token table");
  if (!m->slot) return CT_ENOMEM;
  memset(m->slot, 0xFF, cap * sizeof *m->slot);
  m->mask = cap - 1;
  return CT_OK;
}

/* The id whose string (strs + off[id], len[id]) is s, or -1. */
static int32_t strmap_get(const strmap *m, const char *strs, const int64_t *off, const int32_t *len, const char *s,
                          size_t n) {
  for (size_t i = hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
    int32_t id = m->slot[i];
    if (id < 0) return -1;
    if ((size_t)len[id] == n && memcmp(strs + off[id], s, n) == 0) return id;
  }
}

/* Insert id (whose string is s); the id already there when the string is taken. */
static int32_t strmap_put(strmap *m, const char *strs, const int64_t *off, const int32_t *len, const char *s, size_t n,
                          int32_t id) {
  for (size_t i = hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
    int32_t o = m->slot[i];
    if (o < 0) return m->slot[i] = id;
    if ((size_t)len[o] == n && memcmp(strs + off[o], s, n) == 0) return o;
  }
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
  return x;
}

static const merge_slot *merge_get(const ct_bpe *t, int32_t a, int32_t b) {
  if (!t->merges) return NULL;
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (size_t i = mix64(key) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
    const merge_slot *s = &t->merges[i];
    if (s->key == key) return s;
    if (s->key == UINT64_MAX) return NULL;
  }
}

/* A merge of the later line replaces an earlier one of the same pair (dict(zip(merges, ranks))). */
static void merge_put(ct_bpe *t, int32_t a, int32_t b, int32_t rank, int32_t merged) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (size_t i = mix64(key) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
    merge_slot *s = &t->merges[i];
    if (s->key == key || s->key == UINT64_MAX) {
      s->key = key, s->rank = rank, s->merged = merged;
      return;
    }
  }
}

void ct_bpe_free(ct_bpe *t) {
  if (!t) return;
  free(t->bytes_len), free(t->bytes_off), free(t->bytes);
  free(t->key_len), free(t->key_off), free(t->keys);
  free(t->by_bytes.slot), free(t->by_key.slot), free(t->merges);
  pcre2_code_free(t->re);
  free(t);
}

/* ---- reading vocab.json and merges.txt */

/* The 1-based line of buf's byte at pos. */
static int64_t line_of(const char *buf, size_t pos) {
  int64_t line = 1;
  for (size_t i = 0; i < pos; i++) line += buf[i] == '\n';
  return line;
}

/* A key for a message: at most 40 bytes of it, control bytes as \xNN. */
static const char *shown(const char *s, size_t n, char out[200]) {
  size_t o = 0;
  for (size_t i = 0; i < n && i < 40 && o < 190; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') o += (size_t)snprintf(out + o, 200 - o, "\\x%02x", c);
    else out[o++] = (char)c;
  }
  if (n > 40 && o < 195) out[o++] = '.', out[o++] = '.', out[o++] = '.';
  out[o] = 0;
  return out;
}

static ct_status parse_vocab(ct_bpe *t, const char *op, const char *json, size_t n, const char *label) {
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(json, n, &end, 0);
  if (!j) {
    size_t pos = end && end >= json && end <= json + n ? (size_t)(end - json) : 0;
    return ct__error(CT_EFORMAT, "%s: %s line %lld: not valid JSON (vocab.json is an object from each token to its id)", op,
                     label, (long long)line_of(json, pos));
  }
  size_t pos = end && end >= json && end <= json + n ? (size_t)(end - json) : n;
  while (pos < n && (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' || json[pos] == '\r')) pos++;
  ct_status s = CT_OK;
  char buf[200];
  if (pos < n)
    s = ct__error(CT_EFORMAT, "%s: %s line %lld: data after the JSON object", op, label, (long long)line_of(json, pos));
  else if (!cJSON_IsObject(j))
    s = ct__error(CT_EFORMAT, "%s: %s line 1: not a JSON object (vocab.json maps each token to its id)", op, label);
  /* sizes first: the number of tokens, and their keys' lengths */
  int64_t count = 0;
  size_t key_total = 0;
  for (const cJSON *e = s == CT_OK ? j->child : NULL; e; e = e->next) key_total += strlen(e->string), count++;
  if (s == CT_OK && count >= INT32_MAX)
    s = ct__error(CT_EFORMAT, "%s: %s: %lld tokens (at most 2^31 - 2)", op, label, (long long)count);
  if (s == CT_OK) {
    t->size = count;
    size_t ids = (size_t)count;
    t->bytes_len = ct__malloc(ids * sizeof *t->bytes_len, "the tokenizer's vocabulary");
    t->key_len = ct__malloc(ids * sizeof *t->key_len, "the tokenizer's vocabulary");
    t->bytes_off = ct__calloc(ids, sizeof *t->bytes_off, "the tokenizer's vocabulary");
    t->key_off = ct__calloc(ids, sizeof *t->key_off, "the tokenizer's vocabulary");
    t->bytes = ct__malloc(key_total, "the tokenizer's vocabulary");
    t->keys = ct__malloc(key_total, "the tokenizer's vocabulary");
    if (!t->bytes_len || !t->key_len || !t->bytes_off || !t->key_off || !t->bytes || !t->keys ||
        strmap_init(&t->by_bytes, (size_t)count) != CT_OK || strmap_init(&t->by_key, (size_t)count) != CT_OK)
      s = ct__error_prefix("%s", op);
    else {
      for (size_t i = 0; i < ids; i++) t->bytes_len[i] = t->key_len[i] = -1;
    }
  }
  size_t koff = 0, boff = 0;
  for (const cJSON *e = s == CT_OK ? j->child : NULL; e; e = e->next) {
    double d = cJSON_GetNumberValue(e);
    size_t kn = strlen(e->string);
    if (!cJSON_IsNumber(e) || !(d >= 0 && d < (double)count) || d != (double)(int64_t)d) {
      s = ct__error(CT_EFORMAT, "%s: %s: the id of \"%s\" must be a whole number in [0, %lld) (the ids of N tokens are 0 .. "
                    "N - 1, each once)", op, label, shown(e->string, kn, buf), (long long)count);
      break;
    }
    int32_t id = (int32_t)d;
    if (t->key_len[id] >= 0) {
      char other[200];
      s = ct__error(CT_EFORMAT, "%s: %s: id %d belongs to both \"%s\" and \"%s\"", op, label, (int)id,
                    shown(t->keys + t->key_off[id], (size_t)t->key_len[id], other), shown(e->string, kn, buf));
      break;
    }
    memcpy(t->keys + koff, e->string, kn);
    t->key_off[id] = (int64_t)koff, t->key_len[id] = (int32_t)kn;
    int64_t m = unmap(e->string, kn, t->bytes + boff);
    if (m == -1) {
      s = ct__error(CT_EFORMAT, "%s: %s: the key \"%s\" is not valid UTF-8", op, label, shown(e->string, kn, buf));
      break;
    }
    if (strmap_put(&t->by_key, t->keys, t->key_off, t->key_len, e->string, kn, id) != id) {
      s = ct__error(CT_EFORMAT, "%s: %s: the key \"%s\" occurs twice", op, label, shown(e->string, kn, buf));
      break;
    }
    koff += kn;
    if (m >= 0) { /* a byte-level token: what it spells */
      t->bytes_off[id] = (int64_t)boff, t->bytes_len[id] = (int32_t)m;
      boff += (size_t)m;
      int32_t o = strmap_put(&t->by_bytes, t->bytes, t->bytes_off, t->bytes_len, t->bytes + t->bytes_off[id], (size_t)m, id);
      CT_ASSERT(o == id); /* distinct keys spell distinct bytes */
    } else { /* another token (a special one): its own UTF-8 bytes */
      memcpy(t->bytes + boff, e->string, kn);
      t->bytes_off[id] = (int64_t)boff, t->bytes_len[id] = (int32_t)kn;
      boff += kn;
    }
  }
  cJSON_Delete(j);
  return s;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static ct_status parse_merges(ct_bpe *t, const char *op, const char *txt, size_t n, const char *label) {
  /* GPT2Tokenizer: merges_handle.read().split("\n")[1:-1]: the first line is the header, and what
   * follows the last newline is no merge. */
  size_t last_nl = n;
  while (last_nl > 0 && txt[last_nl - 1] != '\n') last_nl--;
  if (last_nl == 0) return CT_OK; /* at most one line: no merge */
  const char *first_end = memchr(txt, '\n', n);
  if ((size_t)(first_end - txt) < 8 || memcmp(txt, "#version", 8) != 0)
    return ct__error(CT_EFORMAT, "%s: %s line 1: expected the header \"#version: 0.2\" (GPT2Tokenizer skips the first "
                     "line; the merges follow it, one per line)", op, label);
  size_t lines = 0;
  for (size_t i = 0; i < last_nl; i++) lines += txt[i] == '\n';
  size_t cap = pow2_at_least(2 * lines + 1);
  t->merges = ct__malloc(cap * sizeof *t->merges, "the tokenizer's merges");
  if (!t->merges) return ct__error_prefix("%s", op);
  for (size_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
  t->merges_mask = cap - 1;
  char *scratch = ct__malloc(n + 1, "a line of merges.txt");
  if (!scratch) return ct__error_prefix("%s", op);
  ct_status s = CT_OK;
  int32_t rank = 0;
  int64_t line = 1;
  char buf[200], buf2[200];
  for (size_t p = (size_t)(first_end - txt) + 1; p < last_nl && s == CT_OK; line++) {
    const char *l = txt + p, *e = memchr(l, '\n', last_nl - p);
    size_t len = (size_t)(e - l);
    p += len + 1;
    /* the line's parts, split at ASCII white space (str.split) */
    const char *part[3];
    size_t plen[3];
    int np = 0;
    for (size_t i = 0; i < len;) {
      while (i < len && is_space(l[i])) i++;
      if (i == len) break;
      size_t b = i;
      while (i < len && !is_space(l[i])) i++;
      if (np < 3) part[np] = l + b, plen[np] = i - b;
      np++;
    }
    if (np == 0) continue; /* a blank line */
    if (np != 2) {
      s = ct__error(CT_EFORMAT, "%s: %s line %lld: a merge is two tokens separated by a space, this line has %d: \"%s\"", op,
                    label, (long long)(line + 1), np, shown(l, len, buf));
      break;
    }
    int32_t id[2];
    for (int k = 0; k < 2 && s == CT_OK; k++) {
      int64_t m = unmap(part[k], plen[k], scratch);
      id[k] = m >= 0 ? strmap_get(&t->by_bytes, t->bytes, t->bytes_off, t->bytes_len, scratch, (size_t)m) : -1;
      if (m == -1)
        s = ct__error(CT_EFORMAT, "%s: %s line %lld: not valid UTF-8", op, label, (long long)(line + 1));
      else if (id[k] < 0)
        s = ct__error(CT_EFORMAT, "%s: %s line %lld: the merge's token \"%s\" is not in the vocabulary (vocab.json)", op,
                      label, (long long)(line + 1), shown(part[k], plen[k], buf));
    }
    if (s != CT_OK) break;
    size_t la = (size_t)t->bytes_len[id[0]], lb = (size_t)t->bytes_len[id[1]];
    memcpy(scratch, t->bytes + t->bytes_off[id[0]], la);
    memcpy(scratch + la, t->bytes + t->bytes_off[id[1]], lb);
    int32_t merged = strmap_get(&t->by_bytes, t->bytes, t->bytes_off, t->bytes_len, scratch, la + lb);
    if (merged < 0) {
      s = ct__error(CT_EFORMAT, "%s: %s line %lld: the merge of \"%s\" and \"%s\" makes a token that is not in the "
                    "vocabulary (vocab.json)", op, label, (long long)(line + 1), shown(part[0], plen[0], buf),
                    shown(part[1], plen[1], buf2));
      break;
    }
    merge_put(t, id[0], id[1], rank++, merged);
  }
  free(scratch);
  return s;
}

static ct_bpe *parse(const char *op, const char *vocab, size_t vn, const char *merges, size_t mn, const char *vlabel,
                     const char *mlabel) {
  bytes_to_unicode();
  ct_bpe *t = ct__calloc(1, sizeof *t, "a tokenizer");
  if (!t) return ct__error_prefix("%s", op), NULL;
  t->eot = -1;
  ct_status s = parse_vocab(t, op, vocab, vn, vlabel);
  if (s == CT_OK) s = parse_merges(t, op, merges, mn, mlabel);
  if (s == CT_OK) {
    for (int b = 0; b < 256; b++) {
      char c = (char)b;
      t->byte_id[b] = strmap_get(&t->by_bytes, t->bytes, t->bytes_off, t->bytes_len, &c, 1);
    }
    t->eot = strmap_get(&t->by_key, t->keys, t->key_off, t->key_len, EOT, strlen(EOT));
    int err;
    PCRE2_SIZE at;
    t->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &err, &at, NULL);
    if (!t->re) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      s = ct__error(CT_EUNSUPPORTED, "%s: PCRE2 cannot compile GPT-2's pattern: %s (at %zu; it needs a PCRE2 with Unicode "
                    "support, as Debian's libpcre2-8)", op, (const char *)msg, (size_t)at);
    } else {
      pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* faster where the JIT exists; the interpreter otherwise */
    }
  }
  if (s != CT_OK) return ct_bpe_free(t), NULL;
  return t;
}

ct_bpe *ct_bpe_parse(const char *vocab_json, size_t vocab_len, const char *merges_txt, size_t merges_len,
                     const char *vocab_label, const char *merges_label) {
  static const char op[] = "ct_bpe_parse";
  if (!vocab_json && vocab_len) return ct__error(CT_EINVAL, "%s: vocab_json is NULL with vocab_len %zu", op, vocab_len), NULL;
  if (!merges_txt && merges_len)
    return ct__error(CT_EINVAL, "%s: merges_txt is NULL with merges_len %zu", op, merges_len), NULL;
  return parse(op, vocab_json ? vocab_json : "", vocab_len, merges_txt ? merges_txt : "", merges_len,
               vocab_label ? vocab_label : "vocab.json", merges_label ? merges_label : "merges.txt");
}

ct_bpe *ct_bpe_load(const char *vocab_json_path, const char *merges_txt_path) {
  static const char op[] = "ct_bpe_load";
  if (!vocab_json_path) return ct__null_arg(op, "vocab_json_path");
  if (!merges_txt_path) return ct__null_arg(op, "merges_txt_path");
  size_t vn = 0, mn = 0;
  char *v = ct__slurp_file(op, vocab_json_path, &vn);
  if (!v) return NULL;
  char *m = ct__slurp_file(op, merges_txt_path, &mn);
  if (!m) return free(v), NULL;
  ct_bpe *t = parse(op, v, vn, m, mn, vocab_json_path, merges_txt_path);
  free(v), free(m);
  return t;
}

int64_t ct_bpe_vocab_size(const ct_bpe *t) {
  if (!t) return ct__error(CT_EINVAL, "ct_bpe_vocab_size: t is NULL"), -1;
  return t->size;
}

int64_t ct_bpe_token_id(const ct_bpe *t, const char *token) {
  static const char op[] = "ct_bpe_token_id";
  if (!t) return ct__error(CT_EINVAL, "%s: t is NULL", op), -1;
  if (!token) return ct__error(CT_EINVAL, "%s: token is NULL", op), -1;
  int32_t id = strmap_get(&t->by_key, t->keys, t->key_off, t->key_len, token, strlen(token));
  if (id < 0) {
    char buf[200];
    return ct__error(CT_EINVAL, "%s: \"%s\" is not a token of the vocabulary (vocab.json)", op,
                     shown(token, strlen(token), buf)), -1;
  }
  return id;
}

/* ---- encode */

/* What one encode call grows as it goes. */
typedef struct {
  int64_t *ids;
  int64_t count, cap;
  /* BPE's scratch for a pre-token of up to sym_cap bytes */
  int32_t *id, *prev, *next;
  struct cand {
    int32_t rank, pos, left, right;
  } *heap;
  int32_t *round;
  size_t sym_cap;
  int64_t heap_n;
} enc_state;

static ct_status push_id(enc_state *e, int64_t id) {
  if (e->count == e->cap) {
    int64_t cap = e->cap ? e->cap * 2 : 64;
    int64_t *n = ct__realloc(e->ids, (size_t)cap * sizeof *n, "the token ids");
    if (!n) return CT_ENOMEM;
    e->ids = n, e->cap = cap;
  }
  e->ids[e->count++] = id;
  return CT_OK;
}

static int cand_less(const struct cand *a, const struct cand *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(enc_state *e, struct cand c) {
  int64_t i = e->heap_n++;
  while (i > 0) {
    int64_t p = (i - 1) / 2;
    if (!cand_less(&c, &e->heap[p])) break;
    e->heap[i] = e->heap[p], i = p;
  }
  e->heap[i] = c;
}

static struct cand heap_pop(enc_state *e) {
  struct cand top = e->heap[0], last = e->heap[--e->heap_n];
  int64_t i = 0, n = e->heap_n;
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && cand_less(&e->heap[c + 1], &e->heap[c])) c++;
    if (!cand_less(&e->heap[c], &last)) break;
    e->heap[i] = e->heap[c], i = c;
  }
  if (n > 0) e->heap[i] = last;
  return top;
}

/* The pair starting at symbol p, as a candidate, when merges.txt lists it. */
static void consider(const ct_bpe *t, enc_state *e, int32_t p) {
  if (p < 0 || e->next[p] < 0) return;
  int32_t a = e->id[p], b = e->id[e->next[p]];
  if (a < 0 || b < 0) return;
  const merge_slot *m = merge_get(t, a, b);
  if (m) heap_push(e, (struct cand){m->rank, p, a, b});
}

static int cand_valid(const enc_state *e, const struct cand *c) {
  return e->id[c->pos] == c->left && e->next[c->pos] >= 0 && e->id[e->next[c->pos]] == c->right;
}

/* BPE on the pre-token s[0 .. n) (GPT2Tokenizer.bpe), its ids appended. at: its offset in the text,
 * for messages. */
static ct_status bpe_word(const ct_bpe *t, enc_state *e, const char *s, size_t n, size_t at) {
  static const char op[] = "ct_bpe_encode";
  if (n == 1 && t->byte_id[(unsigned char)s[0]] >= 0) return push_id(e, t->byte_id[(unsigned char)s[0]]);
  if (n > INT32_MAX) return ct__error(CT_EINVAL, "%s: a pre-token of %zu bytes (at most 2^31 - 1)", op, n);
  if (n > e->sym_cap) {
    size_t cap = n < 64 ? 64 : n;
    free(e->id), free(e->prev), free(e->next), free(e->heap), free(e->round);
    e->id = ct__malloc(cap * sizeof *e->id, "BPE's symbols");
    e->prev = ct__malloc(cap * sizeof *e->prev, "BPE's symbols");
    e->next = ct__malloc(cap * sizeof *e->next, "BPE's symbols");
    e->round = ct__malloc(cap * sizeof *e->round, "BPE's symbols");
    /* at most n - 1 pairs at the start, and each merge adds at most 2 */
    e->heap = ct__malloc(3 * cap * sizeof *e->heap, "BPE's candidate pairs");
    e->sym_cap = (e->id && e->prev && e->next && e->round && e->heap) ? cap : 0;
    if (!e->sym_cap) return CT_ENOMEM;
  }
  int32_t L = (int32_t)n;
  for (int32_t i = 0; i < L; i++) {
    int32_t b = t->byte_id[(unsigned char)s[i]];
    /* a byte without its token: -1 - byte, which no merge names */
    e->id[i] = b >= 0 ? b : -1 - (int32_t)(unsigned char)s[i];
    e->prev[i] = i - 1, e->next[i] = i + 1 < L ? i + 1 : -1;
  }
  e->heap_n = 0;
  for (int32_t i = 0; i + 1 < L; i++) consider(t, e, i);
  while (e->heap_n > 0) {
    struct cand c = heap_pop(e);
    if (!cand_valid(e, &c)) continue;
    /* one round: every place of this pair (a rank is one pair), which the heap gives in the order
     * of their positions (a place may be listed twice: kept once), merged left to right */
    int32_t nr = 0;
    e->round[nr++] = c.pos;
    while (e->heap_n > 0 && e->heap[0].rank == c.rank) {
      struct cand d = heap_pop(e);
      if (d.pos != e->round[nr - 1] && cand_valid(e, &d)) e->round[nr++] = d.pos;
    }
    const merge_slot *m = merge_get(t, c.left, c.right);
    int32_t done = 0;
    for (int32_t k = 0; k < nr; k++) {
      int32_t p = e->round[k];
      struct cand again = {c.rank, p, c.left, c.right};
      if (!cand_valid(e, &again)) continue; /* its left symbol went into the merge before it ("a a a") */
      int32_t q = e->next[p];
      e->id[p] = m->merged;
      e->next[p] = e->next[q];
      if (e->next[q] >= 0) e->prev[e->next[q]] = p;
      e->id[q] = INT32_MIN; /* gone */
      e->round[done++] = p;
    }
    for (int32_t k = 0; k < done; k++) {
      int32_t p = e->round[k];
      consider(t, e, e->prev[p]);
      consider(t, e, p);
    }
  }
  for (int32_t p = 0; p >= 0; p = e->next[p]) {
    int32_t id = e->id[p];
    if (id < 0) { /* GPT2Tokenizer: encoder.get(token, encoder.get(unk_token)) */
      if (t->eot < 0)
        return ct__error(CT_EINVAL, "%s: byte 0x%02x at offset %zu has no token in the vocabulary (vocab.json lacks its "
                         "one-byte token and \"" EOT "\", GPT2Tokenizer's unk token)", op, (unsigned)(-1 - id),
                         at + (size_t)p);
      id = t->eot;
    }
    if (push_id(e, id) != CT_OK) return CT_ENOMEM;
  }
  return CT_OK;
}

/* The pre-tokens of s[0 .. n) (no special token in it), each through BPE. at: s's offset in the text. */
static ct_status encode_span(const ct_bpe *t, enc_state *e, pcre2_match_data *md, const char *s, size_t n, size_t at) {
  size_t pos = 0;
  while (pos < n) {
    int rc = pcre2_match(t->re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
    size_t ms = n, me = n;
    if (rc >= 0) {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      ms = ov[0], me = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return ct__error(CT_EINVAL, "ct_bpe_encode: PCRE2 failed to match GPT-2's pattern at offset %zu: %s", at + pos,
                       (const char *)msg);
    }
    if (me <= ms && ms < n) me = ms + 1; /* cannot happen: no alternative matches empty */
    if (ms > pos) { /* bytes no match covers (invalid UTF-8): a pre-token of their own */
      ct_status st = bpe_word(t, e, s + pos, ms - pos, at + pos);
      if (st != CT_OK) return st;
    }
    if (ms < n) {
      ct_status st = bpe_word(t, e, s + ms, me - ms, at + ms);
      if (st != CT_OK) return st;
    }
    pos = me;
  }
  return CT_OK;
}

ct_status ct_bpe_encode(const ct_bpe *t, const char *text, size_t n, int64_t **ids, int64_t *count) {
  static const char op[] = "ct_bpe_encode";
  if (ids) *ids = NULL;
  if (count) *count = 0;
  if (!t) return ct__null_status(op, "t");
  if (!ids) return ct__null_status(op, "ids");
  if (!count) return ct__null_status(op, "count");
  if (!text && n) return ct__error(CT_EINVAL, "%s: text is NULL with n %zu", op, n);
  enc_state e = {0};
  ct_status s = CT_OK;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
  if (!md) s = ct__error(CT_ENOMEM, "%s: out of memory for PCRE2's match data", op);
  size_t pos = 0, eot_n = strlen(EOT);
  while (s == CT_OK && pos < n) {
    /* the text up to the next "<|endoftext|>", where the vocabulary has it */
    const char *hit = t->eot >= 0 ? memmem(text + pos, n - pos, EOT, eot_n) : NULL;
    size_t end = hit ? (size_t)(hit - text) : n;
    s = encode_span(t, &e, md, text + pos, end - pos, pos);
    if (s == CT_OK && hit) s = push_id(&e, t->eot);
    pos = hit ? end + eot_n : n;
  }
  if (s == CT_OK && !e.ids) { /* no ids: an empty array, still the caller's to free */
    e.ids = ct__malloc(sizeof *e.ids, "the token ids");
    if (!e.ids) s = CT_ENOMEM;
  }
  pcre2_match_data_free(md);
  free(e.id), free(e.prev), free(e.next), free(e.heap), free(e.round);
  if (s != CT_OK) {
    free(e.ids);
    return ct__error_prefix("%s", op);
  }
  *ids = e.ids, *count = e.count;
  return CT_OK;
}

/* ---- decode */

char *ct_bpe_decode(const ct_bpe *t, const int64_t *ids, int64_t count, size_t *n) {
  static const char op[] = "ct_bpe_decode";
  if (n) *n = 0;
  if (!t) return ct__error(CT_EINVAL, "%s: t is NULL", op), NULL;
  if (count < 0) return ct__error(CT_EINVAL, "%s: count %lld < 0", op, (long long)count), NULL;
  if (!ids && count) return ct__error(CT_EINVAL, "%s: ids is NULL with count %lld", op, (long long)count), NULL;
  size_t total = 0;
  for (int64_t i = 0; i < count; i++) {
    int64_t id = ids[i];
    if (id < 0 || id >= t->size)
      return ct__error(CT_EINVAL, "%s: id %lld (at position %lld) is not in the vocabulary (ids 0 .. %lld)", op, (long long)id,
                       (long long)i, (long long)t->size - 1),
             NULL;
    total += (size_t)t->bytes_len[id];
  }
  char *out = ct__malloc(total + 1, "the decoded text");
  if (!out) return ct__error_prefix("%s", op), NULL;
  size_t o = 0;
  for (int64_t i = 0; i < count; i++) {
    memcpy(out + o, t->bytes + t->bytes_off[ids[i]], (size_t)t->bytes_len[ids[i]]);
    o += (size_t)t->bytes_len[ids[i]];
  }
  out[o] = 0;
  if (n) *n = o;
  return out;
}
