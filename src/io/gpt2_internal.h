/* src/io/gpt2_internal.h: config.json for GPT-2 (gpt2_pretrained.c), for the CLI and the fuzz target. */
#ifndef CUTTLE_IO_GPT2_INTERNAL_H
#define CUTTLE_IO_GPT2_INTERNAL_H

#include <stddef.h>
#include "cuttle/gpt2.h"

/* Parse n bytes of transformers.GPT2Config JSON into *out (GPT2Config's defaults for the fields it
 * lacks, but n_layer, n_head, n_embd, n_positions and vocab_size are required). label names the
 * file in messages. Errors: CT_EFORMAT naming label and the field (not JSON, a required field
 * missing or not a whole number in [0, 2^31], a number field of another type, an
 * activation_function too long or not a string, an attention variant cuttle lacks, or a value
 * ct_gpt2_config_check refuses). */
ct_status ct__gpt2_config_parse(const char *json, size_t n, const char *label, ct_gpt2_config *out);
/* GPT2Config's JSON for c (malloc'd, the caller frees it), or NULL when out of memory. */
char *ct__gpt2_config_json(const ct_gpt2_config *c);

#endif
