/* src/backend/opencl/pool.c: the launchers of 2-D max and average pooling, adaptive average
 * pooling, and their backward (kernels/pool.cl), with the CPU backend's semantics
 * (src/backend/cpu/pool.c's generic path, torch's windows and divisors: dilation, ceil_mode,
 * count_include_pad, divisor_override).
 * x: (N, C, H, W) -> y: (N, C, Ho, Wo), any floating dtype. Max pooling's argmax is int64, the
 * flat index h W + w into x's plane (the vtable's pool2d_argmax_dtype is NULL, which means that),
 * and -1 for a window CT_POOL_MAX_RELU passes no gradient through. The backward is a gather over
 * gx, so it needs no atomics and gives the same sums every run. */
#include "backend/opencl/opencl_backend.h"

/* kernels/pool.cl's pool_geom, field for field: the sizes, the window (dilation 0 means 1), and
 * average pooling's divisor rule: exclude_pad (count_include_pad=False), divisor_override (0 none) */
typedef struct {
  cl_long H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, exclude_pad, divisor;
} pool_geom;

static pool_geom geometry(const ct_tensor *x, const ct_tensor *y, const ct_pool2d_opts *o) {
  pool_geom g = {x->shape[2], x->shape[3], y->shape[2], y->shape[3], o->kernel[0], o->kernel[1],
                 o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0] > 0 ? o->dilation[0] : 1,
                 o->dilation[1] > 0 ? o->dilation[1] : 1, o->exclude_pad != 0, o->divisor_override > 0 ? o->divisor_override : 0};
  return g;
}

/* The kernels' kind: 0 max, 1 average, 2 max of relu. */
static cl_int kind_code(ct_pool_kind kind) { return kind == CT_POOL_AVG ? 1 : kind == CT_POOL_MAX_RELU ? 2 : 0; }

// x: (N, C, H, W) -> y: (N, C, Ho, Wo); argmax: int64 (y's shape) for max pooling, NULL for average
ct_status ct__ocl_pool2d(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o) {
  if (argmax && argmax->dtype != CT_I64)
    return ct__error(CT_EINVAL, "opencl: max_pool2d records its argmax in int64, got %s", ct_dtype_name(argmax->dtype));
  ct__be_tmp xt;
  CT_TRY(ct__be_tmp_contiguous(&xt, x));
  ct__ocl_buf yb, xb, ab;
  ct_status s;
  if ((s = ct__ocl_buf_of(y, &yb)) == CT_OK && (s = ct__ocl_buf_of(&xt.t, &xb)) == CT_OK &&
      (!argmax || (s = ct__ocl_buf_of(argmax, &ab)) == CT_OK)) {
    if (!argmax) ab = yb; /* a valid buffer argument; has_am tells the kernel not to write it */
    pool_geom g = geometry(x, y, o);
    cl_int has_am = argmax != NULL, k = kind_code(kind);
    ct__ocl_arg args[] = {CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(xb.mem), CT_OCL_ARG(xb.off), CT_OCL_ARG(xb.dt),
                          CT_OCL_ARG(ab.mem), CT_OCL_ARG(ab.off), CT_OCL_ARG(has_am), CT_OCL_ARG(k),     CT_OCL_ARG(g)};
    s = ct__ocl_launch(y->device.index, "pool2d", (size_t)ct_tensor_numel(y), 10, args);
  }
  ct__be_tmp_free(&xt);
  return s;
}

// gy: (N, C, Ho, Wo), argmax: int64 (gy's shape) or NULL for average -> gx: (N, C, H, W)
ct_status ct__ocl_pool2d_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o) {
  if (kind != CT_POOL_AVG && (!argmax || argmax->dtype != CT_I64))
    return ct__error(CT_EINVAL, "opencl: max_pool2d backward needs the forward's int64 argmax");
  ct__be_tmp gyt, amt = {0};
  CT_TRY(ct__be_tmp_contiguous(&gyt, gy));
  ct__ocl_buf gxb, gyb, ab;
  ct_status s;
  if ((s = ct__ocl_buf_of(gx, &gxb)) == CT_OK && (s = ct__ocl_buf_of(&gyt.t, &gyb)) == CT_OK &&
      (!argmax || ((s = ct__be_tmp_contiguous(&amt, argmax)) == CT_OK && (s = ct__ocl_buf_of(&amt.t, &ab)) == CT_OK))) {
    if (!argmax) ab = gyb; /* a valid buffer argument the average kernel never reads */
    pool_geom g = geometry(gx, gy, o);
    cl_int k = kind_code(kind);
    ct__ocl_arg args[] = {CT_OCL_ARG(gxb.mem), CT_OCL_ARG(gxb.off), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off), CT_OCL_ARG(gyb.dt),
                          CT_OCL_ARG(ab.mem),  CT_OCL_ARG(ab.off),  CT_OCL_ARG(k),       CT_OCL_ARG(g)};
    s = ct__ocl_launch(gx->device.index, "pool2d_backward", (size_t)ct_tensor_numel(gx), 9, args);
  }
  ct__be_tmp_free(&gyt), ct__be_tmp_free(&amt);
  return s;
}

/* Adaptive average pooling (kernels/pool.cl's adaptive_avg_pool2d): `big` (N, C, H, W) and `small`
 * (N, C, OH, OW) of one floating dtype; `out` is written whole, `in` is read (made contiguous first
 * where it is not). The forward launches over y, the backward over gx. */
static ct_status adaptive(const char *kernel, ct_tensor *out, ct_tensor *in, const ct_tensor *big, const ct_tensor *small) {
  if (out->dtype != in->dtype)
    return ct__error(CT_EDTYPE, "opencl: %s wants tensors of one dtype, got %s and %s", kernel, ct_dtype_name(out->dtype),
                     ct_dtype_name(in->dtype));
  ct__be_tmp it;
  CT_TRY(ct__be_tmp_contiguous(&it, in));
  ct__ocl_buf ob, ib;
  ct_status s;
  if ((s = ct__ocl_buf_of(out, &ob)) == CT_OK && (s = ct__ocl_buf_of(&it.t, &ib)) == CT_OK) {
    cl_long H = big->shape[2], W = big->shape[3], OH = small->shape[2], OW = small->shape[3];
    ct__ocl_arg args[] = {CT_OCL_ARG(ob.mem), CT_OCL_ARG(ob.off), CT_OCL_ARG(ib.mem), CT_OCL_ARG(ib.off), CT_OCL_ARG(ib.dt),
                          CT_OCL_ARG(H),      CT_OCL_ARG(W),      CT_OCL_ARG(OH),     CT_OCL_ARG(OW)};
    s = ct__ocl_launch(out->device.index, kernel, (size_t)ct_tensor_numel(out), 9, args);
  }
  ct__be_tmp_free(&it);
  return s;
}

// x: (N, C, H, W) -> y: (N, C, OH, OW), y contiguous
ct_status ct__ocl_adaptive_avg_pool2d(ct_tensor *y, ct_tensor *x) { return adaptive("adaptive_avg_pool2d", y, x, x, y); }

// gy: (N, C, OH, OW) -> gx: (N, C, H, W), gx contiguous (overwritten)
ct_status ct__ocl_adaptive_avg_pool2d_backward(ct_tensor *gx, ct_tensor *gy) {
  return adaptive("adaptive_avg_pool2d_backward", gx, gy, gx, gy);
}
