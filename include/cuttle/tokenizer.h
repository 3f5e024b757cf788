/* cuttle/tokenizer.h: GPT-2's byte-level BPE tokenizer (Radford et al. 2019, section 2.2), as
 * Hugging Face's transformers implements it in GPT2Tokenizer
 * (src/transformers/models/gpt2/tokenization_gpt2.py, 4.46), reading the vocab.json and merges.txt
 * of a GPT-2 checkpoint directory (the hub's "gpt2", or what tokenizers' ByteLevelBPETokenizer
 * writes with save_model), so that a text becomes the token ids GPT2Tokenizer(vocab, merges)
 * .encode(text) gives, and the ids become the text's bytes again.
 *
 * What GPT2Tokenizer does, and this tokenizer with it:
 *  - bytes_to_unicode(): every byte b is a character: b itself for the printable bytes '!'..'~',
 *    0xA1..0xAC and 0xAE..0xFF, and 256 + k for the k-th of the other 68 bytes in increasing order
 *    (0x00..0x20, 0x7F..0xA0, 0xAD), so a token of vocab.json spells a byte string with printable
 *    characters ("Ġ", U+0120, is the space byte 0x20);
 *  - the special token "<|endoftext|>" (GPT2Tokenizer's unk, bos and eos token): where vocab.json
 *    has it, each occurrence in the text is that one id, and the text between is tokenized apart
 *    (PreTrainedTokenizer.tokenize's split on added tokens, without stripping spaces around it);
 *  - pre-tokenization: the text is cut into the matches of GPT-2's pattern
 *    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *    (regex.findall), here with PCRE2 in UTF and UCP mode, \s being the Unicode White_Space
 *    property of Python's regex module (tab..CR, space, U+0085, U+00A0, U+1680, U+2000..U+200A,
 *    U+2028, U+2029, U+202F, U+205F, U+3000; PCRE2's own \s adds U+180E). \p{L} and \p{N} are
 *    PCRE2's tables (Unicode 14 in Debian 12's 10.42): a code point assigned a letter or number
 *    since then (CJK extensions H to J, new scripts) is a letter to a newer regex module and a
 *    symbol here;
 *  - BPE on each pre-token's bytes: while two adjacent symbols form a pair listed in merges.txt,
 *    the pair of lowest rank (its line) is merged, at every place it occurs, left to right
 *    (GPT2Tokenizer.bpe); each resulting symbol is its id in vocab.json. A byte whose one-byte token
 *    vocab.json lacks becomes the id of "<|endoftext|>" (GPT2Tokenizer's unk), or is an error
 *    where that is missing too.
 *
 * Text that is not valid UTF-8 (GPT2Tokenizer takes only Python str): matched with
 * PCRE2_MATCH_INVALID_UTF, where an invalid byte is part of no match; each run of bytes between
 * matches becomes a pre-token of its own, so encode drops no byte, and decode(encode(x)) is x for
 * any bytes x when vocab.json has the 256 one-byte tokens (as every byte-level vocabulary does).
 * A tokenizer is read-only once made: one may encode and decode on several threads at once. */
#ifndef CUTTLE_TOKENIZER_H
#define CUTTLE_TOKENIZER_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_bpe ct_bpe;

/* A tokenizer from the files vocab_json_path (vocab.json: a JSON object from each token, spelled
 * with bytes_to_unicode's characters, to its id) and merges_txt_path (merges.txt: a first line
 * "#version: ..." that is skipped, then one merge per line, two tokens separated by a space, in
 * rank order), read as GPT2Tokenizer.__init__ reads them: text after the last newline of
 * merges.txt is not a merge (its split("\n")[1:-1]), a blank line is none, and of a merge listed
 * twice the later line counts. The caller frees the tokenizer with ct_bpe_free. Errors (NULL):
 * CT_EINVAL for a NULL path; CT_EIO naming the file that cannot be opened or read; and those of
 * ct_bpe_parse, naming the file. */
CT_API ct_bpe *ct_bpe_load(const char *vocab_json_path, const char *merges_txt_path);

/* ct_bpe_load on the files' bytes held in memory: vocab_json (vocab_len bytes) and merges_txt
 * (merges_len bytes), neither needing a terminating NUL; vocab_label and merges_label name them in
 * messages (NULL: "vocab.json", "merges.txt"). Nothing is kept of the buffers. Errors (NULL):
 * CT_EINVAL for a NULL buffer (with a nonzero length); CT_EFORMAT naming the file and the line for
 * vocab.json that is not a JSON object (the line where parsing stopped), a key that is not valid
 * UTF-8 or occurs twice, an id that is not a whole number in [0, N) for its N tokens or belongs to
 * two tokens (the ids are 0 .. N - 1, each once, as in every GPT-2 vocabulary);
 * for merges.txt whose first line is not a "#version" header, a line that is not valid UTF-8 or
 * does not hold exactly two tokens, a token that is not in vocab.json (as a byte-level token), or
 * a merge whose concatenation vocab.json lacks; CT_EUNSUPPORTED when PCRE2 cannot compile the
 * pattern (a PCRE2 built without Unicode support); CT_ENOMEM. */
CT_API ct_bpe *ct_bpe_parse(const char *vocab_json, size_t vocab_len, const char *merges_txt, size_t merges_len,
                            const char *vocab_label, const char *merges_label);

/* The ids of the n bytes of text (UTF-8; no NUL needed, a NUL byte is a character like any other)
 * as GPT2Tokenizer.encode(text) gives them (no special tokens added; see the top of this file): a
 * new array of *count ids into *ids (malloc'd: the caller frees it; an empty text gives *count 0
 * and an array of no ids, still to be freed). Errors (*ids NULL, *count 0 where those are not
 * NULL): CT_EINVAL for a NULL t, ids or count, or text NULL with n > 0; CT_EINVAL naming the byte
 * and its offset for a byte whose one-byte token vocab.json lacks when "<|endoftext|>" is missing
 * too; CT_EINVAL with PCRE2's message when its matcher fails (a match or memory limit); CT_ENOMEM. */
CT_API ct_status ct_bpe_encode(const ct_bpe *t, const char *text, size_t n, int64_t **ids, int64_t *count);

/* The bytes that count ids spell: each token's characters mapped back through bytes_to_unicode
 * and concatenated (GPT2Tokenizer.convert_tokens_to_string before its UTF-8 decode: the bytes are
 * returned as they are, with no replacement of invalid UTF-8 and no clean_up_tokenization_spaces;
 * a token with a character outside that mapping, such as a special token holding a space, gives
 * its characters' UTF-8 bytes). A new buffer (malloc'd, the caller frees it) of *n bytes (n may be
 * NULL) plus a terminating NUL, which *n does not count. count 0 gives "". Errors (NULL): CT_EINVAL
 * for a NULL t, ids NULL with count > 0, count < 0, or an id outside [0, ct_bpe_vocab_size), naming
 * it and its position; CT_ENOMEM. */
CT_API char *ct_bpe_decode(const ct_bpe *t, const int64_t *ids, int64_t count, size_t *n);

/* The number of tokens of vocab.json, N, whose ids are 0 .. N - 1 (GPT2Tokenizer.vocab_size: 50257
 * for the hub's GPT-2), the size a model's embedding needs. -1 with CT_EINVAL for a NULL t. */
CT_API int64_t ct_bpe_vocab_size(const ct_bpe *t);

/* The id of token, a key of vocab.json written as there (NUL-terminated UTF-8, e.g.
 * "<|endoftext|>", or "Ġthe" for " the"). -1 with CT_EINVAL for a NULL argument or a token that
 * vocab.json lacks, naming it. */
CT_API int64_t ct_bpe_token_id(const ct_bpe *t, const char *token);

/* Free a tokenizer; nothing for NULL. */
CT_API void ct_bpe_free(ct_bpe *t);

#ifdef __cplusplus
}
#endif
#endif
