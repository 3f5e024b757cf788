/* src/core/capture.c: which device a graph capture runs on (one at a time in the process; the
 * public calls are core/cuda.c's ct_device_graph_*), and the first op refused inside it. A leaf of
 * core: the synchronizing paths (ct__sync_point, ct_synchronize) ask it, so it calls nothing of
 * theirs. A refusal happens before any device call, so the driver's capture stays valid; the
 * refusal is kept here so that capture_end fails instead of returning a graph without that op. */
#include <stdio.h>
#include "core/internal.h"

static int capture_on;        /* 1 while a capture runs, 2 while one is being claimed (atomic) */
static ct_device capture_dev; /* its device, published by the store of 1 */
static int refused;           /* an op was refused inside the capture (atomic) */
static char refused_op[64];   /* the first one, written by the claim of `refused` */

int ct__capturing(ct_device d) {
  return __atomic_load_n(&capture_on, __ATOMIC_ACQUIRE) == 1 && capture_dev.kind == d.kind && capture_dev.index == d.index;
}

int ct__capture_claim(ct_device d) {
  int expect = 0;
  if (!__atomic_compare_exchange_n(&capture_on, &expect, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 0;
  capture_dev = d;
  __atomic_store_n(&refused, 0, __ATOMIC_RELAXED);
  refused_op[0] = 0;
  __atomic_store_n(&capture_on, 1, __ATOMIC_RELEASE);
  return 1;
}

int ct__capture_running(void) { return __atomic_load_n(&capture_on, __ATOMIC_ACQUIRE) == 1; }

void ct__capture_release(void) { __atomic_store_n(&capture_on, 0, __ATOMIC_RELEASE); }

void ct__capture_refuse(const char *op) {
  int expect = 0;
  if (__atomic_compare_exchange_n(&refused, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    snprintf(refused_op, sizeof refused_op, "%s", op ? op : "an op");
}

ct_status ct__capture_guard(const char *op, ct_device d) {
  if (!ct__capturing(d)) return CT_OK;
  ct__capture_refuse(op);
  return ct__error(CT_EINVAL, "%s: a graph capture runs on that device, which cannot wait for, query or free what it "
                   "uses; call it before ct_device_graph_capture_begin or after ct_device_graph_capture_end", op);
}

const char *ct__capture_refused(void) { return __atomic_load_n(&refused, __ATOMIC_ACQUIRE) ? refused_op : NULL; }
