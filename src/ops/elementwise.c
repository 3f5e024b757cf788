/* src/ops/elementwise.c: the front-ends of the elementwise ops (ops.def): broadcasting, dtype
 * promotion, device checks, and the autograd rules, plus fill_ and zero_. The helpers other
 * families and autograd share with it are in ops_internal.c. */
#include <ctype.h>
#include <math.h>
#include <string.h>
#include "autograd/node.h"
#include "ops/ops_internal.h"
#include "ops/memory_format.h"
#include "ops/autocast.h"

static const char *const binary_names[] = {
#define CT_BINARY(E, name, fwd, da, db) #name,
#define CT_COMPARE(E, name, pred) #name,
#include "core/ops.def"
};
static const char *const unary_names[] = {
#define CT_UNARY(E, name, fwd, deriv) #name,
#include "core/ops.def"
};
/* each unary op's derivative as core/ops.def writes it */
static const char *const unary_derivs[] = {
#define CT_UNARY(E, name, fwd, deriv) #deriv,
#include "core/ops.def"
};

/* 1 when the derivative of unary op reads x (the identifier x in its ops.def formula), 0 when it
 * reads y = f(x) alone (exp, sqrt, relu, sigmoid, tanh). A node keeps x only when it is read: y's
 * view serves both of the backward kernel's slots otherwise, as PyTorch's rules keep the result
 * (threshold_backward(grad, result, 0) for relu); keeping x too held a second full-size tensor per
 * op until backward (a BatchNorm output before every relu of a resnet: 19 MiB of a resnet18 step's
 * peak, docs/perf.md). Read once per op from the formula's tokens. */
static int deriv_reads_x(ct_unary_op op) {
  static signed char known[CT_UNARY_COUNT]; /* 0: not read yet, 1: no, 2: yes (same value on every thread) */
  int k = __atomic_load_n(&known[op], __ATOMIC_RELAXED);
  if (k) return k == 2;
  int reads = 0;
  for (const char *p = unary_derivs[op]; *p && !reads;) {
    if (isalpha((unsigned char)*p) || *p == '_') { /* an identifier: x itself, or exp, M_SQRT1_2, ... */
      const char *q = p;
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      reads = q - p == 1 && *p == 'x';
      p = q;
    } else if (isdigit((unsigned char)*p) || *p == '.') { /* a number, 1e-5 included */
      while (isalnum((unsigned char)*p) || *p == '.') p++;
    } else
      p++;
  }
  __atomic_store_n(&known[op], (signed char)(reads ? 2 : 1), __ATOMIC_RELAXED);
  return reads;
}

/* t expanded to shape and cast to dt (a view when no cast is needed). */
static ct_tensor *prepare(ct_tensor *t, ct_dtype dt, int nd, const int64_t *shape) {
  ct_tensor *c = t->dtype == dt ? ct__retain_tracked(t) : ct_cast(t, dt);
  ct_tensor *e = c ? ct_expand(c, nd, shape) : NULL;
  ct_tensor_free(c);
  return e;
}

/* ---- binary */
static ct_status bw_binary(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_binary_op op = (ct_binary_op)n->iv[0];
  for (int i = 0; i < 2; i++) {
    if (!n->in[i]) continue;
    if (op == CT_BINARY_ADD || (op == CT_BINARY_SUB && i == 0)) {
      grads[i] = ct__retain_tracked(g);
      if (!grads[i]) return ct_last_status();
      continue;
    }
    if (op == CT_BINARY_SUB) {
      grads[i] = ct_neg(g);
      if (!grads[i]) return ct_last_status();
      continue;
    }
    ct_tensor *a = ct_expand(n->saved[0], g->ndim, g->shape), *b = ct_expand(n->saved[1], g->ndim, g->shape);
    /* the gradient of an input in that input's format (channels_last kept), else in g's */
    ct_memory_format fmt = ct__elementwise_format(2, (ct_tensor *[]){i == 0 ? a : b, g}, g->ndim, g->shape);
    ct_tensor *out = a && b ? ct__alloc_format(g->ndim, g->shape, g->dtype, g->device, fmt) : NULL;
    ct_status s = out ? ct__k_binary_backward(op, i, out, g, a, b) : ct_last_status();
    ct_tensor_free(a);
    ct_tensor_free(b);
    if (s != CT_OK) {
      ct_tensor_free(out);
      return s;
    }
    grads[i] = out;
  }
  return CT_OK;
}

static ct_tensor *binary(ct_binary_op op, ct_tensor *a, ct_tensor *b) {
  const char *name = binary_names[op];
  if (!a || !b) return ct__null_arg(name, !a ? "a" : "b");
  if (op == CT_BINARY_ADD) CT__AUTOCAST(CT__AUTOCAST_PROMOTE, binary(op, a, b), &a, &b);
  if (ct__same_device(name, 2, (ct_tensor *[]){a, b}, (const char *[]){"a", "b"}) != CT_OK) return NULL;
  int nd;
  int64_t shape[CT_MAX_DIMS];
  if (!ct__broadcast_shape(name, a->ndim, a->shape, b->ndim, b->shape, &nd, shape)) return NULL;
  int compare = op >= CT_BINARY_EQ;
  ct_dtype dt = ct__result_type(a, b);
  if (op == CT_BINARY_DIV && !ct_dtype_is_floating(dt)) dt = CT_F32; /* true division */
  if (!compare && dt == CT_BOOL && op != CT_BINARY_MAXIMUM && op != CT_BINARY_MINIMUM && op != CT_BINARY_MUL)
    dt = op == CT_BINARY_ADD ? CT_BOOL : CT_I64;
  const ct_backend *be = a->storage->backend;
  if (!ct__has_kernel(be, CT_K_binary)) return ct__kernel_missing(be, CT_K_binary, name, a), NULL;
  ct_tensor *ae = prepare(a, dt, nd, shape), *bexp = prepare(b, dt, nd, shape);
  ct_memory_format fmt = ct__elementwise_format(2, (ct_tensor *[]){a, b}, nd, shape); /* channels_last kept */
  ct_tensor *out = ae && bexp ? ct__alloc_format(nd, shape, compare ? CT_BOOL : dt, a->device, fmt) : NULL;
  ct_status s = out ? ct__k_binary(op, out, ae, bexp) : ct_last_status();
  ct_tensor_free(ae);
  ct_tensor_free(bexp);
  if (s != CT_OK) {
    ct_tensor_free(out);
    return NULL;
  }
  if (!compare && ct_dtype_is_floating(dt)) {
    ct_node *n;
    s = ct__record(out, name, bw_binary, 2, (ct_tensor *[]){a, b}, &n);
    if (n) {
      n->iv[0] = op;
      if (op != CT_BINARY_ADD && op != CT_BINARY_SUB) {
        /* the rule needs a and b in the compute dtype, detached */
        /* (a view of a input that has dt already: a copy would lose a channels_last layout) */
        ct_tensor *ac = a->dtype == dt ? ct__retain_tracked(a) : ct_cast(a, dt);
        ct_tensor *bc = !ac ? NULL : b->dtype == dt ? ct__retain_tracked(b) : ct_cast(b, dt);
        s = ct__save_detached(n, 0, ac);
        if (s == CT_OK) s = ct__save_detached(n, 1, bc);
        ct_tensor_free(ac);
        ct_tensor_free(bc);
      }
    }
    if (s != CT_OK) return ct_tensor_free(out), NULL;
  }
  return out;
}

#define CT_BINARY(E, name, fwd, da, db) \
  ct_tensor *ct_##name(ct_tensor *a, ct_tensor *b) { return binary(CT_BINARY_##E, a, b); }
#define CT_COMPARE(E, name, pred) \
  ct_tensor *ct_##name(ct_tensor *a, ct_tensor *b) { return binary(CT_BINARY_##E, a, b); }
#include "core/ops.def"

/* The scalar keeps a floating tensor's dtype; an integer tensor with a fractional scalar gives
 * float32 (PyTorch's wrapped-number rule). An integral scalar is an integer, as PyTorch's Python
 * int, so it goes into an integer dtype modulo 2^bits (uint8 + 300 adds 44, as torch), not by the
 * saturating float -> int rule of ct_scalar (src/core/dtype.c). */
static ct_tensor *with_scalar(ct_binary_op op, ct_tensor *a, double s) {
  if (!a) return ct__null_arg(op == CT_BINARY_ADD ? "add_scalar" : op == CT_BINARY_MUL ? "mul_scalar" : "pow_scalar", "a");
  ct_dtype dt = ct_dtype_is_floating(a->dtype) ? a->dtype : (s == floor(s) && op != CT_BINARY_DIV ? a->dtype : CT_F32);
  if (dt == CT_BOOL) dt = CT_I64;
  if (!ct_dtype_is_floating(dt) && s >= -9223372036854775808.0 && s < 9223372036854775808.0) {
    char elem[8];
    ct__store_int(elem, dt, (int64_t)s); /* s is integral here: exact in int64, then wrapped into dt */
    s = ct__load(elem, dt);
  }
  ct_tensor *sc = ct_scalar(s, dt, a->device);
  ct_tensor *out = binary(op, a, sc);
  ct_tensor_free(sc);
  return out;
}

ct_tensor *ct_add_scalar(ct_tensor *a, double s) { return with_scalar(CT_BINARY_ADD, a, s); }
ct_tensor *ct_mul_scalar(ct_tensor *a, double s) { return with_scalar(CT_BINARY_MUL, a, s); }
ct_tensor *ct_pow_scalar(ct_tensor *a, double s) { return with_scalar(CT_BINARY_POW, a, s); }

/* ---- unary */
static ct_status bw_unary(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_unary_op op = (ct_unary_op)n->iv[0];
  if (op == CT_UNARY_NEG) {
    grads[0] = ct_neg(g);
    return grads[0] ? CT_OK : ct_last_status();
  }
  ct_memory_format fmt = ct__elementwise_format(2, (ct_tensor *[]){n->saved[0], g}, g->ndim, g->shape); /* x's format kept */
  ct_tensor *out = ct__alloc_format(g->ndim, g->shape, g->dtype, g->device, fmt);
  if (!out) return ct_last_status();
  ct_status s = ct__k_unary_backward(op, out, g, n->saved[0], n->saved[1]);
  if (s != CT_OK) {
    ct_tensor_free(out);
    return s;
  }
  grads[0] = out;
  return CT_OK;
}

static ct_tensor *unary(ct_unary_op op, ct_tensor *x) {
  if (!x) return ct__null_arg(unary_names[op], "x");
  if (op == CT_UNARY_EXP || op == CT_UNARY_LOG) CT__AUTOCAST(CT__AUTOCAST_F32_GPU, unary(op, x), &x);
  const char *name = unary_names[op];
  int keeps_int = op == CT_UNARY_NEG || op == CT_UNARY_ABS || op == CT_UNARY_RELU;
  ct_dtype dt = ct_dtype_is_floating(x->dtype) || (keeps_int && x->dtype != CT_BOOL) ? x->dtype : CT_F32;
  const ct_backend *be = x->storage->backend;
  if (!ct__has_kernel(be, CT_K_unary)) return ct__kernel_missing(be, CT_K_unary, name, x), NULL;
  ct_tensor *xc = x->dtype == dt ? NULL : ct_cast(x, dt);
  if (x->dtype != dt && !xc) return NULL;
  ct_tensor *src = xc ? xc : x;
  ct_tensor *out = ct__alloc_format(x->ndim, x->shape, dt, x->device, ct__elementwise_format(1, &x, x->ndim, x->shape));
  ct_status s = out ? ct__k_unary(op, out, src) : ct_last_status();
  if (s != CT_OK) {
    ct_tensor_free(xc);
    ct_tensor_free(out);
    return NULL;
  }
  if (ct_dtype_is_floating(dt)) {
    ct_node *n;
    s = ct__record(out, name, bw_unary, 1, &x, &n);
    if (n) {
      n->iv[0] = op;
      s = ct__save_detached(n, 0, deriv_reads_x(op) ? src : out);
      if (s == CT_OK) s = ct__save_detached(n, 1, out);
    }
    if (s != CT_OK) ct_tensor_free(out), out = NULL;
  }
  ct_tensor_free(xc);
  return out;
}

#define CT_UNARY(E, name, fwd, deriv) \
  ct_tensor *ct_##name(ct_tensor *x) { return unary(CT_UNARY_##E, x); }
#include "core/ops.def"

/* ---- where and clamp */
static ct_status bw_where(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *zero = ct_scalar(0, g->dtype, g->device);
  if (n->in[1]) grads[1] = ct_where(n->saved[0], g, zero);
  if (n->in[2]) grads[2] = ct_where(n->saved[0], zero, g);
  ct_tensor_free(zero);
  return (n->in[1] && !grads[1]) || (n->in[2] && !grads[2]) ? ct_last_status() : CT_OK;
}

ct_tensor *ct_where(ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
  if (!cond || !a || !b) return ct__null_arg("where", !cond ? "cond" : !a ? "a" : "b");
  CT__AUTOCAST(CT__AUTOCAST_PROMOTE, ct_where(cond, a, b), &a, &b);
  if (ct__same_device("where", 3, (ct_tensor *[]){cond, a, b}, (const char *[]){"cond", "a", "b"}) != CT_OK) return NULL;
  int nd, nd2;
  int64_t s1[CT_MAX_DIMS], shape[CT_MAX_DIMS];
  if (!ct__broadcast_shape("where", a->ndim, a->shape, b->ndim, b->shape, &nd, s1) ||
      !ct__broadcast_shape("where", cond->ndim, cond->shape, nd, s1, &nd2, shape))
    return NULL;
  ct_dtype dt = ct__result_type(a, b);
  ct_tensor *ce = prepare(cond, CT_BOOL, nd2, shape), *ae = prepare(a, dt, nd2, shape), *be_ = prepare(b, dt, nd2, shape);
  ct_memory_format fmt = ct__elementwise_format(3, (ct_tensor *[]){a, b, cond}, nd2, shape); /* channels_last kept */
  ct_tensor *out = ce && ae && be_ ? ct__alloc_format(nd2, shape, dt, a->device, fmt) : NULL;
  ct_status s = out ? ct__k_where(out, ce, ae, be_) : ct_last_status();
  ct_tensor_free(ae);
  ct_tensor_free(be_);
  if (s != CT_OK) {
    ct_tensor_free(ce);
    ct_tensor_free(out);
    return NULL;
  }
  if (ct_dtype_is_floating(dt)) {
    ct_node *n;
    s = ct__record(out, "where", bw_where, 3, (ct_tensor *[]){NULL, a, b}, &n);
    if (s == CT_OK) s = ct__save_detached(n, 0, ce);
    if (s != CT_OK) ct_tensor_free(out), out = NULL;
  }
  ct_tensor_free(ce);
  return out;
}

static ct_status bw_clamp(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->saved[0];
  ct_tensor *lo = ct_scalar(n->dv[0], x->dtype, x->device), *hi = ct_scalar(n->dv[1], x->dtype, x->device);
  ct_tensor *m1 = ct_ge(x, lo), *m2 = ct_le(x, hi), *m = ct_mul(m1, m2);
  grads[0] = ct_mul(g, m);
  ct_tensor_free(lo), ct_tensor_free(hi), ct_tensor_free(m1), ct_tensor_free(m2), ct_tensor_free(m);
  return grads[0] ? CT_OK : ct_last_status();
}

ct_tensor *ct_clamp(ct_tensor *x, double lo, double hi) {
  if (!x) return ct__null_arg("clamp", "x");
  if (isnan(lo) || isnan(hi)) CT_FAIL_NULL(CT_EINVAL, "clamp: bounds must not be NaN, got min %g max %g (pass -INFINITY or INFINITY for no bound)", lo, hi);
  /* lo > hi is allowed, as in torch: min(max(x, lo), hi) is then hi everywhere (a NaN x stays NaN),
   * and bw_clamp's mask lo <= x <= hi is empty, so the gradient is 0 everywhere. */
  ct_no_grad_begin();
  ct_tensor *l = ct_scalar(lo, x->dtype, x->device), *h = ct_scalar(hi, x->dtype, x->device);
  ct_tensor *t = ct_maximum(x, l), *out = ct_minimum(t, h);
  ct_tensor_free(l), ct_tensor_free(h), ct_tensor_free(t);
  ct_no_grad_end();
  ct_node *n = NULL;
  if (out && ct_dtype_is_floating(x->dtype) &&
      (ct__record(out, "clamp", bw_clamp, 1, &x, &n) != CT_OK || ct__save_detached(n, 0, x) != CT_OK))
    return ct_tensor_free(out), NULL;
  if (n) n->dv[0] = lo, n->dv[1] = hi;
  return out;
}

ct_status ct_fill_(ct_tensor *t, double value) {
  if (!t) return ct__error(CT_EINVAL, "fill_: NULL tensor");
  ct_status s = CT_KERNEL_CALL(t->storage->backend, fill, __func__, t, t, value);
  if (s == CT_OK) ct__bump_version(t);
  return s;
}

ct_status ct_zero_(ct_tensor *t) {
  if (!t) return ct__null_status("zero_", "t");
  return ct_fill_(t, 0);
}
