/* src/core/best.c: the choice behind ct_device_best, as a pure function of the devices'
 * properties so that it can be tested without GPUs. It lives in the core beside the registry that
 * calls it (the monitor only reads the same properties). */
#include "core/internal.h"

/* 1 when a should be chosen over b under policy (strictly better; ties keep the earlier one). */
static int better(const ct_device_props *a, const ct_device_props *b, ct_best_policy policy) {
  if (policy == CT_BEST_LEAST_UTILIZATION) {
    int ka = a->utilization >= 0, kb = b->utilization >= 0;
    if (ka != kb) return ka; /* a known utilization beats an unknown one */
    if (ka && a->utilization != b->utilization) return a->utilization < b->utilization;
  }
  return a->free_memory > b->free_memory;
}

int ct__best_index(const ct_device_props *props, int n, ct_best_policy policy) {
  if (!props || n <= 0) return -1;
  int best = 0;
  for (int i = 1; i < n; i++)
    if (better(&props[i], &props[best], policy)) best = i;
  return best;
}
