/* tools/cuttle/options.c: the strict parser, the help and the value printer of an option table
 * (options.h). */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const ct_cli_opt *ct_cli_opt_find(const ct_cli_opt *table, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

static int refuse(const char *prog, const ct_cli_opt *o, const char *why, const char *s) {
  fprintf(stderr, "%s: --%s: %s \"%s\"\n", prog, o->name, why, s);
  return 2;
}

/* The range check of a number already read, as text for the message when it fails. */
static int in_range(const ct_cli_opt *o, double v) {
  if (o->min > o->max) return 1; /* no range */
  return (o->flags & CT_OPT_GT ? v > o->min : v >= o->min) && v <= o->max;
}

static int out_of_range(const char *prog, const ct_cli_opt *o, const char *s) {
  char lo[40], hi[40];
  snprintf(lo, sizeof lo, "%.17g", o->min);
  snprintf(hi, sizeof hi, "%.17g", o->max);
  fprintf(stderr, "%s: --%s: \"%s\" is out of range: it must be %s %s%s%s\n", prog, o->name, s,
          o->flags & CT_OPT_GT ? ">" : ">=", lo, o->max < 1e300 && o->max < (double)INT64_MAX ? " and <= " : "",
          o->max < 1e300 && o->max < (double)INT64_MAX ? hi : "");
  return 2;
}

int ct_cli_parse_value(const char *prog, const ct_cli_opt *o, const char *s, void *out) {
  char *end = NULL;
  errno = 0;
  switch (o->type) {
    case CT_OPT_STR:
      if (o->choices) {
        int ok = 0;
        for (const char *const *c = o->choices; *c && !ok; c++) ok = strcmp(*c, s) == 0;
        if (!ok) {
          fprintf(stderr, "%s: --%s: unknown value \"%s\": use ", prog, o->name, s);
          for (const char *const *c = o->choices; *c; c++) fprintf(stderr, "%s%s", c == o->choices ? "" : c[1] ? ", " : " or ", *c);
          fputc('\n', stderr);
          return 2;
        }
      }
      *(const char **)out = s;
      return 0;
    case CT_OPT_FLAG: *(int *)out = 1; return 0;
    case CT_OPT_F64: {
      /* Python's float(): decimal digits, an exponent, inf and nan (refused below); no leading
       * space and no hexadecimal float, which strtod would take */
      double v = strtod(s, &end);
      if (end == s || *end || isspace((unsigned char)*s) || strpbrk(s, "xX")) return refuse(prog, o, "not a number:", s);
      if (!isfinite(v) || (errno == ERANGE && fabs(v) == HUGE_VAL)) return refuse(prog, o, "not a finite number:", s);
      if (!in_range(o, v)) return out_of_range(prog, o, s);
      *(double *)out = v;
      return 0;
    }
    case CT_OPT_U64: {
      /* strtoull takes "-1" as 2^64 - 1: a seed is written as a non-negative integer */
      if (*s < '0' || *s > '9') return refuse(prog, o, "not a non-negative integer:", s);
      unsigned long long v = strtoull(s, &end, 10);
      if (*end) return refuse(prog, o, "not a non-negative integer:", s);
      if (errno == ERANGE) return refuse(prog, o, "too large (at most 18446744073709551615):", s);
      *(uint64_t *)out = (uint64_t)v;
      return 0;
    }
    case CT_OPT_INT:
    case CT_OPT_I64: {
      if ((*s < '0' || *s > '9') && *s != '-' && *s != '+') return refuse(prog, o, "not an integer:", s);
      long long v = strtoll(s, &end, 10);
      if (end == s || *end) return refuse(prog, o, "not an integer:", s);
      if (errno == ERANGE || (o->type == CT_OPT_INT && (v > INT32_MAX || v < INT32_MIN)))
        return refuse(prog, o, "too large:", s);
      if (!in_range(o, (double)v)) return out_of_range(prog, o, s);
      if (o->type == CT_OPT_INT) *(int *)out = (int)v;
      else *(int64_t *)out = (int64_t)v;
      return 0;
    }
  }
  return refuse(prog, o, "unknown option type for", s);
}

int ct_cli_parse(const char *prog, const ct_cli_opt *table, int n, unsigned command, int argc, char **argv,
                 void *cfg, unsigned char *given) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 0;
    if (strncmp(a, "--", 2) != 0 || !a[2]) {
      fprintf(stderr, "%s: unexpected argument \"%s\" (options start with --; see %s --help)\n", prog, a, prog);
      return 2;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const ct_cli_opt *o = NULL;
    for (int k = 0; k < n && !o; k++)
      if ((table[k].flags & command) && strlen(table[k].name) == len && strncmp(table[k].name, name, len) == 0)
        o = &table[k];
    if (!o) {
      fprintf(stderr, "%s: unknown option \"--%.*s\" (see %s --help)\n", prog, (int)len, name, prog);
      return 2;
    }
    const char *value = NULL;
    if (o->type == CT_OPT_FLAG) {
      if (eq) {
        fprintf(stderr, "%s: --%s takes no value, but was given \"%s\"\n", prog, o->name, eq + 1);
        return 2;
      }
    } else if (eq) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      fprintf(stderr, "%s: --%s needs a value (%s)\n", prog, o->name, o->metavar ? o->metavar : "VALUE");
      return 2;
    }
    if (ct_cli_parse_value(prog, o, value ? value : "", (char *)cfg + o->offset)) return 2;
    if (given) given[o - table] = 1;
  }
  return -1;
}

const char *ct_cli_opt_str(const ct_cli_opt *o, const void *cfg, char *buf, size_t n) {
  const char *p = (const char *)cfg + o->offset;
  switch (o->type) {
    case CT_OPT_STR: return *(const char *const *)p;
    case CT_OPT_FLAG: return *(const int *)p ? "true" : "false";
    case CT_OPT_INT: snprintf(buf, n, "%d", *(const int *)p); return buf;
    case CT_OPT_I64: snprintf(buf, n, "%" PRId64, *(const int64_t *)p); return buf;
    case CT_OPT_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)p); return buf;
    case CT_OPT_F64: snprintf(buf, n, "%.17g", *(const double *)p); return buf;
  }
  return NULL;
}

/* The default of o in defaults as text, or NULL when it has none to show. */
static const char *default_str(const ct_cli_opt *o, const void *defaults, char *buf, size_t n) {
  if (!defaults || o->type == CT_OPT_FLAG) return NULL;
  const char *p = (const char *)defaults + o->offset;
  switch (o->type) {
    case CT_OPT_INT: if (!*(const int *)p) return NULL; break;
    case CT_OPT_I64: if (!*(const int64_t *)p) return NULL; break;
    case CT_OPT_F64: snprintf(buf, n, "%g", *(const double *)p); return *(const double *)p ? buf : NULL;
    default: break;
  }
  return ct_cli_opt_str(o, defaults, buf, n);
}

void ct_cli_print_options(FILE *f, const ct_cli_opt *table, int n, unsigned command, const void *defaults,
                          int markdown) {
  for (int i = 0; i < n; i++) {
    const ct_cli_opt *o = &table[i];
    if (!(o->flags & command)) continue;
    char buf[64];
    const char *d = default_str(o, defaults, buf, sizeof buf);
    if (markdown) {
      fprintf(f, "- `--%s%s%s`: ", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
      for (const char *h = o->help; *h; h++) fputc(*h == '\n' ? ' ' : *h, f);
      if (d) fprintf(f, " (default %s)", d);
      fputc('\n', f);
      continue;
    }
    fprintf(f, "  --%s%s%s%s%s%s\n      ", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "",
            d ? "   (default " : "", d ? d : "", d ? ")" : "");
    for (const char *h = o->help; *h; h++) {
      fputc(*h, f);
      if (*h == '\n') fputs("      ", f);
    }
    fputc('\n', f);
  }
}
