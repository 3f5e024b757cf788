/* tools/cuttle/cmd_eval.c: `cuttle eval --checkpoint FILE`: the test accuracy of a checkpoint.
 *
 * A checkpoint `cuttle train` wrote records its run's recipe (recipe.h): the model, the data
 * options and the held-out split. eval takes the model and data options from it, so the file alone
 * reproduces the run's figure; an option given on the command line overrides the recorded one,
 * with a note naming both. Before it scores anything it checks that the test split is the one held
 * out in training, by the digest of its file list (or images): another --val-split fraction or
 * seed, or another folder, would score images the model trained on, and is refused (exit 2)
 * unless --allow-overlap. A file without a recipe (PyTorch's state_dict, an older cuttle's) takes
 * --model and the data options as given (default cnn on Fashion-MNIST); when it does not fit the
 * model, the message names the model its keys belong to.
 *
 * Under mpirun each rank evaluates its shard and the counts are summed (train_loop.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "cuttle.h"
#include "cuttle/io.h"
#include "ranks.h"
#include "recipe.h"
#include "run_config.h"
#include "train_loop.h"

#define PROG "cuttle eval"

/* The model name the keys of f belong to, for a file without a recipe ("resnet18-small",
 * "cnn", ...), or NULL when they are none of the CLI's models. */
static const char *guess_model(const ct_safetensors *f) {
  ct_safetensors_info conv1;
  int i = ct_safetensors_find(f, "conv1.weight");
  if (i >= 0 && ct_safetensors_info_at(f, i, &conv1) == CT_OK && conv1.ndim == 4) {
    int small = conv1.shape[2] == 3, blocks = 0;
    int bottleneck = ct_safetensors_find(f, "layer1.0.conv3.weight") >= 0;
    char key[64];
    for (int b = 0; b < 64; b++) {
      snprintf(key, sizeof key, "layer3.%d.conv1.weight", b);
      if (ct_safetensors_find(f, key) < 0) break;
      blocks++;
    }
    ct_clear_error();
    const char *names[2][3] = {{"resnet18", "resnet34", "resnet50"}, {"resnet18-small", "resnet34-small", "resnet50-small"}};
    int d = bottleneck ? 2 : blocks == 2 ? 0 : blocks == 6 ? 1 : -1;
    return d < 0 ? NULL : names[small][d];
  }
  const char *name = ct_safetensors_find(f, "0.weight") >= 0 && ct_safetensors_find(f, "9.weight") >= 0 ? "cnn"
                     : ct_safetensors_find(f, "1.weight") >= 0 && ct_safetensors_find(f, "5.weight") >= 0 ? "mlp"
                                                                                                        : NULL;
  ct_clear_error();
  return name;
}

/* The recorded model's input and classes against the data's: 0, or 2 after naming both and the
 * options to pass. */
static int check_model_fits(const ct_cli_recipe *rec, const ct_cli_run_config *c, const ct_dataset *test,
                            const char *path) {
  int64_t s[3];
  ct_dataset_sample_shape(test, s);
  int classes = ct_dataset_num_classes(test);
  if (rec->in_channels < 0 || (rec->in_channels == s[0] && rec->image_h == s[1] && rec->image_w == s[2] &&
                               rec->num_classes == classes))
    return 0;
  if (ct_dist_rank() == 0)
    fprintf(stderr, "%s: %s holds a %s for (%lld, %lld, %lld) images and %lld classes, but --data %s gives (%lld, %lld, "
                  "%lld) images and %d classes: leave out the data options to use the recorded ones (--data %s)\n",
          PROG, path, rec->cfg.model ? rec->cfg.model : "model", (long long)rec->in_channels, (long long)rec->image_h,
          (long long)rec->image_w, (long long)rec->num_classes, c->data.data ? c->data.data : "fashion-mnist",
          (long long)s[0], (long long)s[1], (long long)s[2], classes,
          rec->cfg.data.data ? rec->cfg.data.data : "fashion-mnist");
  return 2;
}

/* The test split against the one the run held out. 0 (the same, or --allow-overlap after a
 * warning), or 2 after saying why and how to reproduce the recorded split. */
static int check_split(const ct_cli_recipe *rec, const ct_cli_run_config *c, const ct_dataset *test,
                       const char *path) {
  if (!rec->has_split) return 0;
  ct_cli_split_id now;
  if (ct_cli_split_identify(c, test, &now) != 0) {
    fprintf(stderr, "%s: cannot identify the test split: %s\n", PROG, ct_last_error());
    return 1;
  }
  if (strcmp(now.digest, rec->split.digest) == 0) return 0;
  const ct_cli_data_opts *d = &rec->cfg.data;
  char how[256] = "";
  if (d->val_split > 0) snprintf(how, sizeof how, " --val-split %g --seed %llu", d->val_split, (unsigned long long)rec->cfg.seed);
  if (ct_dist_rank() == 0)
    fprintf(stderr, "%s: %s: the test split here (%lld images, %s) is not the one held out in training (--data %s%s: "
                    "%lld images, %s), so it may hold images the model was trained on%s. Leave out --data, --val-split "
                    "and --seed to use the recorded split (or pass --data %s%s), or --allow-overlap to score it anyway\n",
            PROG, c->allow_overlap ? "warning" : "refused", (long long)now.images, now.digest,
            d->data ? d->data : "fashion-mnist", how, (long long)rec->split.images, rec->split.digest,
            c->allow_overlap ? " (--allow-overlap: scored anyway)" : "", d->data ? d->data : "fashion-mnist", how);
  (void)path;
  return c->allow_overlap ? 0 : 2;
}

/* Read argv and the checkpoint's recipe into *c. GO_ON (-1), or the exit status. */
static int configure(int argc, char **argv, ct_cli_run_config *c, ct_cli_recipe *rec, int *has_recipe, int *launched) {
  *c = ct_cli_run_defaults();
  unsigned char *given = calloc((size_t)ct_cli_run_options_n, 1);
  if (!given) return fprintf(stderr, "%s: out of memory\n", PROG), 1;
  int rc = ct_cli_parse(PROG, ct_cli_run_options, ct_cli_run_options_n, CT_OPT_EVAL, argc, argv, c, given);
  if (rc == 0) ct_cli_run_help(stdout, CT_OPT_EVAL);
  if (rc < 0 && !c->checkpoint) {
    fprintf(stderr, "%s: --checkpoint FILE is required\n", PROG);
    rc = 2;
  }
  /* Under mpirun, join the job first: the notes below are rank 0's alone. */
  *launched = rc < 0 && ct_cli_under_launcher();
  if (*launched && ct_cli_rank_init(PROG, c->timeout) != 0) *launched = 0, rc = 1;
  if (rc < 0) {
    /* Every rank reads the recipe: each builds the model and opens its shard of the data. */
    ct_safetensors *f = ct_safetensors_open(c->checkpoint);
    const char *text = f ? ct_safetensors_metadata(f, CT_CLI_RECIPE_KEY) : NULL;
    if (!f) {
      /* a usage error in the options given comes first (exit 2); then the file's */
      ct_cli_run_config given_only = *c;
      given_only.data.seed = c->seed;
      char why[1024];
      snprintf(why, sizeof why, "%s", ct_last_error());
      rc = ct_cli_data_check(PROG, &given_only.data) ? 2 : 1;
      if (rc == 1) fprintf(stderr, "%s: %s\n", PROG, why);
    } else if (text) {
      if (ct_cli_recipe_parse(PROG, c->checkpoint, text, rec) != 0) rc = 1;
      else *has_recipe = 1, ct_cli_recipe_apply(PROG, rec, c, given);
    }
    ct_clear_error();
    ct_safetensors_close(f); /* the recipe is parsed: its strings live in rec */
  }
  free(given);
  c->data.seed = c->seed; /* the --val-split draw's */
  if (rc < 0 && ct_cli_data_check(PROG, &c->data)) rc = 2;
  return rc;
}

/* Why the load failed, and for a file without a recipe, the model its keys belong to. */
static void explain_load_failure(const ct_cli_run_config *c, const ct_cli_recipe *rec, int has_recipe) {
  fprintf(stderr, "%s: %s\n", PROG, ct_last_error());
  if (has_recipe) {
    if (rec->cfg.model && strcmp(rec->cfg.model, c->model) != 0)
      fprintf(stderr, "%s: the file holds a %s, not a %s: leave out --model (or pass --model %s)\n", PROG,
              rec->cfg.model, c->model, rec->cfg.model);
    return;
  }
  ct_status why = ct_last_status();
  ct_safetensors *f = ct_safetensors_open(c->checkpoint);
  const char *guess = f ? guess_model(f) : NULL;
  if (guess && strcmp(guess, c->model) != 0)
    fprintf(stderr, "%s: the file holds a %s, not a %s: pass --model %s (and the --data it was trained on)\n", PROG,
            guess, c->model, guess);
  else if (why == CT_ESHAPE)
    fprintf(stderr, "%s: the file's %s was trained on other images or classes than --data %s gives: pass the --data "
                    "(and its options) it was trained with\n",
            PROG, c->model, c->data.data ? c->data.data : "fashion-mnist");
  ct_safetensors_close(f);
  ct_clear_error();
}

int ct_cmd_eval(int argc, char **argv) {
  ct_cli_run_config c;
  ct_cli_recipe rec = {0};
  int has_recipe = 0, launched = 0;
  int status = configure(argc, argv, &c, &rec, &has_recipe, &launched);
  if (status >= 0) {
    ct_cli_recipe_free(&rec);
    if (launched && status == 1 && ct_dist_world_size() > 1) ct_cli_rank_abort(NULL);
    if (launched) ct_dist_finalize(); /* a usage error: every rank saw the same one */
    return status;
  }
  ct_device dev;
  if (ct_cli_rank_device(PROG, c.device, &dev) != CT_OK) {
    if (ct_last_status() != CT_OK) fprintf(stderr, "%s: %s\n", PROG, ct_last_error());
    if (ct_dist_world_size() > 1) ct_cli_rank_abort(NULL);
    ct_cli_recipe_free(&rec);
    return 2;
  }
  ct_dataset *test = ct_cli_data_open(PROG, &c.data, CT_SPLIT_TEST);
  status = test ? 0 : 1;
  if (test && has_recipe) status = check_model_fits(&rec, &c, test, c.checkpoint);
  if (status == 0 && has_recipe) status = check_split(&rec, &c, test, c.checkpoint);
  ct_module *m = status == 0 ? ct_cli_model_for(PROG, c.model, test, dev, NULL) : NULL;
  if (status == 0) status = 1;
  /* A model that does not fit the data, or a split that is not the recorded one (status 2), is the
   * same verdict on every rank: they leave the job together below. Otherwise, in a job every rank
   * must reach the sum in ct_cli_evaluate_counts, so a rank whose own part failed leaves at once
   * and mpirun ends the others. */
  if (status == 2) {
  } else if (!m || ct_checkpoint_load(c.checkpoint, m, NULL, NULL) != CT_OK) {
    if (m) explain_load_failure(&c, &rec, has_recipe);
    if (ct_dist_world_size() > 1) ct_cli_rank_abort(PROG);
  } else {
    ct_safetensors *f = ct_dist_rank() == 0 && !has_recipe ? ct_safetensors_open(c.checkpoint) : NULL;
    if (!f) ct_clear_error();
    ct_cli_data_compare_saved(PROG, &c.data, f, c.checkpoint);
    ct_safetensors_close(f);
    int64_t counts[2];
    double acc = ct_cli_evaluate_counts(m, test, dev, 2, counts);
    if (acc < 0 && ct_dist_world_size() > 1) ct_cli_rank_abort("cuttle eval: the evaluation failed");
    if (acc >= 0) {
      char name[32];
      if (ct_dist_rank() == 0) {
        printf("test_acc %.2f%% (%lld images, %s, %s; %lld correct", 100 * acc, (long long)counts[1], c.model,
               ct_device_str(dev, name, sizeof name), (long long)counts[0]);
        if (ct_dist_world_size() > 1) printf(", %d ranks", ct_dist_world_size());
        printf(")\n");
      }
      status = 0;
    } else {
      fprintf(stderr, "%s: %s\n", PROG, ct_last_error());
    }
  }
  ct_dataset_free(test);
  ct_module_free(m);
  ct_cli_recipe_free(&rec);
  if (launched && ct_dist_finalize() != CT_OK && !status) {
    fprintf(stderr, "%s: %s\n", PROG, ct_last_error());
    status = 1;
  }
  return status;
}
