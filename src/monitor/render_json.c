/* src/monitor/render_json.c: the snapshot as one JSON object for scripts (`cuttle smi --json`).
 * N/A is null; units are in the key names' documentation in docs/smi.md: bytes, milliwatts, MHz,
 * percent, degrees Celsius. */
#include <stdio.h>

#include "monitor/monitor_internal.h"

static void num(ct__sbuf *b, const char *key, int64_t v, int comma) {
  if (v < 0)
    ct__sb_printf(b, "\"%s\":null%s", key, comma ? "," : "");
  else
    ct__sb_printf(b, "\"%s\":%lld%s", key, (long long)v, comma ? "," : "");
}

static void str(ct__sbuf *b, const char *key, const char *v) {
  ct__sb_printf(b, "\"%s\":", key);
  ct__sb_json_str(b, v);
  ct__sb_printf(b, ",");
}

static void gpu(ct__sbuf *b, const ct_monitor_gpu *g) {
  ct__sb_printf(b, "{");
  num(b, "cuda_index", g->cuda_index, 1);
  num(b, "nvml_index", g->nvml_index, 1);
  str(b, "name", g->name);
  str(b, "pci_bus_id", g->pci_bus_id);
  str(b, "uuid", g->uuid);
  num(b, "temperature_c", g->temperature_c, 1);
  num(b, "power_mw", g->power_mw, 1);
  num(b, "power_limit_mw", g->power_limit_mw, 1);
  num(b, "memory_used_bytes", g->memory_used, 1);
  num(b, "memory_total_bytes", g->memory_total, 1);
  num(b, "utilization_gpu_pct", g->utilization_gpu, 1);
  num(b, "utilization_memory_pct", g->utilization_memory, 1);
  num(b, "clock_sm_mhz", g->clock_sm_mhz, 1);
  num(b, "clock_mem_mhz", g->clock_mem_mhz, 1);
  if (g->process_count < 0) {
    ct__sb_printf(b, "\"processes\":null}");
    return;
  }
  ct__sb_printf(b, "\"processes\":[");
  for (int k = 0; k < g->process_count; k++) {
    const ct_monitor_process *p = &g->processes[k];
    ct__sb_printf(b, "%s{\"pid\":%u,\"type\":\"%c\",", k ? "," : "", p->pid, p->type);
    str(b, "name", p->name);
    num(b, "used_memory_bytes", p->used_memory, 0);
    ct__sb_printf(b, "}");
  }
  ct__sb_printf(b, "]}");
}

static void load(ct__sbuf *b, double v, const char *sep) {
  if (v < 0)
    ct__sb_printf(b, "null%s", sep);
  else
    ct__sb_printf(b, "%.2f%s", v, sep);
}

char *ct__render_json(const ct_monitor_snapshot *s) {
  ct__sbuf b = {0};
  ct__sb_printf(&b, "{\"time\":%lld,\"driver\":{\"found\":%s,", (long long)s->time, s->driver_found ? "true" : "false");
  str(&b, "version", s->driver_version);
  ct__sb_printf(&b, "\"note\":");
  ct__sb_json_str(&b, s->driver_note);
  ct__sb_printf(&b, ",\"cuda_order_exact\":%s},\"gpus\":[", s->cuda_order_exact ? "true" : "false");
  for (int i = 0; i < s->ngpus; i++) {
    if (i) ct__sb_printf(&b, ",");
    gpu(&b, &s->gpus[i]);
  }
  ct__sb_printf(&b, "],\"cpu\":{");
  str(&b, "model", s->cpu.model);
  num(&b, "cores", s->cpu.cores, 1);
  ct__sb_printf(&b, "\"load\":[");
  load(&b, s->cpu.load[0], ",");
  load(&b, s->cpu.load[1], ",");
  load(&b, s->cpu.load[2], "],");
  num(&b, "memory_used_bytes", s->cpu.memory_used, 1);
  num(&b, "memory_total_bytes", s->cpu.memory_total, 0);
  ct__sb_printf(&b, "}");
  if (s->proc.pid > 0) {
    ct__sb_printf(&b, ",\"process\":{\"pid\":%d,\"stats_found\":%s,\"stats_age_s\":%.3f,\"devices\":[", s->proc.pid,
                  s->proc.stats_found ? "true" : "false", s->proc.stats_age_s);
    for (int i = 0; i < s->proc.ndevices; i++) {
      const ct_monitor_proc_device *d = &s->proc.devices[i];
      ct__sb_printf(&b, "%s{", i ? "," : "");
      str(&b, "device", d->device);
      num(&b, "allocated_bytes", d->allocated, 1);
      num(&b, "reserved_bytes", d->reserved, 1);
      num(&b, "peak_allocated_bytes", d->peak_allocated, 1);
      num(&b, "driver_used_bytes", d->driver_used, 0);
      ct__sb_printf(&b, "}");
    }
    ct__sb_printf(&b, "]}");
  }
  ct__sb_printf(&b, "}\n");
  return ct__sb_finish(&b);
}
