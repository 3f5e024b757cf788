/* src/core/capture.c: which device a graph capture runs on (one at a time in the process; the
 * public calls are core/cuda.c's ct_device_graph_*). A leaf of core: the synchronizing paths
 * (ct__sync_point, ct_synchronize) ask it, so it calls nothing of theirs. */
#include "core/internal.h"

static int capture_on;        /* 1 while a capture runs, 2 while one is being claimed (atomic) */
static ct_device capture_dev; /* its device, written before capture_on is set */

int ct__capturing(ct_device d) {
  return __atomic_load_n(&capture_on, __ATOMIC_ACQUIRE) == 1 && capture_dev.kind == d.kind && capture_dev.index == d.index;
}

int ct__capture_claim(ct_device d) {
  int expect = 0;
  if (!__atomic_compare_exchange_n(&capture_on, &expect, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 0;
  capture_dev = d; /* published by the store of 1 */
  __atomic_store_n(&capture_on, 1, __ATOMIC_RELEASE);
  return 1;
}

void ct__capture_release(void) { __atomic_store_n(&capture_on, 0, __ATOMIC_RELEASE); }
