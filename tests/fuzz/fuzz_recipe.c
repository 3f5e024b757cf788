/* tests/fuzz/fuzz_recipe.c: fuzz target for the recipe a checkpoint records (the JSON under
 * "cuttle.recipe" that `cuttle eval` reads back: tools/cuttle/recipe.c's ct_cli_recipe_parse, with
 * the option table it fills). Any input must either parse, leaving every recorded option of a
 * string type NULL or a string, or fail with a message; and applying a parsed recipe to a default
 * configuration must not crash; never crash, read out of bounds or leak. Built with a replay main
 * under CTest (corpus: tests/fuzz/corpus/fuzz_recipe/) and with libFuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* The CLI's sources, as it compiles them. */
#include "../../tools/cuttle/options.c"
#include "../../tools/cuttle/run_options.c"
#include "../../tools/cuttle/recipe.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) quiet = 1, freopen("/dev/null", "w", stderr); /* the parser says why on stderr */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0; /* metadata values are strings: no NUL inside */
  ct_cli_recipe r;
  if (ct_cli_recipe_parse("fuzz", "fuzz", text, &r) == 0) {
    unsigned char *given = calloc((size_t)ct_cli_run_options_n, 1);
    ct_cli_run_config c = ct_cli_run_defaults();
    if (given) ct_cli_recipe_apply("fuzz", &r, &c, given);
    /* every string option is NULL or a readable string */
    for (int i = 0; i < ct_cli_run_options_n; i++)
      if (ct_cli_run_options[i].type == CT_OPT_STR) {
        const char *s = *(const char *const *)((const char *)&c + ct_cli_run_options[i].offset);
        if (s && strlen(s) > size) abort();
      }
    if (r.has_split && strlen(r.split.digest) >= sizeof r.split.digest) abort();
    free(given);
    ct_cli_recipe_free(&r);
  } else if (r.json || r.has) {
    abort(); /* a refused recipe leaves nothing allocated */
  }
  free(text);
  return 0;
}
