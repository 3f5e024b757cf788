/* tests/fuzz/fuzz_gpt2_config.c: fuzz target for GPT-2's config.json reader
 * (src/io/gpt2_pretrained.c's ct__gpt2_config_parse, what ct_gpt2_from_pretrained reads first).
 * Any input must either parse into a config that ct_gpt2_config_check accepts, whose JSON then
 * parses back to the same fields, or fail with CT_EFORMAT; never crash, read out of bounds or
 * leak. Built with tests/fuzz/replay_main.c under CTest over tests/fuzz/corpus/fuzz_gpt2_config/,
 * or with -fsanitize=fuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuttle.h"
#include "io/gpt2_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ct_gpt2_config c;
  if (ct__gpt2_config_parse((const char *)data, size, "<fuzz>", &c) != CT_OK) {
    if (ct_last_status() != CT_EFORMAT) {
      fprintf(stderr, "fuzz_gpt2_config: unexpected status %d: %s\n", ct_last_status(), ct_last_error());
      abort();
    }
    return 0;
  }
  if (ct_gpt2_config_check(&c) != CT_OK) abort(); /* a parsed config is a valid one */
  char *json = ct__gpt2_config_json(&c);
  if (!json) return 0;
  ct_gpt2_config back;
  if (ct__gpt2_config_parse(json, strlen(json), "<round trip>", &back) != CT_OK) abort();
  if (back.n_layer != c.n_layer || back.n_head != c.n_head || back.n_embd != c.n_embd || back.n_positions != c.n_positions ||
      back.vocab_size != c.vocab_size || back.n_inner != c.n_inner || strcmp(back.activation_function, c.activation_function))
    abort();
  free(json);
  return 0;
}
