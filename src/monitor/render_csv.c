/* src/monitor/render_csv.c: the snapshot as CSV (`cuttle smi --csv`): one header, then a row per
 * GPU, one for the CPU, and one per device of the --pid process. Every row has every column, and
 * a column that does not apply to a row's kind, or that the driver cannot give, reads N/A. */
#include <stdio.h>

#include "monitor/monitor_internal.h"

static void num(ct__sbuf *b, int64_t v) {
  if (v < 0)
    ct__sb_printf(b, ",N/A");
  else
    ct__sb_printf(b, ",%lld", (long long)v);
}
static void str(ct__sbuf *b, const char *v) {
  ct__sb_printf(b, ",");
  ct__sb_csv_str(b, v[0] ? v : "N/A");
}
static void na(ct__sbuf *b, int n) {
  for (int i = 0; i < n; i++) ct__sb_printf(b, ",N/A");
}

char *ct__render_csv(const ct_monitor_snapshot *s) {
  ct__sbuf b = {0};
  ct__sb_printf(&b, "kind,cuda_index,nvml_index,name,pci_bus_id,uuid,temperature_c,power_mw,power_limit_mw,"
                    "memory_used_bytes,memory_total_bytes,utilization_gpu_pct,utilization_memory_pct,clock_sm_mhz,"
                    "clock_mem_mhz,processes,cores,load1,allocated_bytes,reserved_bytes\n");
  for (int i = 0; i < s->ngpus; i++) {
    const ct_monitor_gpu *g = &s->gpus[i];
    ct__sb_printf(&b, "gpu");
    num(&b, g->cuda_index);
    num(&b, g->nvml_index);
    str(&b, g->name);
    str(&b, g->pci_bus_id);
    str(&b, g->uuid);
    num(&b, g->temperature_c);
    num(&b, g->power_mw);
    num(&b, g->power_limit_mw);
    num(&b, g->memory_used);
    num(&b, g->memory_total);
    num(&b, g->utilization_gpu);
    num(&b, g->utilization_memory);
    num(&b, g->clock_sm_mhz);
    num(&b, g->clock_mem_mhz);
    /* Processes as "pid:bytes" separated by ';' so the row stays one field per column. */
    if (g->process_count < 0) {
      ct__sb_printf(&b, ",N/A");
    } else {
      ct__sb_printf(&b, ",");
      for (int k = 0; k < g->process_count; k++) {
        if (g->processes[k].used_memory < 0)
          ct__sb_printf(&b, "%s%u:N/A", k ? ";" : "", g->processes[k].pid);
        else
          ct__sb_printf(&b, "%s%u:%lld", k ? ";" : "", g->processes[k].pid, (long long)g->processes[k].used_memory);
      }
    }
    na(&b, 4);
    ct__sb_printf(&b, "\n");
  }
  ct__sb_printf(&b, "cpu");
  na(&b, 2);
  str(&b, s->cpu.model);
  na(&b, 5);
  num(&b, s->cpu.memory_used);
  num(&b, s->cpu.memory_total);
  na(&b, 5);
  num(&b, s->cpu.cores);
  if (s->cpu.load[0] < 0)
    ct__sb_printf(&b, ",N/A");
  else
    ct__sb_printf(&b, ",%.2f", s->cpu.load[0]);
  na(&b, 2);
  ct__sb_printf(&b, "\n");
  for (int i = 0; s->proc.pid > 0 && i < s->proc.ndevices; i++) {
    const ct_monitor_proc_device *d = &s->proc.devices[i];
    ct_device dev;
    int idx = -1; /* the cuda_index column: only a CUDA device has one */
    if (ct_device_parse(d->device, &dev) != CT_OK) ct_clear_error();
    else if (dev.kind == CT_CUDA) idx = dev.index;
    ct__sb_printf(&b, "process");
    num(&b, idx);
    ct__sb_printf(&b, ",N/A,%s", d->device); /* nvml_index, name = the device */
    na(&b, 5);
    num(&b, d->driver_used); /* memory_used_bytes: what the driver (or the OS) attributes to it */
    na(&b, 5);
    ct__sb_printf(&b, ",%d", s->proc.pid); /* processes: the pid */
    na(&b, 2);
    num(&b, d->allocated);
    num(&b, d->reserved);
    ct__sb_printf(&b, "\n");
  }
  return ct__sb_finish(&b);
}
