/* cuttle/profiler.h: where the time of a program goes, kernel by kernel.
 *
 * Every call of a backend kernel (the table in src/core/kernels.def: matmul, conv2d, unary, copy,
 * adam_step, ...) is timed on the host while profiling is on, and the calls are summed per kernel,
 * per op that called it and per device: torch.profiler's key_averages() table, at the level where
 * cuttle hands work to a device. Two modes:
 *  - CT_PROFILE_HOST: the host's time inside the kernel call. On the CPU that is the kernel itself;
 *    on a GPU or an OpenCL device it is the cost of launching it (argument checks, descriptors,
 *    allocation, the launch), since the kernel runs later, asynchronously. What a step costs beyond
 *    the sum is the front-end's and autograd's own work, and the loader's wait.
 *  - CT_PROFILE_SYNC: the same, then the device is waited for before the clock is read, so each
 *    call's time includes its execution (torch.cuda's profiling with CUDA_LAUNCH_BLOCKING=1). The
 *    waits serialize host and device: the step gets slower, and the sum is each kernel's cost alone.
 *    Those waits are not counted in the ledger (ct_ledger_get) or reported by the sync-debug mode.
 * A kernel that calls another kernel (a composite of the backend) has both counted, each with its own
 * time. The clock is CLOCK_MONOTONIC. Profiling off costs one load and branch per kernel call.
 *
 * Thread-safe: the loader's worker threads and data_parallel's device threads are counted too. */
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

/* Start (HOST, SYNC) or pause (OFF) the profiler. The sums are kept across pauses, so a training
 * loop may profile its steps and not its evaluations; ct_profiler_reset clears them. Never fails. */
CT_API void ct_profiler_set_mode(ct_profile_mode mode);
CT_API ct_profile_mode ct_profiler_mode(void);
/* Clear every sum. Never fails. */
CT_API void ct_profiler_reset(void);

/* One kernel of one op on one device. */
typedef struct {
  char kernel[32]; /* the kernel's name in src/core/kernels.def: "matmul", "conv2d_backward", ... */
  char op[48];     /* the op or function that called it: "ct_matmul", "conv2d", "ct_copy_", ... */
  char device[32]; /* "cpu", "cuda:0", "opencl:1" (ct_device_str) */
  int64_t calls;
  double seconds;  /* the calls' total time, in seconds (see the two modes above) */
} ct_profile_row;

/* The sums so far, largest total time first, into rows[0 .. cap): returns how many rows there are
 * in all (which may be more than cap; rows may be NULL with cap 0 to ask). A row's strings are
 * cut to their fields' sizes. Never fails. */
CT_API int ct_profiler_rows(ct_profile_row *rows, int cap);

/* Print the top rows (top <= 0: all) as a table: kernel, op, device, calls, total ms, us per call,
 * share of the rows' total; then one line with the total over every row and the mode that recorded
 * them last (host or sync: print after pausing, as a loop does). f NULL is stdout. Returns
 * the total seconds over every row. */
CT_API double ct_profiler_print(FILE *f, int top);

#ifdef __cplusplus
}
#endif
#endif
