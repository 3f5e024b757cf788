/* tools/cuttle/recipe.c: a run's recipe to JSON and back (recipe.h), with cJSON, and the test
 * split's identity hashed with xxHash's XXH3 (both Debian libraries). */
#define XXH_INLINE_ALL
#include "recipe.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "cli_commit.h"
#include "cuttle/datasets.h"
#include "cuttle/dist.h"
#include "core/internal.h"

int ct_cli_split_identify(const ct_cli_run_config *c, const ct_dataset *test, ct_cli_split_id *out) {
  XXH3_state_t *st = XXH3_createState();
  if (!st) return ct__error(CT_ENOMEM, "out of memory for a hash state"), -1;
  XXH3_64bits_reset(st);
  int64_t n = ct_dataset_len(test), s[3];
  const int64_t *labels = ct_dataset_labels(test);
  const uint8_t *pixels = ct_dataset_pixels(test);
  int rc = 0;
  if (pixels) { /* held in memory: the images themselves */
    ct_dataset_sample_shape(test, s);
    XXH3_64bits_update(st, pixels, (size_t)(n * s[0] * s[1] * s[2]));
  } else { /* an image folder: each file's path relative to the folder, then its label */
    ct_clear_error();
    size_t root = c->data.dir ? strlen(c->data.dir) : 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
      const char *p = ct_dataset_sample_path(test, i);
      if (!p) {
        rc = -1;
        break;
      }
      if (root && strncmp(p, c->data.dir, root) == 0) p += root;
      while (*p == '/') p++;
      XXH3_64bits_update(st, p, strlen(p) + 1);
    }
  }
  if (rc == 0 && labels) XXH3_64bits_update(st, labels, (size_t)n * sizeof *labels);
  snprintf(out->digest, sizeof out->digest, "xxh3_64:%016" PRIx64, (uint64_t)XXH3_64bits_digest(st));
  out->images = n;
  XXH3_freeState(st);
  return rc;
}

/* One option's value into obj under its name. */
static int add_option(cJSON *obj, const ct_cli_opt *o, const ct_cli_run_config *c) {
  const char *p = (const char *)c + o->offset;
  char buf[32];
  switch (o->type) {
    case CT_OPT_STR: {
      const char *v = *(const char *const *)p;
      return (v ? cJSON_AddStringToObject(obj, o->name, v) : cJSON_AddNullToObject(obj, o->name)) != NULL;
    }
    case CT_OPT_FLAG: return cJSON_AddBoolToObject(obj, o->name, *(const int *)p) != NULL;
    case CT_OPT_INT: return cJSON_AddNumberToObject(obj, o->name, *(const int *)p) != NULL;
    case CT_OPT_I64: return cJSON_AddNumberToObject(obj, o->name, (double)*(const int64_t *)p) != NULL;
    case CT_OPT_F64: return cJSON_AddNumberToObject(obj, o->name, *(const double *)p) != NULL;
    case CT_OPT_U64:
      snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *)p);
      return cJSON_AddStringToObject(obj, o->name, buf) != NULL;
  }
  return 0;
}

char *ct_cli_recipe_json(const ct_cli_run_config *c, const ct_dataset *test, int pretty) {
  ct_cli_split_id id;
  if (ct_cli_split_identify(c, test, &id) != 0) return NULL;
  int64_t s[3];
  ct_dataset_sample_shape(test, s);
  char seed[32];
  snprintf(seed, sizeof seed, "%" PRIu64, c->seed);
  cJSON *root = cJSON_CreateObject(), *v = cJSON_AddObjectToObject(root, "cuttle"),
        *m = cJSON_AddObjectToObject(root, "model"), *sp = cJSON_AddObjectToObject(root, "split"),
        *o = cJSON_AddObjectToObject(root, "options");
  int ok = root && v && m && sp && o;
  ok = ok && cJSON_AddStringToObject(v, "version", ct_version()) && cJSON_AddStringToObject(v, "commit", CT_CLI_COMMIT);
  cJSON *size = ok ? cJSON_CreateIntArray((const int[]){(int)s[1], (int)s[2]}, 2) : NULL;
  ok = ok && size && cJSON_AddStringToObject(m, "name", c->model) && cJSON_AddNumberToObject(m, "in_channels", (double)s[0]);
  if (size) cJSON_AddItemToObject(m, "image_size", size);
  ok = ok && cJSON_AddNumberToObject(m, "num_classes", ct_dataset_num_classes(test));
  ok = ok && cJSON_AddStringToObject(sp, "data", c->data.data ? c->data.data : "fashion-mnist") &&
       cJSON_AddNumberToObject(sp, "val_split", c->data.val_split) && cJSON_AddStringToObject(sp, "seed", seed) &&
       cJSON_AddNumberToObject(sp, "test_images", (double)id.images) && cJSON_AddStringToObject(sp, "digest", id.digest);
  for (int i = 0; ok && i < ct_cli_run_options_n; i++)
    if (ct_cli_run_options[i].flags & CT_OPT_RECIPE) ok = add_option(o, &ct_cli_run_options[i], c);
  char *text = ok ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
  cJSON_Delete(root);
  if (!text) ct__error(CT_ENOMEM, "out of memory writing the recipe's JSON");
  return text;
}

/* The recorded value of option o from the JSON item it into cfg (defaults: the defaults), through
 * the parser of the command line, so that a recorded value meets the option's type, range and
 * choices as a given one does. A string may be null only where its default is (no --data-dir, say,
 * but always a --model). 0, or -1 when the value is not one the option takes. */
static int read_option(const ct_cli_opt *o, const cJSON *it, ct_cli_run_config *cfg, const ct_cli_run_config *defaults) {
  char *p = (char *)cfg + o->offset, text[64];
  const char *s = text;
  switch (o->type) {
    case CT_OPT_STR:
      if (cJSON_IsNull(it)) {
        if (*(const char *const *)((const char *)defaults + o->offset)) return -1;
        return *(const char **)p = NULL, 0;
      }
      if (!cJSON_IsString(it)) return -1;
      s = it->valuestring;
      break;
    case CT_OPT_FLAG:
      if (!cJSON_IsBool(it)) return -1;
      *(int *)p = cJSON_IsTrue(it);
      return 0;
    case CT_OPT_U64: /* a string: 64 bits do not fit a JSON number */
      if (!cJSON_IsString(it)) return -1;
      s = it->valuestring;
      break;
    default:
      if (!cJSON_IsNumber(it)) return -1;
      snprintf(text, sizeof text, "%.17g", it->valuedouble);
  }
  return ct_cli_parse_value("cuttle", o, s, p) == 0 ? 0 : -1;
}

/* A count or size the recipe records: an integer in [0, 2^40], else -1. */
static int64_t count_of(const cJSON *it) {
  double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
  return v >= 0 && v <= 1099511627776.0 && v == (double)(int64_t)v ? (int64_t)v : -1;
}
static int64_t num(const cJSON *obj, const char *key) { return count_of(cJSON_GetObjectItemCaseSensitive(obj, key)); }
static const char *str(const cJSON *obj, const char *key) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

int ct_cli_recipe_parse(const char *prog, const char *path, const char *text, ct_cli_recipe *out) {
  *out = (ct_cli_recipe){.cfg = ct_cli_run_defaults(), .in_channels = -1, .image_h = -1, .image_w = -1,
                         .num_classes = -1};
  cJSON *root = cJSON_Parse(text);
  out->json = root;
  out->has = calloc((size_t)ct_cli_run_options_n, 1);
  const char *bad = !out->has ? "out of memory" : !cJSON_IsObject(root) ? "not a JSON object" : NULL, *bad_option = NULL;
  const cJSON *opts = root ? cJSON_GetObjectItemCaseSensitive(root, "options") : NULL;
  for (int i = 0; !bad && opts && i < ct_cli_run_options_n; i++) {
    const ct_cli_opt *o = &ct_cli_run_options[i];
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(opts, o->name);
    if (!it || !(o->flags & CT_OPT_RECIPE)) continue;
    ct_cli_run_config defaults = ct_cli_run_defaults();
    if (read_option(o, it, &out->cfg, &defaults) != 0) bad = "a value the option does not take for --", bad_option = o->name;
    out->has[i] = 1;
  }
  if (!bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "cuttle"), *m = cJSON_GetObjectItemCaseSensitive(root, "model"),
                *sp = cJSON_GetObjectItemCaseSensitive(root, "split");
    out->version = str(v, "version"), out->commit = str(v, "commit");
    out->in_channels = num(m, "in_channels"), out->num_classes = num(m, "num_classes");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(m, "image_size");
    if (cJSON_IsArray(size) && cJSON_GetArraySize(size) == 2) {
      out->image_h = count_of(cJSON_GetArrayItem(size, 0));
      out->image_w = count_of(cJSON_GetArrayItem(size, 1));
    }
    /* the held-out split's identity: without it eval could not refuse an overlapping split */
    const char *digest = str(sp, "digest");
    if (!cJSON_IsObject(opts) || !cJSON_IsObject(m) || !out->cfg.model)
      bad = "no \"options\" or \"model\" object";
    else if (!digest || strlen(digest) != 24 || strncmp(digest, "xxh3_64:", 8) != 0 || num(sp, "test_images") < 0)
      bad = "no well-formed \"split\" (\"digest\": \"xxh3_64:<16 hex digits>\", \"test_images\")";
    else {
      strcpy(out->split.digest, digest);
      out->split.images = num(sp, "test_images");
      out->has_split = 1;
    }
  }
  if (bad) {
    fprintf(stderr, "%s: %s: the recorded recipe (metadata \"%s\") is malformed: %s%s\n", prog, path,
            CT_CLI_RECIPE_KEY, bad, bad_option ? bad_option : "");
    ct_cli_recipe_free(out);
    return -1;
  }
  return 0;
}

void ct_cli_recipe_free(ct_cli_recipe *r) {
  cJSON_Delete(r->json);
  free(r->has);
  r->json = NULL, r->has = NULL;
}

/* The kind of a --data value: the part before ':' ("fashion-mnist" when NULL). */
static size_t kind_len(const char *d) { return d ? strcspn(d, ":") : 0; }
static int same_kind(const char *a, const char *b) {
  const char *x = a ? a : "fashion-mnist", *y = b ? b : "fashion-mnist";
  return kind_len(x) == kind_len(y) && strncmp(x, y, kind_len(x)) == 0;
}

void ct_cli_recipe_apply(const char *prog, const ct_cli_recipe *r, ct_cli_run_config *c, const unsigned char *given) {
  /* --data given as another kind of data set than the recorded one: the recorded options of that
   * kind (Fashion-MNIST's --data-dir, an image folder's --image-size, --gray, --val-split,
   * --skip-bad-images) do not carry over to it */
  const ct_cli_opt *d = ct_cli_opt_find(ct_cli_run_options, ct_cli_run_options_n, "data");
  int other_kind = given[d - ct_cli_run_options] && !same_kind(c->data.data, r->cfg.data.data);
  static const char *const kind_specific[] = {"data-dir", "image-size", "gray", "val-split", "skip-bad-images", NULL};
  for (int i = 0; i < ct_cli_run_options_n; i++) {
    const ct_cli_opt *o = &ct_cli_run_options[i];
    if (!(o->flags & (CT_OPT_MODEL | CT_OPT_DATA)) || !(o->flags & CT_OPT_EVAL)) continue;
    int specific = 0;
    for (const char *const *k = kind_specific; *k; k++) specific |= strcmp(*k, o->name) == 0;
    if (other_kind && specific) continue;
    char a[64], b[64];
    const char *now = ct_cli_opt_str(o, c, a, sizeof a), *saved = ct_cli_opt_str(o, &r->cfg, b, sizeof b);
    if (!given[i]) {
      size_t n = o->type == CT_OPT_STR ? sizeof(const char *) : o->type == CT_OPT_F64 || o->type == CT_OPT_I64 ||
                                                                        o->type == CT_OPT_U64 ? 8 : sizeof(int);
      memcpy((char *)c + o->offset, (const char *)&r->cfg + o->offset, n);
    } else if ((now || saved) && (!now || !saved || strcmp(now, saved) != 0) && ct_dist_rank() == 0) {
      fprintf(stderr, "%s: note: --%s %s overrides the checkpoint's %s\n", prog, o->name, now ? now : "(none)",
              saved ? saved : "(none)");
    }
  }
}
