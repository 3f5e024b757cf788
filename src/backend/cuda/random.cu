/* src/backend/cuda/random.cu: random tensors from Philox4x32-10, bit-identical to the CPU backend.
 *
 * THE SPECIFICATION (src/core/rng.c implements the same on the CPU; change both or neither):
 *
 *  Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
 *  SC'11; the same function as Random123's philox4x32_R(10, ...) and cuRAND's Philox):
 *    key      k0 = seed low 32 bits, k1 = seed high 32 bits
 *    counter  c = (ctr_lo low 32, ctr_lo high 32, ctr_hi low 32, ctr_hi high 32)
 *    round    (hi0, lo0) = 0xD2511F53 * c0 (64-bit product), (hi1, lo1) = 0xCD9E8D57 * c2,
 *             c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
 *    10 rounds, with the key bumped between rounds: k0 += 0x9E3779B9, k1 += 0xBB67AE85.
 *    Known answer: seed 0, counter 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8 (Random123 kat).
 *
 *  A draw of n elements at generator offset `offset`: element i (row-major over out's shape) uses
 *  block counter (ctr_lo = offset + i / 4, ctr_hi = 0) and word w = out[i % 4] of that block.
 *  The caller advances the offset by ceil(n / 4).
 *
 *  All arithmetic below is IEEE double with round-to-nearest and NO fused multiply-add (the GPU
 *  uses __dmul_rn/__dadd_rn/__dsub_rn, which the compiler cannot contract), then one rounding to the
 *  output dtype (float16/bfloat16 through float, as ct__store):
 *    uniform [lo, hi):  u = (double)(w >> 8) * 2^-24;         v = lo + (hi - lo) * u
 *    normal (mean, std): pair p = (i % 4) / 2, words a = out[2p], b = out[2p + 1]:
 *                       u1 = ((double)a + 1) * 2^-32  (in (0, 1], so log never sees 0)
 *                       u2 = (double)b * 2^-32
 *                       r = sqrt(-2 * log(u1));  t = 6.283185307179586 * u2   (2 pi as a double)
 *                       z = r * cos(t) for even i % 4, r * sin(t) for odd i % 4
 *                       v = mean + std * z
 *    randint [lo, hi):  range = (uint64)(hi - lo);  v = lo + (int64)((uint64)w % range)
 *                       (only 2^32 distinct values when the range is wider: documented)
 *  uniform and randint are bit-identical across devices. normal goes through log, cos and sin, whose
 *  last bit can differ between glibc and CUDA's libdevice (both within 1-2 ulp in double): after
 *  rounding to float32 the results agree except in about one element in 10^8; in float64 they agree
 *  to 2 ulp. */
#include <math.h>

#include "backend/cuda/common.cuh"

/* Philox4x32-10 itself is common.cuh's ct_philox4x32_10 (attention.cu's dropout draws it too). */

/* ---- kernels */

static __device__ __forceinline__ void store_int(void *p, int64_t i, int dt, int64_t v) {
  switch (dt) {
    case CT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CT_I64: ((int64_t *)p)[i] = v; break;
    case CT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CT_BOOL: ((bool *)p)[i] = v != 0; break;
    default: ct_st<double>(p, i, dt, (double)v); break;
  }
}

/* out: n elements at iterator offsets; one thread per Philox block of 4 elements */
template <int DIST>
__global__ void random_kernel(void *out, int odt, ct__cuda_iter it, int64_t n, double p0, double p1, uint64_t seed,
                              uint64_t offset) {
  const double two_m24 = 5.9604644775390625e-08;   /* 2^-24 */
  const double two_m32 = 2.3283064365386963e-10;   /* 2^-32 */
  int64_t nblocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; blk < nblocks;
       blk += (int64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    ct_philox4x32_10(seed, offset + (uint64_t)blk, 0, w);
    double z[4];
    if (DIST == CT_DIST_NORMAL) {
#pragma unroll
      for (int p = 0; p < 2; p++) {
        double u1 = __dmul_rn(__dadd_rn((double)w[2 * p], 1.0), two_m32);
        double u2 = __dmul_rn((double)w[2 * p + 1], two_m32);
        double r = sqrt(__dmul_rn(-2.0, log(u1)));
        double t = __dmul_rn(6.283185307179586, u2);
        z[2 * p] = __dmul_rn(r, cos(t));
        z[2 * p + 1] = __dmul_rn(r, sin(t));
      }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int64_t i = blk * 4 + j;
      if (i >= n) break;
      int64_t off;
      ct_iter_offsets<1>(it, i, &off);
      if (DIST == CT_DIST_UNIFORM) {
        double u = __dmul_rn((double)(w[j] >> 8), two_m24);
        ct_st<double>(out, off, odt, __dadd_rn(p0, __dmul_rn(__dsub_rn(p1, p0), u)));
      } else if (DIST == CT_DIST_NORMAL) {
        ct_st<double>(out, off, odt, __dadd_rn(p0, __dmul_rn(p1, z[j])));
      } else {
        int64_t lo = (int64_t)p0;
        uint64_t range = (uint64_t)((int64_t)p1 - lo);
        store_int(out, off, odt, lo + (int64_t)((uint64_t)w[j] % (range ? range : 1)));
      }
    }
  }
}

/* ---- launcher */

/* out: any shape (filled row-major); p0, p1: (lo, hi) for uniform and randint, (mean, std) for normal */
ct_status ct__cuda_random(ct_tensor *out, ct_dist dist, double p0, double p1, uint64_t seed, uint64_t offset) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  const int64_t *strides[1] = {out->stride};
  ct__cuda_iter it;
  ct__cuda_iter_init(&it, out->ndim, out->shape, 1, strides);
  unsigned grid = ct__cuda_blocks(ctx, (n + 3) / 4);
  switch (dist) {
    case CT_DIST_UNIFORM:
      random_kernel<CT_DIST_UNIFORM><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, it, n, p0, p1,
                                                                                 seed, offset);
      break;
    case CT_DIST_NORMAL:
      random_kernel<CT_DIST_NORMAL><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, it, n, p0, p1,
                                                                                seed, offset);
      break;
    case CT_DIST_RANDINT:
      random_kernel<CT_DIST_RANDINT><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, it, n, p0, p1,
                                                                                 seed, offset);
      break;
    default: return ct__error(CT_EINVAL, "cuda: random: unknown distribution %d", (int)dist);
  }
  CT_CUDA_LAUNCHED("random_kernel");
  return CT_OK;
}

/* A host-side known-answer check of the device Philox (the same code compiled for the host); used
 * by tests through ct__cuda_philox_host. */
extern "C" void ct__cuda_philox_host(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
  ct_philox4x32_10(seed, ctr_lo, ctr_hi, out);
}
