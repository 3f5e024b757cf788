/* src/core/status.c: status strings, the thread-local last error, and the errors of a NULL argument.
 * The bottom of the core: it calls no other core file. */
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

void ct__error_restore(ct_status s, const char *msg) {
  snprintf(last_msg, sizeof last_msg, "%s", msg ? msg : "");
  last_status = s;
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

/* The pending message, prefixed with "<context>: " so that an error raised by an inner op also
 * names the public function the caller called (and, where it helps, which part of it failed). A
 * message that already starts with the context is left as it is, so nested calls add it once. With
 * no error pending, the failure that called this set none: that is a bug, reported as one here. */
ct_status ct__error_prefix(const char *fmt, ...) {
  char ctx[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  if (last_status == CT_OK)
    return ct__error(CT_EBACKEND, "%s: failed without an error message (a bug in cuttle; please report it)", ctx);
  size_t n = strlen(ctx), len = strlen(last_msg);
  if (strncmp(last_msg, ctx, n) == 0 && last_msg[n] == ':') return last_status;
  /* Shift the message right by "<context>: " (the context is shorter than the buffer), losing
   * its end if it no longer fits. */
  if (len > sizeof last_msg - 1 - (n + 2)) len = sizeof last_msg - 1 - (n + 2);
  memmove(last_msg + n + 2, last_msg, len);
  last_msg[n + 2 + len] = 0;
  memcpy(last_msg, ctx, n);
  last_msg[n] = ':', last_msg[n + 1] = ' ';
  return last_status;
}

void *ct__null_arg(const char *op, const char *arg) {
  if (ct_last_status() == CT_OK)
    ct__error(CT_EINVAL, "%s: %s is NULL (pass a valid handle; a NULL result of an earlier call means that call failed, "
              "and ct_last_error() said why)", op, arg);
  return NULL;
}

ct_status ct__null_status(const char *op, const char *arg) {
  return ct__error(CT_EINVAL, "%s: %s is NULL (pass a valid pointer)", op, arg);
}
