/* src/backend/cpu/memory.c: the CPU as a device: its properties, host memory, and copies. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "backend/cpu/cpu.h"

static int cpu_count(void) { return 1; }

/* /proc/meminfo's value for key in bytes, or 0. */
static size_t meminfo(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  size_t v = 0, klen = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = (size_t)strtoull(line + klen + 1, NULL, 10) * 1024;
      break;
    }
  if (f) fclose(f);
  return v;
}

static ct_status cpu_props(int index, ct_device_props *p) {
  snprintf(p->name, sizeof p->name, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c += 1 + (c[1] == ' ');
        c[strcspn(c, "\n")] = 0;
        snprintf(p->name, sizeof p->name, "%s", c);
      }
      break;
    }
  if (f) fclose(f);
  p->total_memory = meminfo("MemTotal");
  p->free_memory = meminfo("MemAvailable");
  p->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  p->utilization = -1;
  return CT_OK;
}

static ct_status cpu_sync(int index) { return CT_OK; }

static void *cpu_alloc(int index, size_t nbytes) {
  void *p = ct__cpu_alloc(nbytes);
  if (!p) ct__error(CT_ENOMEM, "out of memory on cpu: requested %zu bytes, %zu bytes available", nbytes, meminfo("MemAvailable"));
  return p;
}

static void cpu_free(int index, void *p, size_t nbytes) { ct__cpu_free(p, nbytes); }

static ct_status cpu_memcpy(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking) {
  memcpy(dst, src, nbytes);
  return CT_OK;
}

static ct_status cpu_memory_stats(int index, ct_memory_stats *out) {
  ct__cpu_memory_stats(&out->allocated, &out->reserved, &out->peak_allocated);
  out->num_device_mallocs = 0; /* small blocks go straight to malloc: not counted */
  return CT_OK;
}

static ct_status cpu_empty_cache(int index) {
  ct__cpu_empty_cache();
  return CT_OK;
}

static ct_status cpu_reset_peak(int index) {
  ct__cpu_reset_peak();
  return CT_OK;
}

/* What the CPU's kernels take as they are (core/backend.h's supports): float16 and bfloat16 matmul
 * (sbgemm for bf16 where OpenBLAS has it, else widened blocks), the fused conv + relu + pool in
 * them (conv_relu_pool.c) and batch norm of a half input with float32 parameters and statistics
 * (norm.c); conv2d computes halves in float32 through the front-end; max pooling takes
 * CT_POOL_MAX_RELU. */
static int cpu_supports(ct_kernel_id k, ct_dtype dt, ct_memory_format fmt) {
  int half = dt == CT_F16 || dt == CT_BF16;
  switch (k) {
    case CT_K_conv2d:
    case CT_K_attention: /* float32 and float64 (attention.c): the front-end widens the halves */
      return !half;
    case CT_K_pool2d_max_relu:
      return 1;
    default:
      return 1;
  }
}

const ct_backend ct__cpu_backend = {
    .name = "cpu",
    .kind = CT_CPU,
    .device_count = cpu_count,
    .device_props = cpu_props,
    .synchronize = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .memory_stats = cpu_memory_stats,
    .empty_cache = cpu_empty_cache,
    .reset_peak_memory_stats = cpu_reset_peak,
    /* no pinned memory and no TF32 on the CPU */
    .stream_new = ct__cpu_stream_new,
    .stream_free = ct__cpu_stream_free,
    .stream_synchronize = ct__cpu_stream_synchronize,
    .stream_wait_event = ct__cpu_stream_wait_event,
    .event_record = ct__cpu_event_record,
    .event_synchronize = ct__cpu_event_synchronize,
    .event_query = ct__cpu_event_query,
    .event_elapsed_ms = ct__cpu_event_elapsed_ms,
    .event_free = ct__cpu_event_free,
    .kernels =
        {
#define CT_HAS(name, cpu, cuda, opencl) .name = CT_HAS_##cpu(ct__cpu_##name),
#include "backend/kernels_by_backend.def"
        },
    .supports = cpu_supports,
    .pool2d_argmax_dtype = ct__cpu_pool2d_argmax_dtype,
};
