/* cuttle/optim.h: optimizers and learning-rate schedules with PyTorch's defaults and formulas
 * (torch.optim.SGD, Adam, AdamW; StepLR, CosineAnnealingLR). */
#ifndef CUTTLE_OPTIM_H
#define CUTTLE_OPTIM_H

#include "cuttle/export.h"

#include "cuttle/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CT_OPTIM_SGD = 0, CT_OPTIM_ADAM, CT_OPTIM_ADAMW } ct_optim_kind;

typedef struct {
  ct_optim_kind kind;
  double lr;           /* 0 = 1e-3 for Adam/AdamW, 1e-2 for SGD */
  double momentum;     /* SGD */
  double dampening;    /* SGD */
  int nesterov;        /* SGD; needs momentum > 0 and dampening 0 */
  double weight_decay; /* SGD/Adam: L2 added to the gradient; AdamW: decoupled; AdamW's 0 = 1e-2 */
  double beta1, beta2; /* 0 = 0.9, 0.999 */
  double eps;          /* 0 = 1e-8 */
} ct_optim_opts;

typedef struct ct_optimizer ct_optimizer;

/* An optimizer over the parameters of m (borrowed: m must outlive it). Errors: CT_EINVAL for
 * a bad option, as torch.optim's ValueError (a negative or NaN lr, momentum, weight_decay or eps,
 * a beta outside [0, 1), an unknown kind, nesterov without momentum). */
CT_API ct_optimizer *ct_optimizer_new(ct_module *m, const ct_optim_opts *opts);
CT_API void ct_optimizer_free(ct_optimizer *o);
/* One update of every parameter that has a gradient, under no-grad. */
CT_API ct_status ct_optimizer_step(ct_optimizer *o);
/* Drop the gradients of every parameter. */
CT_API void ct_optimizer_zero_grad(ct_optimizer *o);
CT_API double ct_optimizer_lr(const ct_optimizer *o);
CT_API void ct_optimizer_set_lr(ct_optimizer *o, double lr);
CT_API int64_t ct_optimizer_steps(const ct_optimizer *o); /* updates done so far */
/* The kind o was created with (CT_OPTIM_SGD for NULL), so checkpoints can record it exactly. */
CT_API ct_optim_kind ct_optimizer_kind(const ct_optimizer *o);
/* The optimizer's state tensors, named "state.<param name>.<slot>" with slot "momentum_buffer",
 * "exp_avg" or "exp_avg_sq", for checkpoints. Same conventions as ct_module_named_tensors. Slots are
 * created lazily by the first step; ct_optimizer_init_state creates them (zeros) now. */
CT_API int ct_optimizer_named_state(ct_optimizer *o, ct_named_tensor *out, int cap);
CT_API ct_status ct_optimizer_init_state(ct_optimizer *o);
CT_API void ct_optimizer_set_steps(ct_optimizer *o, int64_t steps);

/* The getters give NAN (lr) or -1 (steps) and set CT_EINVAL for a NULL optimizer; the setters set
 * CT_EINVAL and change nothing for NULL, a negative or NaN lr, or a negative step count. */

/* Learning-rate schedules, evaluated per epoch. */
typedef enum { CT_SCHED_CONSTANT = 0, CT_SCHED_STEP, CT_SCHED_COSINE } ct_sched_kind;
typedef struct {
  ct_sched_kind kind;
  int step_size;   /* StepLR: decay every step_size epochs */
  double gamma;    /* StepLR: factor, 0 = 0.1 */
  int t_max;       /* Cosine: period in epochs */
  double eta_min;  /* Cosine: floor */
} ct_sched_opts;
/* The learning rate at epoch (0-based) for base_lr, in closed form:
 * step: base_lr * gamma^floor(epoch / step_size);
 * cosine: eta_min + (base_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2.
 * NAN with CT_EINVAL for a NULL s or a negative epoch. */
CT_API double ct_sched_lr(const ct_sched_opts *s, double base_lr, int epoch);

#ifdef __cplusplus
}
#endif
#endif
