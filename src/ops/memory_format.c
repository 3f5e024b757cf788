/* src/ops/memory_format.c: memory formats (torch.channels_last) for 4-D tensors.
 *
 * A channels_last tensor keeps its logical shape (N, C, H, W); its strides are (H W C, 1, W C, C),
 * so it is an (N, H, W, C) array in memory. This file has the public side (ct_contiguous_format,
 * ct_tensor_is_contiguous_format, ct_tensor_suggest_memory_format), the internal helpers the op
 * families use to keep a format (memory_format.h), and the channels_last paths of conv2d and
 * pooling with their backward rules:
 *  - a backend with conv2d_nhwc / pool2d_nhwc (the CPU: src/backend/cpu/conv_nhwc.c) runs them on
 *    the channels_last tensors directly;
 *  - any other (OpenCL, CUDA for now) gets NCHW copies of its inputs, runs its NCHW kernels and
 *    its results are copied back to channels_last: correct everywhere, two copies slower.
 * The elementwise ops keep the format by allocating their output in the format of their first
 * full-size input (ct__elementwise_format) and running the kernel on (N, H, W, C) views
 * (ct__k_unary, ...), so a backend's elementwise kernels see a contiguous output as always. */
#include <stdint.h>
#include <string.h>
#include "autograd/node.h"
#include "ops/memory_format.h"

static int valid_format(ct_memory_format f) { return f == CT_CONTIGUOUS_FORMAT || f == CT_CHANNELS_LAST; }

/* Dense in NHWC order, size-1 dims ignored (c10's compute_channels_last_contiguous_2d). */
static int dense_channels_last(const ct_tensor *t) {
  if (t->ndim != 4) return 0;
  static const int order[4] = {1, 3, 2, 0};
  int64_t expected = 1;
  for (int k = 0; k < 4; k++) {
    int d = order[k];
    if (t->shape[d] == 1) continue;
    if (t->stride[d] != expected) return 0;
    expected *= t->shape[d];
  }
  return 1;
}

/* The strides order the dims C, W, H, N from fastest to slowest (c10's is_channels_last_strides_2d_s4):
 * size-1 dims count with their strides, and the ambiguous N111 case falls back to NCHW. */
static int strides_channels_last(const ct_tensor *t) {
  if (t->ndim != 4 || t->stride[1] == 0) return 0;
  static const int order[4] = {1, 3, 2, 0};
  int64_t min = 0;
  for (int k = 0; k < 4; k++) {
    int d = order[k];
    if (t->shape[d] == 0 || t->stride[d] < min) return 0;
    if (d == 0 && min == t->stride[1]) return 0;
    min = t->stride[d];
    if (t->shape[d] > 1) min *= t->shape[d];
  }
  return 1;
}

int ct_tensor_is_contiguous_format(const ct_tensor *t, ct_memory_format fmt) {
  if (!t) return ct__null_arg("tensor_is_contiguous_format", "t"), 0;
  if (!valid_format(fmt))
    return ct__error(CT_EINVAL, "tensor_is_contiguous_format: invalid memory format %d (pass CT_CONTIGUOUS_FORMAT or "
                     "CT_CHANNELS_LAST)", (int)fmt), 0;
  return fmt == CT_CHANNELS_LAST ? dense_channels_last(t) : ct_tensor_is_contiguous(t);
}

ct_memory_format ct_tensor_suggest_memory_format(const ct_tensor *t) {
  if (!t) return ct__null_arg("tensor_suggest_memory_format", "t"), CT_CONTIGUOUS_FORMAT;
  return strides_channels_last(t) ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT;
}

/* ---- allocation and conversion */
ct_tensor *ct__alloc_format(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, ct_memory_format fmt) {
  if (fmt != CT_CHANNELS_LAST || ndim != 4) return ct__alloc(ndim, shape, dt, dev);
  int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  ct_tensor *t = ct__alloc(4, (int64_t[]){N, H, W, C}, dt, dev);
  if (!t) return NULL;
  /* the same bytes seen as (N, C, H, W): a fresh header that nothing else holds yet */
  const int64_t s[4] = {N, C, H, W}, st[4] = {H * W * C, 1, W * C, C};
  memcpy(t->shape, s, sizeof s);
  memcpy(t->stride, st, sizeof st);
  return t;
}

static int dense_in(const ct_tensor *t, ct_memory_format fmt) {
  return fmt == CT_CHANNELS_LAST ? dense_channels_last(t) : ct_tensor_is_contiguous(t);
}

ct_tensor *ct__to_format(ct_tensor *t, ct_dtype dt, ct_memory_format fmt) {
  if (!t) return NULL;
  /* tracked like the copy below (ct__alloc tracks it in the open scope), so that the caller's
   * ct_tensor_free releases this reference and not the one the scope holds on t */
  if (t->dtype == dt && dense_in(t, fmt)) return ct__retain_tracked(t);
  ct_tensor *c = ct__alloc_format(t->ndim, t->shape, dt, t->device, fmt);
  ct_status s = c ? CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t) : ct_last_status();
  if (s != CT_OK) return ct_tensor_free(c), NULL;
  return c;
}

static ct_status bw_identity(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  (void)n;
  grads[0] = ct_tensor_retain(g);
  return CT_OK;
}

ct_tensor *ct_contiguous_format(ct_tensor *t, ct_memory_format fmt) {
  if (!t) return ct__null_arg("contiguous_format", "t");
  char st[160];
  if (!valid_format(fmt))
    CT_FAIL_NULL(CT_EINVAL, "contiguous_format: invalid memory format %d (pass CT_CONTIGUOUS_FORMAT or CT_CHANNELS_LAST)",
                 (int)fmt);
  if (fmt == CT_CHANNELS_LAST && t->ndim != 4)
    CT_FAIL_NULL(CT_ESHAPE, "contiguous_format: channels_last needs a 4-D (N, C, H, W) tensor, got %s (required rank 4 tensor "
                 "to use channels_last format)", ct_shape_str(t, st, sizeof st));
  /* already there: dense in fmt, and (for a tensor dense in both) strides that suggest fmt */
  if (dense_in(t, fmt) && strides_channels_last(t) == (fmt == CT_CHANNELS_LAST)) return ct__retain_tracked(t);
  ct_tensor *c = ct__alloc_format(t->ndim, t->shape, t->dtype, t->device, fmt);
  ct_status s = c ? CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t) : ct_last_status();
  ct_node *n;
  if (s == CT_OK) s = ct__record(c, "contiguous_format", bw_identity, 1, &t, &n);
  if (s != CT_OK) {
    ct_tensor_free(c);
    ct__error_prefix("contiguous_format");
    return NULL;
  }
  return c;
}

/* ---- elementwise ops */
int ct__non_overlapping_and_dense(const ct_tensor *t) {
  int idx[CT_MAX_DIMS], n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] != 1) idx[n++] = d;
  for (int i = 1; i < n; i++) /* sort the dims by stride, innermost first */
    for (int j = i; j > 0 && t->stride[idx[j]] < t->stride[idx[j - 1]]; j--) {
      int k = idx[j];
      idx[j] = idx[j - 1], idx[j - 1] = k;
    }
  int64_t expect = 1;
  for (int i = 0; i < n; i++) {
    if (t->stride[idx[i]] != expect) return 0;
    expect *= t->shape[idx[i]];
  }
  return 1;
}

ct_memory_format ct__elementwise_format(int n, ct_tensor *const *in, int nd, const int64_t *shape) {
  if (nd != 4) return CT_CONTIGUOUS_FORMAT;
  for (int i = 0; i < n; i++) {
    const ct_tensor *t = in[i];
    if (!t || t->ndim != 4 || memcmp(t->shape, shape, 4 * sizeof *shape) != 0) continue;
    int broadcast = 0; /* an expanded input (stride 0 over a dim of size > 1) has no layout to follow */
    for (int d = 0; d < 4; d++) broadcast |= t->stride[d] == 0 && t->shape[d] > 1;
    if (broadcast) continue;
    return strides_channels_last(t) ? CT_CHANNELS_LAST : CT_CONTIGUOUS_FORMAT;
  }
  return CT_CONTIGUOUS_FORMAT;
}

/* An (N, H, W, C) view of a 4-D t of out's shape (header only, no tape node). */
static ct_tensor *nhwc_view(ct_tensor *t) {
  const int64_t s[4] = {t->shape[0], t->shape[2], t->shape[3], t->shape[1]};
  const int64_t st[4] = {t->stride[0], t->stride[2], t->stride[3], t->stride[1]};
  return ct__view_of(t, 4, s, st, t->offset);
}

/* 1 when out is dense channels_last but not contiguous: the kernel must then see NHWC views. */
static int needs_views(const ct_tensor *out) {
  return out->ndim == 4 && dense_channels_last(out) && !ct_tensor_is_contiguous(out);
}

/* vs[i]: the NHWC view of ts[i] (NULL stays NULL); 0 with the error set when a header cannot be had. */
static int make_views(int n, ct_tensor *const *ts, ct_tensor **vs) {
  for (int i = 0; i < n; i++) {
    vs[i] = ts[i] ? nhwc_view(ts[i]) : NULL;
    if (ts[i] && !vs[i]) {
      for (int j = 0; j < i; j++) ct_tensor_free(vs[j]);
      return 0;
    }
  }
  return 1;
}

static void free_views(int n, ct_tensor **vs) {
  for (int i = 0; i < n; i++) ct_tensor_free(vs[i]);
}

ct_status ct__k_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x) {
  const ct_backend *be = out->storage->backend;
  ct_tensor *v[2];
  if (!needs_views(out)) return CT_KERNEL_CALL(be, unary, __func__, x, op, out, x);
  if (!make_views(2, (ct_tensor *[]){out, x}, v)) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(be, unary, __func__, v[1], op, v[0], v[1]);
  free_views(2, v);
  return s;
}

ct_status ct__k_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y) {
  const ct_backend *be = out->storage->backend;
  ct_tensor *v[4];
  if (!needs_views(out)) return CT_KERNEL_CALL(be, unary_backward, __func__, x, op, out, g, x, y);
  if (!make_views(4, (ct_tensor *[]){out, g, x, y}, v)) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(be, unary_backward, __func__, v[2], op, v[0], v[1], v[2], v[3]);
  free_views(4, v);
  return s;
}

ct_status ct__k_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  const ct_backend *be = out->storage->backend;
  ct_tensor *v[3];
  if (!needs_views(out)) return CT_KERNEL_CALL(be, binary, __func__, a, op, out, a, b);
  if (!make_views(3, (ct_tensor *[]){out, a, b}, v)) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(be, binary, __func__, v[1], op, v[0], v[1], v[2]);
  free_views(3, v);
  return s;
}

ct_status ct__k_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b) {
  const ct_backend *be = out->storage->backend;
  ct_tensor *v[4];
  if (!needs_views(out)) return CT_KERNEL_CALL(be, binary_backward, __func__, a, op, wrt, out, g, a, b);
  if (!make_views(4, (ct_tensor *[]){out, g, a, b}, v)) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(be, binary_backward, __func__, v[2], op, wrt, v[0], v[1], v[2], v[3]);
  free_views(4, v);
  return s;
}

ct_status ct__k_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
  const ct_backend *be = out->storage->backend;
  ct_tensor *v[4];
  if (!needs_views(out)) return CT_KERNEL_CALL(be, where, __func__, a, out, cond, a, b);
  if (!make_views(4, (ct_tensor *[]){out, cond, a, b}, v)) return ct_last_status();
  ct_status s = CT_KERNEL_CALL(be, where, __func__, v[2], v[0], v[1], v[2], v[3]);
  free_views(4, v);
  return s;
}

/* ---- conv2d */
int ct__conv_channels_last(const ct_tensor *x, const ct_tensor *w) { return strides_channels_last(x) || strides_channels_last(w); }

static int native_dtype(ct_dtype dt) { return dt == CT_F32 || dt == CT_F64; }

/* y = conv(x, w) + b with x, w, y channels_last, b contiguous (or NULL), all of one dtype. */
static ct_status run_conv(const ct_backend *be, ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  if (ct__has_kernel(be, CT_K_conv2d_nhwc) && native_dtype(y->dtype)) return CT_KERNEL_CALL(be, conv2d_nhwc, __func__, x, y, x, w, b, o);
  ct_tensor *xn = ct__to_format(x, x->dtype, CT_CONTIGUOUS_FORMAT), *wn = xn ? ct__to_format(w, w->dtype, CT_CONTIGUOUS_FORMAT) : NULL;
  ct_tensor *yn = wn ? ct__alloc(4, y->shape, y->dtype, y->device) : NULL;
  ct_status s = yn ? CT_KERNEL_CALL(be, conv2d, "conv2d", xn, yn, xn, wn, b, o) : ct_last_status();
  if (s == CT_OK) s = CT_KERNEL_CALL(be, copy, __func__, yn, y, yn);
  ct_tensor_free(xn), ct_tensor_free(wn), ct_tensor_free(yn);
  return s;
}

/* The gradients gx, gw (channels_last) and gb, each NULL when not wanted, of gy (channels_last). */
static ct_status run_conv_backward(const ct_backend *be, ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                   ct_tensor *w, const ct_conv2d_opts *o) {
  if (ct__has_kernel(be, CT_K_conv2d_nhwc_backward) && native_dtype(gy->dtype)) return CT_KERNEL_CALL(be, conv2d_nhwc_backward, __func__, x, gx, gw, gb, gy, x, w, o);
  ct_memory_format nchw = CT_CONTIGUOUS_FORMAT;
  ct_tensor *gyn = ct__to_format(gy, gy->dtype, nchw), *xn = gyn ? ct__to_format(x, x->dtype, nchw) : NULL;
  ct_tensor *wn = xn ? ct__to_format(w, w->dtype, nchw) : NULL;
  ct_tensor *gxn = wn && gx ? ct__alloc(4, gx->shape, gx->dtype, gx->device) : NULL;
  ct_tensor *gwn = wn && gw ? ct__alloc(4, gw->shape, gw->dtype, gw->device) : NULL;
  ct_status s = !wn || (gx && !gxn) || (gw && !gwn) ? ct_last_status() : CT_KERNEL_CALL(be, conv2d_backward, __func__, xn, gxn, gwn, gb, gyn, xn, wn, o);
  if (s == CT_OK && gx) s = CT_KERNEL_CALL(be, copy, __func__, gxn, gx, gxn);
  if (s == CT_OK && gw) s = CT_KERNEL_CALL(be, copy, __func__, gwn, gw, gwn);
  ct_tensor_free(gyn), ct_tensor_free(xn), ct_tensor_free(wn), ct_tensor_free(gxn), ct_tensor_free(gwn);
  return s;
}

static ct_conv2d_opts conv_opts_of(const ct_node *n) {
  ct_conv2d_opts o = {.stride = {(int)n->iv[0], (int)n->iv[1]},
                      .padding = {(int)n->iv[2], (int)n->iv[3]},
                      .dilation = {(int)n->iv[4], (int)n->iv[5]},
                      .groups = (int)n->iv[6]};
  return o;
}

/* gx in x's format, gw in w's (PyTorch's gradients follow their inputs' layouts), gb contiguous. */
static ct_status bw_conv_cl(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_tensor *x = n->saved[0], *w = n->saved[1];
  ct_conv2d_opts o = conv_opts_of(n);
  const ct_backend *be = g->storage->backend;
  ct_tensor *gc = ct__to_format(g, x->dtype, CT_CHANNELS_LAST);
  ct_tensor *gx = gc && n->in[0] ? ct__alloc_format(4, x->shape, x->dtype, x->device, CT_CHANNELS_LAST) : NULL;
  ct_tensor *gw = gc && n->in[1] ? ct__alloc_format(4, w->shape, w->dtype, w->device, CT_CHANNELS_LAST) : NULL;
  ct_tensor *gb = gc && n->in[2] ? ct__alloc(1, &w->shape[0], w->dtype, w->device) : NULL;
  ct_status s = !gc || (n->in[0] && !gx) || (n->in[1] && !gw) || (n->in[2] && !gb) ? ct_last_status()
                                                                                     : run_conv_backward(be, gx, gw, gb, gc, x, w, &o);
  ct_tensor_free(gc);
  for (int i = 0; i < 2 && s == CT_OK; i++) { /* back to the input's own format */
    ct_tensor *t = i == 0 ? gx : gw;
    if (!t || strides_channels_last(n->in[i])) continue;
    ct_tensor *c = ct__to_format(t, t->dtype, CT_CONTIGUOUS_FORMAT);
    if (!c) s = ct_last_status();
    ct_tensor_free(t);
    if (i == 0) gx = c;
    else gw = c;
  }
  if (s != CT_OK) {
    ct_tensor_free(gx), ct_tensor_free(gw), ct_tensor_free(gb);
    return s;
  }
  grads[0] = gx, grads[1] = gw, grads[2] = gb;
  return CT_OK;
}

ct_tensor *ct__conv2d_channels_last(ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o, int64_t Ho, int64_t Wo,
                                    ct_dtype dt) {
  const ct_backend *be = x->storage->backend;
  ct_tensor *xc = ct__to_format(x, dt, CT_CHANNELS_LAST), *wc = xc ? ct__to_format(w, dt, CT_CHANNELS_LAST) : NULL;
  ct_tensor *bc = wc && b ? ct__to_format(b, dt, CT_CONTIGUOUS_FORMAT) : NULL;
  int64_t ys[4] = {x->shape[0], w->shape[0], Ho, Wo};
  ct_tensor *y = wc && (!b || bc) ? ct__alloc_format(4, ys, dt, x->device, CT_CHANNELS_LAST) : NULL;
  ct_status s = y ? run_conv(be, y, xc, wc, bc, o) : ct_last_status();
  ct_node *n = NULL;
  if (s == CT_OK) s = ct__record(y, "conv2d", bw_conv_cl, 3, (ct_tensor *[]){x, w, b}, &n);
  if (s == CT_OK && n) {
    const int64_t iv[7] = {o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0], o->dilation[1], o->groups};
    memcpy(n->iv, iv, sizeof iv);
    s = ct__save_detached(n, 0, xc);
    if (s == CT_OK) s = ct__save_detached(n, 1, wc);
  }
  ct_tensor_free(xc), ct_tensor_free(wc), ct_tensor_free(bc);
  if (s != CT_OK) return ct_tensor_free(y), NULL;
  return y;
}

/* ---- pooling. iv: kind, native (1: the backend's NHWC kernels, argmax int32 channels_last; 0:
 * NCHW kernels, argmax in the backend's own NCHW record), kernel, stride, padding, then x's shape;
 * extra: the completed options the backward passes on (a ct_pool2d_opts: with dilation, ceil_mode
 * and avg pooling's options, which iv has no room for). */
static ct_status bw_pool_cl(ct_node *n, ct_tensor *g, ct_tensor **grads) {
  ct_pool_kind kind = (ct_pool_kind)n->iv[0];
  int native = (int)n->iv[1];
  ct_pool2d_opts o = *(const ct_pool2d_opts *)n->extra;
  const ct_backend *be = g->storage->backend;
  const int64_t xs[4] = {n->iv[8], n->iv[9], n->iv[10], n->iv[11]};
  ct_tensor *am = n->saved[0];
  ct_tensor *gx = ct__alloc_format(4, xs, g->dtype, g->device, CT_CHANNELS_LAST);
  ct_status s;
  if (!gx) return ct_last_status();
  if (native) {
    ct_tensor *gc = ct__to_format(g, g->dtype, CT_CHANNELS_LAST);
    s = gc ? CT_KERNEL_CALL(be, pool2d_nhwc_backward, __func__, gc, kind, gx, gc, am, &o) : ct_last_status();
    ct_tensor_free(gc);
  } else {
    ct_tensor *gn = ct__to_format(g, g->dtype, CT_CONTIGUOUS_FORMAT);
    ct_tensor *gxn = gn ? ct__alloc(4, xs, g->dtype, g->device) : NULL;
    s = gxn ? CT_KERNEL_CALL(be, pool2d_backward, __func__, gn, kind, gxn, gn, am, &o) : ct_last_status();
    if (s == CT_OK) s = CT_KERNEL_CALL(be, copy, __func__, gxn, gx, gxn);
    ct_tensor_free(gn), ct_tensor_free(gxn);
  }
  if (s != CT_OK) return ct_tensor_free(gx), s;
  grads[0] = gx;
  return CT_OK;
}

ct_tensor *ct__pool2d_channels_last(const char *op, ct_pool_kind kind, ct_tensor *x, const ct_pool2d_opts *o, int64_t Ho,
                                    int64_t Wo) {
  const ct_backend *be = x->storage->backend;
  int native = ct__has_kernel(be, CT_K_pool2d_nhwc) && ct__has_kernel(be, CT_K_pool2d_nhwc_backward) && native_dtype(x->dtype) && x->shape[2] * x->shape[3] <= INT32_MAX;
  int max = kind != CT_POOL_AVG;
  int64_t ys[4] = {x->shape[0], x->shape[1], Ho, Wo};
  ct_tensor *y = ct__alloc_format(4, ys, x->dtype, x->device, CT_CHANNELS_LAST), *am = NULL;
  ct_status s = y ? CT_OK : ct_last_status();
  if (s == CT_OK && native) {
    ct_tensor *xc = ct__to_format(x, x->dtype, CT_CHANNELS_LAST);
    am = xc && max ? ct__alloc_format(4, ys, CT_I32, x->device, CT_CHANNELS_LAST) : NULL;
    s = xc && (!max || am) ? CT_KERNEL_CALL(be, pool2d_nhwc, op, xc, kind, y, am, xc, o) : ct_last_status();
    ct_tensor_free(xc);
  } else if (s == CT_OK) {
    ct_tensor *xn = ct__to_format(x, x->dtype, CT_CONTIGUOUS_FORMAT);
    ct_tensor *yn = xn ? ct__alloc(4, ys, x->dtype, x->device) : NULL;
    ct_dtype adt = be->pool2d_argmax_dtype && xn ? be->pool2d_argmax_dtype(xn, o) : CT_I64;
    am = yn && max ? ct__alloc(4, ys, adt, x->device) : NULL;
    s = yn && (!max || am) ? CT_KERNEL_CALL(be, pool2d, op, xn, kind, yn, am, xn, o) : ct_last_status();
    if (s == CT_OK) s = CT_KERNEL_CALL(be, copy, __func__, yn, y, yn);
    ct_tensor_free(xn), ct_tensor_free(yn);
  }
  ct_node *n = NULL;
  if (s == CT_OK) s = ct__record(y, op, bw_pool_cl, 1, &x, &n);
  if (s == CT_OK && n) {
    const int64_t iv[12] = {kind, native, o->kernel[0], o->kernel[1], o->stride[0], o->stride[1], o->padding[0], o->padding[1],
                            x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    memcpy(n->iv, iv, sizeof iv);
    ct_pool2d_opts *e = ct__calloc(1, sizeof *e, "pooling's saved options");
    if (!e) s = CT_ENOMEM;
    else *e = *o, n->extra = e;
    if (s == CT_OK && am) s = ct__save_detached(n, 0, am);
  }
  ct_tensor_free(am);
  if (s != CT_OK) return ct_tensor_free(y), NULL;
  return y;
}
