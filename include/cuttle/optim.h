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
  /* 1: torch.optim's capturable=True, for steps replayed from a graph (cuttle/cuda.h). The step
   * count lives on the parameters' device (a float32 scalar, as torch's), is advanced there, and
   * the fused kernels read it, so Adam's bias corrections and SGD's first momentum step follow the
   * replays. The parameters must share one device (ct_optimizer_step fails with CT_EDEVICE
   * otherwise; the count follows them to another device) and be float32 or float64 and dense (the
   * fused update; CT_EUNSUPPORTED otherwise). The state slots must exist
   * before a capture (an eager step, or ct_optimizer_init_state). ct_optimizer_steps then reads
   * the device (a synchronization). Exact to 2^24 steps, as torch's float32 count. */
  int capturable;
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
/* Updates done so far; with capturable, read from the device (-1 with the error set when the read
 * fails, e.g. inside a capture). */
CT_API int64_t ct_optimizer_steps(const ct_optimizer *o);
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

/* ---- GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler
 * (torch/amp/grad_scaler.py; the scale update is _amp_update_scale_ of
 * aten/src/ATen/native/cuda/AmpKernels.cu). The loop is PyTorch's:
 *   loss = forward(); scaled = ct_grad_scaler_scale(s, loss); ct_backward(scaled);
 *   [ct_grad_scaler_unscale_(s, opt); clip ...]  ct_grad_scaler_step(s, opt); ct_grad_scaler_update(s);
 * Unscaling and the inf/NaN check are one fused pass per gradient (the backend's amp_unscale_); the
 * found-inf flag stays on each device until ct_grad_scaler_step reads it, so a step costs one
 * synchronization per device holding gradients. Beyond PyTorch (pytorch#55585), the scaler says
 * what it did: the scale, whether the last step was skipped, and the counts of steps taken and
 * skipped. The scale is kept on the host; PyTorch keeps it in a device tensor. */
typedef struct {
  double init_scale;       /* 0 = 2^16 = 65536.0; must be > 0 and finite */
  double growth_factor;    /* 0 = 2.0; must be > 1 */
  double backoff_factor;   /* 0 = 0.5; must be in (0, 1) */
  int64_t growth_interval; /* 0 = 2000; must be > 0 */
  int disabled;            /* PyTorch's enabled=False: scale, step and update pass through */
} ct_grad_scaler_opts;

/* The scaler's state, PyTorch's GradScaler.state_dict() ("scale", "growth_factor", "backoff_factor",
 * "growth_interval", "_growth_tracker") plus the counts of pytorch#55585, for checkpoints. */
typedef struct {
  double scale;
  double growth_factor, backoff_factor;
  int64_t growth_interval;
  int64_t growth_tracker;  /* consecutive finite steps since the last change of scale */
  int64_t steps_taken, steps_skipped;
  int last_step_skipped;   /* 1 when the last ct_grad_scaler_step skipped, 0 when it ran or none ran */
} ct_grad_scaler_state;

typedef struct ct_grad_scaler ct_grad_scaler;

/* A scaler with options opts (zeros take PyTorch's defaults). The caller frees it with
 * ct_grad_scaler_free. Errors (NULL): CT_EINVAL for NULL opts or an option outside its range, as
 * GradScaler's constructor asserts (growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0);
 * CT_ENOMEM. */
CT_API ct_grad_scaler *ct_grad_scaler_new(const ct_grad_scaler_opts *opts);
/* Frees s and its device flags; NULL is a no-op. */
CT_API void ct_grad_scaler_free(ct_grad_scaler *s);
/* loss * scale: a new tensor of loss's shape, dtype and device, recorded on the tape so that
 * backward gives scaled gradients; the caller frees it. Disabled: loss * 1 (still a new tensor).
 * GradScaler.scale. Errors (NULL): CT_EINVAL for a NULL scaler or loss, and those of ct_mul_scalar. */
CT_API ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, ct_tensor *loss);
/* Divide, in place, the gradient of every parameter of opt that has one by the scale, and record on
 * the gradient's device whether any of them holds an inf or NaN (no synchronization).
 * GradScaler.unscale_. Errors: CT_EINVAL for NULL arguments, and, as PyTorch's RuntimeError, when
 * unscale_ was already called for opt since the last update, or after step; errors of the kernels.
 * Disabled: does nothing and returns CT_OK. */
CT_API ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt);
/* Unscale opt's gradients if ct_grad_scaler_unscale_ has not, read the found-inf flags (one
 * synchronization per device), and run ct_optimizer_step(opt) unless a gradient was inf or NaN.
 * GradScaler.step. Returns 1 when the optimizer stepped, 0 when the step was skipped, a negative
 * ct_status on error: CT_EINVAL for NULL arguments or a second step for opt before update (PyTorch's
 * RuntimeError), and the errors of unscale_ and of ct_optimizer_step. Disabled: steps, returns 1. */
CT_API int ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt);
/* The scale update of torch's _amp_update_scale_, over the found-inf flags of every optimizer
 * unscaled since the last update: on an inf or NaN, scale *= backoff_factor and the growth tracker
 * goes to 0; else the tracker grows by 1, and on reaching growth_interval the scale is multiplied by
 * growth_factor (kept only when the float32 result is finite) and the tracker goes to 0. The scale
 * is rounded to float32, as PyTorch keeps it. GradScaler.update (without its new_scale argument).
 * Errors: CT_EINVAL for NULL s, or when no unscale_ or step ran since the last update (PyTorch's
 * "No inf checks were recorded prior to update"). Disabled: CT_OK, nothing changes. */
CT_API ct_status ct_grad_scaler_update(ct_grad_scaler *s);
/* The current scale (GradScaler.get_scale; 1.0 when disabled, as PyTorch). NAN with CT_EINVAL for NULL. */
CT_API double ct_grad_scaler_scale_value(const ct_grad_scaler *s);
/* The number of ct_grad_scaler_step calls that ran, or skipped, the optimizer's step; -1 with
 * CT_EINVAL for NULL. */
CT_API int64_t ct_grad_scaler_steps_taken(const ct_grad_scaler *s);
CT_API int64_t ct_grad_scaler_steps_skipped(const ct_grad_scaler *s);
/* 1 when the last ct_grad_scaler_step skipped the optimizer's step, 0 when it stepped or no step
 * ran yet; -1 with CT_EINVAL for NULL. */
CT_API int ct_grad_scaler_last_step_skipped(const ct_grad_scaler *s);
/* Copy the state out (GradScaler.state_dict), or restore it (load_state_dict). Errors: CT_EINVAL for
 * NULL arguments; set also for a state outside the ranges of ct_grad_scaler_opts, a scale that is
 * not > 0 and finite, or negative counts, and then changes nothing. */
CT_API ct_status ct_grad_scaler_state_get(const ct_grad_scaler *s, ct_grad_scaler_state *out);
CT_API ct_status ct_grad_scaler_state_set(ct_grad_scaler *s, const ct_grad_scaler_state *st);

#ifdef __cplusplus
}
#endif
#endif
