/* src/io/checkpoint.c: model and training checkpoints as one safetensors file (see io.h).
 *
 * The model's state_dict goes under its PyTorch names, so safetensors.torch.load_file reads it into a
 * PyTorch model; the optimizer's state goes under "optimizer.state.<param>.<slot>", and everything
 * else a resumed run needs (epoch, generator, lr, step count) into "__metadata__" strings, with the
 * checksum of the tensor bytes (CT_SAFETENSORS_CHECKSUM_KEY), which every open of the file verifies.
 * Loading validates everything before it changes anything. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "cuttle/io.h"
#include "io/safetensors_internal.h"

#define OPT_PREFIX "optimizer."

static const char *const reserved_keys[] = {"format", "epoch", "rng_seed", "rng_offset",
                                            "optimizer", "optimizer.lr", "optimizer.steps",
                                            "grad_scaler.scale", "grad_scaler.growth_factor", "grad_scaler.backoff_factor",
                                            "grad_scaler.growth_interval", "grad_scaler.growth_tracker",
                                            "grad_scaler.steps_taken", "grad_scaler.steps_skipped",
                                            "grad_scaler.last_step_skipped", CT_SAFETENSORS_CHECKSUM_KEY};

/* The GradScaler's metadata keys (ct_checkpoint_meta's grad_scaler): three doubles, then five
 * integers. */
#define N_SCALER_KEYS 8
static const char *const scaler_keys[N_SCALER_KEYS] = {
    "grad_scaler.scale",          "grad_scaler.growth_factor", "grad_scaler.backoff_factor",
    "grad_scaler.growth_interval", "grad_scaler.growth_tracker", "grad_scaler.steps_taken",
    "grad_scaler.steps_skipped",  "grad_scaler.last_step_skipped"};

/* The names of the optimizer kinds in the "optimizer" metadata, indexed by ct_optim_kind. */
static const char *const optim_names[] = {[CT_OPTIM_SGD] = "sgd", [CT_OPTIM_ADAM] = "adam", [CT_OPTIM_ADAMW] = "adamw"};
#define N_OPTIM_KINDS ((int)(sizeof optim_names / sizeof *optim_names))

/* The name of kind k ("?" for a value outside the enum, which ct_optimizer_new should not let through). */
static const char *optim_name(int k) { return k >= 0 && k < N_OPTIM_KINDS ? optim_names[k] : "?"; }

/* The kind named s, or -1 when s names none. */
static int optim_kind_of(const char *s) {
  for (int k = 0; k < N_OPTIM_KINDS; k++)
    if (strcmp(s, optim_names[k]) == 0) return k;
  return -1;
}

/* The format version 1 wrote "adam" for both Adam and AdamW (the state slots are the same). */
#define CT_CHECKPOINT_FORMAT_1 "cuttle-checkpoint-1"

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The named tensors of m (with buffers) and, when opt, of opt's state, in one malloc'd array.
 * *nm: count of model entries; *no: count of optimizer entries. Optimizer names get the prefix. */
static ct_named_tensor *collect(ct_module *m, ct_optimizer *opt, int *nm, int *no) {
  int a = ct_module_named_tensors(m, 1, NULL, 0);
  int b = opt ? ct_optimizer_named_state(opt, NULL, 0) : 0;
  if (a < 0 || b < 0) CT_FAIL_NULL(CT_EINVAL, "checkpoint: cannot list the module's or the optimizer's tensors");
  ct_named_tensor *all = ct__calloc((size_t)(a + b) + 1, sizeof *all, "the checkpoint's list of tensors");
  if (!all) return NULL;
  a = ct_module_named_tensors(m, 1, all, a);
  if (opt) b = ct_optimizer_named_state(opt, all + a, b);
  for (int i = a; i < a + b; i++) {
    char name[sizeof all[i].name];
    int w = snprintf(name, sizeof name, OPT_PREFIX "%s", all[i].name);
    if (w < 0 || (size_t)w >= sizeof name) {
      ct__error(CT_EINVAL, "checkpoint: optimizer state name \"%s\" is too long", all[i].name);
      free(all);
      return NULL;
    }
    memcpy(all[i].name, name, sizeof name);
  }
  *nm = a, *no = b;
  return all;
}

ct_status ct_checkpoint_save(const char *path, ct_module *m, ct_optimizer *opt, const ct_checkpoint_meta *meta) {
  if (!path || !m) return ct__error(CT_EINVAL, "ct_checkpoint_save: NULL %s", !path ? "path" : "module");
  int n_extra = meta ? meta->n_extra : 0;
  if (n_extra < 0 || (n_extra > 0 && !meta->extra))
    return ct__error(CT_EINVAL, "ct_checkpoint_save(%s): meta has n_extra %d and extra %p", path, n_extra,
                     meta ? (const void *)meta->extra : NULL);
  for (int i = 0; i < n_extra; i++) {
    const char *k = meta->extra[i].key;
    if (!k) return ct__error(CT_EINVAL, "ct_checkpoint_save(%s): extra metadata %d has a NULL key", path, i);
    for (size_t r = 0; r < sizeof reserved_keys / sizeof *reserved_keys; r++)
      if (strcmp(k, reserved_keys[r]) == 0)
        return ct__error(CT_EINVAL, "ct_checkpoint_save(%s): extra metadata key \"%s\" is reserved for the checkpoint",
                         path, k);
  }
  if (opt && optim_name(ct_optimizer_kind(opt))[0] == '?')
    return ct__error(CT_EINVAL, "ct_checkpoint_save(%s): the optimizer has kind %d, which is no ct_optim_kind", path,
                     (int)ct_optimizer_kind(opt));
  int nm = 0, no = 0;
  ct_named_tensor *all = collect(m, opt, &nm, &no);
  if (!all) return ct_last_status();
  int n = nm + no;
  const char **names = ct__calloc((size_t)n + 1, sizeof *names, "the checkpoint's tensor names");
  ct_tensor **ts = names ? ct__calloc((size_t)n + 1, sizeof *ts, "the checkpoint's tensors") : NULL;
  ct_metadata_kv *kv = ts ? ct__calloc((size_t)n_extra + 8 + N_SCALER_KEYS, sizeof *kv, "the checkpoint's metadata") : NULL;
  ct_status s;
  if (!kv) {
    s = CT_ENOMEM;
    goto out;
  }
  for (int i = 0; i < n; i++) names[i] = all[i].name, ts[i] = all[i].tensor;
  char epoch[32], seed[32], offset[32], lr[40], steps[32];
  int nkv = 0;
  kv[nkv++] = (ct_metadata_kv){"format", CT_CHECKPOINT_FORMAT};
  if (meta) {
    snprintf(epoch, sizeof epoch, "%" PRId64, meta->epoch);
    snprintf(seed, sizeof seed, "%" PRIu64, meta->rng.seed);
    snprintf(offset, sizeof offset, "%" PRIu64, meta->rng.offset);
    kv[nkv++] = (ct_metadata_kv){"epoch", epoch};
    kv[nkv++] = (ct_metadata_kv){"rng_seed", seed};
    kv[nkv++] = (ct_metadata_kv){"rng_offset", offset};
  }
  char sc[N_SCALER_KEYS][40];
  if (meta && meta->has_grad_scaler) {
    const ct_grad_scaler_state *g = &meta->grad_scaler;
    snprintf(sc[0], sizeof sc[0], "%.17g", g->scale);
    snprintf(sc[1], sizeof sc[1], "%.17g", g->growth_factor);
    snprintf(sc[2], sizeof sc[2], "%.17g", g->backoff_factor);
    snprintf(sc[3], sizeof sc[3], "%" PRId64, g->growth_interval);
    snprintf(sc[4], sizeof sc[4], "%" PRId64, g->growth_tracker);
    snprintf(sc[5], sizeof sc[5], "%" PRId64, g->steps_taken);
    snprintf(sc[6], sizeof sc[6], "%" PRId64, g->steps_skipped);
    snprintf(sc[7], sizeof sc[7], "%d", g->last_step_skipped);
    for (int i = 0; i < N_SCALER_KEYS; i++) kv[nkv++] = (ct_metadata_kv){scaler_keys[i], sc[i]};
  }
  if (opt) {
    snprintf(lr, sizeof lr, "%.17g", ct_optimizer_lr(opt));
    snprintf(steps, sizeof steps, "%" PRId64, ct_optimizer_steps(opt));
    kv[nkv++] = (ct_metadata_kv){"optimizer", optim_name(ct_optimizer_kind(opt))};
    kv[nkv++] = (ct_metadata_kv){"optimizer.lr", lr};
    kv[nkv++] = (ct_metadata_kv){"optimizer.steps", steps};
  }
  for (int i = 0; i < n_extra; i++) kv[nkv++] = meta->extra[i];
  /* the writer appends CT_SAFETENSORS_CHECKSUM_KEY, the hash of the tensor bytes */
  s = ct__safetensors_save_checksummed(path, n, names, ts, nkv, kv);
out:
  free(kv);
  free(ts);
  free(names);
  free(all);
  return s;
}

/* Parse a whole decimal integer from metadata key; absent keys leave *out and return CT_OK. */
static ct_status meta_int(const ct_safetensors *f, const char *path, const char *key, int is_signed, void *out) {
  const char *v = ct_safetensors_metadata(f, key);
  if (!v) return CT_OK;
  char *end = NULL;
  errno = 0;
  if (is_signed) {
    long long x = strtoll(v, &end, 10);
    if (!errno && end != v && !*end) return *(int64_t *)out = x, CT_OK;
  } else if (v[0] != '-') {
    unsigned long long x = strtoull(v, &end, 10);
    if (!errno && end != v && !*end) return *(uint64_t *)out = x, CT_OK;
  }
  return ct__error(CT_EFORMAT, "%s: metadata \"%s\" = \"%.40s\" is not a%s integer", path, key, v,
                   is_signed ? "n" : " non-negative");
}

/* The GradScaler's state from the "grad_scaler.*" metadata into *out; *has is 0 (and *out zero)
 * when the file holds none. A key that is missing or does not parse is CT_EFORMAT. */
static ct_status meta_scaler(const ct_safetensors *f, const char *path, int *has, ct_grad_scaler_state *out) {
  memset(out, 0, sizeof *out);
  *has = ct_safetensors_metadata(f, scaler_keys[0]) != NULL;
  if (!*has) return CT_OK;
  double *d[3] = {&out->scale, &out->growth_factor, &out->backoff_factor};
  for (int i = 0; i < 3; i++) {
    const char *v = ct_safetensors_metadata(f, scaler_keys[i]);
    char *end = NULL;
    errno = 0;
    *d[i] = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end)
      return ct__error(CT_EFORMAT, "%s: metadata \"%s\" = \"%.40s\" is not a number", path, scaler_keys[i], v ? v : "(missing)");
  }
  int64_t *n[4] = {&out->growth_interval, &out->growth_tracker, &out->steps_taken, &out->steps_skipped}, last = -1;
  for (int i = 0; i < 5; i++) {
    const char *k = scaler_keys[3 + i];
    if (!ct_safetensors_metadata(f, k)) return ct__error(CT_EFORMAT, "%s: metadata \"%s\" is missing", path, k);
    ct_status s = meta_int(f, path, k, 1, i < 4 ? n[i] : &last);
    if (s != CT_OK) return s;
  }
  out->last_step_skipped = last != 0;
  return CT_OK;
}

/* Does the file's tensor fit the destination? Returns CT_OK or the error for key. */
static ct_status check_fit(const char *path, const char *key, const ct_safetensors_info *in, ct_tensor *dst,
                           const char *what) {
  char a[160], b[160];
  int nd = ct_tensor_ndim(dst);
  const int64_t *sh = ct_tensor_shape(dst);
  int same = in->ndim == nd;
  for (int d = 0; same && d < nd; d++) same = in->shape[d] == sh[d];
  if (!same) {
    /* the file's shape may have more dims than a tensor can */
    size_t used = (size_t)snprintf(a, sizeof a, "(");
    for (int d = 0; d < in->ndim && used < sizeof a; d++)
      used += (size_t)snprintf(a + used, sizeof a - used, "%s%lld", d ? ", " : "", (long long)in->shape[d]);
    if (used < sizeof a) snprintf(a + used, sizeof a - used, in->ndim == 1 ? ",)" : ")");
    return ct__error(CT_ESHAPE, "%s: %s: file has %s, %s has %s", path, key, a, what, ct_shape_str(dst, b, sizeof b));
  }
  ct_dtype dt = ct_tensor_dtype(dst);
  if (in->dtype == dt) return CT_OK;
  if (in->dtype != CT_DTYPE_COUNT && ct_dtype_is_floating(in->dtype) && ct_dtype_is_floating(dt)) return CT_OK;
  return ct__error(CT_EDTYPE, "%s: %s: file has dtype %s, %s has %s (only floating dtypes are converted)", path, key,
                   in->format_dtype, what, ct_dtype_name(dt));
}

/* What a checkpoint's metadata says, read and checked before anything is changed. */
typedef struct {
  int v1; /* the file is format version 1 (CT_CHECKPOINT_FORMAT_1) */
  int64_t epoch, steps;
  uint64_t seed, offset;
  int has_scaler;
  ct_grad_scaler_state scaler;
  int kind;  /* the optimizer's ct_optim_kind, or -1 when the file names none */
  double lr; /* the optimizer's learning rate, read only when loading into an optimizer */
} ckpt_meta;

/* The format, the training state, the GradScaler and the optimizer's kind from f's metadata into
 * *cm (zeroed by the caller). */
static ct_status read_meta(const ct_safetensors *f, const char *path, ckpt_meta *cm) {
  const char *fmt = ct_safetensors_metadata(f, "format");
  cm->v1 = fmt && strcmp(fmt, CT_CHECKPOINT_FORMAT_1) == 0;
  if (fmt && strncmp(fmt, "cuttle-checkpoint-", 18) == 0 && strcmp(fmt, CT_CHECKPOINT_FORMAT) != 0 && !cm->v1)
    return ct__error(CT_EFORMAT, "%s: checkpoint format \"%.40s\" is newer than this cuttle reads (%s)", path, fmt,
                     CT_CHECKPOINT_FORMAT);
  ct_status s;
  if ((s = meta_int(f, path, "epoch", 1, &cm->epoch)) || (s = meta_int(f, path, "rng_seed", 0, &cm->seed)) ||
      (s = meta_int(f, path, "rng_offset", 0, &cm->offset)) || (s = meta_int(f, path, "optimizer.steps", 1, &cm->steps)))
    return s;
  if ((s = meta_scaler(f, path, &cm->has_scaler, &cm->scaler))) return s;
  /* The optimizer the file was saved with, when it says (cuttle's checkpoints do; PyTorch's do not). */
  const char *kind_s = ct_safetensors_metadata(f, "optimizer");
  cm->kind = kind_s ? optim_kind_of(kind_s) : -1;
  if (kind_s && cm->kind < 0)
    return ct__error(CT_EFORMAT, "%s: metadata \"optimizer\" = \"%.40s\" names no optimizer (sgd, adam or adamw)", path,
                     kind_s);
  return CT_OK;
}

/* Loading into opt: it must be the optimizer the file was saved with, and the file must hold an
 * optimizer's state; reads the learning rate into cm->lr. */
static ct_status prepare_optimizer(const ct_safetensors *f, const char *path, ct_optimizer *opt, ckpt_meta *cm) {
  int kind = cm->kind;
  if (kind >= 0) {
    /* PyTorch-like: the optimizer the caller constructed must be the one saved. A version-1 file
     * wrote "adam" for AdamW too, so there it matches either. */
    int want = (int)ct_optimizer_kind(opt);
    int ok = kind == want || (cm->v1 && kind == CT_OPTIM_ADAM && want == CT_OPTIM_ADAMW);
    const char *an = kind == CT_OPTIM_ADAM || kind == CT_OPTIM_ADAMW ? "n" : "";
    if (!ok)
      return ct__error(CT_EINVAL,
                       "%s: the checkpoint holds the state of a%s %s optimizer, but the optimizer given is %s; construct "
                       "a%s %s optimizer to resume from it (ct_optim_opts.kind)",
                       path, an, optim_name(kind), optim_name(want), an, optim_name(kind));
  }
  if (!ct_safetensors_metadata(f, "optimizer.steps"))
    return ct__error(CT_EFORMAT,
                     "%s: the file holds no optimizer state (it was saved without an optimizer); load it with opt = NULL",
                     path);
  const char *lrs = ct_safetensors_metadata(f, "optimizer.lr");
  char *end = NULL;
  cm->lr = lrs ? strtod(lrs, &end) : 0;
  if (!lrs || end == lrs || *end || !(cm->lr >= 0))
    return ct__error(CT_EFORMAT, "%s: metadata \"optimizer.lr\" is %s%.40s%s", path, lrs ? "\"" : "missing",
                     lrs ? lrs : "", lrs ? "\", not a non-negative number" : "");
  /* Create the optimizer's state slots when the file has any, so that both sides can be matched. */
  int file_has_state = 0;
  for (int i = 0; i < ct_safetensors_count(f) && !file_has_state; i++) {
    ct_safetensors_info in;
    ct_safetensors_info_at(f, i, &in);
    file_has_state = strncmp(in.name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0;
  }
  return file_has_state ? ct_optimizer_init_state(opt) : CT_OK;
}

/* BatchNorm's batch count (an int64 buffer named num_batches_tracked), which a file may lack: PyTorch
 * before 0.4.1 and cuttle before it kept one wrote none (torch's _NormBase._load_from_state_dict
 * accepts such a state_dict). */
static int is_batch_count(const ct_named_tensor *nt) {
  return nt->is_buffer && ct_tensor_dtype(nt->tensor) == CT_I64 && ends_with(nt->name, "num_batches_tracked");
}

/* Phase 1 of a load: every one of the n tensors of all (the model's nm first, then the
 * optimizer's) has a key in f that fits it, and f has no other key that the load would drop.
 * used: one zeroed byte per key of f. */
static ct_status validate(const ct_safetensors *f, const char *path, const ct_named_tensor *all, int nm, int n,
                          int has_opt, char *used) {
  for (int i = 0; i < n; i++) {
    const char *what = i < nm ? "model" : "optimizer";
    int k = ct_safetensors_find(f, all[i].name);
    if (k < 0 && is_batch_count(&all[i])) continue; /* left as it is, as torch's BatchNorm loads an old state_dict */
    if (k < 0)
      return ct__error(CT_EFORMAT, "%s: missing key \"%s\" (the %s has it, the file does not)", path, all[i].name, what);
    ct_safetensors_info in;
    ct_safetensors_info_at(f, k, &in);
    ct_status s = check_fit(path, all[i].name, &in, all[i].tensor, what);
    if (s != CT_OK) return s;
    used[k] = 1;
  }
  for (int k = 0; k < ct_safetensors_count(f); k++) {
    if (used[k]) continue;
    ct_safetensors_info in;
    ct_safetensors_info_at(f, k, &in);
    int is_opt = strncmp(in.name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0;
    if (is_opt && !has_opt) continue;
    return ct__error(CT_EFORMAT, "%s: unexpected key \"%s\" (the file has it, the %s does not)", path, in.name,
                     is_opt ? "optimizer" : "model");
  }
  return CT_OK;
}

/* The caller's ct_checkpoint_meta from what the load read. */
static void fill_meta_out(const ct_safetensors *f, const ckpt_meta *cm, ct_checkpoint_meta *out) {
  memset(out, 0, sizeof *out);
  out->has_training_state = ct_safetensors_metadata(f, "epoch") != NULL;
  out->epoch = cm->epoch;
  out->rng.seed = cm->seed;
  out->rng.offset = cm->offset;
  out->has_optimizer = cm->kind >= 0;
  out->optimizer = cm->kind >= 0 ? (ct_optim_kind)cm->kind : CT_OPTIM_SGD;
  out->has_grad_scaler = cm->has_scaler;
  out->grad_scaler = cm->scaler;
}

ct_status ct_checkpoint_load(const char *path, ct_module *m, ct_optimizer *opt, ct_checkpoint_meta *meta_out) {
  if (!path || !m) return ct__error(CT_EINVAL, "ct_checkpoint_load: NULL %s", !path ? "path" : "module");
  ct_safetensors *f = ct_safetensors_open(path);
  if (!f) return ct_last_status();
  ct_named_tensor *all = NULL;
  ct_tensor **src = NULL;
  char *used = NULL;
  int n = 0;
  ckpt_meta cm = {0};
  ct_status s = read_meta(f, path, &cm);
  if (s == CT_OK && opt) s = prepare_optimizer(f, path, opt, &cm);
  if (s != CT_OK) goto out;

  int nm = 0, no = 0;
  all = collect(m, opt, &nm, &no);
  if (!all) {
    s = ct_last_status();
    goto out;
  }
  n = nm + no;
  src = ct__calloc((size_t)n + 1, sizeof *src, "the loaded tensors");
  used = src ? ct__calloc((size_t)ct_safetensors_count(f) + 1, 1, "the loaded keys") : NULL;
  if (!used) {
    s = CT_ENOMEM;
    goto out;
  }
  if ((s = validate(f, path, all, nm, n, opt != NULL, used)) != CT_OK) goto out;
  /* Phase 2: read every tensor onto its destination's device; nothing has changed yet. */
  for (int i = 0; i < n; i++) {
    if (is_batch_count(&all[i]) && ct_safetensors_find(f, all[i].name) < 0) continue; /* src[i] NULL: not copied */
    if (!(src[i] = ct_safetensors_get(f, all[i].name, ct_tensor_device(all[i].tensor)))) {
      s = ct_last_status();
      goto out;
    }
  }
  /* Phase 3: copy in place (shapes and devices already match; dtypes convert). */
  ct_no_grad_begin();
  for (int i = 0; i < n && s == CT_OK; i++)
    if (src[i]) s = ct_copy_(all[i].tensor, src[i]);
  ct_no_grad_end();
  if (s != CT_OK) goto out;
  if (opt) {
    ct_optimizer_set_lr(opt, cm.lr);
    ct_optimizer_set_steps(opt, cm.steps);
  }
  if (meta_out) fill_meta_out(f, &cm, meta_out);
out:
  if (src)
    for (int i = 0; i < n; i++) ct_tensor_free(src[i]);
  free(src);
  free(used);
  free(all);
  ct_safetensors_close(f);
  return s;
}
