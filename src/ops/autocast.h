/* src/ops/autocast.h: the hook by which an op front-end applies the autocast policy
 * (cuttle/autocast.h) to its inputs. Not installed; only src/ and the tests include it.
 *
 * An op under a policy starts, after its NULL checks, with one line:
 *   CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_matmul(a, b), &a, &b);
 * When autocast is on for the inputs' device kind and some floating input lacks the policy's
 * dtype, the hook replaces those inputs (the variables named by the pointers) with their casts,
 * runs the call again with autocast excluded (so the re-entered op and the ops it is made of see
 * no autocast, as torch's ExcludeDispatchKeyGuard in an autocast kernel), releases the casts and
 * returns the call's result. Otherwise it does nothing and the op goes on. A cast that fails makes
 * the op return NULL with the cast's error. */
#ifndef CUTTLE_OPS_AUTOCAST_H
#define CUTTLE_OPS_AUTOCAST_H

#include "core/internal.h"

typedef enum {
  CT__AUTOCAST_LOWER,   /* the region's float16 or bfloat16 */
  CT__AUTOCAST_F32,     /* float32 */
  CT__AUTOCAST_F32_GPU, /* float32 in a CUDA or OpenCL region (torch's CUDA list), the inputs' dtype in a
                         * CPU region (torch's CPU list leaves the op out) */
  CT__AUTOCAST_PROMOTE, /* the widest floating input type */
} ct__autocast_policy;

#define CT__AUTOCAST_MAX_ARGS 4

/* What the hook holds while the op runs again on the casts. */
typedef struct {
  int n;                                  /* casts held in own[] (references outside any scope) */
  ct_tensor *own[CT__AUTOCAST_MAX_ARGS];
  ct_tensor **list;                       /* cat's: n_list inputs, then n_list casts or NULL */
  int n_list;
} ct__autocast_frame;

/* 0: run the op as it is. 1: the inputs *args[i] (n <= CT__AUTOCAST_MAX_ARGS of them; a NULL
 * input is skipped) were replaced by casts that f holds, and autocast is excluded until
 * ct__autocast_release. -1: a cast failed, the error is set and nothing is held. */
int ct__autocast_args(ct__autocast_frame *f, ct__autocast_policy p, int n, ct_tensor **const *args);
/* The same for a list of n inputs (cat): *ts is replaced by a list f holds. */
int ct__autocast_list(ct__autocast_frame *f, ct__autocast_policy p, int n, ct_tensor *const **ts);
/* Release what f holds, end the exclusion, and return result. */
ct_tensor *ct__autocast_release(ct__autocast_frame *f, ct_tensor *result);

#define CT__AUTOCAST_RUN_(r, f, call)              \
  do {                                              \
    if ((r) < 0) return NULL;                       \
    if ((r) > 0) {                                  \
      ct_tensor *ct__ac_y_ = (call);                \
      return ct__autocast_release(&(f), ct__ac_y_); \
    }                                               \
  } while (0)

/* The hook for ops with fixed inputs: the pointers name the input variables. */
#define CT__AUTOCAST(policy, call, ...)                                                                      \
  do {                                                                                                       \
    ct__autocast_frame ct__ac_f_;                                                                            \
    ct_tensor **const ct__ac_a_[] = {__VA_ARGS__};                                                           \
    int ct__ac_r_ = ct__autocast_args(&ct__ac_f_, policy, (int)(sizeof ct__ac_a_ / sizeof *ct__ac_a_), ct__ac_a_); \
    CT__AUTOCAST_RUN_(ct__ac_r_, ct__ac_f_, call);                                                          \
  } while (0)

/* The hook for ops on a list of n inputs; tsp points to the list variable. */
#define CT__AUTOCAST_LIST(policy, call, n, tsp)                        \
  do {                                                                 \
    ct__autocast_frame ct__ac_f_;                                      \
    int ct__ac_r_ = ct__autocast_list(&ct__ac_f_, policy, (n), (tsp)); \
    CT__AUTOCAST_RUN_(ct__ac_r_, ct__ac_f_, call);                     \
  } while (0)

/* ---- for tests */
/* Entries in this thread's cast cache. */
int64_t ct__autocast_cache_size(void);
/* The cached cast of t to dt (borrowed), or NULL. */
ct_tensor *ct__autocast_cached(const ct_tensor *t, ct_dtype dt);
/* Casts the hooks made on this thread (cache hits not counted), since the thread started. */
int64_t ct__autocast_casts_made(void);

#endif
