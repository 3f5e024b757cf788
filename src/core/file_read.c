/* src/core/file_read.c: reading a whole file into memory (internal.h's ct__slurp_file), for the
 * readers of small text files: a GPT-2's config.json, a tokenizer's vocab.json and merges.txt, a
 * text to train on. (src/data's image readers have their own, ct__read_file, which writes its
 * message into the caller's buffer for the loader's threads.) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

char *ct__slurp_file(const char *op, const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return ct__error(CT_EIO, "%s: cannot open %s: %s", op, path, strerror(errno)), NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *nb = ct__realloc(buf, cap, "a file's contents");
      if (!nb) return free(buf), fclose(f), ct__error_prefix("%s: reading %s", op, path), NULL;
      buf = nb;
    }
    size_t r = fread(buf + len, 1, cap - len - 1, f);
    len += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) return free(buf), ct__error(CT_EIO, "%s: cannot read %s (is it a directory?)", op, path), NULL;
  buf[len] = 0;
  *n = len;
  return buf;
}
