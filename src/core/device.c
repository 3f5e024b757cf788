/* src/core/device.c: the device registry. Parses and prints device names, counts devices through
 * the backends, and chooses devices (try_gpu, try_all_gpus, best). The CUDA backend is one #ifdef
 * away here and nowhere else. */
#include <stdio.h>
#include <string.h>
#include "backend/backend.h"
#include "monitor/monitor_internal.h"

const ct_backend *ct__backend(ct_device_kind kind) {
  switch (kind) {
    case CT_CPU: return &ct__cpu_backend;
#ifdef CUTTLE_WITH_CUDA
    case CT_CUDA: return &ct__cuda_backend;
#endif
    default: return NULL;
  }
}

ct_status ct_device_parse(const char *s, ct_device *out) {
  if (!s || !out) return ct__error(CT_EINVAL, "ct_device_parse: NULL argument");
  const char *rest = NULL;
  ct_device d = {CT_CPU, 0};
  if (strcmp(s, "cpu") == 0) return *out = d, CT_OK;
  if (strncmp(s, "cuda", 4) == 0) rest = s + 4;
  else if (strncmp(s, "gpu", 3) == 0) rest = s + 3;
  if (rest) {
    d.kind = CT_CUDA;
    if (*rest == 0) return *out = d, CT_OK;
    if (*rest == ':' && rest[1] >= '0' && rest[1] <= '9' && strlen(rest + 1) <= 6) {
      char *end;
      long v = strtol(rest + 1, &end, 10);
      if (*end == 0) return d.index = (int)v, *out = d, CT_OK;
    }
  }
  return ct__error(CT_EINVAL, "bad device \"%s\": use \"cpu\", \"cuda\", \"cuda:N\", \"gpu\" or \"gpu:N\"", s);
}

char *ct_device_str(ct_device d, char *buf, size_t n) {
  if (d.kind == CT_CPU) snprintf(buf, n, "cpu");
  else snprintf(buf, n, "cuda:%d", d.index);
  return buf;
}

int ct_device_eq(ct_device a, ct_device b) { return a.kind == b.kind && a.index == b.index; }

int ct_device_count(ct_device_kind kind) {
  const ct_backend *be = ct__backend(kind);
  return be ? be->device_count() : 0;
}

int ct_device_available(ct_device d) { return d.index >= 0 && d.index < ct_device_count(d.kind); }

ct_status ct_device_props_get(ct_device d, ct_device_props *out) {
  char name[32];
  if (!out) return ct__error(CT_EINVAL, "ct_device_props_get: NULL output");
  if (!ct_device_available(d))
    return ct__error(CT_EDEVICE, "device %s does not exist: this machine has %d %s device(s)",
                     ct_device_str(d, name, sizeof name), ct_device_count(d.kind), d.kind == CT_CPU ? "cpu" : "cuda");
  memset(out, 0, sizeof *out);
  out->utilization = -1;
  return ct__backend(d.kind)->device_props(d.index, out);
}

ct_device ct_try_gpu(int i) {
  if (i >= 0 && i < ct_device_count(CT_CUDA)) return CT_DEVICE_CUDA(i);
  return CT_DEVICE_CPU;
}

int ct_try_all_gpus(ct_device *out, int cap) {
  int n = ct_device_count(CT_CUDA);
  if (n == 0) {
    if (out && cap > 0) out[0] = CT_DEVICE_CPU;
    return 1;
  }
  for (int i = 0; i < n && i < cap; i++)
    if (out) out[i] = CT_DEVICE_CUDA(i);
  return n;
}

ct_device ct_device_best(ct_best_policy policy) {
  int n = ct_device_count(CT_CUDA), best = -1;
  if (n > 0) {
    ct_device_props *props = calloc((size_t)n, sizeof *props);
    if (props) {
      for (int i = 0; i < n; i++)
        if (ct_device_props_get(CT_DEVICE_CUDA(i), &props[i]) != CT_OK) props[i].free_memory = 0, props[i].utilization = -1;
      best = ct__best_index(props, n, policy);
      free(props);
    }
  }
  ct_clear_error();
  return best >= 0 ? CT_DEVICE_CUDA(best) : CT_DEVICE_CPU;
}

ct_status ct_synchronize(ct_device d) {
  char name[32];
  if (!ct_device_available(d))
    return ct__error(CT_EDEVICE, "ct_synchronize: device %s does not exist", ct_device_str(d, name, sizeof name));
  ct__ledger_sync();
  return ct__backend(d.kind)->synchronize(d.index);
}
