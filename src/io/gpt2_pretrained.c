/* src/io/gpt2_pretrained.c: GPT-2 directories in Hugging Face's layout (cuttle/gpt2.h): config.json,
 * transformers.GPT2Config's JSON, read with cJSON (ct__gpt2_config_parse, also the fuzz target's
 * entry), and model.safetensors, GPT2LMHeadModel's state_dict (or the hub's GPT2Model keys). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "core/internal.h"
#include "cuttle/gpt2.h"
#include "cuttle/io.h"
#include "io/gpt2_internal.h"

/* One integer field of the config: required, a whole number in range. */
static ct_status int_field(const cJSON *j, const char *label, const char *name, int required, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
  if (!v || cJSON_IsNull(v)) {
    if (!required) return CT_OK;
    return ct__error(CT_EFORMAT, "%s: config.json has no \"%s\" (GPT2Config needs n_layer, n_head, n_embd, n_positions "
                     "and vocab_size)", label, name);
  }
  double d = cJSON_GetNumberValue(v);
  if (!cJSON_IsNumber(v) || d != (double)(int64_t)d || d < 0 || d > (double)((int64_t)1 << 31))
    return ct__error(CT_EFORMAT, "%s: config.json's \"%s\" must be a whole number in [0, 2^31]", label, name);
  *out = (int64_t)d;
  return CT_OK;
}

static ct_status real_field(const cJSON *j, const char *label, const char *name, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
  if (!v || cJSON_IsNull(v)) return CT_OK; /* GPT2Config's default stays */
  if (!cJSON_IsNumber(v)) return ct__error(CT_EFORMAT, "%s: config.json's \"%s\" must be a number", label, name);
  *out = cJSON_GetNumberValue(v);
  return CT_OK;
}

ct_status ct__gpt2_config_parse(const char *json, size_t n, const char *label, ct_gpt2_config *out) {
  ct_gpt2_config_default(out);
  cJSON *j = cJSON_ParseWithLength(json, n);
  if (!j || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return ct__error(CT_EFORMAT, "%s: config.json is not a JSON object", label);
  }
  ct_status s = CT_OK;
  const char *ints[] = {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size"};
  int64_t *dst[] = {&out->n_layer, &out->n_head, &out->n_embd, &out->n_positions, &out->vocab_size};
  for (int i = 0; i < 5 && s == CT_OK; i++) s = int_field(j, label, ints[i], 1, dst[i]);
  if (s == CT_OK) s = int_field(j, label, "n_inner", 0, &out->n_inner);
  const char *reals[] = {"layer_norm_epsilon", "initializer_range", "resid_pdrop", "embd_pdrop", "attn_pdrop"};
  double *rdst[] = {&out->layer_norm_epsilon, &out->initializer_range, &out->resid_pdrop, &out->embd_pdrop, &out->attn_pdrop};
  for (int i = 0; i < 5 && s == CT_OK; i++) s = real_field(j, label, reals[i], rdst[i]);
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
  if (s == CT_OK && act) {
    const char *a = cJSON_GetStringValue(act);
    if (!a || strlen(a) >= sizeof out->activation_function)
      s = ct__error(CT_EFORMAT, "%s: config.json's \"activation_function\" must be a short string", label);
    else snprintf(out->activation_function, sizeof out->activation_function, "%s", a);
  }
  /* variants of GPT-2's attention this model does not implement */
  const char *unsupported[] = {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"};
  for (int i = 0; i < 3 && s == CT_OK; i++)
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, unsupported[i])))
      s = ct__error(CT_EFORMAT, "%s: config.json sets \"%s\", which cuttle's GPT-2 does not implement", label, unsupported[i]);
  const cJSON *scale = cJSON_GetObjectItemCaseSensitive(j, "scale_attn_weights");
  if (s == CT_OK && cJSON_IsFalse(scale))
    s = ct__error(CT_EFORMAT, "%s: config.json sets \"scale_attn_weights\": false, which cuttle's GPT-2 does not implement", label);
  cJSON_Delete(j);
  if (s == CT_OK && ct_gpt2_config_check(out) != CT_OK) {
    char why[512]; /* copied: the new message must not be formatted from the one it replaces */
    snprintf(why, sizeof why, "%s", ct_last_error());
    s = ct__error(CT_EFORMAT, "%s: %s", label, why);
  }
  return s;
}

/* DIR/config.json and DIR/model.safetensors from path (a directory, or the safetensors file). */
static void paths_of(const char *path, char *cfg, char *st, size_t cap) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(cfg, cap, "%s/config.json", path);
    snprintf(st, cap, "%s/model.safetensors", path);
    return;
  }
  snprintf(st, cap, "%s", path);
  const char *slash = strrchr(path, '/');
  if (slash) snprintf(cfg, cap, "%.*s/config.json", (int)(slash - path), path);
  else snprintf(cfg, cap, "config.json");
}

/* The file's key for the model's name: "transformer.x" as is, or "x" in GPT2Model's layout. */
static int find_key(const ct_safetensors *f, const char *name, int bare) {
  return ct_safetensors_find(f, bare ? name + strlen("transformer.") : name);
}

ct_status ct_gpt2_from_pretrained(const char *path, ct_device dev, ct_module **out) {
  const char *op = "ct_gpt2_from_pretrained";
  if (out) *out = NULL;
  if (!path || !out) return ct__null_status(op, !path ? "path" : "out");
  struct stat sb;
  if (stat(path, &sb) != 0)
    return ct__error(CT_EIO, "%s: cannot open %s: %s (give a directory with config.json and model.safetensors, or the "
                     "safetensors file)", op, path, strerror(errno));
  char cfg_path[4096], st_path[4096];
  paths_of(path, cfg_path, st_path, sizeof cfg_path);
  size_t n = 0;
  char *json = ct__slurp_file(op, cfg_path, &n);
  if (!json) return ct_last_status();
  ct_gpt2_config c;
  ct_status s = ct__gpt2_config_parse(json, n, cfg_path, &c);
  free(json);
  if (s != CT_OK) return ct__error_prefix("%s", op);
  ct_safetensors *f = ct_safetensors_open(st_path);
  if (!f) return ct__error_prefix("%s", op);
  ct_module *m = ct_gpt2_new(&c, dev, NULL);
  int count = m ? ct_module_named_tensors(m, 1, NULL, 0) : -1;
  ct_named_tensor *nt = count > 0 ? ct__calloc((size_t)count, sizeof *nt, "GPT-2's tensors") : NULL;
  s = nt ? CT_OK : ct_last_status();
  if (s == CT_OK) ct_module_named_tensors(m, 1, nt, count);
  /* the hub's GPT-2 has GPT2Model's keys: no "transformer." */
  int bare = s == CT_OK && ct_safetensors_find(f, "transformer.wte.weight") < 0 && ct_safetensors_find(f, "wte.weight") >= 0;
  int used = 0;
  ct_no_grad_begin();
  for (int i = 0; i < count && s == CT_OK; i++) {
    int k = find_key(f, nt[i].name, bare);
    const char *key = bare ? nt[i].name + strlen("transformer.") : nt[i].name;
    if (k < 0) {
      s = ct__error(CT_EFORMAT, "%s: %s has no tensor \"%s\", which a GPT-2 of this config.json needs", op, st_path, key);
      break;
    }
    ct_safetensors_info info;
    ct_safetensors_info_at(f, k, &info);
    const int64_t *want = ct_tensor_shape(nt[i].tensor);
    int same = info.ndim == ct_tensor_ndim(nt[i].tensor);
    for (int d = 0; same && d < info.ndim; d++) same = info.shape[d] == want[d];
    if (!same) {
      char a[160], b[160];
      s = ct__error(CT_EFORMAT, "%s: %s's \"%s\" has shape %s, but config.json's sizes give %s", op, st_path, key,
                    ct__shape_str(info.ndim, info.shape, a, sizeof a), ct_shape_str(nt[i].tensor, b, sizeof b));
      break;
    }
    ct_tensor *t = ct_safetensors_get(f, key, dev);
    s = t ? ct_copy_(nt[i].tensor, t) : ct_last_status();
    ct_tensor_free(t);
    used++;
  }
  ct_no_grad_end();
  /* every other key must be a known extra: the mask buffers, the tied head */
  for (int i = 0; s == CT_OK && i < ct_safetensors_count(f); i++) {
    ct_safetensors_info info;
    ct_safetensors_info_at(f, i, &info);
    const char *k = info.name, *dot = strrchr(k, '.');
    int extra = (dot && (strcmp(dot, ".bias") == 0 || strcmp(dot, ".masked_bias") == 0) && strstr(k, ".attn.") &&
                 !strstr(k, "c_attn") && !strstr(k, "c_proj")) ||
                strcmp(k, "lm_head.weight") == 0;
    int known = 0;
    for (int j = 0; !extra && !known && j < count; j++) known = strcmp(bare ? nt[j].name + strlen("transformer.") : nt[j].name, k) == 0;
    if (!extra && !known)
      s = ct__error(CT_EFORMAT, "%s: %s holds \"%s\", which a GPT-2 has no place for (is it another model?)", op, st_path, k);
  }
  free(nt);
  ct_safetensors_close(f);
  if (s != CT_OK) {
    ct_module_free(m);
    if (!strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
    return ct_last_status();
  }
  ct_module_train(m, 0);
  *out = m;
  return CT_OK;
}

/* mkdir -p */
static ct_status make_dirs(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s", dir);
  for (char *c = p + 1; *c; c++)
    if (*c == '/') {
      *c = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) return ct__error(CT_EIO, "cannot create %s: %s", p, strerror(errno));
      *c = '/';
    }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return ct__error(CT_EIO, "cannot create %s: %s", p, strerror(errno));
  return CT_OK;
}

char *ct__gpt2_config_json(const ct_gpt2_config *c) {
  cJSON *j = cJSON_CreateObject();
  cJSON *arch = j ? cJSON_AddArrayToObject(j, "architectures") : NULL;
  if (arch) cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
  if (j) {
    cJSON_AddStringToObject(j, "model_type", "gpt2");
    cJSON_AddStringToObject(j, "activation_function", c->activation_function);
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
    cJSON_AddNumberToObject(j, "n_positions", (double)c->n_positions);
    cJSON_AddNumberToObject(j, "n_ctx", (double)c->n_positions);
    cJSON_AddNumberToObject(j, "n_embd", (double)c->n_embd);
    cJSON_AddNumberToObject(j, "n_layer", (double)c->n_layer);
    cJSON_AddNumberToObject(j, "n_head", (double)c->n_head);
    if (c->n_inner) cJSON_AddNumberToObject(j, "n_inner", (double)c->n_inner);
    else cJSON_AddNullToObject(j, "n_inner");
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", c->layer_norm_epsilon);
    cJSON_AddNumberToObject(j, "initializer_range", c->initializer_range);
    cJSON_AddNumberToObject(j, "resid_pdrop", c->resid_pdrop);
    cJSON_AddNumberToObject(j, "embd_pdrop", c->embd_pdrop);
    cJSON_AddNumberToObject(j, "attn_pdrop", c->attn_pdrop);
    cJSON_AddBoolToObject(j, "scale_attn_weights", 1);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", 1);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
  }
  char *text = j ? cJSON_Print(j) : NULL;
  cJSON_Delete(j);
  return text;
}

ct_status ct_gpt2_save_pretrained(ct_module *m, const char *dir) {
  const char *op = "ct_gpt2_save_pretrained";
  if (!m || !dir) return ct__null_status(op, !m ? "m" : "dir");
  const ct_gpt2_config *c = ct_gpt2_config_of(m);
  if (!c) return ct__error_prefix("%s", op);
  if (make_dirs(dir) != CT_OK) return ct__error_prefix("%s", op);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  int count = ct_module_named_tensors(m, 1, NULL, 0);
  ct_named_tensor *nt = count > 0 ? ct__calloc((size_t)count, sizeof *nt, "GPT-2's tensors") : NULL;
  const char **names = nt ? ct__calloc((size_t)count, sizeof *names, "GPT-2's names") : NULL;
  ct_tensor **ts = names ? ct__calloc((size_t)count, sizeof *ts, "GPT-2's tensors") : NULL;
  ct_status s = ts ? CT_OK : ct_last_status();
  if (s == CT_OK) {
    ct_module_named_tensors(m, 1, nt, count);
    for (int i = 0; i < count; i++) names[i] = nt[i].name, ts[i] = nt[i].tensor;
    s = ct_safetensors_save(path, count, names, ts, 1, &(ct_metadata_kv){"format", "pt"});
  }
  free(nt), free(names), free(ts);
  char *json = s == CT_OK ? ct__gpt2_config_json(c) : NULL;
  if (s == CT_OK && !json) s = ct__error(CT_ENOMEM, "out of memory writing config.json");
  if (s == CT_OK) {
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *tmp = NULL;
    FILE *f = ct__replace_open(op, path, &tmp);
    if (!f) s = ct_last_status();
    else {
      fputs(json, f);
      fputc('\n', f);
      s = ct__replace_commit(op, f, tmp, path);
    }
  }
  free(json);
  if (s != CT_OK && !strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
  return s;
}
