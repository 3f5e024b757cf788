/* src/optim/grad_scaler.c: the GradScaler of torch.amp (torch/amp/grad_scaler.py), dynamic loss
 * scaling for float16 training, with PyTorch's defaults (init_scale 2^16, growth_factor 2.0,
 * backoff_factor 0.5, growth_interval 2000) and its four methods:
 *   scale:    loss * scale, so that small float16 gradients do not flush to zero;
 *   unscale_: g *= 1 / scale for every parameter gradient, and a found-inf flag per device set when
 *             any gradient holds an inf or NaN, in one fused pass per gradient (the backend's
 *             amp_unscale_, PyTorch's _amp_foreach_non_finite_check_and_unscale_ of
 *             aten/src/ATen/native/cuda/AmpKernels.cu);
 *   step:     unscale_ if not yet done, read the flags (the only synchronization: one per device),
 *             and run the optimizer's step only when every gradient was finite;
 *   update:   torch's _amp_update_scale_ (AmpKernels.cu): on inf/NaN, scale *= backoff_factor and
 *             the growth tracker goes to 0; otherwise the tracker grows by 1 and, when it reaches
 *             growth_interval, scale *= growth_factor and the tracker goes to 0.
 * As in PyTorch, the state of each optimizer since the last update (ready, unscaled, stepped) is kept
 * so that a second unscale_ or step is an error. Unlike PyTorch the scale lives on the host (it is
 * rounded to float32 as PyTorch's float32 scale tensor is): update needs the found-inf flags, which
 * step has already read, so keeping the scale on the device would save nothing. The counts of steps
 * taken and skipped are pytorch#55585's request. */
#include <math.h>
#include <string.h>
#include "core/backend.h"
#include "ops/memory_format.h" /* ct__non_overlapping_and_dense */
#include "ops/ops_internal.h" /* ct__binary_into */
#include "optim/internal.h"

#define CT_GS_MAX_DEVICES 16

typedef enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;

/* What the scaler knows of one optimizer since the last update: its stage, the found-inf flag of
 * each device its gradients live on (1-element float32 tensors, owned), and the flags' verdict once
 * read (-1 while unread). */
typedef struct {
  ct_optimizer *opt;
  stage st;
  int ndev;
  ct_device dev[CT_GS_MAX_DEVICES];
  ct_tensor *flag[CT_GS_MAX_DEVICES];
  int found; /* -1 unread, 0 all finite, 1 an inf or NaN */
} opt_record;

struct ct_grad_scaler {
  ct_grad_scaler_state s;
  int enabled;
  int nrec, caprec;
  opt_record *rec;
};

/* Check a state's ranges (GradScaler's constructor asserts growth_factor > 1.0 and
 * backoff_factor < 1.0; cuttle also requires a positive finite scale and positive interval). */
static ct_status check_state(const char *op, const ct_grad_scaler_state *st) {
  if (!(st->scale > 0) || isinf(st->scale))
    return ct__error(CT_EINVAL, "%s: the scale must be > 0 and finite, got %g", op, st->scale);
  if (!(st->growth_factor > 1) || isinf(st->growth_factor))
    return ct__error(CT_EINVAL, "%s: growth_factor must be > 1 and finite, got %g", op, st->growth_factor);
  if (!(st->backoff_factor > 0 && st->backoff_factor < 1))
    return ct__error(CT_EINVAL, "%s: backoff_factor must be in (0, 1), got %g", op, st->backoff_factor);
  if (st->growth_interval <= 0)
    return ct__error(CT_EINVAL, "%s: growth_interval must be > 0, got %lld", op, (long long)st->growth_interval);
  if (st->growth_tracker < 0 || st->steps_taken < 0 || st->steps_skipped < 0)
    return ct__error(CT_EINVAL, "%s: growth_tracker, steps_taken and steps_skipped must be >= 0, got %lld, %lld and %lld", op,
                     (long long)st->growth_tracker, (long long)st->steps_taken, (long long)st->steps_skipped);
  if (st->last_step_skipped != 0 && st->last_step_skipped != 1)
    return ct__error(CT_EINVAL, "%s: last_step_skipped must be 0 or 1, got %d", op, st->last_step_skipped);
  return CT_OK;
}

ct_grad_scaler *ct_grad_scaler_new(const ct_grad_scaler_opts *opts) {
  if (!opts) CT_FAIL_NULL(CT_EINVAL, "ct_grad_scaler_new: NULL options (pass &(ct_grad_scaler_opts){0} for the defaults)");
  ct_grad_scaler_state st = {
      .scale = opts->init_scale == 0 ? 65536.0 : opts->init_scale,
      .growth_factor = opts->growth_factor == 0 ? 2.0 : opts->growth_factor,
      .backoff_factor = opts->backoff_factor == 0 ? 0.5 : opts->backoff_factor,
      .growth_interval = opts->growth_interval == 0 ? 2000 : opts->growth_interval,
  };
  if (check_state("ct_grad_scaler_new", &st) != CT_OK) return NULL;
  ct_grad_scaler *s = ct__calloc(1, sizeof *s, "a grad scaler");
  if (!s) return NULL;
  s->s = st;
  s->s.scale = (float)st.scale;
  s->enabled = !opts->disabled;
  return s;
}

static void drop_records(ct_grad_scaler *s) {
  for (int r = 0; r < s->nrec; r++)
    for (int d = 0; d < s->rec[r].ndev; d++) ct__tensor_decref(s->rec[r].flag[d]);
  s->nrec = 0;
}

void ct_grad_scaler_free(ct_grad_scaler *s) {
  if (!s) return;
  drop_records(s);
  free(s->rec);
  free(s);
}

ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, ct_tensor *loss) {
  if (!s) CT_FAIL_NULL(CT_EINVAL, "ct_grad_scaler_scale: NULL scaler");
  if (!loss) CT_FAIL_NULL(CT_EINVAL, "ct_grad_scaler_scale: NULL loss");
  ct_tensor *r = ct_mul_scalar(loss, s->enabled ? s->s.scale : 1.0);
  if (!r) ct__error_prefix("ct_grad_scaler_scale");
  return r;
}

/* The record of opt, made (stage ready, no flags) when there is none; NULL on CT_ENOMEM. */
static opt_record *record_of(ct_grad_scaler *s, ct_optimizer *opt) {
  for (int r = 0; r < s->nrec; r++)
    if (s->rec[r].opt == opt) return &s->rec[r];
  if (s->nrec == s->caprec) {
    int cap = s->caprec ? 2 * s->caprec : 4;
    opt_record *n = realloc(s->rec, (size_t)cap * sizeof *n);
    if (!n) return ct__error(CT_ENOMEM, "ct_grad_scaler: out of memory for %d optimizer records", cap), NULL;
    s->rec = n, s->caprec = cap;
  }
  opt_record *r = &s->rec[s->nrec++];
  memset(r, 0, sizeof *r);
  r->opt = opt;
  r->found = -1;
  return r;
}

/* The found-inf flag of device d in record r, made (a zero float32 scalar on d) on first use. */
static ct_tensor *flag_of(opt_record *r, ct_device d) {
  for (int i = 0; i < r->ndev; i++)
    if (ct_device_eq(r->dev[i], d)) return r->flag[i];
  if (r->ndev == CT_GS_MAX_DEVICES)
    return ct__error(CT_EUNSUPPORTED, "ct_grad_scaler_unscale_: gradients on more than %d devices", CT_GS_MAX_DEVICES), NULL;
  ct_tensor *f = ct_zeros(1, (int64_t[]){1}, CT_F32, d);
  if (!f) return NULL;
  ct__untrack(f);
  r->dev[r->ndev] = d, r->flag[r->ndev++] = f;
  return f;
}

/* g *= inv and flag |= any(!isfinite(g)) for a gradient the backend has no fused kernel for (strided,
 * 16-bit, or a backend without amp_unscale_), composed of ops that stay on the device: inf * 0 and
 * NaN * 0 are NaN, so sum(g * 0) is NaN exactly when g holds an inf or NaN, and the flag accumulates
 * it (a NaN flag reads as found, as does 1.0). */
static ct_status unscale_composed(ct_tensor *g, double inv, ct_tensor *flag) {
  ct_tensor *u = ct_mul_scalar(g, inv), *z = u ? ct_mul_scalar(g, 0.0) : NULL, *sum = z ? ct_sum(z, 0, NULL, 0) : NULL;
  ct_tensor *sf = sum ? ct_cast(sum, CT_F32) : NULL, *sr = sf ? ct_reshape(sf, 1, (int64_t[]){1}) : NULL;
  ct_status st = sr ? ct__binary_into(CT_BINARY_ADD, flag, flag, sr) : ct_last_status();
  if (st == CT_OK) st = CT_KERNEL_CALL(g->storage->backend, copy, __func__, u, g, u);
  ct_tensor_free(u), ct_tensor_free(z), ct_tensor_free(sum), ct_tensor_free(sf), ct_tensor_free(sr);
  return st;
}

static ct_status unscale(ct_grad_scaler *s, opt_record *r) {
  int n = 0;
  ct_named_tensor *params = ct__optimizer_params(r->opt, &n);
  /* PyTorch computes inv_scale = scale.double().reciprocal().float(). */
  double inv = (float)(1.0 / s->s.scale);
  ct_status st = CT_OK;
  ct_no_grad_begin();
  for (int i = 0; i < n && st == CT_OK; i++) {
    ct_tensor *g = params[i].tensor->grad;
    if (!g) continue;
    ct_tensor *flag = flag_of(r, g->device);
    if (!flag) {
      st = ct_last_status();
      break;
    }
    const ct_backend *be = g->storage->backend;
    /* the kernel walks g's numel elements from its data: any dense layout (a channels_last conv
     * weight's gradient too) */
    if (ct__has_kernel(be, CT_K_amp_unscale_) && (g->dtype == CT_F32 || g->dtype == CT_F64) && ct__non_overlapping_and_dense(g))
      st = CT_KERNEL_CALL(be, amp_unscale_, __func__, g, g, inv, flag);
    else if (ct_dtype_is_floating(g->dtype))
      st = unscale_composed(g, inv, flag);
    else
      st = ct__error(CT_EDTYPE, "ct_grad_scaler_unscale_: the gradient of %s has dtype %s; it must be floating", params[i].name,
                     ct_dtype_name(g->dtype));
  }
  ct_no_grad_end();
  if (st != CT_OK) return st;
  r->st = STAGE_UNSCALED;
  return CT_OK;
}

ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt) {
  if (!s) return ct__null_status("ct_grad_scaler_unscale_", "s");
  if (!opt) return ct__null_status("ct_grad_scaler_unscale_", "opt");
  if (!s->enabled) return CT_OK;
  opt_record *r = record_of(s, opt);
  if (!r) return ct_last_status();
  /* torch/amp/grad_scaler.py, unscale_: RuntimeError in both cases. */
  if (r->st == STAGE_UNSCALED)
    return ct__error(CT_EINVAL, "ct_grad_scaler_unscale_: unscale_ has already been called on this optimizer since the last "
                                "update (call ct_grad_scaler_update after ct_grad_scaler_step first)");
  if (r->st == STAGE_STEPPED)
    return ct__error(CT_EINVAL, "ct_grad_scaler_unscale_: unscale_ is being called after step (call ct_grad_scaler_update first)");
  ct_status st = unscale(s, r);
  return st == CT_OK ? CT_OK : ct__error_prefix("ct_grad_scaler_unscale_");
}

/* Read r's flags (one synchronization per device) into r->found, once. */
static ct_status read_flags(opt_record *r, const char *op) {
  if (r->found >= 0) return CT_OK;
  int found = 0;
  for (int d = 0; d < r->ndev; d++) {
    ct_clear_error();
    double v = ct_item(r->flag[d]);
    if (isnan(v) && ct_last_status() < 0)
      return ct__error_prefix("%s: reading the found-inf flag", op);
    found |= v != 0; /* 1.0 from a kernel, NaN from the composed check */
  }
  r->found = found;
  return CT_OK;
}

int ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt) {
  if (!s) return ct__null_status("ct_grad_scaler_step", "s");
  if (!opt) return ct__null_status("ct_grad_scaler_step", "opt");
  if (!s->enabled) {
    ct_status st = ct_optimizer_step(opt);
    if (st != CT_OK) return st;
    s->s.steps_taken++, s->s.last_step_skipped = 0;
    return 1;
  }
  opt_record *r = record_of(s, opt);
  if (!r) return ct_last_status();
  if (r->st == STAGE_STEPPED)
    return ct__error(CT_EINVAL, "ct_grad_scaler_step: step has already been called since the last update (call "
                                "ct_grad_scaler_update once per iteration)");
  if (r->st == STAGE_READY) {
    ct_status st = unscale(s, r);
    if (st != CT_OK) return ct__error_prefix("ct_grad_scaler_step");
  }
  ct_status st = read_flags(r, "ct_grad_scaler_step");
  if (st != CT_OK) return st;
  if (!r->found) {
    st = ct_optimizer_step(opt);
    if (st != CT_OK) return ct__error_prefix("ct_grad_scaler_step");
  }
  r->st = STAGE_STEPPED;
  s->s.last_step_skipped = r->found;
  if (r->found) s->s.steps_skipped++;
  else s->s.steps_taken++;
  return !r->found;
}

ct_status ct_grad_scaler_update(ct_grad_scaler *s) {
  if (!s) return ct__null_status("ct_grad_scaler_update", "s");
  if (!s->enabled) return CT_OK;
  if (s->nrec == 0)
    return ct__error(CT_EINVAL, "ct_grad_scaler_update: no inf checks were recorded prior to update (call "
                                "ct_grad_scaler_step or ct_grad_scaler_unscale_ first)");
  int found = 0;
  for (int r = 0; r < s->nrec; r++) {
    ct_status st = read_flags(&s->rec[r], "ct_grad_scaler_update");
    if (st != CT_OK) return st;
    found |= s->rec[r].found;
  }
  /* _amp_update_scale_cuda_kernel (aten/src/ATen/native/cuda/AmpKernels.cu), with the scale a
   * float32 as there. */
  ct_grad_scaler_state *g = &s->s;
  if (found) {
    g->scale = (float)(g->scale * g->backoff_factor);
    g->growth_tracker = 0;
  } else if (g->growth_tracker + 1 == g->growth_interval) {
    float next = (float)(g->scale * g->growth_factor);
    if (isfinite(next)) g->scale = next;
    g->growth_tracker = 0;
  } else {
    g->growth_tracker++;
  }
  drop_records(s);
  return CT_OK;
}

double ct_grad_scaler_scale_value(const ct_grad_scaler *s) {
  if (!s) return ct__null_status("ct_grad_scaler_scale_value", "s"), NAN;
  return s->enabled ? s->s.scale : 1.0;
}

int64_t ct_grad_scaler_steps_taken(const ct_grad_scaler *s) {
  if (!s) return ct__null_status("ct_grad_scaler_steps_taken", "s"), -1;
  return s->s.steps_taken;
}

int64_t ct_grad_scaler_steps_skipped(const ct_grad_scaler *s) {
  if (!s) return ct__null_status("ct_grad_scaler_steps_skipped", "s"), -1;
  return s->s.steps_skipped;
}

int ct_grad_scaler_last_step_skipped(const ct_grad_scaler *s) {
  if (!s) return ct__null_status("ct_grad_scaler_last_step_skipped", "s"), -1;
  return s->s.last_step_skipped;
}

ct_status ct_grad_scaler_state_get(const ct_grad_scaler *s, ct_grad_scaler_state *out) {
  if (!s) return ct__null_status("ct_grad_scaler_state_get", "s");
  if (!out) return ct__null_status("ct_grad_scaler_state_get", "out");
  *out = s->s;
  return CT_OK;
}

ct_status ct_grad_scaler_state_set(ct_grad_scaler *s, const ct_grad_scaler_state *st) {
  if (!s) return ct__null_status("ct_grad_scaler_state_set", "s");
  if (!st) return ct__null_status("ct_grad_scaler_state_set", "st");
  ct_status c = check_state("ct_grad_scaler_state_set", st);
  if (c != CT_OK) return c;
  s->s = *st;
  s->s.scale = (float)st->scale;
  return CT_OK;
}
