#!/usr/bin/env python3
"""The Hugging Face side of tests/io/test_interop_bpe.c (run by $CUTTLE_PYTHON, the build folder's
venv with transformers, which brings tokenizers):

  write DIR SRC     trains a byte-level BPE vocabulary of 700 tokens with tokenizers'
                    ByteLevelBPETokenizer (train_from_iterator on TRAIN_TEXT below and SRC/README.md,
                    the special token "<|endoftext|>" first), saves it in GPT-2's format with
                    save_model (DIR/vocab.json, DIR/merges.txt), then for each test text K writes
                    DIR/text_K.txt (its UTF-8 bytes) and DIR/ids_K.txt (the ids, one per line) that
                    transformers.GPT2Tokenizer(vocab.json, merges.txt).encode gives. Checks on the
                    way that GPT2Tokenizer decodes each back to its text and that the tokenizers
                    library's own encoding of it (ByteLevelBPETokenizer from the same files, where
                    the text has no "<|endoftext|>") gives the same ids. Exits 1 on a mismatch."""
import os
import sys

from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Tokenizer

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. It's a sentence that holds every letter of the
alphabet, and typists have used it for more than a hundred years to test their machines. We've
seen it on keyboards, in fonts and in the first programs people write; they'll keep using it.

A tokenizer cuts text into pieces that a language model reads as numbers. GPT-2 reads bytes: each
of the 256 byte values is a token of its own, and the merges learned from a corpus join frequent
pairs into longer tokens, so common words such as "the", "and" or "tokenizer" become one token
while rare words, numbers like 1234567 or 3.14159, and text in other scripts fall back to smaller
pieces. I'm told the original vocabulary has 50257 tokens: 256 bytes, 50000 merges and one special
token that ends a document. You'd write it as <|endoftext|> between two documents.

Training on a few kilobytes of English gives a small vocabulary whose merges are mostly parts of
common words: th, he, in, er, an, the, ing, and, tion. Spaces belong to the word that follows them,
so " the" and "the" are different tokens. Newlines and runs of spaces are tokens too; two spaces
before a word become one space token and the word with its own space. Don't forget punctuation!
Commas, periods, colons: semicolons; question marks? Quotes "like these" and 'these', (brackets)
[square] {curly} <angle>, dashes - and -- and hyphen-ated words, slashes / and back\\slashes, the
at sign @ and the hash # and dollars $5.99 and percent 50% and ampersand & and asterisk * too.

Café, naïve, résumé, façade, jalapeño, Zürich and Øresund keep their accents; 中文 and 日本語 and
한국어 are split into bytes; emoji such as 🙂 and 👍🏽 are four bytes or more each.
"""

TEST_TEXTS = [
    # ASCII: contractions, numbers, punctuation, newlines, double spaces, trailing spaces
    "Hello, world! It's 2026: we've 3 cats & they'll eat 12.5kg... I'm sure you'd agree, don't you?\n"
    "\nDouble  spaces,   triple, a\ttab, and\r\nCRLF.   \n\n\n   trailing   ",
    # upper-case contractions ('S is not 's), numbers in other scripts, symbols, other white space
    "IT'S WE'VE O'Neil's 'quoted' x\u00b2\u00b3 \u2167 \u0664\u0665 \u00bd 1,000,000 $9.99 100% "
    "a\u00a0b\u3000c\u2028d\u0085e\u180ef \u200bzero-width",
    # accents, CJK, emoji (with a skin tone and a ZWJ sequence), right-to-left scripts
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c9cole \u00fcber \u00dfe \u4e2d\u6587\u5b57\u7b26 "
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0 \ud55c\uad6d\uc5b4 \U0001F642\U0001F44D\U0001F3FD "
    "\U0001F468\u200d\U0001F469\u200d\U0001F467 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea",
    # the special token, with and without spaces around it
    "one document.<|endoftext|>Another one <|endoftext|> and a third<|endoftext|><|endoftext|>",
]


def write(d, src):
    readme = ""
    path = os.path.join(src, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator([TRAIN_TEXT, readme], vocab_size=700, min_frequency=2, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    tok.save_model(d)
    vocab, merges = os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")
    gpt2 = GPT2Tokenizer(vocab, merges)
    fast = ByteLevelBPETokenizer(vocab, merges)
    texts = TEST_TEXTS + ([readme] if readme else [])
    ok = True
    for k, text in enumerate(texts):
        ids = gpt2.encode(text)
        back = gpt2.decode(ids, clean_up_tokenization_spaces=False)
        if back != text:
            print(f"text {k}: GPT2Tokenizer does not decode its own ids back to the text")
            ok = False
        if "<|endoftext|>" not in text and fast.encode(text).ids != ids:
            print(f"text {k}: GPT2Tokenizer and tokenizers' ByteLevelBPETokenizer disagree")
            ok = False
        with open(os.path.join(d, f"text_{k}.txt"), "wb") as f:
            f.write(text.encode("utf-8"))
        with open(os.path.join(d, f"ids_{k}.txt"), "w") as f:
            f.write("".join(f"{i}\n" for i in ids))
        print(f"text {k}: {len(text.encode('utf-8'))} bytes, {len(ids)} GPT2Tokenizer ids")
    print(f"vocabulary: {len(gpt2)} tokens ({gpt2.vocab_size} in vocab.json), {len(texts)} texts")
    return 0 if ok else 1


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    sys.exit(write(d, sys.argv[3] if len(sys.argv) > 3 else ".") if mode == "write" else 2)
