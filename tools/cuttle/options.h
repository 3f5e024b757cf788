/* tools/cuttle/options.h: command-line options declared once, in a table, from which the parser,
 * `--help` and the README's option lists all come (options.c).
 *
 * Each entry names an option, its type, where its value goes in the command's configuration struct
 * (an offset), its range, and its help. The parser is strict, as Python's argparse is with a type
 * and a choices list: a number must be the whole argument ("1x", "abc", "" are refused), must fit
 * its type (no overflow), a floating value must be finite, and each must lie in its range; an
 * unknown option, a missing value or a flag given a value are refused too. Every refusal prints
 * one line naming the option and the value, and the command exits 2. Options are written
 * "--name VALUE" or "--name=VALUE"; no abbreviations (argparse's allow_abbrev is off), so that an
 * option added later never changes what an old command line means. */
#ifndef CUTTLE_CLI_OPTIONS_H
#define CUTTLE_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  CT_OPT_STR,  /* const char *: the argument itself (borrowed from argv) */
  CT_OPT_INT,  /* int */
  CT_OPT_I64,  /* int64_t */
  CT_OPT_U64,  /* uint64_t (a seed): any decimal integer in [0, 2^64) */
  CT_OPT_F64,  /* double, finite */
  CT_OPT_FLAG, /* int, set to 1; takes no value */
} ct_cli_opt_type;

/* Which commands take an option, and what it is to a run's recipe (recipe.h). */
enum {
  CT_OPT_TRAIN = 1 << 0,  /* cuttle train */
  CT_OPT_EVAL = 1 << 1,   /* cuttle eval */
  CT_OPT_RECIPE = 1 << 2, /* part of the recipe: saved in config.json and the checkpoint */
  CT_OPT_MODEL = 1 << 3,  /* says which model the checkpoint holds: eval takes it from the file */
  CT_OPT_DATA = 1 << 4,   /* says which data and split: eval takes it from the file */
  CT_OPT_GT = 1 << 5,     /* a number's lower bound is exclusive (lr > 0) */
};

typedef struct {
  const char *name;    /* without the dashes: "lr" */
  ct_cli_opt_type type;
  size_t offset;       /* of the value in the configuration struct */
  const char *metavar; /* the value's name in --help: "X", "N", "FILE"; NULL for a flag */
  double min, max;     /* numbers: the range (min exclusive with CT_OPT_GT) */
  unsigned flags;      /* CT_OPT_* */
  const char *help;    /* one paragraph; "\n" starts a new line in --help */
  const char *const *choices; /* strings: NULL, or the NULL-terminated list of the values allowed */
} ct_cli_opt;

/* Parse argv[1..argc-1] (argv[0] is the command's name) into cfg, for the options of table (n
 * entries) whose flags have `command` (CT_OPT_TRAIN or CT_OPT_EVAL). given (n entries, may be NULL)
 * is set to 1 for each option on the command line. "--help" or "-h" prints the help with usage()
 * and returns 0. Returns -1 when the command goes on, else the exit status after printing why,
 * prefixed with prog: 2 for every usage error. */
int ct_cli_parse(const char *prog, const ct_cli_opt *table, int n, unsigned command, int argc, char **argv,
                 void *cfg, unsigned char *given);

/* Read one value as the parser does: into *out (the type's C type). 0, or 2 after printing
 * "<prog>: --<name>: <why> "<value>"". */
int ct_cli_parse_value(const char *prog, const ct_cli_opt *o, const char *s, void *out);

/* An option's value in cfg as text, as the parser would read it back ("%.17g" for a double, the
 * string itself, "true"/"false" for a flag); NULL for an unset string. buf: at least 32 bytes. */
const char *ct_cli_opt_str(const ct_cli_opt *o, const void *cfg, char *buf, size_t n);

/* Print the help of the options of table that `command` takes: "--name METAVAR", the help
 * paragraph indented beneath, and the default from defaults (a configuration struct; a NULL
 * string, a 0 number or an unset flag has none shown), in table order. markdown: the README's list
 * ("- `--name METAVAR`: help (default V)"), one line per option. */
void ct_cli_print_options(FILE *f, const ct_cli_opt *table, int n, unsigned command, const void *defaults,
                          int markdown);

/* The entry of table called name, or NULL. */
const ct_cli_opt *ct_cli_opt_find(const ct_cli_opt *table, int n, const char *name);

#endif
