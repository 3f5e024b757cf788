/* src/core/status.c: status strings and the thread-local last error. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

static _Thread_local char last_msg[2048];
static _Thread_local ct_status last_status = CT_OK;

const char *ct_status_str(ct_status s) {
  switch (s) {
#define CT__STATUS_CASE(name, value, text) \
  case name:                               \
    return text;
    CT_STATUS_TABLE(CT__STATUS_CASE)
#undef CT__STATUS_CASE
  }
  return "unknown status";
}

const char *ct_last_error(void) { return last_msg; }
ct_status ct_last_status(void) { return last_status; }

void ct_clear_error(void) {
  last_msg[0] = 0;
  last_status = CT_OK;
}

ct_status ct__error(ct_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  last_status = s;
  const char *abort_env = getenv("CT_ABORT_ON_ERROR");
  if (abort_env && strcmp(abort_env, "1") == 0) {
    fprintf(stderr, "cuttle: %s (CT_ABORT_ON_ERROR=1)\n", last_msg);
    abort();
  }
  return s;
}
