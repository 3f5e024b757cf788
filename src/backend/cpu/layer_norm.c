/* src/backend/cpu/layer_norm.c: layer norm's kernels (core/kernels.def: layer_norm,
 * layer_norm_backward) over the R rows of D elements of a contiguous x, float32 or float64, as
 * PyTorch's CPU kernels (aten/src/ATen/native/cpu/layer_norm_kernel.cpp):
 *   forward:  mean = sum(x) / D, var = sum((x - mean)^2) / D per row (two passes, summed in double),
 *             rstd = 1 / sqrt(var + eps), y = (x - mean) rstd w + b;
 *   backward: with xhat = (x - mean) rstd, a = sum(gy w) / D and c = sum(gy w xhat) / D per row,
 *             gx = rstd (gy w - a - xhat c); gw = sum over rows of gy xhat, gb = sum of gy.
 * The OpenMP threads split the rows; the column sums gw and gb go into per-thread double
 * accumulators (D each) that are added up at the end. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/cpu.h"

#define LN_PARALLEL_MIN 32768 /* elements below which one thread does it all */

#define LN_ROWS(T, SFX)                                                                                    \
  static void ln_forward_##SFX(const T *x, T *y, T *mean_out, T *rstd_out, const T *w, const T *b, int64_t R, \
                               int64_t D, double eps) {                                                   \
    _Pragma("omp parallel for schedule(static) if (R * D >= LN_PARALLEL_MIN)") for (int64_t r = 0; r < R; r++) { \
      const T *xr = x + r * D;                                                                             \
      T *yr = y + r * D;                                                                                   \
      double s = 0, q = 0;                                                                                 \
      _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < D; i++) s += (double)xr[i];             \
      const double m = s / (double)D;                                                                      \
      _Pragma("omp simd reduction(+ : q)") for (int64_t i = 0; i < D; i++) {                               \
        double d = (double)xr[i] - m;                                                                      \
        q += d * d;                                                                                        \
      }                                                                                                    \
      const double rs = 1.0 / sqrt(q / (double)D + eps);                                                   \
      mean_out[r] = (T)m, rstd_out[r] = (T)rs;                                                             \
      const T mt = (T)m, rt = (T)rs;                                                                       \
      if (w && b) {                                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mt) * rt * w[i] + b[i];       \
      } else if (w) {                                                                                      \
        _Pragma("omp simd") for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mt) * rt * w[i];              \
      } else if (b) {                                                                                      \
        _Pragma("omp simd") for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mt) * rt + b[i];              \
      } else {                                                                                             \
        _Pragma("omp simd") for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mt) * rt;                     \
      }                                                                                                    \
    }                                                                                                      \
  }                                                                                                        \
  /* gx (NULL: not wanted) per row; gw, gb (NULL: not wanted) into accw, accb: nt rows of D doubles */     \
  static void ln_backward_##SFX(T *gx, double *accw, double *accb, int nt, const T *gy, const T *x, const T *w, \
                                const T *mean, const T *rstd, int64_t R, int64_t D) {                      \
    _Pragma("omp parallel if (R * D >= LN_PARALLEL_MIN)") {                                                \
      for (int64_t t = omp_get_thread_num(); t < nt; t += omp_get_num_threads()) {                         \
        if (accw) memset(accw + t * D, 0, (size_t)D * sizeof(double));                                    \
        if (accb) memset(accb + t * D, 0, (size_t)D * sizeof(double));                                    \
      }                                                                                                    \
      _Pragma("omp for schedule(static)") for (int64_t r = 0; r < R; r++) {                                \
        const T *gr = gy + r * D, *xr = x + r * D;                                                         \
        const double m = (double)mean[r], rs = (double)rstd[r];                                            \
        const int tid = omp_get_thread_num();                                                              \
        if (accw || accb) {                                                                                \
          double *aw = accw ? accw + tid * D : NULL, *ab = accb ? accb + tid * D : NULL;                   \
          for (int64_t i = 0; i < D; i++) {                                                                \
            if (aw) aw[i] += (double)gr[i] * (((double)xr[i] - m) * rs);                                   \
            if (ab) ab[i] += (double)gr[i];                                                                \
          }                                                                                                \
        }                                                                                                  \
        if (!gx) continue;                                                                                 \
        double a = 0, c = 0;                                                                               \
        _Pragma("omp simd reduction(+ : a, c)") for (int64_t i = 0; i < D; i++) {                          \
          double gw_ = (double)gr[i] * (w ? (double)w[i] : 1.0);                                           \
          a += gw_, c += gw_ * (((double)xr[i] - m) * rs);                                                 \
        }                                                                                                  \
        a /= (double)D, c /= (double)D;                                                                    \
        T *o = gx + r * D;                                                                                 \
        for (int64_t i = 0; i < D; i++) {                                                                  \
          double gw_ = (double)gr[i] * (w ? (double)w[i] : 1.0), xh = ((double)xr[i] - m) * rs;            \
          o[i] = (T)(rs * (gw_ - a - xh * c));                                                             \
        }                                                                                                  \
      }                                                                                                    \
    }                                                                                                      \
  }

LN_ROWS(float, f32)
LN_ROWS(double, f64)

ct_status ct__cpu_layer_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_rstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, int64_t D, double eps) {
  if (x->dtype != CT_F32 && x->dtype != CT_F64)
    return ct__error(CT_EDTYPE, "layer_norm (cpu): float32 or float64 only, got %s", ct_dtype_name(x->dtype));
  int64_t R = D > 0 ? ct_tensor_numel(x) / D : 0;
  if (x->dtype == CT_F32)
    ln_forward_f32(ct__ptr(x), ct__ptr(y), ct__ptr(save_mean), ct__ptr(save_rstd), w ? ct__ptr(w) : NULL,
                   b ? ct__ptr(b) : NULL, R, D, eps);
  else
    ln_forward_f64(ct__ptr(x), ct__ptr(y), ct__ptr(save_mean), ct__ptr(save_rstd), w ? ct__ptr(w) : NULL,
                   b ? ct__ptr(b) : NULL, R, D, eps);
  return CT_OK;
}

ct_status ct__cpu_layer_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_rstd, int64_t D) {
  if (x->dtype != CT_F32 && x->dtype != CT_F64)
    return ct__error(CT_EDTYPE, "layer_norm_backward (cpu): float32 or float64 only, got %s", ct_dtype_name(x->dtype));
  int64_t R = D > 0 ? ct_tensor_numel(x) / D : 0;
  int nt = omp_get_max_threads();
  double *acc = gw || gb ? ct__malloc((size_t)(2 * nt * D) * sizeof(double), "layer_norm backward sums") : NULL;
  if ((gw || gb) && !acc) return CT_ENOMEM;
  double *accw = gw ? acc : NULL, *accb = gb ? acc + nt * D : NULL;
  if (x->dtype == CT_F32)
    ln_backward_f32(gx ? ct__ptr(gx) : NULL, accw, accb, nt, ct__ptr(gy), ct__ptr(x), w ? ct__ptr(w) : NULL,
                    ct__ptr(save_mean), ct__ptr(save_rstd), R, D);
  else
    ln_backward_f64(gx ? ct__ptr(gx) : NULL, accw, accb, nt, ct__ptr(gy), ct__ptr(x), w ? ct__ptr(w) : NULL,
                    ct__ptr(save_mean), ct__ptr(save_rstd), R, D);
  /* the per-thread column sums added up, in the thread order */
  for (int k = 0; k < 2; k++) {
    ct_tensor *out = k ? gb : gw;
    const double *a = k ? accb : accw;
    if (!out) continue;
    for (int64_t i = 0; i < D; i++) {
      double s = 0;
      for (int t = 0; t < nt; t++) s += a[t * D + i];
      if (out->dtype == CT_F32) ((float *)ct__ptr(out))[i] = (float)s;
      else ((double *)ct__ptr(out))[i] = s;
    }
  }
  free(acc);
  return CT_OK;
}
