/* src/backend/cpu/amp.c: the fused unscale and inf/NaN check of the GradScaler
 * (src/optim/grad_scaler.c), PyTorch's _amp_foreach_non_finite_check_and_unscale_
 * (aten/src/ATen/native/cuda/AmpKernels.cu): one pass that multiplies every element of a gradient
 * by inv_scale and sets the found-inf flag to 1.0 when any element is inf or NaN. f32 and f64,
 * contiguous g; the flag is a 1-element float32 tensor. */
#include <math.h>
#include "backend/cpu/cpu.h"

/* As AmpKernels.cu, the product is computed in g's type with the multiplier rounded to it. */
#define UNSCALE_LOOP(T)                                                                      \
  do {                                                                                       \
    T *restrict gp = ct__ptr(g);                                                             \
    const T inv = (T)inv_scale;                                                              \
    _Pragma("omp parallel for schedule(static) reduction(| : bad) if (n >= 65536)")          \
    for (int64_t i = 0; i < n; i++) {                                                        \
      bad |= !isfinite(gp[i]);                                                               \
      gp[i] *= inv;                                                                          \
    }                                                                                        \
  } while (0)

ct_status ct__cpu_amp_unscale_(ct_tensor *g, double inv_scale, ct_tensor *found_inf) {
  int64_t n = ct_tensor_numel(g);
  int bad = 0;
  if (g->dtype == CT_F32) UNSCALE_LOOP(float);
  else UNSCALE_LOOP(double);
  if (bad) *(float *)ct__ptr(found_inf) = 1.0f;
  return CT_OK;
}
