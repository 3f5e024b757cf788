/* src/ops/conv.c: conv2d, max_pool2d, avg_pool2d and adaptive_avg_pool2d front-ends (NCHW), with
 * their backward.
 * Channels_last inputs go to their own paths in src/ops/memory_format.c. */
#include <string.h>
#include "autograd/node.h"
#include "ops/ops_internal.h"
#include "ops/autocast.h"
#include "ops/memory_format.h"

typedef struct {
  ct_conv2d_opts conv;
  ct_pool2d_opts pool;
} conv_extra;

/* The output size of a window k (dilated) sliding with stride s over n padded by p on each side:
 * (n + 2p - k) / s + 1, or 0 when the window does not fit (C's division truncates toward zero,
 * so a negative span must not reach it: it would give 1). */
static int64_t out_size(int64_t n, int64_t p, int64_t k, int64_t s) {
  int64_t span = n + 2 * p - k;
  return span < 0 ? 0 : span / s + 1;
}

static ct_conv2d_opts conv_defaults(const ct_conv2d_opts *o) {
  ct_conv2d_opts r = o ? *o : (ct_conv2d_opts){0};
  for (int i = 0; i < 2; i++) {
    if (r.stride[i] == 0) r.stride[i] = 1;
    if (r.dilation[i] == 0) r.dilation[i] = 1;
  }
  if (r.groups == 0) r.groups = 1;
  return r;
}

/* The backward of conv2d and of conv2d_relu_max_pool2d: saved are x, w (cast to the compute dtype)
 * and, for the fused op, the pooling's argmax, which picks the fused backward kernel. */
static ct_status bw_conv(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->saved[0], *w = n->saved[1], *argmax = n->saved[2];
  conv_extra *e = n->extra;
  const ct_backend *be = g->storage->backend;
  ct_tensor *gc = ct_contiguous(g);
  if (!gc) return ct_last_status();
  if (n->in[0]) grads[0] = ct__alloc(x->ndim, x->shape, x->dtype, x->device);
  if (n->in[1]) grads[1] = ct__alloc(w->ndim, w->shape, w->dtype, w->device);
  if (n->in[2]) grads[2] = ct__alloc(1, &w->shape[0], w->dtype, w->device);
  ct_status s = (n->in[0] && !grads[0]) || (n->in[1] && !grads[1]) || (n->in[2] && !grads[2]) ? ct_last_status()
                : argmax ? CT_KERNEL_CALL(be, conv2d_relu_pool2x2_backward, __func__, x, grads[0], grads[1], grads[2], gc, argmax, x, w, &e->conv)
                         : CT_KERNEL_CALL(be, conv2d_backward, __func__, x, grads[0], grads[1], grads[2], gc, x, w, &e->conv);
  ct_tensor_free(gc);
  return s;
}

/* Records y = op(x, w, b) with bw_conv's saved tensors; the node's references are its own.
 * CT_ENOMEM when the node or what it saves cannot be allocated (y must then be freed). */
static ct_status record_conv(ct_tensor *y, const char *op, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o,
                             ct_tensor *xc, ct_tensor *wc, ct_tensor *argmax) {
  ct_node *n;
  ct_status s = ct__record(y, op, bw_conv, 3, (ct_tensor *[]){x, w, b}, &n);
  if (s != CT_OK || !n) return s;
  conv_extra *e = ct__calloc(1, sizeof *e, "conv2d's saved options");
  if (!e) return CT_ENOMEM;
  e->conv = *o;
  n->extra = e;
  if ((s = ct__save_detached(n, 0, xc)) != CT_OK || (s = ct__save_detached(n, 1, wc)) != CT_OK) return s;
  return argmax ? ct__save_detached(n, 2, argmax) : CT_OK;
}

/* Checks conv2d's arguments (op names the caller in errors): 1 with the options completed, the
 * output size and the compute dtype, or 0 with the error set. */
static int conv_check(const char *op, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *opts, ct_conv2d_opts *out,
                      int64_t *Ho_, int64_t *Wo_, ct_dtype *dt_) {
  char sx[160], sw[160], sb[160];
  if (ct__same_device(op, 3, (ct_tensor *[]){x, w, b}, (const char *[]){"input", "weight", "bias"}) != CT_OK) return 0;
  ct_conv2d_opts o = conv_defaults(opts);
  if (x->ndim != 4 || w->ndim != 4)
    return ct__error(CT_ESHAPE, "%s: expected input (N, C, H, W) and weight (O, C/groups, kH, kW), got %s and %s", op,
                     ct_shape_str(x, sx, sizeof sx), ct_shape_str(w, sw, sizeof sw)), 0;
  int64_t C = x->shape[1], O = w->shape[0];
  if (o.groups < 1) return ct__error(CT_EINVAL, "%s: groups must be positive, got %d (0 means 1)", op, o.groups), 0;
  if (C % o.groups || O % o.groups || w->shape[1] * o.groups != C)
    return ct__error(CT_ESHAPE, "%s: input %s with groups=%d does not fit weight %s (weight dim 1 must be C/groups)", op,
                     ct_shape_str(x, sx, sizeof sx), o.groups, ct_shape_str(w, sw, sizeof sw)), 0;
  if (b && (b->ndim != 1 || b->shape[0] != O))
    return ct__error(CT_ESHAPE, "%s: bias %s does not match %lld output channels", op, ct_shape_str(b, sb, sizeof sb),
                     (long long)O), 0;
  for (int i = 0; i < 2; i++) {
    if (o.stride[i] < 1)
      return ct__error(CT_EINVAL, "%s: stride must be positive, got stride[%d] = %d (0 means 1)", op, i, o.stride[i]), 0;
    if (o.padding[i] < 0)
      return ct__error(CT_EINVAL, "%s: padding must be >= 0, got padding[%d] = %d", op, i, o.padding[i]), 0;
    if (o.dilation[i] < 1)
      return ct__error(CT_EINVAL, "%s: dilation must be positive, got dilation[%d] = %d (0 means 1)", op, i, o.dilation[i]), 0;
  }
  int64_t Ho = out_size(x->shape[2], o.padding[0], o.dilation[0] * (w->shape[2] - 1) + 1, o.stride[0]);
  int64_t Wo = out_size(x->shape[3], o.padding[1], o.dilation[1] * (w->shape[3] - 1) + 1, o.stride[1]);
  if (Ho <= 0 || Wo <= 0)
    return ct__error(CT_ESHAPE, "%s: input %s is smaller than the (dilated) kernel %s after padding", op,
                     ct_shape_str(x, sx, sizeof sx), ct_shape_str(w, sw, sizeof sw)), 0;
  ct_dtype dt = ct_promote_types(x->dtype, w->dtype);
  if (!ct_dtype_is_floating(dt))
    return ct__error(CT_EDTYPE, "%s: needs floating input and weight, got %s and %s (cast them first, e.g. ct_cast(x, CT_F32))",
                     op, ct_dtype_name(x->dtype), ct_dtype_name(w->dtype)), 0;
  /* The output's size, checked here so that huge padding is this op's error, not the allocator's. */
  int64_t ys[4] = {x->shape[0], O, Ho, Wo}, nbytes = (int64_t)ct_dtype_size(dt);
  for (int i = 0; i < 4; i++)
    if (__builtin_mul_overflow(nbytes, ys[i], &nbytes))
      return ct__error(CT_EINVAL, "%s: the output %s for input %s with padding (%d, %d) would need more than 2^63 bytes; reduce "
                       "the padding", op, ct__shape_str(4, ys, sb, sizeof sb), ct_shape_str(x, sx, sizeof sx), o.padding[0],
                       o.padding[1]), 0;
  *out = o, *Ho_ = Ho, *Wo_ = Wo, *dt_ = dt;
  return 1;
}

ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *opts) {
  if (!x || !w) return ct__null_arg("conv2d", !x ? "x" : "w");
  CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_conv2d(x, w, b, opts), &x, &w, &b);
  ct_conv2d_opts o;
  int64_t Ho, Wo, O = w->shape[0];
  ct_dtype dt;
  if (!conv_check("conv2d", x, w, b, opts, &o, &Ho, &Wo, &dt)) return NULL;
  const ct_backend *be = x->storage->backend;
  if (ct__conv_channels_last(x, w)) /* a channels_last output (src/ops/memory_format.c) */
    return ct__cast_result(ct__conv2d_channels_last(x, w, b, &o, Ho, Wo, ct__compute_dtype(dt)), dt);
  /* float16 and bfloat16 compute in float32 (cast in, one rounding out) unless the backend has
   * kernels for them (ct__supports(be, CT_K_conv2d, dt)); the tape then casts the gradients back to the inputs' dtypes */
  ct_dtype cdt = ct__supports(be, CT_K_conv2d, dt, CT_CONTIGUOUS_FORMAT) ? dt : ct__compute_dtype(dt);
  ct_tensor *xc = ct_cast(x, cdt), *wc = ct_cast(w, cdt), *bc = b ? ct_cast(b, cdt) : NULL;
  int64_t ys[4] = {x->shape[0], O, Ho, Wo};
  ct_tensor *y = xc && wc && (!b || bc) ? ct__alloc(4, ys, cdt, x->device) : NULL;
  ct_status s = y ? CT_KERNEL_CALL(be, conv2d, "conv2d", xc, y, xc, wc, bc, &o) : ct_last_status();
  if (s == CT_OK) s = record_conv(y, "conv2d", x, w, b, &o, xc, wc, NULL);
  if (s != CT_OK) ct_tensor_free(y), y = NULL;
  ct_tensor_free(xc), ct_tensor_free(wc), ct_tensor_free(bc);
  return ct__cast_result(y, dt);
}

static ct_status bw_pool(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->in[0];
  conv_extra *e = n->extra;
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gx = gc ? ct__alloc(x->ndim, x->shape, g->dtype, g->device) : NULL;
  ct_status s = gx ? CT_KERNEL_CALL(g->storage->backend, pool2d_backward, __func__, gc, (ct_pool_kind)n->iv[0], gx, gc, n->saved[0], &e->pool)
                   : ct_last_status();
  ct_tensor_free(gc);
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

/* torch's pooling output size, aten/src/ATen/native/Pool.h (pooling_output_shape_pad_lr):
 * floor_or_ceil((n + 2p - d (k - 1) - 1) / s) + 1 (div_rtn: rounded toward -inf, so an input
 * smaller than the window gives 0 or less), and with ceil_mode one less when the last window would
 * start at or past n + p (beyond the input and its left padding). */
static int64_t pool_out_size(int64_t n, int64_t p, int64_t k, int64_t s, int64_t d, int ceil_mode) {
  int64_t num = n + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= n + p) out--;
  return out;
}

/* Checks pooling's arguments for an input of shape xs and dtype dt (op names the caller in errors;
 * avg: average pooling, else max): 1 with the options completed (stride 0 = kernel, dilation 0 = 1)
 * and the output size, or 0 with the error set. torch's checks (aten/src/ATen/native/Pool.h,
 * pool2d_shape_check and pooling_output_shape; avg_pool2d's divisor_override != 0). */
static int pool_check(const char *op, int avg, int ndim, const int64_t *xs, ct_dtype dt, const ct_pool2d_opts *opts,
                      ct_pool2d_opts *out, int64_t *Ho_, int64_t *Wo_) {
  char sx[160];
  if (!opts)
    return ct__error(CT_EINVAL, "%s: pooling options are NULL; pass a kernel size >= 1, e.g. &(ct_pool2d_opts){.kernel = {2, 2}}",
                     op), 0;
  ct_pool2d_opts o = *opts;
  for (int i = 0; i < 2; i++) {
    if (o.kernel[i] < 1)
      return ct__error(CT_EINVAL, "%s: kernel size must be positive, got kernel[%d] = %d", op, i, o.kernel[i]), 0;
    if (o.stride[i] < 0)
      return ct__error(CT_EINVAL, "%s: stride must be positive, got stride[%d] = %d (0 means the kernel size)", op, i,
                       o.stride[i]), 0;
    if (o.stride[i] == 0) o.stride[i] = o.kernel[i];
    if (o.dilation[i] < 0)
      return ct__error(CT_EINVAL, "%s: dilation must be positive, got dilation[%d] = %d (0 means 1)", op, i, o.dilation[i]), 0;
    if (o.dilation[i] == 0) o.dilation[i] = 1;
    if (avg && o.dilation[i] != 1)
      return ct__error(CT_EINVAL, "%s: average pooling has no dilation (torch's avg_pool2d takes none), got dilation[%d] = %d",
                       op, i, o.dilation[i]), 0;
    /* torch checks pad <= ((k - 1) d + 1) / 2 (half the dilated kernel) and pad <= k / 2; the second
     * is the tighter */
    if (o.padding[i] < 0 || o.padding[i] > o.kernel[i] / 2)
      return ct__error(CT_EINVAL, "%s: padding must be between 0 and kernel/2 = %d (at most half the kernel size, dilated or "
                       "not, as torch), got padding[%d] = %d with kernel[%d] = %d and dilation[%d] = %d", op, o.kernel[i] / 2, i,
                       o.padding[i], i, o.kernel[i], i, o.dilation[i]), 0;
  }
  if (o.ceil_mode != 0 && o.ceil_mode != 1)
    return ct__error(CT_EINVAL, "%s: ceil_mode must be 0 or 1, got %d", op, o.ceil_mode), 0;
  if (o.exclude_pad != 0 && o.exclude_pad != 1)
    return ct__error(CT_EINVAL, "%s: exclude_pad must be 0 (count_include_pad=True) or 1 (count_include_pad=False), got %d", op,
                     o.exclude_pad), 0;
  if (!avg && (o.exclude_pad || o.divisor_override))
    return ct__error(CT_EINVAL, "%s: exclude_pad (count_include_pad) and divisor_override are average pooling's options; max "
                     "pooling takes neither, got exclude_pad = %d, divisor_override = %d", op, o.exclude_pad,
                     o.divisor_override), 0;
  if (o.divisor_override < 0)
    return ct__error(CT_EINVAL, "%s: divisor_override must be positive (0 means none), got %d", op, o.divisor_override), 0;
  if (ndim != 4)
    return ct__error(CT_ESHAPE, "%s: expected input (N, C, H, W), got %s", op, ct__shape_str(ndim, xs, sx, sizeof sx)), 0;
  if (!ct_dtype_is_floating(dt))
    return ct__error(CT_EDTYPE, "%s: needs a floating input, got %s (cast it first, e.g. ct_cast(x, CT_F32))", op,
                     ct_dtype_name(dt)), 0;
  int64_t Ho = pool_out_size(xs[2], o.padding[0], o.kernel[0], o.stride[0], o.dilation[0], o.ceil_mode);
  int64_t Wo = pool_out_size(xs[3], o.padding[1], o.kernel[1], o.stride[1], o.dilation[1], o.ceil_mode);
  if (Ho <= 0 || Wo <= 0)
    return ct__error(CT_ESHAPE, "%s: input %s is smaller than the kernel (%d, %d) (dilation (%d, %d)) after padding: output "
                     "size (%lld, %lld) is too small", op, ct__shape_str(ndim, xs, sx, sizeof sx), o.kernel[0], o.kernel[1],
                     o.dilation[0], o.dilation[1], (long long)Ho, (long long)Wo), 0;
  *out = o, *Ho_ = Ho, *Wo_ = Wo;
  return 1;
}

static ct_tensor *pool(const char *op, ct_pool_kind kind, ct_tensor *x, const ct_pool2d_opts *opts) {
  if (!x) return ct__null_arg(op, "x");
  ct_pool2d_opts o;
  int64_t Ho, Wo;
  if (!pool_check(op, kind == CT_POOL_AVG, x->ndim, x->shape, x->dtype, opts, &o, &Ho, &Wo)) return NULL;
  const ct_backend *be = x->storage->backend;
  if (ct_tensor_suggest_memory_format(x) == CT_CHANNELS_LAST) /* src/ops/memory_format.c */
    return ct__pool2d_channels_last(op, kind, x, &o, Ho, Wo);
  ct_tensor *xc = ct_contiguous(x);
  int64_t ys[4] = {x->shape[0], x->shape[1], Ho, Wo};
  ct_tensor *y = xc ? ct__alloc(4, ys, x->dtype, x->device) : NULL;
  ct_dtype adt = be->pool2d_argmax_dtype ? be->pool2d_argmax_dtype(x, &o) : CT_I64;
  int max = kind != CT_POOL_AVG;
  ct_tensor *am = y && max ? ct__alloc(4, ys, adt, x->device) : NULL;
  ct_status s = y && (!max || am) ? CT_KERNEL_CALL(be, pool2d, op, xc, kind, y, am, xc, &o) : ct_last_status();
  ct_tensor_free(xc);
  if (s != CT_OK) {
    ct_tensor_free(y), ct_tensor_free(am);
    return NULL;
  }
  ct_node *n;
  s = ct__record(y, op, bw_pool, 1, &x, &n);
  if (n) {
    conv_extra *e = ct__calloc(1, sizeof *e, "pooling's saved options");
    n->extra = e;
    n->iv[0] = kind;
    if (!e) s = CT_ENOMEM;
    else e->pool = o;
    if (s == CT_OK && am) s = ct__save_detached(n, 0, am);
  }
  ct_tensor_free(am);
  if (s != CT_OK) return ct_tensor_free(y), NULL;
  return y;
}

ct_tensor *ct_max_pool2d(ct_tensor *x, const ct_pool2d_opts *opts) { return pool("max_pool2d", CT_POOL_MAX, x, opts); }
ct_tensor *ct_avg_pool2d(ct_tensor *x, const ct_pool2d_opts *opts) { return pool("avg_pool2d", CT_POOL_AVG, x, opts); }

static ct_status bw_adaptive(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->in[0];
  ct_tensor *gc = ct_contiguous(g);
  ct_tensor *gx = gc ? ct__alloc(x->ndim, x->shape, g->dtype, g->device) : NULL;
  ct_status s = gx ? CT_KERNEL_CALL(g->storage->backend, adaptive_avg_pool2d_backward, "adaptive_avg_pool2d", gc, gx, gc)
                   : ct_last_status();
  ct_tensor_free(gc);
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

ct_tensor *ct_adaptive_avg_pool2d(ct_tensor *x, int64_t out_h, int64_t out_w) {
  const char *op = "adaptive_avg_pool2d";
  char sx[160];
  if (!x) return ct__null_arg(op, "x");
  if (out_h < 1 || out_w < 1) CT_FAIL_NULL(CT_EINVAL, "%s: output size must be at least 1, got (%lld, %lld)", op, (long long)out_h, (long long)out_w);
  if (x->ndim != 4) CT_FAIL_NULL(CT_ESHAPE, "%s: expected input (N, C, H, W), got %s", op, ct_shape_str(x, sx, sizeof sx));
  if (!ct_dtype_is_floating(x->dtype))
    CT_FAIL_NULL(CT_EDTYPE, "%s: needs a floating input, got %s (cast it first, e.g. ct_cast(x, CT_F32))", op, ct_dtype_name(x->dtype));
  const ct_backend *be = x->storage->backend;
  int64_t H = x->shape[2], W = x->shape[3];
  if (!ct__has_kernel(be, CT_K_adaptive_avg_pool2d) && H % out_h == 0 && W % out_w == 0 && H / out_h <= INT32_MAX &&
      W / out_w <= INT32_MAX) /* the same windows, none overlapping: avg_pool2d computes them */
    return pool(op, CT_POOL_AVG, x, &(ct_pool2d_opts){.kernel = {(int)(H / out_h), (int)(W / out_w)}});
  ct_tensor *xc = ct_contiguous(x);
  int64_t ys[4] = {x->shape[0], x->shape[1], out_h, out_w};
  ct_tensor *y = xc ? ct__alloc(4, ys, x->dtype, x->device) : NULL;
  ct_status s = y ? CT_KERNEL_CALL(be, adaptive_avg_pool2d, op, xc, y, xc) : ct_last_status();
  ct_tensor_free(xc);
  ct_node *n;
  if (s == CT_OK) s = ct__record(y, op, bw_adaptive, 1, &x, &n);
  if (s != CT_OK) return ct_tensor_free(y), NULL;
  return y;
}

ct_tensor *ct_relu_max_pool2d(ct_tensor *x, const ct_pool2d_opts *opts) {
  if (!x) return ct__null_arg("relu_max_pool2d", "x");
  if (ct__supports(x->storage->backend, CT_K_pool2d_max_relu, x->dtype, CT_CONTIGUOUS_FORMAT)) return pool("relu_max_pool2d", CT_POOL_MAX_RELU, x, opts);
  ct_pool2d_opts o;
  int64_t Ho, Wo;
  if (!pool_check("relu_max_pool2d", 0, x->ndim, x->shape, x->dtype, opts, &o, &Ho, &Wo)) return NULL;
  ct_tensor *r = ct_relu(x), *y = r ? ct_max_pool2d(r, opts) : NULL; /* a backend without the fused kernel */
  ct_tensor_free(r);
  if (!y) ct__error_prefix("relu_max_pool2d");
  return y;
}

/* ---- conv2d, relu and max_pool2d as one op */
ct_tensor *ct_conv2d_relu_max_pool2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *copts,
                                     const ct_pool2d_opts *popts) {
  if (!x || !w) return ct__null_arg("conv2d_relu_max_pool2d", !x ? "x" : "w");
  CT__AUTOCAST(CT__AUTOCAST_LOWER, ct_conv2d_relu_max_pool2d(x, w, b, copts, popts), &x, &w, &b);
  ct_conv2d_opts o;
  int64_t Ho, Wo, O = w->shape[0];
  ct_dtype dt;
  if (!conv_check("conv2d_relu_max_pool2d", x, w, b, copts, &o, &Ho, &Wo, &dt)) return NULL;
  ct_pool2d_opts pc;
  int64_t Hp, Wp;
  if (!pool_check("conv2d_relu_max_pool2d", 0, 4, (int64_t[]){x->shape[0], O, Ho, Wo}, dt, popts, &pc, &Hp, &Wp)) return NULL;
  const ct_backend *be = x->storage->backend;
  int pool2x2 = popts && popts->kernel[0] == 2 && popts->kernel[1] == 2 && (popts->stride[0] == 0 || popts->stride[0] == 2) &&
                (popts->stride[1] == 0 || popts->stride[1] == 2) && popts->padding[0] == 0 && popts->padding[1] == 0 &&
                pc.dilation[0] == 1 && pc.dilation[1] == 1 && !pc.ceil_mode; /* the fused kernels' windows */
  /* float32, or a half the backend's fused kernel takes as it is (ct__supports):
   * under autocast the conv output then stays out of memory too, and nothing is widened */
  int fused_dt = dt == CT_F32 || ((dt == CT_F16 || dt == CT_BF16) && ct__supports(be, CT_K_conv2d_relu_pool2x2, dt, CT_CONTIGUOUS_FORMAT));
  if (!ct__has_kernel(be, CT_K_conv2d_relu_pool2x2) || !pool2x2 || !fused_dt || Ho < 2 || Wo < 2 || ct__conv_channels_last(x, w)) { /* the ops one by one */
    ct_tensor *c = ct_conv2d(x, w, b, copts), *y = c ? ct_relu_max_pool2d(c, popts) : NULL;
    ct_tensor_free(c);
    if (!y) ct__error_prefix("conv2d_relu_max_pool2d");
    return y;
  }
  ct_tensor *xc = ct_cast(x, dt), *wc = ct_cast(w, dt), *bc = b ? ct_cast(b, dt) : NULL;
  int64_t ys[4] = {x->shape[0], O, Ho / 2, Wo / 2};
  ct_pool2d_opts po = {.kernel = {2, 2}, .stride = {2, 2}};
  ct_tensor *y = xc && wc && (!b || bc) ? ct__alloc(4, ys, dt, x->device) : NULL;
  /* the argmax format the backend picks for pooling the (float32) conv output */
  ct_dtype adt = y && be->pool2d_argmax_dtype ? be->pool2d_argmax_dtype(xc, &po) : CT_I64;
  /* a half's positions go two a byte (backend.h) */
  int half = dt == CT_F16 || dt == CT_BF16;
  int64_t as[3] = {ys[0], ys[1], (ys[2] * ys[3] + 1) / 2};
  ct_tensor *am = y ? half ? ct__alloc(3, as, CT_U8, x->device) : ct__alloc(4, ys, adt, x->device) : NULL;
  ct_status s = am ? CT_KERNEL_CALL(be, conv2d_relu_pool2x2, __func__, xc, y, am, xc, wc, bc, &o) : ct_last_status();
  if (s == CT_OK) s = record_conv(y, "conv2d_relu_max_pool2d", x, w, b, &o, xc, wc, am);
  if (s != CT_OK) ct_tensor_free(y), y = NULL;
  ct_tensor_free(xc), ct_tensor_free(wc), ct_tensor_free(bc), ct_tensor_free(am);
  return y;
}
