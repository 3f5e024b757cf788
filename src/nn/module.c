/* src/nn/module.c: what every module shares: freeing, train/eval, moving to a device, named
 * tensors (state_dict names), parameter counting and printing. */
#include <string.h>
#include "nn/module.h"

static const char *const type_names[] = {"Linear", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Flatten", "Dropout", "Sequential"};

ct_module *ct__module_alloc(ct_module_kind kind) {
  ct_module *m = ct__calloc(1, sizeof *m, "a module");
  if (!m) return NULL;
  m->kind = kind;
  m->training = 1;
  return m;
}

void ct__module_add(ct_module *m, const char *name, ct_tensor *t, int is_buffer) {
  CT_ASSERT(m->n_slots < CT_MODULE_SLOTS);
  ct__untrack(t);
  m->slot_name[m->n_slots] = name;
  m->slot[m->n_slots] = t;
  m->slot_is_buffer[m->n_slots] = is_buffer;
  m->n_slots++;
}

void ct_module_free(ct_module *m) {
  if (!m) return;
  for (int i = 0; i < m->n_slots; i++) ct__tensor_decref(m->slot[i]);
  for (int i = 0; i < m->n_children; i++) ct_module_free(m->children[i]);
  free(m->children);
  free(m);
}

void ct_module_train(ct_module *m, int training) {
  if (!m) return (void)ct__null_status("ct_module_train", "m");
  m->training = training != 0;
  for (int i = 0; i < m->n_children; i++) ct_module_train(m->children[i], training);
}

const char *ct_module_type(const ct_module *m) {
  if (!m) return ct__null_status("ct_module_type", "m"), "?";
  return type_names[m->kind];
}

static int collect(ct_module *m, const char *prefix, int with_buffers, ct_named_tensor *out, int cap, int k) {
  for (int i = 0; i < m->n_slots; i++) {
    if (m->slot_is_buffer[i] && !with_buffers) continue;
    if (out && k < cap) {
      snprintf(out[k].name, sizeof out[k].name, "%s%s", prefix, m->slot_name[i]);
      out[k].tensor = m->slot[i];
      out[k].is_buffer = m->slot_is_buffer[i];
    }
    k++;
  }
  for (int c = 0; c < m->n_children; c++) {
    char p[128];
    snprintf(p, sizeof p, "%s%d.", prefix, c);
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
    case CT_M_DROPOUT: fprintf(f, "Dropout(p=%g)", m->p); break;
    case CT_M_SEQUENTIAL:
      fprintf(f, "Sequential(\n");
      for (int i = 0; i < m->n_children; i++) {
        fprintf(f, "%*s(%d): ", indent + 2, "", i);
        print_rec(m->children[i], f, indent + 2);
        fprintf(f, "\n");
      }
      fprintf(f, "%*s)", indent, "");
      break;
  }
}

void ct_module_print(ct_module *m, FILE *f) {
  if (!m || !f) return (void)ct__null_status("ct_module_print", !m ? "m" : "f");
  print_rec(m, f, 0);
  fprintf(f, "\n");
}
