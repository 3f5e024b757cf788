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
#include "backend/backend.h"

struct ct_optimizer {
  ct_optim_opts o;
  int n;
  ct_named_tensor *params; /* borrowed from the module */
  ct_tensor **state[2];    /* momentum_buffer, or exp_avg and exp_avg_sq */
  int64_t steps;
};

static int nslots(const ct_optimizer *o) { return o->o.kind == CT_OPTIM_SGD ? (o->o.momentum > 0) : 2; }

ct_optimizer *ct_optimizer_new(ct_module *m, const ct_optim_opts *opts) {
  if (!m || !opts) CT_FAIL_NULL(CT_EINVAL, "ct_optimizer_new: NULL module or options");
  ct_optim_opts o = *opts;
  if (o.lr == 0) o.lr = o.kind == CT_OPTIM_SGD ? 1e-2 : 1e-3;
  if (o.beta1 == 0) o.beta1 = 0.9;
  if (o.beta2 == 0) o.beta2 = 0.999;
  if (o.eps == 0) o.eps = 1e-8;
  if (o.kind == CT_OPTIM_ADAMW && o.weight_decay == 0) o.weight_decay = 1e-2;
  if (o.lr < 0 || o.momentum < 0 || o.weight_decay < 0 || o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
    CT_FAIL_NULL(CT_EINVAL, "optimizer: invalid options (lr %g, momentum %g, weight_decay %g, betas (%g, %g))", o.lr, o.momentum,
                 o.weight_decay, o.beta1, o.beta2);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    CT_FAIL_NULL(CT_EINVAL, "SGD: nesterov momentum requires a momentum and zero dampening");
  ct_optimizer *opt = calloc(1, sizeof *opt);
  if (!opt) CT_FAIL_NULL(CT_ENOMEM, "optimizer: out of host memory");
  opt->o = o;
  opt->n = ct_module_named_tensors(m, 0, NULL, 0);
  opt->params = calloc((size_t)(opt->n ? opt->n : 1), sizeof *opt->params);
  opt->state[0] = calloc((size_t)(opt->n ? opt->n : 1), sizeof(ct_tensor *));
  opt->state[1] = calloc((size_t)(opt->n ? opt->n : 1), sizeof(ct_tensor *));
  if (!opt->params || !opt->state[0] || !opt->state[1]) {
    ct_optimizer_free(opt);
    CT_FAIL_NULL(CT_ENOMEM, "optimizer: out of host memory");
  }
  ct_module_named_tensors(m, 0, opt->params, opt->n);
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
  free(o);
}

static ct_status ensure_state(ct_optimizer *o, int i) {
  ct_tensor *p = o->params[i].tensor;
  for (int s = 0; s < nslots(o); s++) {
    if (o->state[s][i]) continue;
    ct_tensor *z = ct_zeros(p->ndim, p->shape, p->dtype, p->device);
    if (!z) return ct_last_status();
    ct__untrack(z);
    o->state[s][i] = z;
  }
  return CT_OK;
}

ct_status ct_optimizer_init_state(ct_optimizer *o) {
  for (int i = 0; o && i < o->n; i++) {
    ct_status s = ensure_state(o, i);
    if (s != CT_OK) return s;
  }
  return CT_OK;
}

/* out = a * x + b * y, in place into out (which may be x or y). */
static ct_status axpby(ct_tensor *out, double a, ct_tensor *x, double b, ct_tensor *y) {
  ct_tensor *ax = ct_mul_scalar(x, a), *by = ct_mul_scalar(y, b);
  ct_status s = ax && by ? ct__binary_into(CT_BINARY_ADD, out, ax, by) : ct_last_status();
  ct_tensor_free(ax), ct_tensor_free(by);
  return s;
}

/* The backend's fused kernel, when it has one and every operand is contiguous in p's dtype. */
static int fused_step(ct_optimizer *o, int i, ct_status *s) {
  const ct_optim_opts *c = &o->o;
  ct_tensor *p = o->params[i].tensor, *g = p->grad, *s0 = o->state[0][i], *s1 = o->state[1][i];
  const ct_backend *be = p->storage->backend;
  int ok = (p->dtype == CT_F32 || p->dtype == CT_F64) && g->dtype == p->dtype && ct_tensor_is_contiguous(p) &&
           ct_tensor_is_contiguous(g) && ct_device_eq(g->device, p->device);
  if (!ok) return 0;
  double t = (double)(o->steps + 1);
  if (c->kind == CT_OPTIM_SGD && be->sgd_step) {
    ct_sgd_args a = {c->lr, c->momentum, c->dampening, c->weight_decay, c->nesterov, o->steps == 0};
    *s = be->sgd_step(p, g, c->momentum > 0 ? s0 : NULL, &a);
    return 1;
  }
  if (c->kind != CT_OPTIM_SGD && be->adam_step) {
    ct_adam_args a = {c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, c->kind == CT_OPTIM_ADAMW,
                      1.0 - pow(c->beta1, t), 1.0 - pow(c->beta2, t)};
    *s = be->adam_step(p, g, s0, s1, &a);
    return 1;
  }
  return 0;
}

static ct_status step_one(ct_optimizer *o, int i) {
  const ct_optim_opts *c = &o->o;
  ct_tensor *p = o->params[i].tensor, *g0 = p->grad;
  ct_status s = ensure_state(o, i);
  if (s != CT_OK) return s;
  if (fused_step(o, i, &s)) return s;
  ct_tensor *g = ct_tensor_retain(g0); /* untracked: we free it ourselves */
  if (c->weight_decay > 0 && c->kind != CT_OPTIM_ADAMW) { /* L2: g + wd p */
    ct_tensor *t = ct_mul_scalar(p, c->weight_decay), *gd = t ? ct_add(g, t) : NULL;
    ct_tensor_free(t), ct__tensor_decref(g);
    if (!gd) return ct_last_status();
    ct__untrack(gd);
    g = gd;
  }
  if (c->kind == CT_OPTIM_SGD) {
    ct_tensor *d = g;
    if (c->momentum > 0) {
      ct_tensor *b = o->state[0][i];
      s = o->steps == 0 ? ct_copy_(b, g) : axpby(b, c->momentum, b, 1.0 - c->dampening, g);
      if (s == CT_OK && c->nesterov) {
        ct_tensor *mb = ct_mul_scalar(b, c->momentum), *n = mb ? ct_add(g, mb) : NULL;
        ct_tensor_free(mb);
        if (!n) s = ct_last_status();
        else ct__untrack(n), d = n;
      } else d = b;
    }
    if (s == CT_OK) s = axpby(p, 1.0, p, -c->lr, d);
    if (d != g && d != o->state[0][i]) ct__tensor_decref(d);
    ct__tensor_decref(g);
    return s;
  }
  double t = (double)(o->steps + 1);
  if (c->kind == CT_OPTIM_ADAMW && c->weight_decay > 0) {
    ct_tensor *f = ct_scalar(1.0 - c->lr * c->weight_decay, p->dtype, p->device);
    s = f ? ct__binary_into(CT_BINARY_MUL, p, p, f) : ct_last_status();
    ct_tensor_free(f);
  }
  ct_tensor *m = o->state[0][i], *v = o->state[1][i];
  ct_tensor *g2 = ct_mul(g, g);
  if (s == CT_OK) s = axpby(m, c->beta1, m, 1.0 - c->beta1, g);
  if (s == CT_OK) s = g2 ? axpby(v, c->beta2, v, 1.0 - c->beta2, g2) : ct_last_status();
  if (s == CT_OK) {
    double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    ct_tensor *vh = ct_mul_scalar(v, 1.0 / bc2), *sq = vh ? ct_sqrt(vh) : NULL, *den = sq ? ct_add_scalar(sq, c->eps) : NULL;
    ct_tensor *q = den ? ct_div(m, den) : NULL;
    s = q ? axpby(p, 1.0, p, -c->lr / bc1, q) : ct_last_status();
    ct_tensor_free(vh), ct_tensor_free(sq), ct_tensor_free(den), ct_tensor_free(q);
  }
  ct_tensor_free(g2);
  ct__tensor_decref(g);
  return s;
}

ct_status ct_optimizer_step(ct_optimizer *o) {
  if (!o) return ct__error(CT_EINVAL, "ct_optimizer_step: NULL optimizer");
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int i = 0; i < o->n && s == CT_OK; i++)
    if (o->params[i].tensor->grad) s = step_one(o, i);
  ct_no_grad_end();
  if (s == CT_OK) o->steps++;
  return s;
}

void ct_optimizer_zero_grad(ct_optimizer *o) {
  for (int i = 0; o && i < o->n; i++) ct_zero_grad(o->params[i].tensor);
}

double ct_optimizer_lr(const ct_optimizer *o) { return o ? o->o.lr : 0; }
void ct_optimizer_set_lr(ct_optimizer *o, double lr) {
  if (o) o->o.lr = lr;
}
int64_t ct_optimizer_steps(const ct_optimizer *o) { return o ? o->steps : 0; }
void ct_optimizer_set_steps(ct_optimizer *o, int64_t steps) {
  if (o) o->steps = steps;
}

int ct_optimizer_named_state(ct_optimizer *o, ct_named_tensor *out, int cap) {
  if (!o) return 0;
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
