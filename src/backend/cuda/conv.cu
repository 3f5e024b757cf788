/* src/backend/cuda/conv.cu: 2-D convolution, NCHW, and its backward, through cuDNN's legacy API.
 *
 *   x: (N, Cin, H, W), w: (Cout, Cin / groups, kH, kW), b: (Cout) or NULL -> y: (N, Cout, Ho, Wo)
 *   Ho = (H + 2 pH - dH (kH - 1) - 1) / sH + 1, likewise Wo.
 * Backward: gx (x's shape), gw (w's shape), gb (Cout), each may be NULL; all are overwritten.
 *
 * The algorithm is cuDNN's own heuristic choice (cudnnGet*Algorithm_v7): the first candidate that
 * succeeded, respects the TF32 switch, and whose workspace the allocator can provide. The workspace
 * is the device context's (grown on demand, reused across calls). float32 runs with
 * CUDNN_FMA_MATH (no TF32) unless ct__cuda_set_allow_tf32(1); float16 and bfloat16 may use tensor
 * cores; float64 is supported by cuDNN's legacy kernels. Strided inputs are copied to contiguous
 * scratch first (cuDNN's filter descriptor has no strides); outputs must be contiguous. */
#include "backend/cuda/common.cuh"

/* Descriptors that destroy themselves. */
struct tensor_desc {
  cudnnTensorDescriptor_t d = NULL;
  ~tensor_desc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
};
struct filter_desc {
  cudnnFilterDescriptor_t d = NULL;
  ~filter_desc() {
    if (d) cudnnDestroyFilterDescriptor(d);
  }
};
struct conv_desc {
  cudnnConvolutionDescriptor_t d = NULL;
  ~conv_desc() {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
};
/* Scratch copies freed on every path. */
struct scoped_tmp {
  ct__cuda_tmp t;
  scoped_tmp() { memset(&t, 0, sizeof t); }
  ~scoped_tmp() { ct__cuda_tmp_free(&t); }
};

static int cudnn_type(ct_dtype dt, cudnnDataType_t *data, cudnnDataType_t *compute) {
  switch (dt) {
    case CT_F32: *data = CUDNN_DATA_FLOAT, *compute = CUDNN_DATA_FLOAT; return 1;
    case CT_F64: *data = CUDNN_DATA_DOUBLE, *compute = CUDNN_DATA_DOUBLE; return 1;
    case CT_F16: *data = CUDNN_DATA_HALF, *compute = CUDNN_DATA_FLOAT; return 1;
    case CT_BF16: *data = CUDNN_DATA_BFLOAT16, *compute = CUDNN_DATA_FLOAT; return 1;
    default: return 0;
  }
}

/* fmt: CUDNN_TENSOR_NCHW for row-major tensors, CUDNN_TENSOR_NHWC for channels_last ones; the
 * dims are the logical (n, c, h, w) either way, as cuDNN's 4-D descriptors take them. */
static ct_status set_tensor(tensor_desc &td, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w,
                            cudnnTensorFormat_t fmt = CUDNN_TENSOR_NCHW) {
  CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&td.d));
  CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(td.d, fmt, dt, (int)n, (int)c, (int)h, (int)w));
  return CT_OK;
}

/* Everything the three directions share. */
struct conv_setup {
  cudnnHandle_t h = NULL;
  cudnnDataType_t data, compute;
  tensor_desc xd, yd;
  filter_desc wd;
  conv_desc cd;
  bool fma_only = false; /* float32 without TF32 */
  double one_d = 1.0, zero_d = 0.0;
  float one_f = 1.0f, zero_f = 0.0f;
  const void *one() const { return data == CUDNN_DATA_DOUBLE ? (const void *)&one_d : (const void *)&one_f; }
  const void *zero() const { return data == CUDNN_DATA_DOUBLE ? (const void *)&zero_d : (const void *)&zero_f; }
};

/* x: (N, Cin, H, W), w: (Cout, Cin/g, kH, kW), y: (N, Cout, Ho, Wo) (shapes only) */
static ct_status setup(conv_setup &s, ct__cuda_ctx *ctx, const ct_tensor *x, const ct_tensor *w, const ct_tensor *y,
                       const ct_conv2d_opts *o, cudnnTensorFormat_t fmt) {
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
    return ct__error(CT_ESHAPE, "cuda: conv2d wants 4-D x, w and y, got %d, %d and %d dims", x->ndim, w->ndim, y->ndim);
  if (!cudnn_type(x->dtype, &s.data, &s.compute))
    return ct__error(CT_EDTYPE, "cuda: conv2d supports float32, float64, float16 and bfloat16, not %s", ct_dtype_name(x->dtype));
  for (int d = 0; d < 4; d++)
    if (x->shape[d] > INT32_MAX || w->shape[d] > INT32_MAX || y->shape[d] > INT32_MAX)
      return ct__error(CT_EINVAL, "cuda: conv2d: a dimension exceeds cuDNN's int range");
  s.h = ct__cuda_cudnn(ctx);
  if (!s.h) return ct_last_status();
  CT_TRY(set_tensor(s.xd, s.data, x->shape[0], x->shape[1], x->shape[2], x->shape[3], fmt));
  CT_TRY(set_tensor(s.yd, s.data, y->shape[0], y->shape[1], y->shape[2], y->shape[3], fmt));
  CT_CUDNN_TRY(cudnnCreateFilterDescriptor(&s.wd.d));
  CT_CUDNN_TRY(cudnnSetFilter4dDescriptor(s.wd.d, s.data, fmt, (int)w->shape[0], (int)w->shape[1],
                                          (int)w->shape[2], (int)w->shape[3]));
  int sh = o->stride[0] ? o->stride[0] : 1, sw = o->stride[1] ? o->stride[1] : 1;
  int dh = o->dilation[0] ? o->dilation[0] : 1, dw = o->dilation[1] ? o->dilation[1] : 1;
  int groups = o->groups ? o->groups : 1;
  CT_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s.cd.d));
  CT_CUDNN_TRY(cudnnSetConvolution2dDescriptor(s.cd.d, o->padding[0], o->padding[1], sh, sw, dh, dw,
                                               CUDNN_CROSS_CORRELATION, s.compute));
  CT_CUDNN_TRY(cudnnSetConvolutionGroupCount(s.cd.d, groups));
  cudnnMathType_t mt = CUDNN_DEFAULT_MATH;
  if (x->dtype == CT_F32 && !ct__cuda_allow_tf32()) mt = CUDNN_FMA_MATH, s.fma_only = true;
  else if (x->dtype == CT_F16 || x->dtype == CT_BF16) mt = CUDNN_TENSOR_OP_MATH;
  CT_CUDNN_TRY(cudnnSetConvolutionMathType(s.cd.d, mt));
  return CT_OK;
}

/* Pick the first usable candidate: status ok, no TF32 when it is off, workspace obtainable. */
template <typename Perf>
static ct_status pick(ct__cuda_ctx *ctx, conv_setup &s, const Perf *perf, int n, const char *what, int *algo,
                      void **ws, size_t *wsz) {
  for (int i = 0; i < n; i++) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (s.fma_only && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
    if (ct__cuda_workspace(ctx, perf[i].memory, ws) != CT_OK) {
      ct_clear_error();
      continue;
    }
    if (cudnnSetConvolutionMathType(s.cd.d, perf[i].mathType) != CUDNN_STATUS_SUCCESS) continue;
    *algo = (int)perf[i].algo;
    *wsz = perf[i].memory;
    return CT_OK;
  }
  return ct__error(CT_EBACKEND, "cuda: cuDNN offers no usable %s algorithm for this convolution (or no workspace memory for one)", what);
}

/* The device pointer of t as cuDNN reads it: a channels_last tensor (nhwc; the vtable's *_nhwc
 * entries pass dense ones) as it is, else a row-major copy when t is strided (tmp keeps it). */
static ct_status dense(scoped_tmp &tmp, ct_tensor *t, bool nhwc, const void **p) {
  if (nhwc) {
    *p = ct__ptr(t);
    return CT_OK;
  }
  CT_TRY(ct__cuda_tmp_contiguous(&tmp.t, t));
  *p = ct__ptr(&tmp.t.t);
  return CT_OK;
}

/* y: (N, Cout, Ho, Wo) contiguous (nhwc: dense channels_last, as x and w); x, w any strides;
 * b: (Cout) or NULL */
static ct_status conv_forward(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o, bool nhwc) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(y);
  if (!ctx) return ct_last_status();
  if (ct__numel(y->ndim, y->shape) == 0) return CT_OK;
  if (!nhwc && !ct__cuda_is_contiguous(y)) return ct__error(CT_EINVAL, "cuda: conv2d wants a contiguous y");
  cudnnTensorFormat_t fmt = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  conv_setup s;
  CT_TRY(setup(s, ctx, x, w, y, o, fmt));
  scoped_tmp xc, wc, bc;
  const void *xp, *wp;
  CT_TRY(dense(xc, x, nhwc, &xp));
  CT_TRY(dense(wc, w, nhwc, &wp));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0, algo = 0;
  CT_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(s.h, s.xd.d, s.wd.d, s.cd.d, s.yd.d,
                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
  void *ws = NULL;
  size_t wsz = 0;
  CT_TRY(pick(ctx, s, perf, n, "forward", &algo, &ws, &wsz));
  CT_CUDNN_TRY(cudnnConvolutionForward(s.h, s.one(), s.xd.d, xp, s.wd.d, wp, s.cd.d,
                                       (cudnnConvolutionFwdAlgo_t)algo, ws, wsz, s.zero(), s.yd.d, ct__ptr(y)));
  if (b) {
    tensor_desc bd;
    CT_TRY(set_tensor(bd, s.data, 1, y->shape[1], 1, 1, fmt)); /* (1, C, 1, 1): one layout in both formats */
    CT_TRY(ct__cuda_tmp_contiguous(&bc.t, b));
    CT_CUDNN_TRY(cudnnAddTensor(s.h, s.one(), bd.d, ct__ptr(&bc.t.t), s.one(), s.yd.d, ct__ptr(y)));
  }
  return CT_OK;
}

ct_status ct__cuda_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  return conv_forward(y, x, w, b, o, false);
}

/* The channels_last forward (backend.h's conv2d_nhwc): cuDNN's NHWC descriptors, no copies. */
ct_status ct__cuda_conv2d_nhwc(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  return conv_forward(y, x, w, b, o, true);
}

/* gx: x's shape, gw: w's shape, gb: (Cout); each NULL when not wanted; gy: y's shape (nhwc: the 4-D
 * ones dense channels_last) */
static ct_status conv_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                               const ct_conv2d_opts *o, bool nhwc) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(gy);
  if (!ctx) return ct_last_status();
  if ((!nhwc && gx && !ct__cuda_is_contiguous(gx)) || (!nhwc && gw && !ct__cuda_is_contiguous(gw)) ||
      (gb && !ct__cuda_is_contiguous(gb)))
    return ct__error(CT_EINVAL, "cuda: conv2d_backward wants contiguous gx, gw and gb");
  if (ct__numel(gy->ndim, gy->shape) == 0) {
    if (gx) CT_TRY(ct__cuda_fill(gx, 0.0));
    if (gw) CT_TRY(ct__cuda_fill(gw, 0.0));
    if (gb) CT_TRY(ct__cuda_fill(gb, 0.0));
    return CT_OK;
  }
  cudnnTensorFormat_t fmt = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  conv_setup s;
  CT_TRY(setup(s, ctx, x, w, gy, o, fmt));
  scoped_tmp gyc;
  const void *gyp;
  CT_TRY(dense(gyc, gy, nhwc, &gyp));
  if (gx) {
    scoped_tmp wc;
    const void *wp;
    CT_TRY(dense(wc, w, nhwc, &wp));
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0, algo = 0;
    CT_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(s.h, s.wd.d, s.yd.d, s.cd.d, s.xd.d,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
    void *ws = NULL;
    size_t wsz = 0;
    CT_TRY(pick(ctx, s, perf, n, "backward-data", &algo, &ws, &wsz));
    CT_CUDNN_TRY(cudnnConvolutionBackwardData(s.h, s.one(), s.wd.d, wp, s.yd.d, gyp, s.cd.d,
                                              (cudnnConvolutionBwdDataAlgo_t)algo, ws, wsz, s.zero(), s.xd.d, ct__ptr(gx)));
  }
  if (gw) {
    scoped_tmp xc;
    const void *xp;
    CT_TRY(dense(xc, x, nhwc, &xp));
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0, algo = 0;
    CT_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.h, s.xd.d, s.yd.d, s.cd.d, s.wd.d,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
    void *ws = NULL;
    size_t wsz = 0;
    CT_TRY(pick(ctx, s, perf, n, "backward-filter", &algo, &ws, &wsz));
    CT_CUDNN_TRY(cudnnConvolutionBackwardFilter(s.h, s.one(), s.xd.d, xp, s.yd.d, gyp,
                                                s.cd.d, (cudnnConvolutionBwdFilterAlgo_t)algo, ws, wsz, s.zero(), s.wd.d,
                                                ct__ptr(gw)));
  }
  if (gb) {
    tensor_desc bd;
    CT_TRY(set_tensor(bd, s.data, 1, gy->shape[1], 1, 1, fmt));
    CT_CUDNN_TRY(cudnnConvolutionBackwardBias(s.h, s.one(), s.yd.d, gyp, s.zero(), bd.d, ct__ptr(gb)));
  }
  return CT_OK;
}

ct_status ct__cuda_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                   ct_tensor *w, const ct_conv2d_opts *o) {
  return conv_backward(gx, gw, gb, gy, x, w, o, false);
}

ct_status ct__cuda_conv2d_nhwc_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x,
                                        ct_tensor *w, const ct_conv2d_opts *o) {
  return conv_backward(gx, gw, gb, gy, x, w, o, true);
}
