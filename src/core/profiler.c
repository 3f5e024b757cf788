/* src/core/profiler.c: the kernel profiler (cuttle/profiler.h). CT_KERNEL_CALL (core/backend.h)
 * reads ct__profile_mode and, when it is on, brackets the kernel call with ct__profile_begin and
 * ct__profile_end; the core's copies between host and device go through ct__profile_memcpy. The
 * sums live in one table under a mutex, keyed by (kernel, op, device). Only profiled calls pay for
 * the lock; with the profiler off a kernel call costs one relaxed load more.
 *
 * A row holds self time: a backend's composite kernel that calls other kernels (a contiguous
 * temporary, a conversion) through CT_KERNEL_CALL while its own clock runs is charged its time
 * less theirs, so that a thread's rows add up to its time inside kernel calls, each instant once.
 * The frames of the calls in progress are a small per-thread stack. */
#include <pthread.h>
#include <stdint.h>
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
#define PROF_OP_LEN 48 /* an op's name kept in a row or an event, cut there (as ct_profile_row.op) */

typedef struct {
  const char *kernel; /* a static name: ct__kernel_names[k], a copy's name, or "(other)" */
  char op[PROF_OP_LEN];
  ct_device device;
  int64_t calls;
  double seconds; /* self time */
} prof_row;

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_row prof_rows[PROF_MAX_ROWS];
static int prof_nrows;
static int prof_recorded_mode = CT_PROFILE_HOST; /* the last mode that recorded, for the table */
static int64_t prof_waits; /* CT_PROFILE_SYNC's waits, for the tests (ct__profile_waits) */
/* the calls in progress on this thread: when each began, and the time of the calls inside it */
static _Thread_local struct {
  double t0, inner;
} prof_stack[PROF_MAX_DEPTH];
static _Thread_local int prof_depth;

/* The trace: every profiled call as an event, while ct_profiler_set_trace has it on. */
typedef struct {
  const char *kernel;
  char op[PROF_OP_LEN];
  ct_device device;
  int tid;
  double t0, dur; /* seconds: the start, from prof_epoch, and the call's whole time */
} prof_event;
static int prof_trace_on;
static prof_event *prof_events;
static int64_t prof_nevents, prof_max_events, prof_dropped;
static double prof_epoch = -1;
static int prof_next_tid;
static _Thread_local int prof_tid = -1; /* this thread's small id in the trace, from 0 */

static double prof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ct_status ct_profiler_set_mode(ct_profile_mode mode) {
  if (mode != CT_PROFILE_OFF && mode != CT_PROFILE_HOST && mode != CT_PROFILE_SYNC)
    return ct__error(CT_EINVAL, "ct_profiler_set_mode: mode %d is none of CT_PROFILE_OFF, CT_PROFILE_HOST, CT_PROFILE_SYNC",
                     (int)mode);
  if (mode != CT_PROFILE_OFF) __atomic_store_n(&prof_recorded_mode, (int)mode, __ATOMIC_RELAXED);
  __atomic_store_n(&ct__profile_mode, (int)mode, __ATOMIC_RELAXED);
  return CT_OK;
}

ct_profile_mode ct_profiler_mode(void) { return (ct_profile_mode)__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED); }

void ct_profiler_reset(void) {
  pthread_mutex_lock(&prof_lock);
  prof_nrows = 0, prof_nevents = 0, prof_dropped = 0;
  memset(&prof_rows[PROF_MAX_ROWS - 1], 0, sizeof prof_rows[0]); /* no "(other)" row */
  pthread_mutex_unlock(&prof_lock);
}

void ct__profile_begin(void) {
  if (prof_depth < PROF_MAX_DEPTH) prof_stack[prof_depth].t0 = prof_now(), prof_stack[prof_depth].inner = 0;
  prof_depth++;
}

/* the row of (kernel, op, d), made when new; past PROF_MAX_ROWS - 1 rows, the "(other)" row in
 * the last slot. The caller holds prof_lock. */
static prof_row *row_of(const char *kernel, const char *op, ct_device d) {
  for (int i = 0; i < prof_nrows; i++) {
    prof_row *r = &prof_rows[i];
    if (r->kernel == kernel && r->device.kind == d.kind && r->device.index == d.index &&
        strncmp(r->op, op, sizeof r->op - 1) == 0)
      return r;
  }
  prof_row *r = &prof_rows[prof_nrows < PROF_MAX_ROWS - 1 ? prof_nrows++ : PROF_MAX_ROWS - 1];
  if (r == &prof_rows[PROF_MAX_ROWS - 1]) {
    if (r->kernel) return r;
    kernel = "(other)", op = "(other)", d = CT_DEVICE_CPU;
  }
  memset(r, 0, sizeof *r);
  r->kernel = kernel, r->device = d;
  snprintf(r->op, sizeof r->op, "%s", op);
  return r;
}

/* The end of the call on top of this thread's stack: in CT_PROFILE_SYNC (and when the call
 * succeeded) a wait for d first, then its self time into its row. */
static void record(const char *kernel, const char *op, ct_device d, ct_status s) {
  int depth = --prof_depth;
  if (depth < 0 || depth >= PROF_MAX_DEPTH) { /* deeper than the stack: not timed */
    if (depth < 0) prof_depth = 0;
    return;
  }
  if (__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED) == CT_PROFILE_SYNC && s == CT_OK && d.kind != CT_CPU &&
      !ct__capturing(d)) { /* a capture cannot wait: its calls are timed as in CT_PROFILE_HOST */
    /* the backend's wait itself, not ct_synchronize: no ledger count, no sync-debug report. Its
     * failure is an earlier asynchronous error, which the next real wait reports: the caller's
     * last error is left as it was. */
    const ct_backend *be = ct__backend(d.kind);
    if (be && be->synchronize) {
      ct_status saved = ct_last_status();
      char msg[512];
      snprintf(msg, sizeof msg, "%s", ct_last_error());
      if (be->synchronize(d.index) != CT_OK) ct__error_restore(saved, msg);
      __atomic_add_fetch(&prof_waits, 1, __ATOMIC_RELAXED);
    }
  }
  double dt = prof_now() - prof_stack[depth].t0;
  if (depth > 0) prof_stack[depth - 1].inner += dt;
  pthread_mutex_lock(&prof_lock);
  prof_row *r = row_of(kernel, op ? op : "?", d);
  r->calls++, r->seconds += dt - prof_stack[depth].inner;
  if (prof_trace_on) {
    if (prof_tid < 0) prof_tid = prof_next_tid++;
    if (prof_nevents < prof_max_events) {
      prof_event *e = &prof_events[prof_nevents++];
      e->kernel = kernel, e->device = d, e->tid = prof_tid;
      e->t0 = prof_stack[depth].t0 - prof_epoch, e->dur = dt;
      snprintf(e->op, sizeof e->op, "%s", op ? op : "?");
    } else {
      prof_dropped++;
    }
  }
  pthread_mutex_unlock(&prof_lock);
}

ct_status ct_profiler_set_trace(int on, int64_t max_events) {
  if (max_events < 0) return ct__error(CT_EINVAL, "ct_profiler_set_trace: max_events is %lld; give 0 (a million) or more",
                                       (long long)max_events);
  pthread_mutex_lock(&prof_lock);
  ct_status s = CT_OK;
  if (on) {
    int64_t cap = max_events ? max_events : 1000000;
    if (cap != prof_max_events) {
      prof_event *e = (uint64_t)cap > SIZE_MAX / sizeof *e ? NULL : realloc(prof_events, (size_t)cap * sizeof *e);
      if (!e) {
        s = ct__error(CT_ENOMEM, "ct_profiler_set_trace: out of memory for %lld events", (long long)cap);
      } else {
        if (prof_nevents > cap) prof_dropped += prof_nevents - cap, prof_nevents = cap; /* kept no more */
        prof_events = e, prof_max_events = cap;
      }
    }
    if (s == CT_OK && prof_epoch < 0) prof_epoch = prof_now();
  }
  if (s == CT_OK) prof_trace_on = on != 0;
  pthread_mutex_unlock(&prof_lock);
  return s;
}

/* s with JSON's escapes, into f */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* t seconds as microseconds with three decimals, in integers: no locale's decimal comma in the
 * JSON; a time before the epoch (a call already running when the trace began) is 0 */
static void json_us(FILE *f, double t) {
  long long ns = t > 0 ? (long long)(t * 1e9 + 0.5) : 0;
  fprintf(f, "%lld.%03lld", ns / 1000, ns % 1000);
}

ct_status ct_profiler_export_chrome_trace(const char *path) {
  if (!path) return ct__error(CT_EINVAL, "ct_profiler_export_chrome_trace: path is NULL");
  /* the events copied under the lock and written without it, so that profiled calls on other
   * threads do not wait for the file */
  pthread_mutex_lock(&prof_lock);
  int64_t n = prof_nevents, dropped = prof_dropped;
  prof_event *ev = n ? malloc((size_t)n * sizeof *ev) : NULL;
  if (ev) memcpy(ev, prof_events, (size_t)n * sizeof *ev);
  pthread_mutex_unlock(&prof_lock);
  if (n && !ev) return ct__error(CT_ENOMEM, "ct_profiler_export_chrome_trace: out of memory for %lld events", (long long)n);
  char *tmp;
  FILE *f = ct__replace_open("ct_profiler_export_chrome_trace", path, &tmp);
  if (!f) {
    free(ev);
    return ct_last_status();
  }
  fprintf(f, "{\"traceEvents\": [");
  for (int64_t i = 0; i < n; i++) {
    const prof_event *e = &ev[i];
    char dev[32];
    ct_device_str(e->device, dev, sizeof dev);
    fprintf(f, "%s\n{\"name\": ", i ? "," : "");
    json_string(f, e->kernel);
    fprintf(f, ", \"cat\": \"kernel\", \"ph\": \"X\", \"ts\": ");
    json_us(f, e->t0);
    fprintf(f, ", \"dur\": ");
    json_us(f, e->dur);
    fprintf(f, ", \"pid\": 0, \"tid\": %d, \"args\": {\"op\": ", e->tid);
    json_string(f, e->op);
    fprintf(f, ", \"device\": ");
    json_string(f, dev);
    fprintf(f, "}}");
  }
  fprintf(f, "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"producer\": \"cuttle\", \"dropped_events\": %lld}}\n",
          (long long)dropped);
  free(ev);
  return ct__replace_commit("ct_profiler_export_chrome_trace", f, tmp, path);
}

ct_status ct__profile_end(ct_kernel_id k, const char *op, const ct_tensor *t, ct_status s) {
  record(k >= 0 && k < CT_K_COUNT ? ct__kernel_names[k] : "?", op, t ? t->device : CT_DEVICE_CPU, s);
  return s;
}

ct_status ct__profile_memcpy(const ct_backend *be, ct_device d, void *dst, const void *src, size_t nbytes, int kind,
                             int async, const char *op) {
  if (!__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED) || d.kind == CT_CPU) /* a CPU copy is no transfer */
    return be->memcpy(d.index, dst, src, nbytes, kind, async);
  static const char *const names[3] = {"memcpy_host_to_device", "memcpy_device_to_host", "memcpy_device_to_device"};
  ct__profile_begin();
  ct_status s = be->memcpy(d.index, dst, src, nbytes, kind, async);
  record(names[kind >= 0 && kind <= 2 ? kind : 2], op, d, s);
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
  *n = prof_nrows + (prof_rows[PROF_MAX_ROWS - 1].kernel != NULL);
  ct_profile_row *out = calloc((size_t)(*n > 0 ? *n : 1), sizeof *out);
  for (int i = 0; out && i < *n; i++) {
    const prof_row *r = i < prof_nrows ? &prof_rows[i] : &prof_rows[PROF_MAX_ROWS - 1];
    snprintf(out[i].kernel, sizeof out[i].kernel, "%s", r->kernel);
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
  int64_t calls = 0;
  for (int i = 0; i < n; i++) total += all[i].seconds, calls += all[i].calls;
  const char *mode = __atomic_load_n(&prof_recorded_mode, __ATOMIC_RELAXED) == CT_PROFILE_SYNC
                         ? "each call waited for (sync)" : "host time per call";
  fprintf(f, "%-28s %-32s %-10s %10s %12s %12s %7s\n", "kernel", "op", "device", "calls", "self ms", "us/call", "share");
  int shown = top > 0 && top < n ? top : n;
  for (int i = 0; i < shown; i++)
    fprintf(f, "%-28s %-32s %-10s %10lld %12.3f %12.2f %6.1f%%\n", all[i].kernel, all[i].op, all[i].device,
            (long long)all[i].calls, 1e3 * all[i].seconds, all[i].calls ? 1e6 * all[i].seconds / (double)all[i].calls : 0.0,
            total > 0 ? 100.0 * all[i].seconds / total : 0.0);
  fprintf(f, "total: %lld calls, %.3f ms of self time over every thread (%s)%s\n", (long long)calls, 1e3 * total, mode,
          shown < n ? "; the rows not shown are in the total" : "");
  free(all);
  return total;
}
