/* tools/cuttle/recipe.h: a run's recipe, written as JSON into the run folder's config.json and
 * into every checkpoint's safetensors metadata (under CT_CLI_RECIPE_KEY, so
 * `safetensors.safe_open(f, "pt").metadata()` shows it), and read back by `cuttle eval`.
 *
 * The JSON object:
 *   "cuttle":  {"version": "0.1.0", "commit": "<git describe>"}
 *   "model":   {"name": "resnet18", "in_channels": 3, "image_size": [32, 32], "num_classes": 10}
 *              (the constructor's arguments: ct_model_new_for's, the depth and stem in the name)
 *   "split":   {"data": "imagefolder:photos", "val_split": 0.2, "seed": "1", "test_images": 30,
 *               "digest": "xxh3_64:<16 hex digits>"}
 *              the held-out test split: the digest hashes its file list (each path relative to the
 *              folder, and its label) for an image folder, or its pixels and labels for a data set
 *              held in memory (Fashion-MNIST, CIFAR), so any other split of the same images hashes
 *              differently
 *   "options": every option of the recipe (CT_OPT_RECIPE in run_options.c) as resolved, under its
 *              command-line name: numbers as JSON numbers (a seed, 64 bits, as a string), flags as
 *              booleans, unset strings as null. */
#ifndef CUTTLE_CLI_RECIPE_H
#define CUTTLE_CLI_RECIPE_H

#include "cuttle.h"
#include "run_config.h"

#define CT_CLI_RECIPE_KEY "cuttle.recipe"

/* The test split's identity: images and digest ("xxh3_64:" + 16 hex digits). 0, or -1 with
 * ct_last_error() set (a sample whose path or pixels cannot be read). */
typedef struct {
  int64_t images;
  char digest[32];
} ct_cli_split_id;
int ct_cli_split_identify(const ct_cli_run_config *c, const ct_dataset *test, ct_cli_split_id *out);

/* The recipe of c, whose test split is test (the model's input shape and classes come from it), as
 * a JSON string (pretty: indented, for config.json; else compact, for metadata). The caller frees
 * it. NULL when out of memory or the split cannot be identified, with ct_last_error() set. */
char *ct_cli_recipe_json(const ct_cli_run_config *c, const ct_dataset *test, int pretty);

/* What `cuttle eval` reads back from a recipe. Strings are borrowed from the parsed JSON, kept by
 * the struct until ct_cli_recipe_free. */
typedef struct {
  void *json;            /* the parsed tree (cJSON), owned */
  ct_cli_run_config cfg; /* the recorded options, over the defaults for any the recipe lacks */
  unsigned char *has;    /* ct_cli_run_options_n entries: 1 where the recipe records the option */
  const char *version, *commit;
  int64_t in_channels, image_h, image_w, num_classes;
  ct_cli_split_id split;
  int has_split;
} ct_cli_recipe;

/* Parse text (a CT_CLI_RECIPE_KEY value) into *out. 0, or -1 after printing why, prefixed with
 * prog and naming path (a malformed recipe: not JSON, or a value of the wrong type). */
int ct_cli_recipe_parse(const char *prog, const char *path, const char *text, ct_cli_recipe *out);
void ct_cli_recipe_free(ct_cli_recipe *r);

/* For eval: each model and data option (CT_OPT_MODEL or CT_OPT_DATA) not given on the command line
 * (given[i] 0) takes the recipe's value; one given with another value than the recipe's keeps it,
 * and a note naming both goes to stderr (rank 0). */
void ct_cli_recipe_apply(const char *prog, const ct_cli_recipe *r, ct_cli_run_config *c, const unsigned char *given);

#endif
