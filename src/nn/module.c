/* src/nn/module.c: what every module shares: building (named tensors and children, user modules),
 * freeing, train/eval, moving to a device, named tensors (state_dict names), lookup by dotted
 * path, parameter counting and printing. */
#include <string.h>
#include "nn/module.h"

static const char *const type_names[CT_M_KIND_COUNT] = {
    "Linear", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Flatten", "Dropout", "Sequential", "AvgPool2d",
    "AdaptiveAvgPool2d", "Identity", "Sigmoid", "Tanh", "GELU", "SiLU", "BatchNorm1d", "LayerNorm", "Embedding",
    "Module"};

ct_module *ct__module_alloc(ct_module_kind kind) {
  ct_module *m = ct__calloc(1, sizeof *m, "a module");
  if (!m) return NULL;
  m->kind = kind;
  m->training = 1;
  return m;
}

static char *dup_name(const char *s, const char *what) {
  size_t n = strlen(s) + 1;
  char *d = ct__malloc(n, what);
  if (d) memcpy(d, s, n);
  return d;
}

/* Grow a list of *cap entries to hold one more: each of the k arrays (element sizes sz[k]) is
 * reallocated. On failure nothing changes. */
static ct_status grow(int n, int *cap, int k, void **arrays[], const size_t sz[], const char *what) {
  if (n < *cap) return CT_OK;
  int nc = *cap ? *cap * 2 : 4;
  for (int i = 0; i < k; i++) {
    void *p = realloc(*arrays[i], (size_t)nc * sz[i]);
    if (!p) return ct__error(CT_ENOMEM, "out of memory growing %s to %d entries", what, nc);
    *arrays[i] = p; /* a larger block of the same entries: the list stays valid if a later one fails */
  }
  *cap = nc;
  return CT_OK;
}

ct_status ct__module_add(ct_module *m, const char *name, ct_tensor *t, int is_buffer) {
  ct__untrack(t);
  char *nm = dup_name(name, "a tensor's name");
  ct_status s = nm ? grow(m->n_slots, &m->cap_slots, 3,
                          (void **[]){(void **)&m->slot_name, (void **)&m->slot, (void **)&m->slot_is_buffer},
                          (size_t[]){sizeof *m->slot_name, sizeof *m->slot, sizeof *m->slot_is_buffer}, "a module's tensors")
                   : CT_ENOMEM;
  if (s != CT_OK) return free(nm), ct__tensor_decref(t), s;
  m->slot_name[m->n_slots] = nm;
  m->slot[m->n_slots] = t;
  m->slot_is_buffer[m->n_slots] = (unsigned char)(is_buffer != 0);
  m->n_slots++;
  return CT_OK;
}

ct_status ct__module_add_child(ct_module *m, const char *name, ct_module *child) {
  char *nm = dup_name(name, "a child's name");
  ct_status s = nm ? grow(m->n_children, &m->cap_children, 2, (void **[]){(void **)&m->child_name, (void **)&m->children},
                          (size_t[]){sizeof *m->child_name, sizeof *m->children}, "a module's children")
                   : CT_ENOMEM;
  if (s != CT_OK) return free(nm), ct_module_free(child), s;
  m->child_name[m->n_children] = nm;
  m->children[m->n_children++] = child;
  return CT_OK;
}

int ct__module_find_slot(const ct_module *m, const char *name) {
  for (int i = 0; i < m->n_slots; i++)
    if (strcmp(m->slot_name[i], name) == 0) return i;
  return -1;
}

static int find_child(const ct_module *m, const char *name, size_t len) {
  for (int i = 0; i < m->n_children; i++)
    if (strlen(m->child_name[i]) == len && strncmp(m->child_name[i], name, len) == 0) return i;
  return -1;
}

void ct_module_free(ct_module *m) {
  if (!m) return;
  for (int i = 0; i < m->n_slots; i++) ct__tensor_decref(m->slot[i]), free(m->slot_name[i]);
  for (int i = 0; i < m->n_children; i++) ct_module_free(m->children[i]), free(m->child_name[i]);
  free(m->slot), free(m->slot_name), free(m->slot_is_buffer);
  free(m->children), free(m->child_name);
  if (m->free_ctx) m->free_ctx(m->ctx);
  free(m->type_name);
  free(m);
}

/* ---- user modules */

ct_module *ct_module_new(const char *type_name, ct_module_forward_fn forward, void *ctx, void (*free_ctx)(void *ctx)) {
  const char *op = "ct_module_new";
  if (!forward) {
    if (free_ctx) free_ctx(ctx);
    CT_FAIL_NULL(CT_EINVAL, "%s: forward is NULL; pass the function that runs the module", op);
  }
  ct_module *m = ct__module_alloc(CT_M_USER);
  char *tn = m ? dup_name(type_name && *type_name ? type_name : "Module", "a module's type name") : NULL;
  if (!tn) {
    free(m);
    if (free_ctx) free_ctx(ctx);
    return ct__error_prefix("%s", op), NULL;
  }
  m->type_name = tn, m->user_forward = forward, m->ctx = ctx, m->free_ctx = free_ctx;
  return m;
}

void *ct_module_ctx(const ct_module *m) {
  if (!m) return ct__null_status("ct_module_ctx", "m"), NULL;
  return m->ctx;
}

int ct_module_is_training(const ct_module *m) {
  if (!m) return ct__null_status("ct_module_is_training", "m"), 0;
  return m->training;
}

/* A name a user module may register: as torch.nn.Module's, not empty, without a '.', not taken by
 * another tensor or child of m (register_parameter's and add_module's KeyError). */
static ct_status check_new_name(const ct_module *m, const char *op, const char *name) {
  if (!m->user_forward)
    return ct__error(CT_EINVAL, "%s: %s is a built-in layer; only modules made with ct_module_new take new children, "
                     "parameters and buffers", op, type_names[m->kind]);
  if (!name || !*name) return ct__error(CT_EINVAL, "%s: the name is %s; pass a name such as \"conv1\"", op, name ? "empty" : "NULL");
  if (strchr(name, '.')) return ct__error(CT_EINVAL, "%s: name \"%s\" contains '.', which separates the parts of a path", op, name);
  if (strlen(name) > 63) return ct__error(CT_EINVAL, "%s: name \"%.40s...\" is longer than 63 characters", op, name);
  if (ct__module_find_slot(m, name) >= 0 || find_child(m, name, strlen(name)) >= 0)
    return ct__error(CT_EINVAL, "%s: the module already has a %s named \"%s\"", op,
                     ct__module_find_slot(m, name) >= 0 ? "tensor" : "child", name);
  return CT_OK;
}

ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child) {
  const char *op = "ct_module_add_child";
  if (!child) {
    /* a constructor that failed left its error: keep it, as ct_sequential_new does */
    if (ct_last_status() != CT_OK) return ct_last_status();
    return ct__error(CT_EINVAL, "%s: child \"%s\" is NULL", op, name ? name : "(NULL)");
  }
  if (!m) return ct_module_free(child), ct__null_status(op, "m");
  if (child == m) return ct__error(CT_EINVAL, "%s: a module cannot be its own child", op);
  ct_status s = check_new_name(m, op, name);
  if (s != CT_OK) return ct_module_free(child), s;
  return ct__module_add_child(m, name, child);
}

static ct_status register_tensor(ct_module *m, const char *name, ct_tensor *t, int is_buffer) {
  const char *op = is_buffer ? "ct_module_register_buffer" : "ct_module_register_parameter";
  if (!t) {
    if (ct_last_status() != CT_OK) return ct_last_status();
    return ct__error(CT_EINVAL, "%s: tensor \"%s\" is NULL", op, name ? name : "(NULL)");
  }
  ct_status s = !m ? ct__null_status(op, "m") : check_new_name(m, op, name);
  if (s == CT_OK && !is_buffer && !ct_dtype_is_floating(t->dtype))
    s = ct__error(CT_EDTYPE, "%s: parameter \"%s\" is %s; a parameter must be floating (register an integer tensor as a "
                  "buffer)", op, name, ct_dtype_name(t->dtype));
  if (s == CT_OK && !is_buffer && t->grad_fn)
    s = ct__error(CT_EINVAL, "%s: parameter \"%s\" is the result of an op; register a leaf (detach it first)", op, name);
  if (s == CT_OK && !is_buffer) s = ct_requires_grad_(t, 1);
  if (s != CT_OK) return ct_tensor_free(t), s;
  return ct__module_add(m, name, t, is_buffer);
}

ct_status ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t) { return register_tensor(m, name, t, 0); }
ct_status ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t) { return register_tensor(m, name, t, 1); }

/* The module at a dotted path ("layer1.0"), or NULL; *rest receives what follows the last
 * module's name when want_tensor is set ("conv1.weight" -> the module "conv1", rest "weight"). */
static ct_module *walk_path(ct_module *m, const char *path, int want_tensor, const char **rest) {
  const char *p = path;
  for (;;) {
    const char *dot = strchr(p, '.');
    if (!dot && want_tensor) return *rest = p, m;
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    int i = find_child(m, p, len);
    if (i < 0) return *rest = p, NULL;
    m = m->children[i];
    if (!dot) return m;
    p = dot + 1;
  }
}

ct_module *ct_module_child(ct_module *m, const char *path) {
  const char *op = "ct_module_child", *rest = NULL;
  if (!m || !path) return ct__null_arg(op, !m ? "m" : "path");
  ct_module *c = walk_path(m, path, 0, &rest);
  if (!c) CT_FAIL_NULL(CT_EINVAL, "%s: no child \"%.*s\" on the way to \"%s\" (%s)", op, (int)strcspn(rest, "."), rest, path,
                       type_names[m->kind]);
  return c;
}

ct_tensor *ct_module_tensor(ct_module *m, const char *path) {
  const char *op = "ct_module_tensor", *rest = NULL;
  if (!m || !path) return ct__null_arg(op, !m ? "m" : "path");
  ct_module *c = walk_path(m, path, 1, &rest);
  int i = c ? ct__module_find_slot(c, rest) : -1;
  if (i < 0)
    CT_FAIL_NULL(CT_EINVAL, "%s: no %s \"%.*s\" in \"%s\"; ct_module_named_tensors lists the names", op, c ? "tensor" : "child",
                 (int)strcspn(rest, "."), rest, path);
  return c->slot[i];
}

int ct_module_num_children(const ct_module *m) {
  if (!m) return ct__null_status("ct_module_num_children", "m");
  return m->n_children;
}

ct_module *ct_module_child_at(ct_module *m, int i, const char **name) {
  if (!m) return ct__null_arg("ct_module_child_at", "m");
  if (i < 0 || i >= m->n_children)
    CT_FAIL_NULL(CT_EINVAL, "ct_module_child_at: index %d is outside [0, %d)", i, m->n_children);
  if (name) *name = m->child_name[i];
  return m->children[i];
}

/* ---- walking */

void ct_module_train(ct_module *m, int training) {
  if (!m) return (void)ct__null_status("ct_module_train", "m");
  m->training = training != 0;
  for (int i = 0; i < m->n_children; i++) ct_module_train(m->children[i], training);
}

const char *ct_module_type(const ct_module *m) {
  if (!m) return ct__null_status("ct_module_type", "m"), "?";
  return m->kind == CT_M_USER ? m->type_name : type_names[m->kind];
}

/* torch.nn.Module.state_dict's order: a module's parameters, its buffers, then each child's, in
 * registration order (named_parameters: the same without buffers). */
static int collect(ct_module *m, const char *prefix, int with_buffers, ct_named_tensor *out, int cap, int k) {
  for (int pass = 0; pass < 1 + (with_buffers != 0); pass++)
    for (int i = 0; i < m->n_slots; i++) {
      if (m->slot_is_buffer[i] != pass) continue;
      if (out && k < cap) {
        snprintf(out[k].name, sizeof out[k].name, "%s%s", prefix, m->slot_name[i]);
        out[k].tensor = m->slot[i];
        out[k].is_buffer = m->slot_is_buffer[i];
      }
      k++;
    }
  for (int c = 0; c < m->n_children; c++) {
    char p[sizeof ((ct_named_tensor *)0)->name];
    snprintf(p, sizeof p, "%s%s.", prefix, m->child_name[c]);
    k = collect(m->children[c], p, with_buffers, out, cap, k);
  }
  return k;
}

int ct_module_named_tensors(ct_module *m, int with_buffers, ct_named_tensor *out, int cap) {
  if (!m) return ct__null_status("ct_module_named_tensors", "m");
  if (cap < 0) return ct__error(CT_EINVAL, "ct_module_named_tensors: cap must be >= 0, got %d", cap);
  return collect(m, "", with_buffers, out, cap, 0);
}

int64_t ct_module_num_params(ct_module *m) {
  if (!m) return ct__null_status("ct_module_num_params", "m"), -1;
  int n = ct_module_named_tensors(m, 0, NULL, 0);
  ct_named_tensor *nt = ct__calloc((size_t)n, sizeof *nt, "a list of named tensors");
  if (!nt) return -1;
  ct_module_named_tensors(m, 0, nt, n);
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += ct_tensor_numel(nt[i].tensor);
  free(nt);
  return total;
}

void ct__module_swap_storage(ct_tensor *t, ct_tensor *c) {
  ct_storage *old = t->storage;
  t->storage = c->storage, t->device = c->device, t->offset = c->offset;
  memcpy(t->stride, c->stride, sizeof t->stride);
  c->storage = old;
  ct_zero_grad(t);
}

/* Moving keeps every tensor header (the handles optimizers and users hold) and swaps in storage
 * on the new device. Two phases: copy everything first, so a failure changes nothing. */
ct_status ct_module_to(ct_module *m, ct_device dev) {
  if (!m) return ct__error(CT_EINVAL, "ct_module_to: NULL module");
  if (!ct__check_device("ct_module_to", dev)) return ct_last_status();
  int n = ct_module_named_tensors(m, 1, NULL, 0);
  ct_named_tensor *nt = ct__calloc((size_t)n, sizeof *nt, "ct_module_to's list of tensors");
  ct_tensor **moved = nt ? ct__calloc((size_t)n, sizeof *moved, "ct_module_to's list of copies") : NULL;
  if (!moved) return free(nt), CT_ENOMEM;
  ct_module_named_tensors(m, 1, nt, n);
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int i = 0; i < n && s == CT_OK; i++) {
    ct_tensor *c = ct_to(nt[i].tensor, dev, 0);
    if (!c) s = ct__error_prefix("ct_module_to (tensor %s)", nt[i].name);
    else ct__untrack(c), moved[i] = c;
  }
  ct_no_grad_end();
  for (int i = 0; i < n; i++) {
    if (!moved[i]) continue;
    ct_tensor *t = nt[i].tensor, *c = moved[i];
    if (s == CT_OK && c != t) ct__module_swap_storage(t, c); /* c, freed below, takes t's old storage */
    ct__tensor_decref(c);
  }
  free(nt);
  free(moved);
  return s;
}

/* "3" for a square pair, "(3, 5)" otherwise. */
static const char *pair_str(const int v[2], char *buf, size_t n) {
  if (v[0] == v[1]) snprintf(buf, n, "%d", v[0]);
  else snprintf(buf, n, "(%d, %d)", v[0], v[1]);
  return buf;
}

char *ct__module_desc(const ct_module *m, char *buf, size_t n) {
  char a[32];
  int k = 0;
  switch (m->kind) {
    case CT_M_LINEAR: snprintf(buf, n, "Linear(%lld, %lld)", (long long)m->in, (long long)m->out); break;
    case CT_M_CONV2D: /* the options that differ from the defaults, as torch.nn.Conv2d's repr */
      k = snprintf(buf, n, "Conv2d(%lld, %lld, kernel_size=%d", (long long)m->in, (long long)m->out, m->kernel);
      if (k >= 0 && (size_t)k < n && (m->conv.stride[0] != 1 || m->conv.stride[1] != 1))
        k += snprintf(buf + k, n - (size_t)k, ", stride=%s", pair_str(m->conv.stride, a, sizeof a));
      if (k >= 0 && (size_t)k < n && (m->conv.padding[0] || m->conv.padding[1]))
        k += snprintf(buf + k, n - (size_t)k, ", padding=%s", pair_str(m->conv.padding, a, sizeof a));
      if (k >= 0 && (size_t)k < n && m->conv.groups > 1) k += snprintf(buf + k, n - (size_t)k, ", groups=%d", m->conv.groups);
      if (k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ")");
      break;
    case CT_M_BATCHNORM2D: snprintf(buf, n, "BatchNorm2d(%lld)", (long long)m->out); break;
    case CT_M_MAXPOOL2D: snprintf(buf, n, "MaxPool2d(kernel_size=%s)", pair_str(m->pool.kernel, a, sizeof a)); break;
    case CT_M_DROPOUT: snprintf(buf, n, "Dropout(p=%g)", m->p); break;
    case CT_M_AVGPOOL2D: snprintf(buf, n, "AvgPool2d(kernel_size=%s)", pair_str(m->pool.kernel, a, sizeof a)); break;
    case CT_M_ADAPTIVEAVGPOOL2D:
      snprintf(buf, n, "AdaptiveAvgPool2d(output_size=(%lld, %lld))", (long long)m->out_size[0], (long long)m->out_size[1]);
      break;
    case CT_M_BATCHNORM1D: snprintf(buf, n, "BatchNorm1d(%lld)", (long long)m->out); break;
    case CT_M_LAYERNORM: {
      char s[160];
      snprintf(buf, n, "LayerNorm(%s)", ct__shape_str(m->norm_ndim, m->norm_shape, s, sizeof s));
      break;
    }
    case CT_M_GELU: snprintf(buf, n, "GELU(approximate='%s')", m->approximate ? "tanh" : "none"); break;
    case CT_M_EMBEDDING: /* torch.nn.Embedding's repr */
      if (m->padding_idx >= 0)
        snprintf(buf, n, "Embedding(%lld, %lld, padding_idx=%lld)", (long long)m->in, (long long)m->out, (long long)m->padding_idx);
      else snprintf(buf, n, "Embedding(%lld, %lld)", (long long)m->in, (long long)m->out);
      break;
    case CT_M_USER: snprintf(buf, n, "%s", m->type_name); break;
    default: snprintf(buf, n, "%s%s", type_names[m->kind], m->kind == CT_M_SEQUENTIAL ? "" : "()"); break;
  }
  return buf;
}

static void print_rec(ct_module *m, FILE *f, int indent) {
  switch (m->kind) {
    case CT_M_LINEAR:
      fprintf(f, "Linear(in_features=%lld, out_features=%lld, bias=%s)", (long long)m->in, (long long)m->out,
              m->n_slots > 1 ? "True" : "False");
      break;
    case CT_M_CONV2D:
      fprintf(f, "Conv2d(%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d), padding=(%d, %d))", (long long)m->in,
              (long long)m->out, m->kernel, m->kernel, m->conv.stride[0], m->conv.stride[1], m->conv.padding[0],
              m->conv.padding[1]);
      break;
    case CT_M_BATCHNORM2D:
      fprintf(f, "BatchNorm2d(%lld, eps=%g, momentum=%g)", (long long)m->out, m->eps, m->momentum);
      break;
    case CT_M_RELU: fprintf(f, "ReLU()"); break;
    case CT_M_MAXPOOL2D:
      fprintf(f, "MaxPool2d(kernel_size=%d, stride=%d, padding=%d)", m->pool.kernel[0], m->pool.stride[0], m->pool.padding[0]);
      break;
    case CT_M_FLATTEN: fprintf(f, "Flatten(start_dim=1, end_dim=-1)"); break;
    case CT_M_DROPOUT: fprintf(f, "Dropout(p=%g, inplace=False)", m->p); break;
    case CT_M_AVGPOOL2D:
      fprintf(f, "AvgPool2d(kernel_size=%d, stride=%d, padding=%d)", m->pool.kernel[0], m->pool.stride[0], m->pool.padding[0]);
      break;
    case CT_M_BATCHNORM1D:
      fprintf(f, "BatchNorm1d(%lld, eps=%g, momentum=%g, affine=True, track_running_stats=True)", (long long)m->out, m->eps,
              m->momentum);
      break;
    case CT_M_LAYERNORM: {
      char s[160];
      fprintf(f, "LayerNorm(%s, eps=%g, elementwise_affine=%s)", ct__shape_str(m->norm_ndim, m->norm_shape, s, sizeof s), m->eps,
              m->n_slots ? "True" : "False");
      break;
    }
    case CT_M_SEQUENTIAL:
    case CT_M_USER: /* torch.nn.Module.__repr__: the type, then each child as "(name): repr" */
      if (!m->n_children) {
        fprintf(f, "%s()", ct_module_type(m));
        break;
      }
      fprintf(f, "%s(\n", ct_module_type(m));
      for (int i = 0; i < m->n_children; i++) {
        fprintf(f, "%*s(%s): ", indent + 2, "", m->child_name[i]);
        print_rec(m->children[i], f, indent + 2);
        fprintf(f, "\n");
      }
      fprintf(f, "%*s)", indent, "");
      break;
    default: {
      char d[160];
      fprintf(f, "%s", ct__module_desc(m, d, sizeof d));
      break;
    }
  }
}

void ct_module_print(ct_module *m, FILE *f) {
  if (!m || !f) return (void)ct__null_status("ct_module_print", !m ? "m" : "f");
  print_rec(m, f, 0);
  fprintf(f, "\n");
}
