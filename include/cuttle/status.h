/* cuttle/status.h: status codes and the thread-local last error.
 *
 * Every cuttle function that can fail either returns a negative ct_status or a NULL pointer, and
 * leaves a message in ct_last_error() naming the op, its arguments (shapes, dtypes, devices) and
 * the fix. Nothing in the library aborts or exits, except when CT_ABORT_ON_ERROR=1 is set in the
 * environment, which turns every error into an abort() for debugging under gdb. */
#ifndef CUTTLE_STATUS_H
#define CUTTLE_STATUS_H

#include "cuttle/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One X-macro table: code name, value, short description. */
#define CT_STATUS_TABLE(X)                                                   \
  X(CT_OK, 0, "ok")                                                          \
  X(CT_EINVAL, -1, "invalid argument")                                       \
  X(CT_ESHAPE, -2, "shape mismatch")                                         \
  X(CT_EDTYPE, -3, "unsupported dtype")                                      \
  X(CT_EDEVICE, -4, "device mismatch or unavailable device")                 \
  X(CT_ENOMEM, -5, "out of memory")                                          \
  X(CT_EIO, -6, "input/output error")                                        \
  X(CT_EFORMAT, -7, "malformed file")                                        \
  X(CT_EUNSUPPORTED, -8, "not supported")                                    \
  X(CT_EAUTOGRAD, -9, "autograd error")                                      \
  X(CT_EBACKEND, -10, "backend error")                                       \
  X(CT_EINTERRUPTED, -11, "interrupted")

typedef enum {
#define CT__STATUS_ENUM(name, value, text) name = value,
  CT_STATUS_TABLE(CT__STATUS_ENUM)
#undef CT__STATUS_ENUM
} ct_status;

/* The short description of a status code ("out of memory"); a static string, never NULL. */
CT_API const char *ct_status_str(ct_status s);

/* The message of the last error on this thread, or "" when none. The pointer stays valid until the
 * next cuttle call on this thread that fails or clears the error. */
CT_API const char *ct_last_error(void);

/* The status code of the last error on this thread (CT_OK when none). */
CT_API ct_status ct_last_status(void);

/* Forget the last error on this thread. */
CT_API void ct_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
