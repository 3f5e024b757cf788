/* src/backend/cpu/optim.c: fused SGD and Adam/AdamW updates, one pass over each parameter
 * instead of a dozen elementwise ops with temporaries (the formulas are torch.optim's, written
 * out in src/optim/optimizer.c). f32 and f64, contiguous tensors. */
#include <math.h>
#include "backend/cpu/cpu.h"

/* Parameters of at least this many elements are updated by all the threads. The update streams 28
 * bytes an element (Adam), so 16384 elements are some 10 us on one thread against a parallel
 * region's few us; at 65536, resnet18's 3 x 3 x 64 x 64 layer1 convs (36864) ran on one thread
 * while the others waited (docs/perf-history.md). */
#define OPTIM_PARALLEL_MIN 16384

/* The constants are hoisted and the arithmetic stays in T, so that the float32 loop vectorizes
 * (sqrt and division included); the formula is torch.optim.Adam's, in its order:
 *   denom = sqrt(v) / sqrt(1 - beta2^t) + eps,  p -= lr / (1 - beta1^t) * m / denom. */
#define ADAM_LOOP(T, SQRT)                                                                    \
  do {                                                                                        \
    T *restrict pp = ct__ptr(p), *restrict mp = ct__ptr(m), *restrict vp = ct__ptr(v);        \
    const T *restrict gp = ct__ptr(g);                                                        \
    const T b1 = (T)a->beta1, nb1 = (T)(1.0 - a->beta1), b2 = (T)a->beta2, nb2 = (T)(1.0 - a->beta2); \
    const T eps = (T)a->eps, step = (T)(a->lr / bc1), sbc2 = (T)sqrt(bc2);                       \
    /* AdamW: p *= 1 - lr wd; Adam: g += wd p. The other factor is exactly 1 or 0. */          \
    const T decay = a->decoupled ? (T)(1.0 - a->lr * a->weight_decay) : (T)1;                \
    const T l2 = a->decoupled ? (T)0 : (T)a->weight_decay;                                    \
    _Pragma("omp parallel for simd schedule(static) if (n >= OPTIM_PARALLEL_MIN)") for (int64_t i = 0; i < n; i++) { \
      T gi = gp[i] + l2 * pp[i];                                                              \
      T mi = b1 * mp[i] + nb1 * gi, vi = b2 * vp[i] + nb2 * gi * gi;                          \
      mp[i] = mi, vp[i] = vi;                                                                 \
      pp[i] = pp[i] * decay - step * mi / (SQRT(vi) / sbc2 + eps);                            \
    }                                                                                         \
  } while (0)

/* t of a capturable step (ct_adam_args.step: float32 on this device, host memory here) */
static double step_count(const ct_tensor *t) { return *(const float *)ct__ptr(t); }

ct_status ct__cpu_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a) {
  int64_t n = ct_tensor_numel(p);
  /* the host's corrections, or the same formula (optimizer.c's) on the count the tensor holds */
  double bc1 = a->step ? 1.0 - pow(a->beta1, step_count(a->step)) : a->bias_correction1;
  double bc2 = a->step ? 1.0 - pow(a->beta2, step_count(a->step)) : a->bias_correction2;
  if (p->dtype == CT_F32) ADAM_LOOP(float, sqrtf);
  else ADAM_LOOP(double, sqrt);
  return CT_OK;
}

#define SGD_LOOP(T)                                                                           \
  do {                                                                                        \
    T *pp = ct__ptr(p), *bp = buf ? (T *)ct__ptr(buf) : NULL;                                 \
    const T *gp = ct__ptr(g);                                                                 \
    _Pragma("omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)") for (int64_t i = 0; i < n; i++) { \
      T d = gp[i] + (T)a->weight_decay * pp[i];                                               \
      if (bp) {                                                                               \
        bp[i] = first ? d : (T)a->momentum * bp[i] + (T)(1.0 - a->dampening) * d;             \
        d = a->nesterov ? d + (T)a->momentum * bp[i] : bp[i];                                 \
      }                                                                                       \
      pp[i] -= (T)a->lr * d;                                                                  \
    }                                                                                         \
  } while (0)

ct_status ct__cpu_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a) {
  int64_t n = ct_tensor_numel(p);
  int first = a->step ? step_count(a->step) == 1.0 : a->first_step;
  if (p->dtype == CT_F32) SGD_LOOP(float);
  else SGD_LOOP(double);
  return CT_OK;
}
