/* src/monitor/render_text.c: the table `cuttle smi` prints, close to nvidia-smi's so that a reader
 * of one can read the other: memory in MiB, power in W, N/A where the driver cannot say. */
#include <stdio.h>
#include <time.h>

#include "monitor/monitor_internal.h"

/* Each formatter writes into a caller's buffer so that a row is one printf. */
static const char *mib(int64_t bytes, char *buf, size_t n) {
  if (bytes < 0)
    snprintf(buf, n, "N/A");
  else
    snprintf(buf, n, "%lldMiB", (long long)(bytes >> 20));
  return buf;
}
static const char *intu(int v, const char *unit, char *buf, size_t n) {
  if (v < 0)
    snprintf(buf, n, "N/A");
  else
    snprintf(buf, n, "%d%s", v, unit);
  return buf;
}
static const char *watts(int64_t mw, char *buf, size_t n) {
  if (mw < 0)
    snprintf(buf, n, "N/A");
  else
    snprintf(buf, n, "%lldW", (long long)((mw + 500) / 1000));
  return buf;
}

static void gpu_rows(ct__sbuf *b, const ct_monitor_gpu *g) {
  char cuda[16], t[16], pw[32], pl[32], mu[32], mt[32], ug[16], um[16], cs[16], cm[16];
  if (g->cuda_index >= 0)
    snprintf(cuda, sizeof cuda, "%d", g->cuda_index);
  else
    snprintf(cuda, sizeof cuda, "-");
  ct__sb_printf(b, "%-4s %-4d %-30s %-17s %s\n", cuda, g->nvml_index, g->name[0] ? g->name : "N/A",
                g->pci_bus_id[0] ? g->pci_bus_id : "N/A", g->uuid[0] ? g->uuid : "N/A");
  ct__sb_printf(b, "          Temp %-4s  Power %5s / %-5s  Memory %9s / %-9s  GPU %-4s  Mem %-4s  SM %-7s  Mem %s\n",
                intu(g->temperature_c, "C", t, sizeof t), watts(g->power_mw, pw, sizeof pw),
                watts(g->power_limit_mw, pl, sizeof pl), mib(g->memory_used, mu, sizeof mu),
                mib(g->memory_total, mt, sizeof mt), intu(g->utilization_gpu, "%", ug, sizeof ug),
                intu(g->utilization_memory, "%", um, sizeof um), intu(g->clock_sm_mhz, "MHz", cs, sizeof cs),
                intu(g->clock_mem_mhz, "MHz", cm, sizeof cm));
  if (g->process_count < 0) {
    ct__sb_printf(b, "          processes: N/A\n");
    return;
  }
  if (g->process_count == 0) ct__sb_printf(b, "          processes: none\n");
  for (int k = 0; k < g->process_count; k++) {
    const ct_monitor_process *p = &g->processes[k];
    ct__sb_printf(b, "          pid %-8u %c  %-24s %s\n", p->pid, p->type, p->name[0] ? p->name : "?",
                  mib(p->used_memory, mu, sizeof mu));
  }
}

static void cpu_row(ct__sbuf *b, const ct_monitor_cpu *c) {
  char mu[32], mt[32], cores[16];
  ct__sb_printf(b, "CPU  %s, %s cores, load ", c->model[0] ? c->model : "N/A", intu(c->cores, "", cores, sizeof cores));
  if (c->load[0] < 0)
    ct__sb_printf(b, "N/A");
  else
    ct__sb_printf(b, "%.2f %.2f %.2f", c->load[0], c->load[1], c->load[2]);
  ct__sb_printf(b, ", memory %s / %s\n", mib(c->memory_used, mu, sizeof mu), mib(c->memory_total, mt, sizeof mt));
}

static void proc_rows(ct__sbuf *b, const ct_monitor_proc *p) {
  char a[32], r[32], pk[32], d[32];
  ct__sb_printf(b, "\nProcess %d: ", p->pid);
  if (p->stats_found)
    ct__sb_printf(b, "cuttle allocator stats from %.1f s ago\n", p->stats_age_s);
  else
    ct__sb_printf(b, "no cuttle stats (the process has not called ct_monitor_publish): N/A\n");
  ct__sb_printf(b, "  %-10s %14s %14s %14s %14s\n", "device", "allocated", "reserved", "peak", "driver sees");
  for (int i = 0; i < p->ndevices; i++) {
    const ct_monitor_proc_device *x = &p->devices[i];
    ct__sb_printf(b, "  %-10s %14s %14s %14s %14s\n", x->device, mib(x->allocated, a, sizeof a), mib(x->reserved, r, sizeof r),
                  mib(x->peak_allocated, pk, sizeof pk), mib(x->driver_used, d, sizeof d));
  }
}

char *ct__render_text(const ct_monitor_snapshot *s) {
  ct__sbuf b = {0};
  char when[64];
  time_t t = (time_t)s->time;
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
  ct__sb_printf(&b, "cuttle smi  %s", when);
  if (s->driver_version[0]) ct__sb_printf(&b, "  driver %s", s->driver_version);
  ct__sb_printf(&b, "\n");
  if (!s->driver_found) {
    ct__sb_printf(&b, "No NVIDIA driver found (%s)\n", s->driver_note);
  } else {
    ct__sb_printf(&b, "%-4s %-4s %-30s %-17s %s\n", "CUDA", "NVML", "Name", "Bus-Id", "UUID");
    for (int i = 0; i < s->ngpus; i++) gpu_rows(&b, &s->gpus[i]);
    if (!s->cuda_order_exact)
      ct__sb_printf(&b, "(CUDA indices assume PCI bus order; set CUDA_DEVICE_ORDER=PCI_BUS_ID to make CUDA agree)\n");
  }
  cpu_row(&b, &s->cpu);
  if (s->proc.pid > 0) proc_rows(&b, &s->proc);
  return ct__sb_finish(&b);
}
