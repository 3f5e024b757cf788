/* src/backend/opencl/kernels/amp.cl: the GradScaler's fused unscale and inf/NaN check, PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_ (aten/src/ATen/native/cuda/AmpKernels.cu), over a
 * contiguous floating g: g[i] *= inv_scale, and the float32 flag at found (element foff) set to 1
 * by every work-item whose element is inf or NaN. Every writer stores the same value, so the race
 * between them is harmless, as in AmpKernels.cu. */
__kernel void amp_unscale(__global uchar *g, long goff, int dt, REAL inv_scale, __global float *found, long foff) {
  long i = get_global_id(0);
  REAL v = ld(g, goff + i, dt);
  if (!isfinite(v)) found[foff] = 1.0f;
  st(g, goff + i, dt, v * inv_scale);
}
