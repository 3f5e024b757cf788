/* src/optim/schedule.c: learning-rate schedules in closed form (torch.optim.lr_scheduler's
 * StepLR and CosineAnnealingLR, evaluated per epoch). */
#include <math.h>
#include "core/internal.h"

double ct_sched_lr(const ct_sched_opts *s, double base_lr, int epoch) {
  if (!s) return ct__null_status("ct_sched_lr", "s"), NAN;
  if (epoch < 0) return ct__error(CT_EINVAL, "ct_sched_lr: epoch must be >= 0, got %d", epoch), NAN;
  switch (s->kind) {
    case CT_SCHED_STEP: {
      double gamma = s->gamma > 0 ? s->gamma : 0.1;
      int step = s->step_size > 0 ? s->step_size : 1;
      return base_lr * pow(gamma, (double)(epoch / step));
    }
    case CT_SCHED_COSINE: {
      int tmax = s->t_max > 0 ? s->t_max : 1;
      return s->eta_min + (base_lr - s->eta_min) * (1.0 + cos(M_PI * (double)epoch / (double)tmax)) / 2.0;
    }
    default:
      return base_lr;
  }
}
