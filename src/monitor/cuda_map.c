/* src/monitor/cuda_map.c: which NVML device each CUDA ordinal is.
 *
 * NVML numbers every GPU in the machine and ignores CUDA_VISIBLE_DEVICES; CUDA numbers only the
 * visible ones, in the order that variable lists them. The PCI bus id is the one name both share.
 * Without the CUDA runtime we cannot know CUDA's default "fastest first" order, so the base order
 * is PCI bus order (exact under CUDA_DEVICE_ORDER=PCI_BUS_ID, and on machines with one GPU model). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "monitor/monitor_internal.h"

/* Hex digits up to a separator (or the end when sep is 0); -1 when there are none or too many.
 * Hand-written because scanf's %x would also take a "0x" prefix and skip spaces. */
static long long hex_part(const char **p, char sep, int maxdigits) {
  long long v = 0;
  int n = 0;
  for (; isxdigit((unsigned char)**p); (*p)++, n++) {
    char c = (char)tolower((unsigned char)**p);
    v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (n == 0 || n > maxdigits || **p != sep) return -1;
  if (sep) (*p)++;
  return v;
}

long long ct__pci_key(const char *s) {
  if (!s) return -1;
  long long dom = hex_part(&s, ':', 8), bus = hex_part(&s, ':', 2), dev = hex_part(&s, '.', 2), fn = hex_part(&s, 0, 1);
  if (dom < 0 || bus < 0 || dev < 0 || fn < 0 || dev > 0x1f || fn > 7) return -1;
  return (dom << 16) | (bus << 8) | (dev << 3) | fn;
}

/* NVML indices in PCI bus order (devices with an unreadable bus id last, in NVML order). */
static void pci_order(const ct__nvml_ident *devs, int n, int *order) {
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) { /* insertion sort: n is a handful, and it is stable */
    int v = order[i], j = i - 1;
    long long kv = ct__pci_key(devs[v].pci_bus_id);
    if (kv < 0) kv = 0x7fffffffffffffffLL;
    while (j >= 0) {
      long long kj = ct__pci_key(devs[order[j]].pci_bus_id);
      if (kj < 0) kj = 0x7fffffffffffffffLL;
      if (kj <= kv) break;
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = v;
  }
}

/* One entry of CUDA_VISIBLE_DEVICES, trimmed, to an NVML index; -1 when invalid. */
static int resolve_entry(const char *e, size_t len, const ct__nvml_ident *devs, int n, const int *order) {
  while (len && isspace((unsigned char)*e)) e++, len--;
  while (len && isspace((unsigned char)e[len - 1])) len--;
  if (len == 0) return -1;
  if (isdigit((unsigned char)e[0])) {
    long v = 0;
    for (size_t i = 0; i < len; i++) {
      if (!isdigit((unsigned char)e[i])) return -1;
      v = v * 10 + (e[i] - '0');
      if (v >= n) return -1;
    }
    return order[v];
  }
  /* A UUID or a unique prefix of one; CUDA wants the "GPU-" prefix. MIG instances ("MIG-...") are
   * not GPUs NVML lists at the top level, so they end the list here. */
  if (len <= 4 || strncasecmp(e, "GPU-", 4) != 0) return -1;
  int found = -1;
  for (int i = 0; i < n; i++) {
    if (strlen(devs[i].uuid) >= len && strncasecmp(devs[i].uuid, e, len) == 0) {
      if (found >= 0) return -1; /* ambiguous prefix */
      found = i;
    }
  }
  return found;
}

int ct__cuda_visible_map(const ct__nvml_ident *devs, int n, const char *env, int *cuda_to_nvml) {
  if (n <= 0) return 0;
  int *order = malloc(n * sizeof *order);
  if (!order) return 0;
  pci_order(devs, n, order);
  int m = 0;
  if (!env) {
    memcpy(cuda_to_nvml, order, n * sizeof *order);
    m = n;
  } else {
    const char *p = env;
    while (m < n) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      int idx = resolve_entry(p, len, devs, n, order);
      if (idx < 0) break; /* CUDA ignores everything from the first invalid entry on */
      int repeat = 0;
      for (int k = 0; k < m; k++) repeat |= cuda_to_nvml[k] == idx;
      if (repeat) break;
      cuda_to_nvml[m++] = idx;
      if (!comma) break;
      p = comma + 1;
    }
  }
  free(order);
  return m;
}
