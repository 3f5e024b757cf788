/* src/monitor/snapshot.c: one reading of every device (ct_monitor_snapshot_new), the data every
 * renderer and `cuttle smi` work from. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "monitor/monitor_internal.h"

/* The process section: its allocator view (in-process, or the file it published) beside the
 * driver's figure for the same device. */
static void read_proc(int pid, ct_monitor_snapshot *s) {
  ct_monitor_proc *p = &s->proc;
  p->pid = pid;
  if (pid == (int)getpid()) {
    ct__stats_self(p);
    p->stats_found = 1;
  } else {
    p->stats_found = ct__stats_read(pid, p);
  }
  /* Without stats, still show the driver's side: the CPU and every GPU the process is on. */
  if (!p->stats_found) {
    p->ndevices = 0;
    ct_monitor_proc_device *d = &p->devices[p->ndevices++];
    ct_device_str(CT_DEVICE_CPU, d->device, sizeof d->device);
    d->allocated = d->reserved = d->peak_allocated = -1;
    for (int g = 0; g < s->ngpus && p->ndevices < CT_MONITOR_MAX_PROC_DEVICES; g++) {
      if (s->gpus[g].cuda_index < 0) continue;
      for (int k = 0; k < s->gpus[g].process_count; k++) {
        if ((int)s->gpus[g].processes[k].pid != pid) continue;
        d = &p->devices[p->ndevices++];
        ct_device_str(CT_DEVICE_CUDA(s->gpus[g].cuda_index), d->device, sizeof d->device);
        d->allocated = d->reserved = d->peak_allocated = -1;
        break;
      }
    }
  }
  for (int i = 0; i < p->ndevices; i++) {
    ct_monitor_proc_device *d = &p->devices[i];
    d->driver_used = -1;
    ct_device dev;
    if (ct_device_parse(d->device, &dev) != CT_OK) {
      ct_clear_error(); /* a row this version cannot name has no driver figure */
    } else if (dev.kind == CT_CPU) {
      d->driver_used = ct__proc_rss("/proc", pid);
    } else if (dev.kind == CT_CUDA) { /* NVML, the driver's view, knows only NVIDIA GPUs */
      int idx = dev.index;
      /* The publishing process's cuda:N is this snapshot's cuda:N only when both see the same
       * CUDA_VISIBLE_DEVICES; smi is normally run from the same environment. */
      for (int g = 0; g < s->ngpus; g++) {
        if (s->gpus[g].cuda_index != idx) continue;
        for (int k = 0; k < s->gpus[g].process_count; k++)
          if ((int)s->gpus[g].processes[k].pid == pid) d->driver_used = s->gpus[g].processes[k].used_memory;
      }
    }
  }
}

ct_monitor_snapshot *ct_monitor_snapshot_new(const ct_monitor_options *opt) {
  ct_monitor_snapshot *s = calloc(1, sizeof *s);
  if (!s) CT_FAIL_NULL(CT_ENOMEM, "ct_monitor_snapshot_new: out of memory");
  s->time = (int64_t)time(NULL);
  s->cuda_order_exact = 1;
  ct__nvml nv;
  if (ct__nvml_open(&nv) == CT_OK) {
    if (nv.driver_version && nv.driver_version(s->driver_version, sizeof s->driver_version) != NVML_SUCCESS)
      s->driver_version[0] = 0;
    s->driver_version[sizeof s->driver_version - 1] = 0;
    char nv_path[sizeof nv.path];
    memcpy(nv_path, nv.path, sizeof nv_path);
    ct_status st = ct__nvml_read_gpus(&nv, s);
    ct__nvml_close(&nv);
    if (st != CT_OK) {
      ct_monitor_snapshot_free(s);
      return NULL;
    }
    s->driver_found = s->ngpus > 0;
    if (!s->driver_found) snprintf(s->driver_note, sizeof s->driver_note, "NVML loaded from %.200s, but it lists no GPU", nv_path);
  } else {
    /* The reason is in the last error; it belongs in the snapshot, not in the caller's error. */
    snprintf(s->driver_note, sizeof s->driver_note, "%s", ct_last_error());
    ct_clear_error();
  }
  ct__cpu_read("/proc", &s->cpu);
  if (opt && opt->pid > 0) read_proc(opt->pid, s);
  return s;
}

void ct_monitor_snapshot_free(ct_monitor_snapshot *s) {
  if (!s) return;
  for (int i = 0; i < s->ngpus; i++) free(s->gpus[i].processes);
  free(s->gpus);
  free(s);
}
