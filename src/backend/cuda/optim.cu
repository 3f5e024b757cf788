/* src/backend/cuda/optim.cu: fused SGD and Adam/AdamW updates, one kernel per parameter instead of
 * a dozen elementwise launches with temporaries. The formulas are torch.optim's, written out in
 * src/optim/optimizer.c, and match the CPU kernels of src/backend/cpu/optim.c operation for
 * operation: the same constants (rounded on the host as the CPU rounds them), the same order, and
 * no FMA contraction, so that many steps on both backends can be compared tightly. A capturable
 * step (the count on the device) computes its bias corrections here with the device's pow, within
 * 2 ulp of the host's in double, so it is the CPU's to that rounding, not bit for bit.
 * f32 and f64, contiguous tensors (the optimizer checks). */
#include "backend/cuda/common.cuh"

/* ---- exact arithmetic: every operation rounded on its own (the _rn intrinsics), so that nvcc
 * contracts no a * b + c into an FMA and the kernels compute bit for bit what the CPU loops compute
 * (plain C on x86-64 without -mfma: no contraction). */
template <typename T>
struct rn;
template <>
struct rn<float> {
  static __device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
  static __device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
  static __device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
  static __device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
  static __device__ __forceinline__ float sqrt(float a) { return __fsqrt_rn(a); }
};
template <>
struct rn<double> {
  static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
  static __device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
  static __device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
  static __device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
  static __device__ __forceinline__ double sqrt(double a) { return __dsqrt_rn(a); }
};

/* The constants of the CPU's ADAM_LOOP (src/backend/cpu/optim.c), computed the same way on the
 * host: in double, rounded to T once. */
template <typename T>
struct adam_consts {
  T b1, nb1, b2, nb2, eps, step, sbc2, decay, l2;
  const float *t;          /* a capturable step's count on the device, or NULL */
  double lr, beta1, beta2; /* for step and sbc2 from *t, as the host computes them from its count */
};
template <typename T>
static adam_consts<T> adam_consts_of(const ct_adam_args *a) {
  adam_consts<T> c;
  c.b1 = (T)a->beta1, c.nb1 = (T)(1.0 - a->beta1), c.b2 = (T)a->beta2, c.nb2 = (T)(1.0 - a->beta2);
  c.eps = (T)a->eps, c.step = (T)(a->lr / a->bias_correction1), c.sbc2 = (T)sqrt(a->bias_correction2);
  /* AdamW: p *= 1 - lr wd; Adam: g += wd p. The other factor is exactly 1 or 0. */
  c.decay = a->decoupled ? (T)(1.0 - a->lr * a->weight_decay) : (T)1;
  c.l2 = a->decoupled ? (T)0 : (T)a->weight_decay;
  c.t = a->step ? (const float *)ct__ptr(a->step) : nullptr;
  c.lr = a->lr, c.beta1 = a->beta1, c.beta2 = a->beta2;
  return c;
}

/* The SGD constants, as the CPU's SGD_LOOP rounds them. */
template <typename T>
struct sgd_consts {
  T wd, momentum, nd, lr; /* nd = 1 - dampening */
  int nesterov, first_step;
  const float *t; /* a capturable step's count on the device (first_step is t == 1), or NULL */
};
template <typename T>
static sgd_consts<T> sgd_consts_of(const ct_sgd_args *a) {
  sgd_consts<T> c;
  c.wd = (T)a->weight_decay, c.momentum = (T)a->momentum, c.nd = (T)(1.0 - a->dampening), c.lr = (T)a->lr;
  c.nesterov = a->nesterov, c.first_step = a->first_step;
  c.t = a->step ? (const float *)ct__ptr(a->step) : nullptr;
  return c;
}

/* ---- kernels: the CPU's formulas in the CPU's order, torch.optim's:
 *   Adam:  g += l2 p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *          p = p decay - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
 *   SGD:   d = g + wd p;  buf = momentum buf + (1 - dampening) d (d at the first step);
 *          d = nesterov ? d + momentum buf : buf;  p = p - lr d */
template <typename T>
__global__ void adam_kernel(T *p, const T *g, T *m, T *v, int64_t n, adam_consts<T> c) {
  typedef rn<T> R;
  if (c.t) { /* capturable: optimizer.c's corrections, in double, from the device's count */
    double t = *c.t;
    c.step = (T)(c.lr / (1.0 - pow(c.beta1, t)));
    c.sbc2 = (T)sqrt(1.0 - pow(c.beta2, t));
  }
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T pi = p[i];
    T gi = R::add(g[i], R::mul(c.l2, pi));
    T mi = R::add(R::mul(c.b1, m[i]), R::mul(c.nb1, gi));
    T vi = R::add(R::mul(c.b2, v[i]), R::mul(R::mul(c.nb2, gi), gi));
    m[i] = mi, v[i] = vi;
    T denom = R::add(R::div(R::sqrt(vi), c.sbc2), c.eps);
    p[i] = R::sub(R::mul(pi, c.decay), R::div(R::mul(c.step, mi), denom));
  }
}

template <typename T>
__global__ void sgd_kernel(T *p, const T *g, T *buf, int64_t n, sgd_consts<T> c) {
  typedef rn<T> R;
  if (c.t) c.first_step = *c.t == 1.0f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T pi = p[i];
    T d = R::add(g[i], R::mul(c.wd, pi));
    if (buf) {
      T b = c.first_step ? d : R::add(R::mul(c.momentum, buf[i]), R::mul(c.nd, d));
      buf[i] = b;
      d = c.nesterov ? R::add(d, R::mul(c.momentum, b)) : b;
    }
    p[i] = R::sub(pi, R::mul(c.lr, d));
  }
}

/* ---- launchers */
extern "C" ct_status ct__cuda_adam_step(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(p);
  if (!ctx) return ct_last_status();
  int64_t n = ct_tensor_numel(p);
  if (n == 0) return CT_OK;
  unsigned blocks = ct__cuda_blocks(ctx, n);
  if (p->dtype == CT_F32)
    adam_kernel<float><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((float *)ct__ptr(p), (const float *)ct__ptr(g),
                                                                     (float *)ct__ptr(m), (float *)ct__ptr(v), n,
                                                                     adam_consts_of<float>(a));
  else
    adam_kernel<double><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((double *)ct__ptr(p), (const double *)ct__ptr(g),
                                                                      (double *)ct__ptr(m), (double *)ct__ptr(v), n,
                                                                      adam_consts_of<double>(a));
  CT_CUDA_LAUNCHED("adam_step");
  return CT_OK;
}

extern "C" ct_status ct__cuda_sgd_step(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(p);
  if (!ctx) return ct_last_status();
  int64_t n = ct_tensor_numel(p);
  if (n == 0) return CT_OK;
  unsigned blocks = ct__cuda_blocks(ctx, n);
  if (p->dtype == CT_F32)
    sgd_kernel<float><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((float *)ct__ptr(p), (const float *)ct__ptr(g),
                                                                    buf ? (float *)ct__ptr(buf) : nullptr, n,
                                                                    sgd_consts_of<float>(a));
  else
    sgd_kernel<double><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((double *)ct__ptr(p), (const double *)ct__ptr(g),
                                                                     buf ? (double *)ct__ptr(buf) : nullptr, n,
                                                                     sgd_consts_of<double>(a));
  CT_CUDA_LAUNCHED("sgd_step");
  return CT_OK;
}
