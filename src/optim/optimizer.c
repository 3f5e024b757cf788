/* src/optim/optimizer.c: SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW with
 * the update rules of torch.optim (the pseudo-code in their documentation):
 *   SGD:   g += wd p; b = mu b + (1 - damp) g (b = g at the first step); g = nesterov ? g + mu b : b;
 *          p -= lr g
 *   Adam:  g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *          p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *   AdamW: p *= 1 - lr wd, then Adam without the wd term.
 * Updates run as in-place elementwise ops through the backend of each parameter's device. */
#include <math.h>
#include <string.h>
#include "core/backend.h"
#include "ops/memory_format.h"
#include "optim/internal.h"

struct ct_optimizer {
  ct_optim_opts o;
  int n;
  ct_named_tensor *params; /* borrowed from the module */
  ct_tensor **state[2];    /* momentum_buffer, or exp_avg and exp_avg_sq */
  int64_t steps;           /* the host's count; with capturable, of the eager steps only */
  ct_tensor *step_t;       /* capturable: the count on the parameters' device (float32 0-dim) */
};

static int nslots(const ct_optimizer *o) { return o->o.kind == CT_OPTIM_SGD ? (o->o.momentum > 0) : 2; }

ct_optimizer *ct_optimizer_new(ct_module *m, const ct_optim_opts *opts) {
  if (!m || !opts) CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: NULL module or options");
  ct_optim_opts o = *opts;
  if ((unsigned)o.kind > CT_OPTIM_ADAMW)
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid kind %d (use CT_OPTIM_SGD, CT_OPTIM_ADAM or CT_OPTIM_ADAMW)", (int)o.kind);
  if (o.lr == 0) o.lr = o.kind == CT_OPTIM_SGD ? 1e-2 : 1e-3;
  if (o.beta1 == 0) o.beta1 = 0.9;
  if (o.beta2 == 0) o.beta2 = 0.999;
  if (o.eps == 0) o.eps = 1e-8;
  if (o.kind == CT_OPTIM_ADAMW && o.weight_decay == 0) o.weight_decay = 1e-2;
  /* The checks of torch.optim, which raises ValueError("Invalid learning rate: ...") and the like;
   * written as !(x >= 0) so that a NaN fails them too. */
  if (!(o.lr >= 0))
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid learning rate %g (lr must be >= 0; 0 takes the default)", o.lr);
  if (!(o.momentum >= 0)) CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid momentum %g (momentum must be >= 0)", o.momentum);
  if (!(o.weight_decay >= 0))
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid weight_decay %g (weight_decay must be >= 0)", o.weight_decay);
  if (!(o.eps >= 0))
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid eps %g (eps must be >= 0; 0 takes the default, 1e-8)", o.eps);
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: invalid beta%d %g (betas must be in [0, 1); 0 takes the defaults, 0.9 and 0.999)",
                 !(o.beta1 >= 0 && o.beta1 < 1) ? 1 : 2, !(o.beta1 >= 0 && o.beta1 < 1) ? o.beta1 : o.beta2);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: nesterov momentum requires momentum > 0 and dampening 0, got momentum %g and "
                 "dampening %g", o.momentum, o.dampening);
  ct_optimizer *opt = ct__calloc(1, sizeof *opt, "an optimizer");
  if (!opt) return NULL;
  opt->o = o;
  opt->n = ct_module_named_tensors(m, 0, NULL, 0);
  size_t n = (size_t)(opt->n ? opt->n : 1);
  if (!(opt->params = ct__calloc(n, sizeof *opt->params, "the optimizer's list of parameters")) ||
      !(opt->state[0] = ct__calloc(n, sizeof(ct_tensor *), "the optimizer's state")) ||
      !(opt->state[1] = ct__calloc(n, sizeof(ct_tensor *), "the optimizer's state"))) {
    ct_optimizer_free(opt);
    return NULL;
  }
  ct_module_named_tensors(m, 0, opt->params, opt->n);
  if (o.capturable && opt->n > 0) { /* the count, on the parameters' device (count_beside_params) */
    if (!(opt->step_t = ct_scalar(0, CT_F32, opt->params[0].tensor->device))) {
      ct_optimizer_free(opt);
      return NULL;
    }
    ct__untrack(opt->step_t);
  }
  return opt;
}

void ct_optimizer_free(ct_optimizer *o) {
  if (!o) return;
  for (int s = 0; s < 2; s++) {
    for (int i = 0; s < 2 && o->state[s] && i < o->n; i++)
      if (o->state[s][i]) ct__tensor_decref(o->state[s][i]);
    free(o->state[s]);
  }
  free(o->params);
  if (o->step_t) ct__tensor_decref(o->step_t);
  free(o);
}

/* The state slots are zeros in the parameter's memory format (a channels_last conv weight's are
 * channels_last), as torch.zeros_like keeps it, so that the fused kernels pair their elements by
 * memory position (fusable). */
static ct_status ensure_state(ct_optimizer *o, int i) {
  ct_tensor *p = o->params[i].tensor;
  for (int s = 0; s < nslots(o); s++) {
    if (o->state[s][i]) continue;
    if (ct__capturing(p->device)) { /* the zeros would be written again at every replay */
      ct__capture_refuse("ct_optimizer_step");
      return ct__error(CT_EINVAL, "ct_optimizer_step: the state of %s does not exist yet inside a graph capture; run "
                       "one step eagerly (or ct_optimizer_init_state) before capturing", o->params[i].name);
    }
    ct_tensor *z = ct__alloc_format(p->ndim, p->shape, p->dtype, p->device, ct_tensor_suggest_memory_format(p));
    if (z && ct_zero_(z) != CT_OK) ct_tensor_free(z), z = NULL;
    if (!z) return ct_last_status();
    ct__untrack(z);
    o->state[s][i] = z;
  }
  return CT_OK;
}

ct_status ct_optimizer_init_state(ct_optimizer *o) {
  if (!o) return ct__null_status("ct_optimizer_init_state", "o");
  for (int i = 0; o && i < o->n; i++) {
    ct_status s = ensure_state(o, i);
    if (s != CT_OK) return s;
  }
  return CT_OK;
}

/* a * x + b * y, a new tensor. */
static ct_tensor *lin(double a, ct_tensor *x, double b, ct_tensor *y) {
  ct_tensor *ax = ct_mul_scalar(x, a), *by = ax ? ct_mul_scalar(y, b) : NULL, *r = by ? ct_add(ax, by) : NULL;
  ct_tensor_free(ax), ct_tensor_free(by);
  return r;
}

/* 1 when a and b (of one shape) place every element at the same offset from their data: the
 * strides of the dims longer than 1 agree */
static int same_layout(const ct_tensor *a, const ct_tensor *b) {
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] > 1 && a->stride[d] != b->stride[d]) return 0;
  return 1;
}

/* 1 when the backend's fused kernel can update parameter i: it has one, p's dtype is float32 or
 * float64 and g and the state share it, p is dense (ct__non_overlapping_and_dense), and g and the
 * state are laid out as p. The kernels walk the numel elements from each operand's data pointer,
 * so any dense layout that all operands share is theirs. (Before, a channels_last conv weight fell
 * to the composed update, a dozen elementwise ops: a fifth of a channels_last resnet18 step.) The
 * kernels allocate nothing, so they cannot fail for want of memory. */
static int fusable(const ct_optimizer *o, int i) {
  ct_tensor *p = o->params[i].tensor, *g = p->grad;
  const ct_backend *be = p->storage->backend;
  int ok = (p->dtype == CT_F32 || p->dtype == CT_F64) && g->dtype == p->dtype && ct_device_eq(g->device, p->device) &&
           ct__non_overlapping_and_dense(p) && same_layout(p, g);
  for (int s = 0; ok && s < nslots(o); s++) ok = o->state[s][i] && same_layout(p, o->state[s][i]);
  return ok && (o->o.kind == CT_OPTIM_SGD ? ct__has_kernel(be, CT_K_sgd_step) : ct__has_kernel(be, CT_K_adam_step));
}

static ct_status fused_step(ct_optimizer *o, int i) {
  const ct_optim_opts *c = &o->o;
  ct_tensor *p = o->params[i].tensor, *g = p->grad, *s0 = o->state[0][i], *s1 = o->state[1][i];
  const ct_backend *be = p->storage->backend;
  double t = (double)(o->steps + 1);
  if (c->kind == CT_OPTIM_SGD) {
    ct_sgd_args a = {c->lr, c->momentum, c->dampening, c->weight_decay, c->nesterov, o->steps == 0, o->step_t};
    return CT_KERNEL_CALL(be, sgd_step, __func__, p, p, g, c->momentum > 0 ? s0 : NULL, &a);
  }
  ct_adam_args a = {c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, c->kind == CT_OPTIM_ADAMW,
                    1.0 - pow(c->beta1, t), 1.0 - pow(c->beta2, t), o->step_t};
  return CT_KERNEL_CALL(be, adam_step, __func__, p, p, g, s0, s1, &a);
}

/* The update of parameter i composed of elementwise ops, computed without touching the parameter
 * or its state: next[0] is the new parameter, next[1] and next[2] the new state slots (NULL where
 * a slot is unused). On failure every tensor made so far is freed. */
static ct_status composed_step(ct_optimizer *o, int i, ct_tensor *next[3]) {
  const ct_optim_opts *c = &o->o;
  ct_tensor *p = o->params[i].tensor, *g = ct_contiguous(p->grad), *tmp = NULL;
  next[0] = next[1] = next[2] = NULL;
  if (g && c->weight_decay > 0 && c->kind != CT_OPTIM_ADAMW) { /* L2: g + wd p */
    ct_tensor *t = ct_mul_scalar(p, c->weight_decay), *gd = t ? ct_add(g, t) : NULL;
    ct_tensor_free(t), ct_tensor_free(g);
    g = gd;
  }
  if (!g) return ct_last_status();
  if (c->kind == CT_OPTIM_SGD) {
    ct_tensor *d = g;
    if (c->momentum > 0) {
      ct_tensor *b = o->state[0][i];
      next[1] = o->steps == 0 ? ct_contiguous(g) : lin(c->momentum, b, 1.0 - c->dampening, g);
      if (next[1] && c->nesterov) d = tmp = lin(1.0, g, c->momentum, next[1]);
      else d = next[1];
    }
    next[0] = d ? lin(1.0, p, -c->lr, d) : NULL;
  } else {
    double t = (double)(o->steps + 1), bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    ct_tensor *p0 = NULL;
    if (c->kind == CT_OPTIM_ADAMW && c->weight_decay > 0) p0 = tmp = ct_mul_scalar(p, 1.0 - c->lr * c->weight_decay);
    else p0 = p;
    ct_tensor *g2 = p0 ? ct_mul(g, g) : NULL;
    next[1] = g2 ? lin(c->beta1, o->state[0][i], 1.0 - c->beta1, g) : NULL;
    next[2] = next[1] ? lin(c->beta2, o->state[1][i], 1.0 - c->beta2, g2) : NULL;
    ct_tensor *vh = next[2] ? ct_mul_scalar(next[2], 1.0 / bc2) : NULL, *sq = vh ? ct_sqrt(vh) : NULL;
    ct_tensor *den = sq ? ct_add_scalar(sq, c->eps) : NULL, *q = den ? ct_div(next[1], den) : NULL;
    next[0] = q ? lin(1.0, p0, -c->lr / bc1, q) : NULL;
    ct_tensor_free(g2), ct_tensor_free(vh), ct_tensor_free(sq), ct_tensor_free(den), ct_tensor_free(q);
  }
  ct_tensor_free(tmp), ct_tensor_free(g);
  if (next[0]) return CT_OK;
  ct_status s = ct_last_status();
  for (int k = 0; k < 3; k++) ct_tensor_free(next[k]), next[k] = NULL;
  return s;
}

/* Copy src's values into dst (same shape and device; the cast, if any, is the copy's): the commit
 * of a composed update, which allocates nothing. */
static ct_status commit(ct_tensor *dst, ct_tensor *src) { return src ? CT_KERNEL_CALL(dst->storage->backend, copy, __func__, src, dst, src) : CT_OK; }

/* A capturable optimizer's count must sit on its parameters' device, which the kernels read it
 * from: after ct_module_to (or a checkpoint loaded elsewhere) it follows them, outside a capture. */
static ct_status count_beside_params(ct_optimizer *o) {
  ct_device d = o->params[0].tensor->device;
  for (int i = 1; i < o->n; i++)
    if (!ct_device_eq(o->params[i].tensor->device, d)) {
      char a[32], b[32];
      return ct__error(CT_EDEVICE, "ct_optimizer_step: capturable needs every parameter on one device; %s is on %s, %s "
                       "on %s", o->params[0].name, ct_device_str(d, a, sizeof a), o->params[i].name,
                       ct_device_str(o->params[i].tensor->device, b, sizeof b));
    }
  if (ct_device_eq(o->step_t->device, d)) return CT_OK;
  ct_tensor *moved = ct_to(o->step_t, d, 0);
  if (!moved) return ct_last_status();
  ct__untrack(moved);
  ct__tensor_decref(o->step_t);
  o->step_t = moved;
  return CT_OK;
}

/* A step is all or nothing: everything it allocates (state slots, the results of composed updates)
 * is allocated before the first parameter changes, so that a failure for want of memory leaves
 * the parameters, the state and the step count as they were, and the same step can run again. */
ct_status ct_optimizer_step(ct_optimizer *o) {
  if (!o) return ct__error(CT_EINVAL, "ct_optimizer_step: NULL optimizer");
  ct_status s = CT_OK;
  int composed = 0;
  for (int i = 0; i < o->n && s == CT_OK; i++)
    if (o->params[i].tensor->grad) {
      s = ensure_state(o, i);
      composed += s == CT_OK && !fusable(o, i);
      if (composed && o->step_t) {
        return ct__error(CT_EUNSUPPORTED, "ct_optimizer_step: capturable needs the fused update, which %s (%s) cannot "
                         "take: parameters, gradients and state of float32 or float64, dense and laid out alike, "
                         "on a backend with the fused kernel",
                         o->params[i].name, ct_dtype_name(o->params[i].tensor->dtype));
      }
    }
  if (s != CT_OK) return s;
  if (o->step_t && (s = count_beside_params(o)) != CT_OK) return s;
  if (o->step_t) { /* advance the device's count, which the fused kernels read */
    ct_no_grad_begin();
    ct_tensor *t1 = ct_add_scalar(o->step_t, 1.0);
    s = t1 ? ct_copy_(o->step_t, t1) : ct_last_status();
    ct_tensor_free(t1);
    ct_no_grad_end();
    if (s != CT_OK) return s;
  }
  ct_tensor **next = NULL;
  if (composed && !(next = ct__calloc((size_t)o->n * 3, sizeof *next, "the optimizer's pending updates"))) return CT_ENOMEM;
  ct_no_grad_begin();
  for (int i = 0; i < o->n && s == CT_OK; i++)
    if (o->params[i].tensor->grad && !fusable(o, i)) s = composed_step(o, i, next + 3 * i);
  for (int i = 0; i < o->n && s == CT_OK; i++) {
    ct_tensor *p = o->params[i].tensor;
    if (!p->grad) continue;
    if (!fusable(o, i)) {
      s = commit(p, next[3 * i]);
      if (s == CT_OK) s = commit(o->state[0][i], next[3 * i + 1]);
      if (s == CT_OK) s = commit(o->state[1][i], next[3 * i + 2]);
    } else s = fused_step(o, i);
    if (s == CT_OK) ct__bump_version(p); /* a graph that saved p before the step would compute a stale gradient */
  }
  ct_no_grad_end();
  for (int k = 0; next && k < 3 * o->n; k++) ct_tensor_free(next[k]);
  free(next);
  if (s == CT_OK) o->steps++;
  return s;
}

void ct_optimizer_zero_grad(ct_optimizer *o) {
  if (!o) return (void)ct__null_status("ct_optimizer_zero_grad", "o");
  for (int i = 0; o && i < o->n; i++) ct_zero_grad(o->params[i].tensor);
}

double ct_optimizer_lr(const ct_optimizer *o) {
  if (!o) return ct__null_status("ct_optimizer_lr", "o"), NAN;
  return o->o.lr;
}
void ct_optimizer_set_lr(ct_optimizer *o, double lr) {
  if (!o) return (void)ct__null_status("ct_optimizer_set_lr", "o");
  if (!(lr >= 0)) return (void)ct__error(CT_EINVAL, "ct_optimizer_set_lr: lr must be >= 0, got %g (the lr is unchanged)", lr);
  o->o.lr = lr;
}
int64_t ct_optimizer_steps(const ct_optimizer *o) {
  if (!o) return ct__null_status("ct_optimizer_steps", "o"), -1;
  if (o->step_t) {
    double t = ct_item((ct_tensor *)o->step_t);
    return isnan(t) ? -1 : (int64_t)t;
  }
  return o->steps;
}
ct_optim_kind ct_optimizer_kind(const ct_optimizer *o) { return o ? o->o.kind : CT_OPTIM_SGD; }
void ct_optimizer_set_steps(ct_optimizer *o, int64_t steps) {
  if (!o) return (void)ct__null_status("ct_optimizer_set_steps", "o");
  if (steps < 0)
    return (void)ct__error(CT_EINVAL, "ct_optimizer_set_steps: steps must be >= 0, got %lld (the count is unchanged)",
                           (long long)steps);
  if (o->step_t && ct_fill_(o->step_t, (double)steps) != CT_OK) return;
  o->steps = steps;
}

int ct_optimizer_named_state(ct_optimizer *o, ct_named_tensor *out, int cap) {
  if (!o) return ct__null_status("ct_optimizer_named_state", "o");
  if (cap < 0) return ct__error(CT_EINVAL, "ct_optimizer_named_state: cap must be >= 0, got %d", cap);
  static const char *const sgd[] = {"momentum_buffer"}, *const adam[] = {"exp_avg", "exp_avg_sq"};
  const char *const *names = o->o.kind == CT_OPTIM_SGD ? sgd : adam;
  int k = 0;
  for (int i = 0; i < o->n; i++)
    for (int s = 0; s < nslots(o); s++) {
      if (!o->state[s][i]) continue;
      if (out && k < cap) {
        snprintf(out[k].name, sizeof out[k].name, "state.%.160s.%s", o->params[i].name, names[s]);
        out[k].tensor = o->state[s][i];
        out[k].is_buffer = 1;
      }
      k++;
    }
  return k;
}

/* The parameters of o (borrowed from its module) and their count, for the GradScaler. */
ct_named_tensor *ct__optimizer_params(ct_optimizer *o, int *n) {
  *n = o->n;
  return o->params;
}
