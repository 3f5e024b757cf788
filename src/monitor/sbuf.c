/* src/monitor/sbuf.c: a growing string for the renderers, with JSON and CSV quoting. An append that
 * cannot allocate marks the buffer failed, so a renderer checks once, at its end. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor_internal.h"

static int reserve(ct__sbuf *b, size_t more) {
  if (b->failed) return 0;
  if (b->len + more + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < b->len + more + 1) cap *= 2;
  char *p = realloc(b->buf, cap);
  if (!p) {
    b->failed = 1;
    return 0;
  }
  b->buf = p;
  b->cap = cap;
  return 1;
}

void ct__sb_printf(ct__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void ct__sb_json_str(ct__sbuf *b, const char *s) {
  ct__sb_printf(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      ct__sb_printf(b, "\\%c", *p);
    else if (*p == '\n')
      ct__sb_printf(b, "\\n");
    else if (*p == '\t')
      ct__sb_printf(b, "\\t");
    else if (*p < 0x20 || *p == 0x7f)
      ct__sb_printf(b, "\\u%04x", *p);
    else
      ct__sb_printf(b, "%c", *p); /* UTF-8 bytes pass through; names from the driver are ASCII */
  }
  ct__sb_printf(b, "\"");
}

void ct__sb_csv_str(ct__sbuf *b, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    ct__sb_printf(b, "%s", s);
    return;
  }
  ct__sb_printf(b, "\"");
  for (const char *p = s; *p; p++) ct__sb_printf(b, *p == '"' ? "\"\"" : "%c", *p);
  ct__sb_printf(b, "\"");
}

char *ct__sb_finish(ct__sbuf *b) {
  if (!b->failed && !reserve(b, 0)) b->failed = 1;
  if (b->failed) {
    free(b->buf);
    b->buf = NULL;
    ct__error(CT_ENOMEM, "ct_monitor_render: out of memory");
    return NULL;
  }
  b->buf[b->len] = 0;
  return b->buf;
}
