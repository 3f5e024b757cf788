/* src/backend/cuda/amp.cu: the GradScaler's fused unscale and inf/NaN check (src/optim/grad_scaler.c),
 * PyTorch's _amp_foreach_non_finite_check_and_unscale_ (aten/src/ATen/native/cuda/AmpKernels.cu),
 * one tensor a launch: every element of g is multiplied by inv_scale in g's type (the multiplier
 * rounded to it first, as AmpKernels.cu and the CPU's kernel, src/backend/cpu/amp.c, do), and the
 * float32 flag is set to 1.0 by every thread whose element is inf or NaN. Every writer stores the
 * same value, so their race is harmless, as in AmpKernels.cu. Without this kernel the scaler composed
 * six launches a gradient (two products, a sum, a cast, an add, a copy): about 970 of resnet50's
 * 2142 launches a step under --amp f16 on the H100 (docs/perf-history.md). f32 and f64, dense g. */
#include "backend/cuda/common.cuh"

template <typename T>
__global__ void amp_unscale_kernel(T *g, int64_t n, T inv, float *found) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T v = g[i];
    if (!isfinite(v)) *found = 1.0f;
    g[i] = v * inv; /* one rounding, as the CPU's g[i] *= inv */
  }
}

/* g: a dense float32 or float64 tensor on a CUDA device (any strides whose elements fill its
 * storage span without gaps: the grad scaler checks), multiplied in place; found_inf: a 1-element
 * float32 tensor on the same device, set to 1.0 when an element of g is inf or NaN, else left as
 * it is. Only enqueues on the compute stream. Errors: CT_EDTYPE for another dtype, a launch error
 * as CT_EBACKEND. */
extern "C" ct_status ct__cuda_amp_unscale_(ct_tensor *g, double inv_scale, ct_tensor *found_inf) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(g);
  if (!ctx) return ct_last_status();
  if (g->dtype != CT_F32 && g->dtype != CT_F64)
    return ct__error(CT_EDTYPE, "cuda: amp_unscale_ takes float32 or float64 gradients, not %s", ct_dtype_name(g->dtype));
  int64_t n = ct_tensor_numel(g);
  if (n == 0) return CT_OK;
  unsigned blocks = ct__cuda_blocks(ctx, n);
  float *found = (float *)ct__ptr(found_inf);
  if (g->dtype == CT_F32)
    amp_unscale_kernel<float><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((float *)ct__ptr(g), n, (float)inv_scale, found);
  else
    amp_unscale_kernel<double><<<blocks, CT_CUDA_THREADS, 0, ctx->compute>>>((double *)ct__ptr(g), n, inv_scale, found);
  CT_CUDA_LAUNCHED("amp_unscale_");
  return CT_OK;
}
