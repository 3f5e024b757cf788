/* src/core/profiler.c: the kernel profiler (cuttle/profiler.h). CT_KERNEL_CALL (core/backend.h)
 * reads ct__profile_mode and, when it is on, brackets the kernel call with ct__profile_begin and
 * ct__profile_end; the sums live in one table under a mutex, keyed by (kernel, op, device). Only
 * profiled calls pay for the lock; with the profiler off a kernel call costs one relaxed load more.
 * The begin times are a small per-thread stack, since a backend's composite kernel may call other
 * kernels through CT_KERNEL_CALL while its own clock runs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "cuttle/profiler.h"

int ct__profile_mode = CT_PROFILE_OFF;

/* Rows past this many share one "(other)" row, so that a table never grows without bound (a few
 * dozen rows is usual: the kernels times the ops that call them). */
#define PROF_MAX_ROWS 1024
#define PROF_MAX_DEPTH 16

typedef struct {
  ct_kernel_id kernel; /* CT_K_COUNT for the "(other)" row */
  char op[48];
  ct_device device;
  int64_t calls;
  double seconds;
} prof_row;

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_row prof_rows[PROF_MAX_ROWS];
static int prof_nrows;
static int prof_recorded_mode = CT_PROFILE_HOST; /* the last mode that recorded, for the table */
static int64_t prof_waits; /* CT_PROFILE_SYNC's waits, for the tests (ct__profile_waits) */
static _Thread_local double prof_t0[PROF_MAX_DEPTH];
static _Thread_local int prof_depth;

static double prof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ct_profiler_set_mode(ct_profile_mode mode) {
  int m = mode == CT_PROFILE_HOST || mode == CT_PROFILE_SYNC ? (int)mode : CT_PROFILE_OFF;
  if (m != CT_PROFILE_OFF) __atomic_store_n(&prof_recorded_mode, m, __ATOMIC_RELAXED);
  __atomic_store_n(&ct__profile_mode, m, __ATOMIC_RELAXED);
}

ct_profile_mode ct_profiler_mode(void) { return (ct_profile_mode)__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED); }

void ct_profiler_reset(void) {
  pthread_mutex_lock(&prof_lock);
  prof_nrows = 0;
  memset(&prof_rows[PROF_MAX_ROWS - 1], 0, sizeof prof_rows[0]); /* no "(other)" row */
  pthread_mutex_unlock(&prof_lock);
}

void ct__profile_begin(void) {
  if (prof_depth < PROF_MAX_DEPTH) prof_t0[prof_depth] = prof_now();
  prof_depth++;
}

/* the row of (k, op, d), made when new; past PROF_MAX_ROWS - 1 rows, the "(other)" row in the last
 * slot. The caller holds prof_lock. */
static prof_row *row_of(ct_kernel_id k, const char *op, ct_device d) {
  for (int i = 0; i < prof_nrows; i++) {
    prof_row *r = &prof_rows[i];
    if (r->kernel == k && r->device.kind == d.kind && r->device.index == d.index && strncmp(r->op, op, sizeof r->op - 1) == 0)
      return r;
  }
  prof_row *r = &prof_rows[prof_nrows < PROF_MAX_ROWS - 1 ? prof_nrows++ : PROF_MAX_ROWS - 1];
  if (r == &prof_rows[PROF_MAX_ROWS - 1]) {
    if (r->kernel == CT_K_COUNT) return r;
    k = CT_K_COUNT, op = "(other)", d = CT_DEVICE_CPU;
  }
  memset(r, 0, sizeof *r);
  r->kernel = k, r->device = d;
  snprintf(r->op, sizeof r->op, "%s", op);
  return r;
}

ct_status ct__profile_end(ct_kernel_id k, const char *op, const ct_tensor *t, ct_status s) {
  int depth = --prof_depth;
  if (depth < 0) { /* profiling switched on between a call's begin and end: nothing to time */
    prof_depth = 0;
    return s;
  }
  if (depth >= PROF_MAX_DEPTH) return s;
  ct_device d = t ? t->device : CT_DEVICE_CPU;
  if (__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED) == CT_PROFILE_SYNC && s == CT_OK && d.kind != CT_CPU) {
    /* the backend's wait itself, not ct_synchronize: no ledger count, no sync-debug report. A
     * failure here is an earlier asynchronous error, which the next real wait reports again. */
    const ct_backend *be = ct__backend(d.kind);
    if (be && be->synchronize) (void)be->synchronize(d.index), __atomic_add_fetch(&prof_waits, 1, __ATOMIC_RELAXED);
  }
  double dt = prof_now() - prof_t0[depth];
  pthread_mutex_lock(&prof_lock);
  prof_row *r = row_of(k, op ? op : "?", d);
  r->calls++, r->seconds += dt;
  pthread_mutex_unlock(&prof_lock);
  return s;
}

int64_t ct__profile_waits(void) { return __atomic_load_n(&prof_waits, __ATOMIC_RELAXED); }

static int by_seconds(const void *a, const void *b) {
  double x = ((const ct_profile_row *)a)->seconds, y = ((const ct_profile_row *)b)->seconds;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* every row as the public struct, sorted; *n its count; NULL when out of memory */
static ct_profile_row *snapshot(int *n) {
  pthread_mutex_lock(&prof_lock);
  *n = prof_nrows + (prof_rows[PROF_MAX_ROWS - 1].kernel == CT_K_COUNT);
  ct_profile_row *out = calloc((size_t)(*n > 0 ? *n : 1), sizeof *out);
  for (int i = 0; out && i < *n; i++) {
    const prof_row *r = i < prof_nrows ? &prof_rows[i] : &prof_rows[PROF_MAX_ROWS - 1];
    snprintf(out[i].kernel, sizeof out[i].kernel, "%s", r->kernel == CT_K_COUNT ? "(other)" : ct__kernel_names[r->kernel]);
    snprintf(out[i].op, sizeof out[i].op, "%s", r->op);
    ct_device_str(r->device, out[i].device, sizeof out[i].device);
    out[i].calls = r->calls, out[i].seconds = r->seconds;
  }
  pthread_mutex_unlock(&prof_lock);
  if (out) qsort(out, (size_t)*n, sizeof *out, by_seconds);
  return out;
}

int ct_profiler_rows(ct_profile_row *rows, int cap) {
  int n = 0;
  ct_profile_row *all = snapshot(&n);
  if (!all) return 0;
  for (int i = 0; rows && i < n && i < cap; i++) rows[i] = all[i];
  free(all);
  return n;
}

double ct_profiler_print(FILE *f, int top) {
  if (!f) f = stdout;
  int n = 0;
  ct_profile_row *all = snapshot(&n);
  if (!all) return 0;
  double total = 0;
  for (int i = 0; i < n; i++) total += all[i].seconds;
  const char *mode = __atomic_load_n(&prof_recorded_mode, __ATOMIC_RELAXED) == CT_PROFILE_SYNC
                         ? "each call waited for (sync)" : "host time per call";
  fprintf(f, "%-28s %-32s %-10s %10s %12s %12s %7s\n", "kernel", "op", "device", "calls", "total ms", "us/call", "share");
  int shown = top > 0 && top < n ? top : n;
  for (int i = 0; i < shown; i++)
    fprintf(f, "%-28s %-32s %-10s %10lld %12.3f %12.2f %6.1f%%\n", all[i].kernel, all[i].op, all[i].device,
            (long long)all[i].calls, 1e3 * all[i].seconds, all[i].calls ? 1e6 * all[i].seconds / (double)all[i].calls : 0.0,
            total > 0 ? 100.0 * all[i].seconds / total : 0.0);
  int64_t calls = 0;
  for (int i = 0; i < n; i++) calls += all[i].calls;
  fprintf(f, "total: %lld kernel calls, %.3f ms (%s)%s\n", (long long)calls, 1e3 * total, mode,
          shown < n ? "; the rows not shown are in the total" : "");
  free(all);
  return total;
}
