/* src/backend/cpu/norm.c: batch norm's kernels (core/kernels.def: batch_norm, batch_norm_backward)
 * over a contiguous x (N, C, S), S the product of the dims after C (1 for (N, C)), float32 or
 * float64, or float16 / bfloat16 with float32 parameters and statistics (computed in float32, as
 * PyTorch's mixed-type batch norm), as PyTorch's CPU kernels (aten/src/ATen/native/Normalization.cpp):
 *   forward:  mean = sum(x) / n, var = sum((x - mean)^2) / n over the n = N S values of a channel
 *             (two passes, accumulated in double), invstd = 1 / sqrt(var + eps),
 *             y = (x - mean) invstd w + b; running_mean and running_var move by momentum toward
 *             mean and the unbiased variance sum((x - mean)^2) / (n - 1);
 *   backward: gb = sum(gy), gw = sum(gy (x - mean)) invstd, and
 *             gx = (gy - gb / n - (x - mean) sum(gy (x - mean)) invstd^2 / n) invstd w in training,
 *             gx = gy invstd w in eval.
 * The OpenMP threads split the channels; each thread walks its channels in blocks of BN_BLOCK,
 * image by image, so it reads x in runs of (block) S contiguous values and keeps its sums on its stack. */
#include <math.h>
#include <omp.h>
#include "backend/common.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"

#define BN_BLOCK 256            /* channels whose sums a thread keeps at a time */
#define BN_PARALLEL_MIN 32768   /* elements below which one thread does it all */

/* this thread's channels [*c0, *c1) of C */
static void bn_channels(int64_t C, int64_t *c0, int64_t *c1) {
  int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
  *c0 = C * t / T, *c1 = C * (t + 1) / T;
}

/* element c of a 1-D parameter p (any stride), dflt when p is NULL */
static inline double bn_get(const ct_tensor *p, int64_t c, double dflt) {
  if (!p) return dflt;
  return ct__load((const char *)ct__ptr(p) + c * p->stride[0] * (int64_t)ct_dtype_size(p->dtype), p->dtype);
}
static inline void bn_set(ct_tensor *p, int64_t c, double v) {
  ct__store((char *)ct__ptr(p) + c * p->stride[0] * (int64_t)ct_dtype_size(p->dtype), p->dtype, v);
}

/* The passes over the channels [c0, c0 + nb) of x (N, C, S), for element type T (suffix SFX):
 *   sum:    s[j] += sum of x's channel c0 + j
 *   sqdev:  q[j] += sum of (x - m[j])^2
 *   affine: y = (x - m[j]) a[j] + b[j]
 *   dsums:  s[j] += sum of gy, d[j] += sum of gy (x - m[j])
 *   dx:     gx = A[j] gy - B[j] (x - m[j]) - D[j]
 * S == 1 (an (N, C) input, or 1x1 images) runs along the channels instead, so that it vectorizes.
 * noipa: the half kernels call these on slabs with N = 1 and c0 = 0, and gcc's clones of them for
 * those constants lost the vectorized loops (a bfloat16 forward of (64, 64, 14, 14) took 850 us
 * against 430 us by casts; 415 us with noipa). */
#define BN_PASSES(T, SFX)                                                                                               \
  static __attribute__((noipa)) void bn_sum_##SFX(const T *x, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t nb, double *s) {           \
    for (int64_t n = 0; n < N; n++) {                                                                                 \
      const T *xn = x + (n * C + c0) * S;                                                                             \
      if (S == 1) {                                                                                                   \
        _Pragma("omp simd") for (int64_t j = 0; j < nb; j++) s[j] += (double)xn[j];                                   \
        continue;                                                                                                     \
      }                                                                                                               \
      for (int64_t j = 0; j < nb; j++) {                                                                              \
        const T *p = xn + j * S;                                                                                      \
        double a = 0;                                                                                                 \
        _Pragma("omp simd reduction(+ : a)") for (int64_t i = 0; i < S; i++) a += (double)p[i];                       \
        s[j] += a;                                                                                                    \
      }                                                                                                               \
    }                                                                                                                 \
  }                                                                                                                   \
  static __attribute__((noipa)) void bn_sqdev_##SFX(const T *x, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t nb, const double *m,     \
                             double *q) {                                                                             \
    for (int64_t n = 0; n < N; n++) {                                                                                 \
      const T *xn = x + (n * C + c0) * S;                                                                             \
      if (S == 1) {                                                                                                   \
        _Pragma("omp simd") for (int64_t j = 0; j < nb; j++) {                                                        \
          double d = (double)xn[j] - m[j];                                                                            \
          q[j] += d * d;                                                                                              \
        }                                                                                                             \
        continue;                                                                                                     \
      }                                                                                                               \
      for (int64_t j = 0; j < nb; j++) {                                                                              \
        const T *p = xn + j * S;                                                                                      \
        const double mj = m[j];                                                                                       \
        double a = 0;                                                                                                 \
        _Pragma("omp simd reduction(+ : a)") for (int64_t i = 0; i < S; i++) {                                        \
          double d = (double)p[i] - mj;                                                                               \
          a += d * d;                                                                                                 \
        }                                                                                                             \
        q[j] += a;                                                                                                    \
      }                                                                                                               \
    }                                                                                                                 \
  }                                                                                                                   \
  static __attribute__((noipa)) void bn_affine_##SFX(const T *x, T *y, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t nb,              \
                              const double *m, const double *a, const double *b) {                                    \
    T mt[BN_BLOCK], at[BN_BLOCK], bt[BN_BLOCK];                                                                       \
    for (int64_t j = 0; j < nb; j++) mt[j] = (T)m[j], at[j] = (T)a[j], bt[j] = (T)b[j];                               \
    for (int64_t n = 0; n < N; n++) {                                                                                 \
      const T *xn = x + (n * C + c0) * S;                                                                             \
      T *yn = y + (n * C + c0) * S;                                                                                   \
      if (S == 1) {                                                                                                   \
        _Pragma("omp simd") for (int64_t j = 0; j < nb; j++) yn[j] = (xn[j] - mt[j]) * at[j] + bt[j];                 \
        continue;                                                                                                     \
      }                                                                                                               \
      for (int64_t j = 0; j < nb; j++) {                                                                              \
        const T *p = xn + j * S;                                                                                      \
        T *r = yn + j * S;                                                                                            \
        const T mj = mt[j], aj = at[j], bj = bt[j];                                                                   \
        _Pragma("omp simd") for (int64_t i = 0; i < S; i++) r[i] = (p[i] - mj) * aj + bj;                             \
      }                                                                                                               \
    }                                                                                                                 \
  }                                                                                                                   \
  static __attribute__((noipa)) void bn_dsums_##SFX(const T *gy, const T *x, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t nb,        \
                             const double *m, double *s, double *d) {                                                 \
    for (int64_t n = 0; n < N; n++) {                                                                                 \
      const T *gn = gy + (n * C + c0) * S, *xn = x + (n * C + c0) * S;                                               \
      if (S == 1) {                                                                                                   \
        _Pragma("omp simd") for (int64_t j = 0; j < nb; j++) {                                                        \
          double g = (double)gn[j];                                                                                   \
          s[j] += g, d[j] += g * ((double)xn[j] - m[j]);                                                              \
        }                                                                                                             \
        continue;                                                                                                     \
      }                                                                                                               \
      for (int64_t j = 0; j < nb; j++) {                                                                              \
        const T *g = gn + j * S, *p = xn + j * S;                                                                     \
        const double mj = m[j];                                                                                       \
        double a = 0, e = 0;                                                                                          \
        _Pragma("omp simd reduction(+ : a, e)") for (int64_t i = 0; i < S; i++) {                                     \
          double gi = (double)g[i];                                                                                   \
          a += gi, e += gi * ((double)p[i] - mj);                                                                     \
        }                                                                                                             \
        s[j] += a, d[j] += e;                                                                                         \
      }                                                                                                               \
    }                                                                                                                 \
  }                                                                                                                   \
  static __attribute__((noipa)) void bn_dx_##SFX(T *gx, const T *gy, const T *x, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t nb,    \
                          const double *m, const double *A, const double *B, const double *D) {                       \
    T mt[BN_BLOCK], at[BN_BLOCK], bt[BN_BLOCK], dt[BN_BLOCK];                                                         \
    for (int64_t j = 0; j < nb; j++) mt[j] = (T)m[j], at[j] = (T)A[j], bt[j] = (T)B[j], dt[j] = (T)D[j];              \
    for (int64_t n = 0; n < N; n++) {                                                                                 \
      const int64_t o = (n * C + c0) * S;                                                                             \
      const T *gn = gy + o, *xn = x + o;                                                                              \
      T *rn = gx + o;                                                                                                 \
      if (S == 1) {                                                                                                   \
        _Pragma("omp simd") for (int64_t j = 0; j < nb; j++) rn[j] = at[j] * gn[j] - bt[j] * (xn[j] - mt[j]) - dt[j]; \
        continue;                                                                                                     \
      }                                                                                                               \
      for (int64_t j = 0; j < nb; j++) {                                                                              \
        const T *g = gn + j * S, *p = xn + j * S;                                                                     \
        T *r = rn + j * S;                                                                                            \
        const T mj = mt[j], aj = at[j], bj = bt[j], dj = dt[j];                                                       \
        _Pragma("omp simd") for (int64_t i = 0; i < S; i++) r[i] = aj * g[i] - bj * (p[i] - mj) - dj;                 \
      }                                                                                                               \
    }                                                                                                                 \
  }

BN_PASSES(float, f32)
BN_PASSES(double, f64)

/* ---- a float16 or bfloat16 x (the mixed kernels: float32 parameters and statistics). Each image's
 * part of a channel block, kb channels of S values (contiguous at (n C + c) S), is converted to a
 * float32 slab with the vectorized loops of half.h and run through the float32 passes as one image
 * of kb channels; outputs come back the same way. The float32 passes then see the values the cast
 * path (x cast to float32 first) gave them, in the same order: bit for bit its results. */
#define BN_SLAB 4096 /* values in a slab when S allows: 16 KiB */

typedef struct {
  int lp;              /* CT_LP_F16 or CT_LP_BF16; 0: x is not half */
  int64_t N, C, S, kb; /* kb: channels in a slab */
  float *a, *b;        /* two slabs of kb S floats (a owns both) */
} bn_slabs;

static inline void slab_in(const bn_slabs *h, float *dst, const void *src, int64_t n, int64_t c, int64_t k) {
  ct__lp_to_f32_n(dst, (const char *)src + (n * h->C + c) * h->S * 2, k * h->S, h->lp);
}
static inline void slab_out(const bn_slabs *h, void *dst, const float *src, int64_t n, int64_t c, int64_t k) {
  ct__f32_to_lp_n((char *)dst + (n * h->C + c) * h->S * 2, src, k * h->S, h->lp);
}

/* BODY for each image n and each slab [k0, k0 + k) of the channel block's nb channels */
#define BN_SLABS_OF(h, nb, BODY)                                   \
  for (int64_t n = 0; n < (h)->N; n++)                             \
    for (int64_t k0 = 0; k0 < (nb); k0 += (h)->kb) {               \
      const int64_t k = (nb) - k0 < (h)->kb ? (nb) - k0 : (h)->kb; \
      BODY                                                         \
    }

/* BN_PASSES's five passes over the channels [c0, c0 + nb) of a half x (and gy, y, gx) */
static void bn_sum_lp(const bn_slabs *h, const void *x, int64_t c0, int64_t nb, double *s) {
  BN_SLABS_OF(h, nb, slab_in(h, h->a, x, n, c0 + k0, k); bn_sum_f32(h->a, 1, k, h->S, 0, k, s + k0);)
}
static void bn_sqdev_lp(const bn_slabs *h, const void *x, int64_t c0, int64_t nb, const double *m, double *q) {
  BN_SLABS_OF(h, nb, slab_in(h, h->a, x, n, c0 + k0, k); bn_sqdev_f32(h->a, 1, k, h->S, 0, k, m + k0, q + k0);)
}
static void bn_affine_lp(const bn_slabs *h, const void *x, void *y, int64_t c0, int64_t nb, const double *m,
                         const double *a, const double *b) {
  BN_SLABS_OF(h, nb, slab_in(h, h->a, x, n, c0 + k0, k);
              bn_affine_f32(h->a, h->b, 1, k, h->S, 0, k, m + k0, a + k0, b + k0); slab_out(h, y, h->b, n, c0 + k0, k);)
}
static void bn_dsums_lp(const bn_slabs *h, const void *gy, const void *x, int64_t c0, int64_t nb, const double *m,
                        double *s, double *d) {
  BN_SLABS_OF(h, nb, slab_in(h, h->a, gy, n, c0 + k0, k); slab_in(h, h->b, x, n, c0 + k0, k);
              bn_dsums_f32(h->a, h->b, 1, k, h->S, 0, k, m + k0, s + k0, d + k0);)
}
static void bn_dx_lp(const bn_slabs *h, void *gx, const void *gy, const void *x, int64_t c0, int64_t nb, const double *m,
                     const double *A, const double *B, const double *D) {
  /* gx into gy's slab: each element is read, then written, at its own index */
  BN_SLABS_OF(h, nb, slab_in(h, h->a, gy, n, c0 + k0, k); slab_in(h, h->b, x, n, c0 + k0, k);
              bn_dx_f32(h->a, h->a, h->b, 1, k, h->S, 0, k, m + k0, A + k0, B + k0, D + k0);
              slab_out(h, gx, h->a, n, c0 + k0, k);)
}

/* This thread's slabs for a half x (lp != 0) with channels to do (has_work): two of kb S floats,
 * BN_SLAB values each, or one channel's S when S is larger; none otherwise. Every thread of the
 * region calls it before any work and meets the others at a barrier, so that when one thread's
 * allocation fails (*nomem set) none has written an output or a running statistic yet. Returns 1
 * when this thread may work. */
static int bn_slabs_start(bn_slabs *h, int lp, int has_work, int64_t N, int64_t C, int64_t S, int *nomem) {
  *h = (bn_slabs){.lp = lp, .N = N, .C = C, .S = S};
  if (lp && has_work) {
    h->kb = S >= BN_SLAB ? 1 : S > 0 ? BN_SLAB / S : BN_BLOCK;
    if (h->kb > BN_BLOCK) h->kb = BN_BLOCK;
    h->a = ct__malloc(2 * (size_t)(h->kb * S) * sizeof(float), "batch_norm's float32 slabs of a half input");
    h->b = h->a ? h->a + h->kb * S : NULL;
    if (!h->a) {
#pragma omp atomic write
      *nomem = 1;
    }
  }
#pragma omp barrier
  int stop;
#pragma omp atomic read
  stop = *nomem;
  return !stop;
}

/* The dtypes the kernels take: x (y, gy, gx) in float32 or float64 with every other operand in
 * x's dtype, or x in float16 or bfloat16 with every other operand float32 (PyTorch's mixed batch
 * norm: half activations, float32 parameters and statistics, as cudnn and ATen's CPU kernel take
 * them). 0 with the error set otherwise. */
static int bn_dtypes_ok(const char *op, const ct_tensor *x, const ct_tensor *stat) {
  int half = x->dtype == CT_F16 || x->dtype == CT_BF16;
  if (!half && x->dtype != CT_F32 && x->dtype != CT_F64) {
    ct__error(CT_EDTYPE, "%s (cpu): float32, float64, float16 or bfloat16 input only, got %s", op, ct_dtype_name(x->dtype));
    return 0;
  }
  ct_dtype want = half ? CT_F32 : x->dtype;
  if (stat->dtype == want) return 1;
  ct__error(CT_EDTYPE, "%s (cpu): statistics of %s for an input of %s (want %s)", op, ct_dtype_name(stat->dtype),
            ct_dtype_name(x->dtype), ct_dtype_name(want));
  return 0;
}

ct_status ct__cpu_batch_norm(ct_tensor *y, ct_tensor *save_mean, ct_tensor *save_invstd, ct_tensor *x, ct_tensor *w,
                             ct_tensor *b, ct_tensor *running_mean, ct_tensor *running_var, int training, double momentum,
                             double eps) {
  if (!bn_dtypes_ok("batch_norm", x, save_mean)) return ct_last_status();
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  const int lp = ct__lp_tag(x->dtype), f32 = x->dtype == CT_F32;
  const double n = (double)N * (double)S;
  const void *xp = ct__ptr(x);
  void *yp = ct__ptr(y);
  int nomem = 0;
#pragma omp parallel if (N * C * S >= BN_PARALLEL_MIN)
  {
    int64_t c0, c1;
    bn_channels(C, &c0, &c1);
    bn_slabs h;
    if (!bn_slabs_start(&h, lp, c1 > c0, N, C, S, &nomem)) c1 = c0; /* no work; the region still ends for all */
    for (int64_t cb = c0; cb < c1; cb += BN_BLOCK) {
      const int64_t nb = c1 - cb < BN_BLOCK ? c1 - cb : BN_BLOCK;
      double mean[BN_BLOCK] = {0}, q[BN_BLOCK] = {0}, invstd[BN_BLOCK], scale[BN_BLOCK], shift[BN_BLOCK];
      if (training) {
        if (lp) bn_sum_lp(&h, xp, cb, nb, mean);
        else if (f32) bn_sum_f32(xp, N, C, S, cb, nb, mean);
        else bn_sum_f64(xp, N, C, S, cb, nb, mean);
        for (int64_t j = 0; j < nb; j++) mean[j] /= n;
        if (lp) bn_sqdev_lp(&h, xp, cb, nb, mean, q);
        else if (f32) bn_sqdev_f32(xp, N, C, S, cb, nb, mean, q);
        else bn_sqdev_f64(xp, N, C, S, cb, nb, mean, q);
        for (int64_t j = 0; j < nb; j++) {
          invstd[j] = 1.0 / sqrt(q[j] / n + eps);
          if (running_mean && running_var) {
            int64_t c = cb + j;
            bn_set(running_mean, c, (1.0 - momentum) * bn_get(running_mean, c, 0) + momentum * mean[j]);
            bn_set(running_var, c, (1.0 - momentum) * bn_get(running_var, c, 0) + momentum * (q[j] / (n - 1)));
          }
        }
      } else {
        for (int64_t j = 0; j < nb; j++)
          mean[j] = bn_get(running_mean, cb + j, 0), invstd[j] = 1.0 / sqrt(bn_get(running_var, cb + j, 0) + eps);
      }
      for (int64_t j = 0; j < nb; j++) {
        bn_set(save_mean, cb + j, mean[j]);
        bn_set(save_invstd, cb + j, invstd[j]);
        scale[j] = invstd[j] * bn_get(w, cb + j, 1.0);
        shift[j] = bn_get(b, cb + j, 0.0);
      }
      if (lp) bn_affine_lp(&h, xp, yp, cb, nb, mean, scale, shift);
      else if (f32) bn_affine_f32(xp, yp, N, C, S, cb, nb, mean, scale, shift);
      else bn_affine_f64(xp, yp, N, C, S, cb, nb, mean, scale, shift);
    }
    free(h.a);
  }
  if (nomem) /* nothing was written */
    return ct__error(CT_ENOMEM, "batch_norm (cpu): out of host memory for the float32 slabs of a %s input", ct_dtype_name(x->dtype));
  return CT_OK;
}

ct_status ct__cpu_batch_norm_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                      ct_tensor *save_mean, ct_tensor *save_invstd, int training) {
  if (!bn_dtypes_ok("batch_norm_backward", x, save_mean)) return ct_last_status();
  int64_t N, C, S;
  ct__be_channel_dims(x, &N, &C, &S);
  const int lp = ct__lp_tag(x->dtype), f32 = x->dtype == CT_F32;
  const double n = (double)N * (double)S;
  const void *xp = ct__ptr(x), *gp = ct__ptr(gy);
  void *gxp = gx ? ct__ptr(gx) : NULL;
  const int sums = gw || gb || (gx && training); /* the per-channel sums anyone needs */
  int nomem = 0;
#pragma omp parallel if (N * C * S >= BN_PARALLEL_MIN)
  {
    int64_t c0, c1;
    bn_channels(C, &c0, &c1);
    bn_slabs h;
    if (!bn_slabs_start(&h, lp, c1 > c0, N, C, S, &nomem)) c1 = c0; /* no work; the region still ends for all */
    for (int64_t cb = c0; cb < c1; cb += BN_BLOCK) {
      const int64_t nb = c1 - cb < BN_BLOCK ? c1 - cb : BN_BLOCK;
      double mean[BN_BLOCK], invstd[BN_BLOCK], s[BN_BLOCK] = {0}, d[BN_BLOCK] = {0};
      for (int64_t j = 0; j < nb; j++) mean[j] = bn_get(save_mean, cb + j, 0), invstd[j] = bn_get(save_invstd, cb + j, 0);
      if (sums) {
        if (lp) bn_dsums_lp(&h, gp, xp, cb, nb, mean, s, d);
        else if (f32) bn_dsums_f32(gp, xp, N, C, S, cb, nb, mean, s, d);
        else bn_dsums_f64(gp, xp, N, C, S, cb, nb, mean, s, d);
      }
      for (int64_t j = 0; j < nb; j++) {
        if (gb) bn_set(gb, cb + j, s[j]);
        if (gw) bn_set(gw, cb + j, d[j] * invstd[j]);
      }
      if (!gx) continue;
      double A[BN_BLOCK], B[BN_BLOCK], D[BN_BLOCK];
      for (int64_t j = 0; j < nb; j++) {
        A[j] = invstd[j] * bn_get(w, cb + j, 1.0);
        B[j] = training ? A[j] * d[j] * invstd[j] * invstd[j] / n : 0;
        D[j] = training ? A[j] * s[j] / n : 0;
      }
      if (lp) bn_dx_lp(&h, gxp, gp, xp, cb, nb, mean, A, B, D);
      else if (f32) bn_dx_f32(gxp, gp, xp, N, C, S, cb, nb, mean, A, B, D);
      else bn_dx_f64(gxp, gp, xp, N, C, S, cb, nb, mean, A, B, D);
    }
    free(h.a);
  }
  if (nomem)
    return ct__error(CT_ENOMEM, "batch_norm_backward (cpu): out of host memory for the float32 slabs of a %s input",
                     ct_dtype_name(x->dtype));
  return CT_OK;
}
