/* cuttle/monitor.h: a device monitor in the spirit of nvidia-smi (what `cuttle smi` prints).
 *
 * GPU figures come from NVML, which is loaded with dlopen at run time ("libnvidia-ml.so.1", or the
 * path in CUTTLE_NVML_LIBRARY), so cuttle builds and runs on machines without a driver. Every
 * figure the driver cannot give (an older driver lacking the function, NOT_SUPPORTED on this GPU)
 * is CT_MONITOR_NA (-1) and prints as "N/A". The figures are int64_t rather than size_t, unlike
 * the rest of the API, so that one sentinel serves every column.
 *
 * CUDA indices. NVML ignores CUDA_VISIBLE_DEVICES and numbers GPUs its own way; cuttle maps each
 * NVML device to its CUDA index by PCI bus id. When the CUDA runtime can tell the bus id of each
 * CUDA index (the CUDA backend registered a probe, see src/monitor/monitor_internal.h) that is used;
 * otherwise the visible GPUs are taken in PCI bus order, which is what CUDA does under
 * CUDA_DEVICE_ORDER=PCI_BUS_ID and may differ from CUDA's default "fastest first" order on a
 * machine with mixed GPU models. CUDA_VISIBLE_DEVICES is honoured as CUDA reads it: integers and
 * UUIDs (or unique prefixes of them, "GPU-8932f937"), stopping at the first invalid entry. */
#ifndef CUTTLE_MONITOR_H
#define CUTTLE_MONITOR_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/device.h"
#include "cuttle/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MONITOR_NA (-1)
#define CT_MONITOR_MAX_PROC_DEVICES 17 /* the CPU and up to 16 GPUs in a process's stats */

typedef struct {
  uint32_t pid;
  char type;            /* 'C' compute, 'G' graphics, as nvidia-smi prints */
  int64_t used_memory;  /* bytes of this GPU the driver attributes to the process, or -1 */
  char name[64];        /* /proc/<pid>/comm, "" when not readable (another container, exited) */
} ct_monitor_process;

typedef struct {
  int cuda_index;               /* the CUDA ordinal ("cuda:N"), -1 when CUDA_VISIBLE_DEVICES hides it */
  int nvml_index;               /* NVML's (and nvidia-smi's) index */
  char name[96];                /* "NVIDIA H100 80GB HBM3" */
  char pci_bus_id[32];          /* "00000000:01:00.0" as nvidia-smi prints it */
  char uuid[96];                /* "GPU-xxxxxxxx-xxxx-..." */
  int temperature_c;            /* degrees Celsius, or -1 */
  int64_t power_mw;             /* power draw in milliwatts, or -1 */
  int64_t power_limit_mw;       /* enforced power limit in milliwatts, or -1 */
  int64_t memory_used;          /* bytes, or -1 */
  int64_t memory_total;         /* bytes, or -1 */
  int utilization_gpu;          /* percent of the last sample period a kernel ran, or -1 */
  int utilization_memory;       /* percent of time memory was read or written, or -1 */
  int clock_sm_mhz;             /* current SM clock, or -1 */
  int clock_mem_mhz;            /* current memory clock, or -1 */
  int process_count;            /* number of entries in processes, -1 when the driver cannot list them */
  ct_monitor_process *processes; /* owned by the snapshot */
} ct_monitor_gpu;

typedef struct {
  char model[256];       /* "model name" from /proc/cpuinfo, "" when unknown */
  int cores;             /* online logical cores */
  double load[3];        /* 1, 5 and 15 minute load averages (/proc/loadavg), -1 when unknown */
  int64_t memory_total;  /* bytes (MemTotal), or -1 */
  int64_t memory_used;   /* bytes (MemTotal - MemAvailable), or -1 */
} ct_monitor_cpu;

/* One device of a cuttle process: its allocator's view beside the driver's. */
typedef struct {
  char device[32];       /* "cpu", "cuda:0", "opencl:0" (as ct_device_str prints it) */
  int64_t allocated;     /* bytes cuttle's allocator hands out to live tensors, or -1 */
  int64_t reserved;      /* bytes the allocator holds from the system (allocated + cached), or -1 */
  int64_t driver_used;   /* CPU: the process's resident set (VmRSS); GPU: NVML's per-process
                            figure on that GPU; -1 when unknown */
  int64_t peak_allocated; /* the highest allocated since the start or ct_reset_peak_memory_stats,
                             from the backend's ct_memory_stats_get; -1 when unknown */
} ct_monitor_proc_device;

typedef struct {
  int pid;               /* 0 when no process was asked for */
  int stats_found;       /* 1 when the process's stats were read (published file, or in-process) */
  double stats_age_s;    /* seconds since the process published them (0 in-process) */
  int ndevices;
  ct_monitor_proc_device devices[CT_MONITOR_MAX_PROC_DEVICES];
} ct_monitor_proc;

typedef struct {
  int64_t time;            /* seconds since the epoch when taken */
  int driver_found;        /* 1 when NVML loaded, initialized and counted at least one GPU */
  char driver_version[80]; /* "550.54.15", "" when unknown */
  char driver_note[256];   /* why there is no GPU data when driver_found is 0 */
  int cuda_order_exact;    /* 1 when CUDA indices came from the CUDA runtime or CUDA_DEVICE_ORDER is
                              PCI_BUS_ID; 0 when they assume PCI bus order (see the top of this file) */
  int ngpus;
  ct_monitor_gpu *gpus;    /* CUDA-visible GPUs in CUDA order, then hidden ones in NVML order */
  ct_monitor_cpu cpu;
  ct_monitor_proc proc;
} ct_monitor_snapshot;

typedef struct {
  int pid; /* 0: no process section; getpid(): this process, asked directly; another pid: read the
              stats that process published with ct_monitor_publish (N/A when it did not) */
} ct_monitor_options;

/* Read every device now. opt may be NULL (all defaults). The library is opened and closed within
 * the call, so a snapshot costs one nvmlInit (tens of milliseconds on a GPU machine).
 * Never fails for want of a driver: then driver_found is 0 and driver_note says why.
 * Returns a new snapshot the caller frees with ct_monitor_snapshot_free, or NULL with CT_ENOMEM. */
CT_API ct_monitor_snapshot *ct_monitor_snapshot_new(const ct_monitor_options *opt);
CT_API void ct_monitor_snapshot_free(ct_monitor_snapshot *s); /* NULL is a no-op */

typedef enum {
  CT_MONITOR_TEXT = 0, /* the table `cuttle smi` prints */
  CT_MONITOR_JSON,     /* one JSON object; N/A is null; bytes, milliwatts, MHz, percent, Celsius */
  CT_MONITOR_CSV,      /* a header line and one row per GPU, the CPU, and the process's devices */
} ct_monitor_format;

/* Render s as text, JSON or CSV (docs/smi.md shows each). Returns a NUL-terminated string the
 * caller frees with free(), or NULL (CT_EINVAL for a NULL snapshot or unknown format, CT_ENOMEM). */
CT_API char *ct_monitor_render(const ct_monitor_snapshot *s, ct_monitor_format format);

/* Cuttle's allocator view of device d in this process: *allocated bytes in live tensors and
 * *reserved bytes held from the system (allocated plus cache). When no allocator has registered
 * statistics for d's kind (see ct__monitor_set_allocator_stats), the CPU reports the whole
 * process's malloc heap (glibc mallinfo2: in use, and obtained from the system), which includes
 * memory that is not cuttle's, and another device reports its backend's figures
 * (ct_memory_stats_get). Errors: CT_EINVAL for NULL outputs; CT_EUNSUPPORTED for a device whose
 * allocator has not registered and whose backend has no figures (it does not exist here);
 * CT_EDEVICE when the registered allocator does not know d. */
CT_API ct_status ct_monitor_allocator_stats(ct_device d, size_t *allocated, size_t *reserved);

/* Write this process's allocator statistics (the CPU, then cuda:0, cuda:1, ... for as long as the
 * allocator knows them, then each device of another backend that this process has allocated on,
 * such as opencl:0) to its stats file (ct_monitor_stats_path), atomically (a temporary file in
 * the same folder, then rename), so that `cuttle smi --pid PID` can show them. Cheap enough to
 * call once per training step. The format, version 1, is text, one record a line:
 *     cuttle-stats 1
 *     pid 12345
 *     time 1732312345.250          (seconds since the epoch, when written)
 *     cpu 1048576 2097152 -1       (device, allocated bytes, reserved bytes, peak allocated or -1)
 *     cuda:0 524288 1048576 786432
 * Readers ignore lines they do not know; a line without the fourth figure has an unknown peak. Errors: CT_EIO when the file cannot be written. */
CT_API ct_status ct_monitor_publish(void);

/* Remove this process's stats file (call at exit). Errors: CT_EIO when it exists and cannot be
 * removed; a missing file is CT_OK. */
CT_API ct_status ct_monitor_unpublish(void);

/* The stats file of process pid: "$XDG_RUNTIME_DIR/cuttle-<pid>.stats" when XDG_RUNTIME_DIR names
 * a folder, else "/tmp/cuttle-<pid>.stats". Writes it into buf of size n (256 bytes suffice).
 * Errors: CT_EINVAL when buf is too small. */
CT_API ct_status ct_monitor_stats_path(int pid, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
