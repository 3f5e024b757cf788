/* src/core/sync_debug.c: the sync-debug mode (cuttle/cuda.h, after torch.cuda.set_sync_debug_mode),
 * which reports each implicit synchronization of the copy paths. Every path that blocks the host on
 * a device calls ct__sync_point first, in core (copies, reads) and in ops (ct_to) alike. */
#include <stdio.h>
#include <stdlib.h>
#include "core/internal.h"

static int sync_mode = -1; /* -1: not read from the environment yet */
static uint64_t sync_warnings;

int ct__sync_debug_action(int mode, ct_device_kind kind) {
  if (kind == CT_CPU) return 0; /* the host never waits for itself */
  return mode == CT_SYNC_DEBUG_WARN ? 1 : mode == CT_SYNC_DEBUG_ERROR ? 2 : 0;
}

int ct_get_sync_debug_mode(void) {
  int m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
  if (m < 0) {
    const char *e = getenv("CUTTLE_SYNC_DEBUG");
    m = e && (e[0] == '1' || e[0] == '2') && !e[1] ? e[0] - '0' : 0;
    int expect = -1;
    __atomic_compare_exchange_n(&sync_mode, &expect, m, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
  }
  return m;
}

ct_status ct_set_sync_debug_mode(int mode) {
  if (mode < CT_SYNC_DEBUG_OFF || mode > CT_SYNC_DEBUG_ERROR)
    return ct__error(CT_EINVAL, "ct_set_sync_debug_mode: mode must be 0 (off), 1 (warn) or 2 (error), got %d", mode);
  __atomic_store_n(&sync_mode, mode, __ATOMIC_RELAXED);
  return CT_OK;
}

uint64_t ct__sync_debug_warnings(void) { return __atomic_load_n(&sync_warnings, __ATOMIC_RELAXED); }

ct_status ct__sync_point(const char *op, ct_device dev, const char *what) {
  char name[32];
  if (ct__capturing(dev)) {
    ct__capture_refuse(op);
    return ct__error(CT_EINVAL, "%s: would synchronize the host with %s (%s) while a graph capture runs there; a "
                     "captured region can hold no synchronization: read values and copy to or from the host before "
                     "ct_device_graph_capture_begin or after ct_device_graph_capture_end",
                     op, ct_device_str(dev, name, sizeof name), what);
  }
  int action = ct__sync_debug_action(ct_get_sync_debug_mode(), dev.kind);
  if (action == 0) return CT_OK;
  ct_device_str(dev, name, sizeof name);
  if (action == 1) {
    __atomic_add_fetch(&sync_warnings, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "cuttle: warning: %s synchronized the host with %s (%s); sync-debug mode is 1 (warn)\n", op, name, what);
    return CT_OK;
  }
  return ct__error(CT_EINVAL,
                   "%s: called a synchronizing operation on %s (%s) while sync-debug mode is 2 (error); use pinned memory "
                   "(ct_empty_pinned) with CT_NON_BLOCKING and one explicit ct_synchronize, or ct_set_sync_debug_mode(0)",
                   op, name, what);
}
