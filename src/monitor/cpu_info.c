/* src/monitor/cpu_info.c: the CPU row (model, cores, load, memory) and per-process figures, read
 * from /proc. The root is a parameter so that tests can read fixture files. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor/monitor_internal.h"

/* The value after "key<spaces/tabs>:" on a line of a "key: value" file such as /proc/cpuinfo. */
static const char *value_of(const char *line, const char *key) {
  size_t k = strlen(key);
  if (strncmp(line, key, k) != 0) return NULL;
  const char *p = line + k;
  while (*p == ' ' || *p == '\t') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

static void read_model(const char *root, char *model, size_t n) {
  char path[512], line[512];
  snprintf(path, sizeof path, "%s/cpuinfo", root);
  FILE *f = fopen(path, "r");
  model[0] = 0;
  if (!f) return;
  /* x86 says "model name"; some ARM kernels only "Hardware" or "Processor"; POWER "cpu". */
  static const char *const keys[] = {"model name", "Hardware", "Processor", "cpu model", "cpu"};
  int rank = 99;
  while (fgets(line, sizeof line, f)) {
    for (int k = 0; k < 5 && k < rank; k++) {
      const char *v = value_of(line, keys[k]);
      if (v && *v && *v != '\n') {
        snprintf(model, n, "%s", v);
        model[strcspn(model, "\n")] = 0;
        rank = k;
      }
    }
    if (rank == 0) break;
  }
  fclose(f);
}

/* A "Key:   123 kB" figure of /proc/meminfo or /proc/<pid>/status in bytes, -1 when absent. */
static int64_t kb_field(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  while (fgets(line, sizeof line, f)) {
    const char *p = value_of(line, key);
    if (p) {
      v = strtoll(p, NULL, 10) * 1024;
      break;
    }
  }
  fclose(f);
  return v;
}

void ct__cpu_read(const char *root, ct_monitor_cpu *out) {
  memset(out, 0, sizeof *out);
  if (!root) root = "/proc";
  read_model(root, out->model, sizeof out->model);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  out->cores = cores > 0 ? (int)cores : -1;
  char path[512];
  snprintf(path, sizeof path, "%s/loadavg", root);
  out->load[0] = out->load[1] = out->load[2] = -1;
  FILE *f = fopen(path, "r");
  if (f) {
    double a, b, c;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) out->load[0] = a, out->load[1] = b, out->load[2] = c;
    fclose(f);
  }
  snprintf(path, sizeof path, "%s/meminfo", root);
  out->memory_total = kb_field(path, "MemTotal");
  int64_t avail = kb_field(path, "MemAvailable");
  out->memory_used = out->memory_total >= 0 && avail >= 0 ? out->memory_total - avail : -1;
}

int64_t ct__proc_rss(const char *root, int pid) {
  char path[512];
  snprintf(path, sizeof path, "%s/%d/status", root ? root : "/proc", pid);
  return kb_field(path, "VmRSS");
}

void ct__proc_comm(const char *root, int pid, char *buf, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%d/comm", root ? root : "/proc", pid);
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)n, f)) buf[0] = 0;
  buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}
