/* src/monitor/monitor_internal.h: what the monitor's files share, and the hooks the rest of the
 * library (device registry, allocators, CUDA backend) calls or registers. Not installed. */
#ifndef CUTTLE_MONITOR_INTERNAL_H
#define CUTTLE_MONITOR_INTERNAL_H

#include <stddef.h>
#include "core/internal.h"
#include "cuttle/monitor.h"
#include "monitor/nvml_api.h"

#include "monitor/hooks.h"

/* ---- pure helpers (unit-tested directly) */

/* What identifies an NVML device for the CUDA mapping. */
typedef struct {
  char pci_bus_id[32];
  char uuid[96];
} ct__nvml_ident;

/* Map CUDA ordinals to NVML devices. devs[0..n) are NVML's devices in NVML order; env is the value
 * of CUDA_VISIBLE_DEVICES (NULL when unset). The base order is PCI bus id order (see monitor.h);
 * env entries are base-order integers, or "GPU-..." UUIDs and unique prefixes of them; the list
 * stops at the first entry that is malformed, out of range, ambiguous, a repeat, or a MIG device.
 * Writes cuda_to_nvml[0..m) (cap n) and returns m, the number of CUDA-visible devices. */
int ct__cuda_visible_map(const ct__nvml_ident *devs, int n, const char *env, int *cuda_to_nvml);

/* Parse "dddd:bb:dd.f" (any domain width, hex) into one comparable number; -1 when malformed. */
long long ct__pci_key(const char *bus_id);

/* Read the CPU row from proc_root ("/proc" normally; a fixture folder in tests). Fields it cannot
 * read are -1 / "". */
void ct__cpu_read(const char *proc_root, ct_monitor_cpu *out);
/* VmRSS of pid in bytes from proc_root/<pid>/status, -1 when unreadable. */
int64_t ct__proc_rss(const char *proc_root, int pid);
/* The comm name of pid into buf ("" when unreadable). */
void ct__proc_comm(const char *proc_root, int pid, char *buf, size_t n);

/* Read the stats file of pid into *out (devices with allocated/reserved; driver_used left -1).
 * Looks in $XDG_RUNTIME_DIR, then /tmp. Returns 1 when found and valid, else 0. */
int ct__stats_read(int pid, ct_monitor_proc *out);
/* This process's allocator view of each device (CPU first, then cuda:0... while known). */
void ct__stats_self(ct_monitor_proc *out);

/* Fill the GPUs of snap from an open NVML (used by the snapshot). Returns CT_OK or CT_ENOMEM. */
ct_status ct__nvml_read_gpus(const ct__nvml *nv, ct_monitor_snapshot *snap);

/* ---- a growing string for the renderers */
typedef struct {
  char *buf;
  size_t len, cap;
  int failed; /* an allocation failed; the result is discarded */
} ct__sbuf;
void ct__sb_printf(ct__sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a JSON string literal (quotes and escapes included). */
void ct__sb_json_str(ct__sbuf *b, const char *s);
/* Append s as one CSV field (quoted when it holds a comma, quote or newline). */
void ct__sb_csv_str(ct__sbuf *b, const char *s);
/* Hand the string to the caller (NULL with CT_ENOMEM when an append failed). */
char *ct__sb_finish(ct__sbuf *b);

char *ct__render_text(const ct_monitor_snapshot *s);
char *ct__render_json(const ct_monitor_snapshot *s);
char *ct__render_csv(const ct_monitor_snapshot *s);

#endif
