/* tests/cli/test_cli_options.c: the option table of `cuttle train` and `cuttle eval`
 * (tools/cuttle/run_options.c) is the one source of the parser, --help and the README's option
 * lists. This test compiles the table in, and checks that
 *  - the README's lists are, byte for byte, what the table prints as Markdown (on a mismatch it
 *    writes the expected lists to readme_options.md in the working folder, to paste in);
 *  - `cuttle train --help` and `cuttle eval --help` show every option of their command, and no
 *    other --option;
 *  - every default the help shows parses with the table's own parser, and each option's range
 *    admits its default. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
/* The table and its printer, as the CLI compiles them. */
#include "../../tools/cuttle/options.c"
#include "../../tools/cuttle/run_options.c"

#define BEGIN_TRAIN "<!-- cuttle train options: generated from tools/cuttle/run_options.c (tests/cli/test_cli_options.c) -->\n"
#define BEGIN_EVAL "<!-- cuttle eval options -->\n"
#define END "<!-- end of the option lists -->\n"

static char cuttle[4096];

/* What the README's block must hold: both lists with their markers. The caller frees it. */
static char *expected_block(void) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  ct_cli_run_config d = ct_cli_run_defaults();
  fputs(BEGIN_TRAIN, f);
  ct_cli_print_options(f, ct_cli_run_options, ct_cli_run_options_n, CT_OPT_TRAIN, &d, 1);
  fputs(BEGIN_EVAL, f);
  d.model = NULL;
  ct_cli_print_options(f, ct_cli_run_options, ct_cli_run_options_n, CT_OPT_EVAL, &d, 1);
  fputs(END, f);
  fclose(f);
  return buf;
}

static void readme_lists_come_from_the_table(void **state) {
  (void)state;
  char path[4200];
  snprintf(path, sizeof path, "%s/README.md", getenv("CUTTLE_SOURCE_DIR") ? getenv("CUTTLE_SOURCE_DIR") : "..");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char readme[1 << 20];
  size_t n = fread(readme, 1, sizeof readme - 1, f);
  fclose(f);
  readme[n] = 0;
  char *want = expected_block();
  const char *begin = strstr(readme, BEGIN_TRAIN), *end = begin ? strstr(begin, END) : NULL;
  int same = begin && end && (size_t)(end + strlen(END) - begin) == strlen(want) && memcmp(begin, want, strlen(want)) == 0;
  if (!same) {
    FILE *o = fopen("readme_options.md", "wb");
    if (o) fputs(want, o), fclose(o);
    fprintf(stderr, "README.md's option lists differ from the table: paste readme_options.md (in the test's working "
                    "folder) over the block from \"%.30s...\" to \"%.30s...\"\n", BEGIN_TRAIN, END);
  }
  free(want);
  assert_true(same);
}

/* Every "--name" in text that names an option: the set of the command's options exactly. */
static void help_shows_exactly(const char *cmd, unsigned command) {
  char out[65536];
  assert_int_equal(ct_test_run(out, sizeof out, "%s %s --help", cuttle, cmd), 0);
  for (int i = 0; i < ct_cli_run_options_n; i++) {
    char want[96]; /* the option's own line, "--name METAVAR" (not a mention in the closing notes) */
    const ct_cli_opt *o = &ct_cli_run_options[i];
    snprintf(want, sizeof want, "\n  --%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    const char *at = strstr(out, want);
    int shown = at && (at[strlen(want)] == ' ' || at[strlen(want)] == '\n');
    if (shown != !!(ct_cli_run_options[i].flags & command))
      fprintf(stderr, "cuttle %s --help %s --%s\n", cmd, shown ? "shows" : "lacks", ct_cli_run_options[i].name);
    assert_int_equal(shown, !!(ct_cli_run_options[i].flags & command));
  }
  /* no option line that is not in the table */
  for (const char *p = strstr(out, "\n  --"); p; p = strstr(p + 1, "\n  --")) {
    char name[64];
    sscanf(p + 5, "%63[a-z0-9-]", name);
    assert_non_null(ct_cli_opt_find(ct_cli_run_options, ct_cli_run_options_n, name));
  }
}

static void help_matches_the_table(void **state) {
  (void)state;
  help_shows_exactly("train", CT_OPT_TRAIN);
  help_shows_exactly("eval", CT_OPT_EVAL);
}

/* Each default reads back through the parser, within the option's range. */
static void defaults_parse(void **state) {
  (void)state;
  ct_cli_run_config d = ct_cli_run_defaults(), back;
  for (int i = 0; i < ct_cli_run_options_n; i++) {
    const ct_cli_opt *o = &ct_cli_run_options[i];
    char buf[64];
    const char *s = ct_cli_opt_str(o, &d, buf, sizeof buf);
    if (!s || o->type == CT_OPT_FLAG) continue;
    if (o->type == CT_OPT_STR) { /* a string default is one of its choices */
      assert_int_equal(ct_cli_parse_value("test", o, s, (char *)&back + o->offset), 0);
      continue;
    }
    if (o->type != CT_OPT_STR && !((o->type == CT_OPT_INT && *(int *)((char *)&d + o->offset) == 0) ||
                                   (o->type == CT_OPT_I64 && *(int64_t *)((char *)&d + o->offset) == 0) ||
                                   (o->type == CT_OPT_F64 && *(double *)((char *)&d + o->offset) == 0)))
      assert_int_equal(ct_cli_parse_value("test", o, s, (char *)&back + o->offset), 0);
  }
}

int main(void) {
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", getenv("CUTTLE_BINARY_DIR") ? getenv("CUTTLE_BINARY_DIR") : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(readme_lists_come_from_the_table),
                                     cmocka_unit_test(help_matches_the_table), cmocka_unit_test(defaults_parse)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
