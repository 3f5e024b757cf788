/* cuttle/profiler.h: where the time of a program goes, kernel by kernel.
 *
 * Every call of a backend kernel (the table in src/core/kernels.def: matmul, conv2d, unary, copy,
 * adam_step, ...) and every copy between host and device memory (rows memcpy_host_to_device,
 * memcpy_device_to_host, memcpy_device_to_device: ct_to, ct_item, ct_to_host, ct_from_host) is
 * timed on the host while profiling is on, and the calls are summed per kernel, per op that called
 * it and per device: torch.profiler's key_averages() table with self times, at the level where
 * cuttle hands work to a device. Two modes:
 *  - CT_PROFILE_HOST: the host's time inside the kernel call. On the CPU that is the kernel itself;
 *    on a GPU or an OpenCL device it is the cost of launching it (argument checks, descriptors,
 *    allocation, the launch), since the kernel runs later, asynchronously. What a step costs beyond
 *    the sum is the front-end's and autograd's own work, and the loader's wait.
 *  - CT_PROFILE_SYNC: the same, then the device is waited for before the clock is read, so each
 *    call's time includes its execution (torch.cuda's profiling with CUDA_LAUNCH_BLOCKING=1). The
 *    waits serialize host and device: the step gets slower, and the sum is each kernel's cost alone.
 *    Those waits are not counted in the ledger (ct_ledger_get) or reported by the sync-debug mode.
 * Times are self times: a kernel that calls another kernel (a backend's composite: a contiguous
 * temporary, a conversion) is charged its time less the inner call's, so one thread's rows add up
 * to its time inside kernel calls and copies, each instant once. The clock is CLOCK_MONOTONIC.
 * Profiling off costs one load and branch per kernel call.
 *
 * Thread-safe: the loader's worker threads and data_parallel's device threads are counted too, in
 * the same rows, so the sum over rows is time summed over threads, which may exceed the wall time. */
#ifndef CUTTLE_PROFILER_H
#define CUTTLE_PROFILER_H

#include <stdint.h>
#include <stdio.h>

#include "cuttle/device.h"
#include "cuttle/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CT_PROFILE_OFF = 0, CT_PROFILE_HOST = 1, CT_PROFILE_SYNC = 2 } ct_profile_mode;

/* Start (HOST, SYNC) or pause (OFF) the profiler, for every thread. The sums are kept across
 * pauses, so a training loop may profile its steps and not its evaluations; ct_profiler_reset
 * clears them. Errors: CT_EINVAL for a value that is none of the three (the mode is left as it was). */
CT_API ct_status ct_profiler_set_mode(ct_profile_mode mode);
/* The mode now (CT_PROFILE_OFF until ct_profiler_set_mode starts it). Never fails. */
CT_API ct_profile_mode ct_profiler_mode(void);
/* Clear every sum. Never fails. */
CT_API void ct_profiler_reset(void);

/* One kernel of one op on one device. */
typedef struct {
  char kernel[32]; /* the kernel's name in src/core/kernels.def ("matmul", "conv2d_backward", ...), or
                      memcpy_host_to_device / _device_to_host / _device_to_device, or "(other)" for
                      the rows past the table's 1023 */
  char op[48];     /* the op or function that called it: "ct_matmul", "conv2d", "ct_copy_", ... */
  char device[32]; /* "cpu", "cuda:0", "opencl:1" (ct_device_str); a copy's device side */
  int64_t calls;
  double seconds;  /* the calls' self time, summed, in seconds (see the two modes above) */
} ct_profile_row;

/* The sums so far, largest total time first, into rows[0 .. cap): returns how many rows there are
 * in all (which may be more than cap; rows may be NULL with cap 0 to ask). A row's strings are
 * cut to their fields' sizes. Never fails. */
CT_API int ct_profiler_rows(ct_profile_row *rows, int cap);

/* Print the top rows (top <= 0: all) as a table: kernel, op, device, calls, self ms, us per call,
 * share of the rows' total; then one line with the total over every row and the mode that recorded
 * them last (host or sync: print after pausing, as a loop does). f NULL is stdout. Returns the total
 * seconds over every row (summed over threads). Ops whose names hold spaces ("batch_norm backward")
 * keep them: read the rows with ct_profiler_rows, not by splitting the printed lines. */
CT_API double ct_profiler_print(FILE *f, int top);

/* Also keep every profiled call as an event, for ct_profiler_export_chrome_trace (on 1), or stop
 * keeping them (on 0; those kept stay until ct_profiler_reset). At most max_events are kept (0: one
 * million, about 80 MB); the calls past them are still summed in the rows, and counted as dropped
 * in the export. Errors: CT_EINVAL for max_events < 0 (nothing changes). */
CT_API ct_status ct_profiler_set_trace(int on, int64_t max_events);

/* Write the kept events to path as a Chrome trace (the JSON of torch.profiler's
 * export_chrome_trace: {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid",
 * "args": {"op", "device"}}]}, times in microseconds from the first ct_profiler_set_trace(1, ...);
 * a call already running then starts at 0: turn the trace on before the profiler),
 * which chrome://tracing and Perfetto (ui.perfetto.dev) show as a timeline, one row per thread; a
 * call that called other kernels holds their events within its own. The file is written whole or
 * not at all (a temporary file renamed over path). Errors: CT_EINVAL for a NULL path, CT_EIO when
 * the file cannot be written (path says which), CT_ENOMEM. */
CT_API ct_status ct_profiler_export_chrome_trace(const char *path);

#ifdef __cplusplus
}
#endif
#endif
