/* src/backend/cpu/softmax.c: softmax and log_softmax over the last dim of a contiguous (R, C)
 * tensor, max-subtracted for stability, and their backward:
 *   softmax:     gx = y * (gy - sum(gy * y))
 *   log_softmax: gx = gy - exp(y) * sum(gy) */
#include <math.h>
#include "backend/cpu/cpu.h"

ct_status ct__cpu_softmax(ct_tensor *y, ct_tensor *x, int log_) {
  int64_t C = x->ndim ? x->shape[x->ndim - 1] : 1, R = C ? ct_tensor_numel(x) / C : 0;
  const char *xb = ct__ptr(x);
  char *yb = ct__ptr(y);
  ct_dtype dt = x->dtype;
  size_t es = ct_dtype_size(dt);
#pragma omp parallel for schedule(static) if (R * C >= 32768)
  for (int64_t r = 0; r < R; r++) {
    const char *xr = xb + r * C * (int64_t)es;
    char *yr = yb + r * C * (int64_t)es;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; c++) {
      double v = ct__load(xr + c * (int64_t)es, dt);
      if (v > m) m = v;
    }
    for (int64_t c = 0; c < C; c++) s += exp(ct__load(xr + c * (int64_t)es, dt) - m);
    double ls = log(s);
    for (int64_t c = 0; c < C; c++) {
      double v = ct__load(xr + c * (int64_t)es, dt) - m;
      ct__store(yr + c * (int64_t)es, dt, log_ ? v - ls : exp(v - ls));
    }
  }
  return CT_OK;
}

ct_status ct__cpu_softmax_backward(ct_tensor *gx, ct_tensor *gy, ct_tensor *y, int log_) {
  int64_t C = y->ndim ? y->shape[y->ndim - 1] : 1, R = C ? ct_tensor_numel(y) / C : 0;
  ct_dtype dt = y->dtype;
  size_t es = ct_dtype_size(dt);
#pragma omp parallel for schedule(static) if (R * C >= 32768)
  for (int64_t r = 0; r < R; r++) {
    const char *gyr = (const char *)ct__ptr(gy) + r * C * (int64_t)es;
    const char *yr = (const char *)ct__ptr(y) + r * C * (int64_t)es;
    char *gxr = (char *)ct__ptr(gx) + r * C * (int64_t)es;
    double s = 0;
    for (int64_t c = 0; c < C; c++) {
      double g = ct__load(gyr + c * (int64_t)es, dt);
      s += log_ ? g : g * ct__load(yr + c * (int64_t)es, dt);
    }
    for (int64_t c = 0; c < C; c++) {
      double g = ct__load(gyr + c * (int64_t)es, dt), yv = ct__load(yr + c * (int64_t)es, dt);
      ct__store(gxr + c * (int64_t)es, dt, log_ ? g - exp(yv) * s : yv * (g - s));
    }
  }
  return CT_OK;
}
