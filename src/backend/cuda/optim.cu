/* src/backend/cuda/optim.cu: fused SGD and Adam/AdamW updates, one kernel per parameter instead of
 * a dozen elementwise launches with temporaries. The formulas are torch.optim's, written out in
 * src/optim/optimizer.c, and match the CPU kernels of src/backend/cpu/optim.c line for line.
 * f32 and f64, contiguous tensors (the optimizer checks). */
#include "backend/cuda/common.cuh"

/* ---- kernels */
template <typename T>
__global__ void adam_kernel(T *p, const T *g, T *m, T *v, int64_t n, ct_adam_args a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T gi = g[i];
    if (a.decoupled) p[i] *= (T)(1.0 - a.lr * a.weight_decay);
    else gi += (T)a.weight_decay * p[i];
    m[i] = (T)a.beta1 * m[i] + (T)(1.0 - a.beta1) * gi;
    v[i] = (T)a.beta2 * v[i] + (T)(1.0 - a.beta2) * gi * gi;
    T denom = (T)sqrt((double)v[i] / a.bias_correction2) + (T)a.eps;
    p[i] -= (T)(a.lr / a.bias_correction1) * m[i] / denom;
  }
}

template <typename T>
__global__ void sgd_kernel(T *p, const T *g, T *buf, int64_t n, ct_sgd_args a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T d = g[i] + (T)a.weight_decay * p[i];
    if (buf) {
      buf[i] = a.first_step ? d : (T)a.momentum * buf[i] + (T)(1.0 - a.dampening) * d;
      d = a.nesterov ? d + (T)a.momentum * buf[i] : buf[i];
    }
    p[i] -= (T)a.lr * d;
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
                                                                     (float *)ct__ptr(m), (float *)ct__ptr(v), n, *a);
  else
    adam_kernel<double><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((double *)ct__ptr(p), (const double *)ct__ptr(g),
                                                                      (double *)ct__ptr(m), (double *)ct__ptr(v), n, *a);
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
                                                                    buf ? (float *)ct__ptr(buf) : nullptr, n, *a);
  else
    sgd_kernel<double><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((double *)ct__ptr(p), (const double *)ct__ptr(g),
                                                                     buf ? (double *)ct__ptr(buf) : nullptr, n, *a);
  CT_CUDA_LAUNCHED("sgd_step");
  return CT_OK;
}
