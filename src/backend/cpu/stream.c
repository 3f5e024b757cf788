/* src/backend/cpu/stream.c: streams and events of the CPU. The CPU queues nothing: an op has
 * finished when it returns, so a stream is a token (NULL handle), every wait returns at once, and
 * an event is a timestamp of the monotonic clock taken when it is recorded (complete at once). */
#include <time.h>
#include "backend/cpu/cpu.h"

ct_status ct__cpu_stream_new(int index, void **out) {
  *out = NULL;
  return CT_OK;
}
void ct__cpu_stream_free(int index, void *stream) {}
ct_status ct__cpu_stream_synchronize(int index, void *stream) { return CT_OK; }
ct_status ct__cpu_stream_wait_event(int index, void *stream, void *event) { return CT_OK; }

ct_status ct__cpu_event_record(int index, void *stream, void **out) {
  struct timespec ts;
  double *e = ct__malloc(sizeof *e, "a cpu event");
  if (!e) return CT_ENOMEM;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *e = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6; /* milliseconds */
  *out = e;
  return CT_OK;
}

ct_status ct__cpu_event_synchronize(int index, void *event) { return CT_OK; }
int ct__cpu_event_query(int index, void *event) { return 1; }

ct_status ct__cpu_event_elapsed_ms(int index, void *start, void *end, double *ms) {
  *ms = *(const double *)end - *(const double *)start;
  return CT_OK;
}

void ct__cpu_event_free(int index, void *event) { free(event); }
