/* src/core/device.c: the device registry. Parses and prints device names, counts devices through
 * the backends, and chooses devices (try_gpu, try_all_gpus, best). Each backend is one registry
 * row (and one #ifdef) here and named nowhere else in the core. */
#include <stdio.h>
#include <string.h>
#include "core/backend.h"

/* The registry: one row per device kind, naming it for parsing and printing ("cpu"; "cuda" with
 * the alias "gpu"; "opencl"), with its backend when that is built in (else NULL) and whether its
 * devices are all GPUs when the backend does not say per device (device_is_gpu). Adding a backend
 * is one row here. Rows are in the order try_gpu numbers GPUs. */
typedef struct {
  ct_device_kind kind;
  const char *name, *alias;
  const ct_backend *backend;
  int all_gpus;
} registry_row;

static const registry_row registry[] = {
    {CT_CPU, "cpu", NULL, &ct__cpu_backend, 0},
#ifdef CUTTLE_WITH_CUDA
    {CT_CUDA, "cuda", "gpu", &ct__cuda_backend, 1},
#else
    {CT_CUDA, "cuda", "gpu", NULL, 1},
#endif
#ifdef CUTTLE_WITH_OPENCL
    {CT_OPENCL, "opencl", NULL, &ct__opencl_backend, 0},
#else
    {CT_OPENCL, "opencl", NULL, NULL, 0},
#endif
};
#define NROWS ((int)(sizeof registry / sizeof registry[0]))

static const registry_row *row_of(ct_device_kind kind) {
  for (int i = 0; i < NROWS; i++)
    if (registry[i].kind == kind) return &registry[i];
  return NULL;
}

const ct_backend *ct__backend(ct_device_kind kind) {
  const registry_row *r = row_of(kind);
  return r ? r->backend : NULL;
}

/* name is s's prefix up to ':' or its end; 1 when it equals word. */
static int names(const char *s, size_t len, const char *word) { return word && strlen(word) == len && strncmp(s, word, len) == 0; }

ct_status ct_device_parse(const char *s, ct_device *out) {
  if (!s || !out) return ct__error(CT_EINVAL, "ct_device_parse: NULL argument");
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  for (int i = 0; i < NROWS; i++) {
    const registry_row *r = &registry[i];
    if (!names(s, len, r->name) && !names(s, len, r->alias)) continue;
    ct_device d = {r->kind, 0};
    if (!colon) return *out = d, CT_OK;
    if (r->kind != CT_CPU && colon[1] >= '0' && colon[1] <= '9' && strlen(colon + 1) <= 6) {
      char *end;
      long v = strtol(colon + 1, &end, 10);
      if (*end == 0) return d.index = (int)v, *out = d, CT_OK;
    }
    break;
  }
  char forms[256];
  size_t k = (size_t)snprintf(forms, sizeof forms, "\"cpu\"");
  for (int i = 1; i < NROWS && k < sizeof forms; i++)
    for (int a = 0; a < 2 && k < sizeof forms; a++) {
      const char *n = a ? registry[i].alias : registry[i].name;
      if (n) k += (size_t)snprintf(forms + k, sizeof forms - k, ", \"%s\", \"%s:N\"", n, n);
    }
  return ct__error(CT_EINVAL, "ct_device_parse: bad device \"%s\": use %s", s, forms);
}

char *ct_device_str(ct_device d, char *buf, size_t n) {
  if (!buf) return ct__error(CT_EINVAL, "ct_device_str: buf is NULL (pass a buffer of 32 bytes)"), NULL;
  const registry_row *r = row_of(d.kind);
  if (d.kind == CT_CPU && d.index == 0) snprintf(buf, n, "cpu"); /* the one CPU prints as it is parsed */
  else if (r) snprintf(buf, n, "%s:%d", r->name, d.index);
  else snprintf(buf, n, "device%d:%d", (int)d.kind, d.index);
  return buf;
}

int ct_device_eq(ct_device a, ct_device b) { return a.kind == b.kind && a.index == b.index; }

int ct_device_count(ct_device_kind kind) {
  if ((unsigned)kind >= CT_DEVICE_KIND_COUNT)
    return ct__error(CT_EINVAL, "ct_device_count: invalid device kind %d (use a ct_device_kind value)", (int)kind), 0;
  const ct_backend *be = ct__backend(kind);
  return be ? be->device_count() : 0;
}

int ct_device_available(ct_device d) {
  return (unsigned)d.kind < CT_DEVICE_KIND_COUNT && d.index >= 0 && d.index < ct_device_count(d.kind);
}

ct_status ct_device_props_get(ct_device d, ct_device_props *out) {
  char name[32];
  if (!out) return ct__error(CT_EINVAL, "ct_device_props_get: NULL output");
  if (!ct_device_available(d))
    return ct__error(CT_EDEVICE, "ct_device_props_get: device %s does not exist: this machine has %d %s device(s)",
                     ct_device_str(d, name, sizeof name), ct_device_count(d.kind), row_of(d.kind) ? row_of(d.kind)->name : "unknown");
  memset(out, 0, sizeof *out);
  out->utilization = -1;
  return ct__backend(d.kind)->device_props(d.index, out);
}

/* Every GPU in try_gpu's order into out (at most cap), returning how many there are. */
static int list_gpus(ct_device *out, int cap) {
  int k = 0;
  for (int i = 0; i < NROWS; i++) {
    const registry_row *r = &registry[i];
    if (!r->backend || r->kind == CT_CPU) continue;
    int n = r->backend->device_count();
    for (int j = 0; j < n; j++) {
      int gpu = r->backend->device_is_gpu ? r->backend->device_is_gpu(j) : r->all_gpus;
      if (!gpu) continue;
      if (out && k < cap) out[k] = (ct_device){r->kind, j};
      k++;
    }
  }
  return k;
}

ct_device ct_try_gpu(int i) {
  ct_device all[64];
  int n = list_gpus(all, 64);
  return i >= 0 && i < n && i < 64 ? all[i] : CT_DEVICE_CPU;
}

int ct_try_all_gpus(ct_device *out, int cap) {
  int n = list_gpus(out, cap);
  if (n == 0) {
    if (out && cap > 0) out[0] = CT_DEVICE_CPU;
    return 1;
  }
  return n;
}

ct_device ct_device_best(ct_best_policy policy) {
  ct_device all[64];
  int n = list_gpus(all, 64), best = -1;
  if (n > 64) n = 64;
  if (n > 0) {
    ct_device_props *props = ct__calloc((size_t)n, sizeof *props, "the list of device properties");
    if (props) {
      for (int i = 0; i < n; i++)
        if (ct_device_props_get(all[i], &props[i]) != CT_OK) props[i].free_memory = 0, props[i].utilization = -1;
      best = ct__best_index(props, n, policy);
      free(props);
    }
  }
  ct_clear_error();
  return best >= 0 ? all[best] : CT_DEVICE_CPU;
}

ct_status ct_synchronize(ct_device d) {
  char name[32];
  if (!ct_device_available(d))
    return ct__error(CT_EDEVICE, "ct_synchronize: device %s does not exist", ct_device_str(d, name, sizeof name));
  if (ct__capture_guard("ct_synchronize", d) != CT_OK) return ct_last_status();
  ct__ledger_sync();
  return ct__backend(d.kind)->synchronize(d.index);
}
