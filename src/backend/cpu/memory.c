/* src/backend/cpu/memory.c: the CPU as a device: its properties, host memory, and copies. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/nhwc.h"

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

const ct_backend ct__cpu_backend = {
    .name = "cpu",
    .kind = CT_CPU,
    .device_count = cpu_count,
    .device_props = cpu_props,
    .synchronize = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .copy = ct__cpu_copy,
    .fill = ct__cpu_fill,
    .unary = ct__cpu_unary,
    .unary_backward = ct__cpu_unary_backward,
    .binary = ct__cpu_binary,
    .binary_backward = ct__cpu_binary_backward,
    .where = ct__cpu_where,
    .reduce = ct__cpu_reduce,
    .matmul = ct__cpu_matmul,
    .matmul_halves = 1u << CT_F16 | 1u << CT_BF16, /* sbgemm for bf16 where there is one, else widened blocks */
    .conv2d = ct__cpu_conv2d,
    .conv2d_backward = ct__cpu_conv2d_backward,
    .pool2d_argmax_dtype = ct__cpu_pool2d_argmax_dtype,
    .pool2d_fuses_relu = 1,
    .conv2d_relu_pool2x2 = ct__cpu_conv2d_relu_pool2x2,
    .conv2d_relu_pool2x2_halves = 1u << CT_F16 | 1u << CT_BF16,
    .conv2d_relu_pool2x2_backward = ct__cpu_conv2d_relu_pool2x2_backward,
    .pool2d = ct__cpu_pool2d,
    .pool2d_backward = ct__cpu_pool2d_backward,
    .softmax = ct__cpu_softmax,
    .softmax_backward = ct__cpu_softmax_backward,
    .random = ct__cpu_random,
    .index_select = ct__cpu_index_select,
    .index_add = ct__cpu_index_add,
    .gather = ct__cpu_gather,
    .scatter_add = ct__cpu_scatter_add,
    .adam_step = ct__cpu_adam_step,
    .sgd_step = ct__cpu_sgd_step,
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
    .amp_unscale_ = ct__cpu_amp_unscale_,
    .conv2d_nhwc = ct__cpu_conv2d_nhwc, /* channels_last: conv_nhwc.c, pool_nhwc.c */
    .conv2d_nhwc_backward = ct__cpu_conv2d_nhwc_backward,
    .pool2d_nhwc = ct__cpu_pool2d_nhwc,
    .pool2d_nhwc_backward = ct__cpu_pool2d_nhwc_backward,
};
