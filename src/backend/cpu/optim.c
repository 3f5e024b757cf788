/* src/backend/cpu/optim.c: fused SGD and Adam/AdamW updates, one pass over each parameter
 * instead of a dozen elementwise ops with temporaries (the formulas are torch.optim's, written
 * out in src/optim/optimizer.c). f32 and f64, contiguous tensors. */
#include <math.h>
#include "backend/cpu/cpu.h"

#define ADAM_LOOP(T)                                                                          \
  do {                                                                                        \
    T *pp = ct__ptr(p), *mp = ct__ptr(m), *vp = ct__ptr(v);                                   \
    const T *gp = ct__ptr(g);                                                                 \
    _Pragma("omp parallel for schedule(static) if (n >= 65536)") for (int64_t i = 0; i < n; i++) { \
      T gi = gp[i];                                                                           \
      if (a->decoupled) pp[i] *= (T)(1.0 - a->lr * a->weight_decay);                          \
      else gi += (T)a->weight_decay * pp[i];                                                  \
      mp[i] = (T)a->beta1 * mp[i] + (T)(1.0 - a->beta1) * gi;                                 \
      vp[i] = (T)a->beta2 * vp[i] + (T)(1.0 - a->beta2) * gi * gi;                            \
      T denom = (T)sqrt((double)vp[i] / a->bias_correction2) + (T)a->eps;                     \
      pp[i] -= (T)(a->lr / a->bias_correction1) * mp[i] / denom;                              \
    }                                                                                         \
  } while (0)

ct_status ct__cpu_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a) {
  int64_t n = ct_tensor_numel(p);
  if (p->dtype == CT_F32) ADAM_LOOP(float);
  else ADAM_LOOP(double);
  return CT_OK;
}

#define SGD_LOOP(T)                                                                           \
  do {                                                                                        \
    T *pp = ct__ptr(p), *bp = buf ? (T *)ct__ptr(buf) : NULL;                                 \
    const T *gp = ct__ptr(g);                                                                 \
    _Pragma("omp parallel for schedule(static) if (n >= 65536)") for (int64_t i = 0; i < n; i++) { \
      T d = gp[i] + (T)a->weight_decay * pp[i];                                               \
      if (bp) {                                                                               \
        bp[i] = a->first_step ? d : (T)a->momentum * bp[i] + (T)(1.0 - a->dampening) * d;     \
        d = a->nesterov ? d + (T)a->momentum * bp[i] : bp[i];                                 \
      }                                                                                       \
      pp[i] -= (T)a->lr * d;                                                                  \
    }                                                                                         \
  } while (0)

ct_status ct__cpu_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a) {
  int64_t n = ct_tensor_numel(p);
  if (p->dtype == CT_F32) SGD_LOOP(float);
  else SGD_LOOP(double);
  return CT_OK;
}
