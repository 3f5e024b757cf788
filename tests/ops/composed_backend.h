/* tests/ops/composed_backend.h: what the tests of a composed op's CPU kernels share
 * (test_batch_norm_cpu, test_layer_norm_cpu): a copy of the CPU backend whose table lacks the op's
 * two kernels, on which the front-end composes the op of other ops (as it does for the dtypes and
 * formats the kernels do not take), and leaves of seeded values on either backend, so that the
 * kernels and the composition see the same inputs. */
#ifndef CUTTLE_TESTS_COMPOSED_BACKEND_H
#define CUTTLE_TESTS_COMPOSED_BACKEND_H
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/backend.h"
#include "core/internal.h"

static ct_backend composed_backend; /* the CPU without the op's kernels */

/* composed_backend := the CPU backend with kernels fwd and bwd (ct_kernels fields) removed */
#define COMPOSED_BACKEND_WITHOUT(fwd, bwd)          \
  do {                                              \
    ct_kernels k_ = ct__cpu_backend.kernels;        \
    k_.fwd = NULL;                                  \
    k_.bwd = NULL;                                  \
    composed_backend = ct__cpu_backend;             \
    composed_backend.name = "cpu-composed";         \
    composed_backend.kernels = k_;                  \
  } while (0)

/* n values uniform in [lo, hi) from *seed (an LCG), rounded to float32 for f32 so that both
 * paths see the same values; malloc'd, the caller frees them */
static double *values(int64_t n, double lo, double hi, int f32, unsigned *seed) {
  double *v = malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    double u = lo + ((*seed >> 8) & 0xffffff) / 16777216.0 * (hi - lo);
    v[i] = f32 ? (double)(float)u : u;
  }
  return v;
}

/* a leaf of dtype dt holding v; on composed_backend when composed; requires grad when grad */
static ct_tensor *leaf(const double *v, int ndim, const int64_t *shape, ct_dtype dt, int composed, int grad) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, ndim, shape, CT_F64, CT_DEVICE_CPU));
  ct_tensor *t = ct_assert_nonnull(ct_cast(h, dt));
  ct_tensor_free(h);
  if (composed) t->storage->backend = &composed_backend;
  if (grad) ct_assert_ok(ct_requires_grad_(t, 1));
  return t;
}
/* Fails the test unless y was made, on one node named name when not composed (the kernels) and on
 * some other node when composed; then runs backward of sum(y gy), gy of y's shape and dtype holding
 * gyv. what (the case) and the path name the failure. */
static void node_then_backward(ct_tensor *y, const char *name, int composed, const char *what, const double *gyv) {
  const char *path = composed ? "composed" : "kernel";
  if (!y) fail_msg("%s (%s): %s", what, path, ct_last_error());
  const char *fn = ct_grad_fn_name(y);
  if (composed ? strcmp(fn, name) == 0 : strcmp(fn, name) != 0) fail_msg("%s (%s): the output's node is %s", what, path, fn);
  ct_tensor *gy = leaf(gyv, ct_tensor_ndim(y), ct_tensor_shape(y), ct_tensor_dtype(y), 0, 0);
  ct_tensor *p = ct_assert_nonnull(ct_mul(y, gy));
  ct_tensor *l = ct_assert_nonnull(ct_sum(p, 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  ct_tensor_free(l), ct_tensor_free(p), ct_tensor_free(gy);
}
#endif
