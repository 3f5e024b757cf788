/* src/backend/cpu/pool.c: 2-D max and average pooling and their backward.
 * x: (N, C, H, W) contiguous -> y: (N, C, Ho, Wo). Max pooling records, per output, the flat
 * index h W + w of the chosen input (int64 argmax, y's shape) for the backward; average pooling
 * divides by kH kW (count_include_pad=True, PyTorch's default). */
#include <math.h>
#include <string.h>
#include "backend/cpu/cpu.h"

ct_status ct__cpu_pool2d(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o) {
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], Ho = y->shape[2], Wo = y->shape[3];
  ct_dtype dt = x->dtype;
  size_t es = ct_dtype_size(dt);
  int kh = o->kernel[0], kw = o->kernel[1], sh = o->stride[0], sw = o->stride[1], ph = o->padding[0], pw = o->padding[1];
  int f32 = dt == CT_F32;
  if (f32 && kind == CT_POOL_MAX && kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0 && argmax) {
    /* MaxPool2d(2), the most common pooling: two input rows per output row, no bounds checks */
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
    for (int64_t p = 0; p < NC; p++) {
      const float *xp = (const float *)ct__ptr(x) + p * H * W;
      float *yp = (float *)ct__ptr(y) + p * Ho * Wo;
      int64_t *ap = (int64_t *)ct__ptr(argmax) + p * Ho * Wo;
      for (int64_t ho = 0; ho < Ho; ho++) {
        const float *r0 = xp + 2 * ho * W, *r1 = r0 + W;
        for (int64_t wo = 0; wo < Wo; wo++) {
          /* branch-free selects: which element wins is data-dependent and mispredicts */
          int64_t i0 = 2 * ho * W + 2 * wo, bi = i0;
          float best = r0[2 * wo], v;
          int t;
          v = r0[2 * wo + 1], t = (v > best) | (v != v), best = t ? v : best, bi = t ? i0 + 1 : bi;
          v = r1[2 * wo], t = (v > best) | (v != v), best = t ? v : best, bi = t ? i0 + W : bi;
          v = r1[2 * wo + 1], t = (v > best) | (v != v), best = t ? v : best, bi = t ? i0 + W + 1 : bi;
          yp[ho * Wo + wo] = best;
          ap[ho * Wo + wo] = bi;
        }
      }
    }
    return CT_OK;
  }
  if (f32 && kind == CT_POOL_MAX) { /* the training hot path: float compares, no conversions */
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
    for (int64_t p = 0; p < NC; p++) {
      const float *xp = (const float *)ct__ptr(x) + p * H * W;
      float *yp = (float *)ct__ptr(y) + p * Ho * Wo;
      int64_t *ap = argmax ? (int64_t *)ct__ptr(argmax) + p * Ho * Wo : NULL;
      for (int64_t ho = 0; ho < Ho; ho++) {
        int64_t h0 = ho * sh - ph, h1 = h0 + kh;
        if (h0 < 0) h0 = 0;
        if (h1 > H) h1 = H;
        for (int64_t wo = 0; wo < Wo; wo++) {
          int64_t w0 = wo * sw - pw, w1 = w0 + kw;
          if (w0 < 0) w0 = 0;
          if (w1 > W) w1 = W;
          int64_t bi = h0 * W + w0;
          float best = xp[bi];
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) {
              float v = xp[h * W + w];
              if (v > best || v != v) best = v, bi = h * W + w; /* NaN propagates, as in torch */
            }
          yp[ho * Wo + wo] = best;
          if (ap) ap[ho * Wo + wo] = bi;
        }
      }
    }
    return CT_OK;
  }
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
  for (int64_t p = 0; p < NC; p++) {
    const char *xp = (const char *)ct__ptr(x) + p * H * W * (int64_t)es;
    char *yp = (char *)ct__ptr(y) + p * Ho * Wo * (int64_t)es;
    int64_t *ap = argmax ? (int64_t *)ct__ptr(argmax) + p * Ho * Wo : NULL;
    for (int64_t ho = 0; ho < Ho; ho++)
      for (int64_t wo = 0; wo < Wo; wo++) {
        double best = kind == CT_POOL_MAX ? -INFINITY : 0.0;
        int64_t best_i = -1;
        for (int i = 0; i < kh; i++) {
          int64_t h = ho * sh - ph + i;
          if (h < 0 || h >= H) continue;
          for (int j = 0; j < kw; j++) {
            int64_t w = wo * sw - pw + j;
            if (w < 0 || w >= W) continue;
            double v = f32 ? ((const float *)xp)[h * W + w] : ct__load(xp + (h * W + w) * (int64_t)es, dt);
            if (kind == CT_POOL_AVG) best += v;
            else if (v > best || best_i < 0 || isnan(v)) best = v, best_i = h * W + w;
          }
        }
        if (kind == CT_POOL_AVG) best /= (double)(kh * kw);
        if (f32) ((float *)yp)[ho * Wo + wo] = (float)best;
        else ct__store(yp + (ho * Wo + wo) * (int64_t)es, dt, best);
        if (ap) ap[ho * Wo + wo] = best_i;
      }
  }
  return CT_OK;
}

ct_status ct__cpu_pool2d_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o) {
  int64_t NC = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3], Ho = gy->shape[2], Wo = gy->shape[3];
  ct_dtype dt = gx->dtype;
  size_t es = ct_dtype_size(dt);
  int kh = o->kernel[0], kw = o->kernel[1], sh = o->stride[0], sw = o->stride[1], ph = o->padding[0], pw = o->padding[1];
  memset(ct__ptr(gx), 0, (size_t)ct_tensor_numel(gx) * es);
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
  for (int64_t p = 0; p < NC; p++) {
    char *gxp = (char *)ct__ptr(gx) + p * H * W * (int64_t)es;
    const char *gyp = (const char *)ct__ptr(gy) + p * Ho * Wo * (int64_t)es;
    const int64_t *ap = argmax ? (const int64_t *)ct__ptr(argmax) + p * Ho * Wo : NULL;
    if (kind == CT_POOL_MAX && dt == CT_F32) {
      for (int64_t q = 0; q < Ho * Wo; q++)
        if (ap[q] >= 0) ((float *)gxp)[ap[q]] += ((const float *)gyp)[q];
      continue;
    }
    for (int64_t q = 0; q < Ho * Wo; q++) {
      double g = ct__load(gyp + q * (int64_t)es, dt);
      if (kind == CT_POOL_MAX) {
        if (ap[q] < 0) continue;
        char *d = gxp + ap[q] * (int64_t)es;
        ct__store(d, dt, ct__load(d, dt) + g);
        continue;
      }
      int64_t ho = q / Wo, wo = q % Wo;
      g /= (double)(kh * kw);
      for (int i = 0; i < kh; i++) {
        int64_t h = ho * sh - ph + i;
        if (h < 0 || h >= H) continue;
        for (int j = 0; j < kw; j++) {
          int64_t w = wo * sw - pw + j;
          if (w < 0 || w >= W) continue;
          char *d = gxp + (h * W + w) * (int64_t)es;
          ct__store(d, dt, ct__load(d, dt) + g);
        }
      }
    }
  }
  return CT_OK;
}
