/* src/backend/cpu/pool.c: 2-D max and average pooling and their backward.
 * x: (N, C, H, W) contiguous -> y: (N, C, Ho, Wo). Max pooling records, per output, which input it
 * chose, for the backward (argmax, y's shape): for MaxPool2d(2) on float32, the most common pooling
 * of all, the position inside the 2x2 window (u8: 0 1 / 2 3), a byte instead of eight; otherwise
 * the flat index h W + w (int64). Windows follow torch's rules (pool_window.h): dilation, ceil_mode
 * windows running past the input; average pooling divides by kH kW (count_include_pad=True,
 * PyTorch's default) or as pool_window.h's ct__pool_avg_divisor says for a window running past the
 * padded input, count_include_pad=False or divisor_override; a window with no element inside the
 * input gives -inf (max) or 0 (avg) and no gradient. Ties keep the first element in row-major window order; a NaN wins over
 * numbers and a later NaN over an earlier one, as in torch's CPU kernel. CT_POOL_MAX_RELU pools
 * relu(x) (a NaN passes, as in torch) and marks a window whose maximum is 0 with no winner
 * (position 4, or index -1), so that its backward passes nothing, as relu's would. */
#include <math.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"
#include "backend/cpu/pool_window.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

ct_dtype ct__cpu_pool2d_argmax_dtype(const ct_tensor *x, const ct_pool2d_opts *o) {
  /* MaxPool2d(2)'s whole windows: no dilation, and ceil_mode only where it adds no window */
  int window2 = o->kernel[0] == 2 && o->kernel[1] == 2 && o->stride[0] == 2 && o->stride[1] == 2 && o->dilation[0] <= 1 &&
                o->dilation[1] <= 1 && (!o->ceil_mode || (x->shape[2] % 2 == 0 && x->shape[3] % 2 == 0));
  return x->dtype == CT_F32 && window2 && o->padding[0] == 0 && o->padding[1] == 0 ? CT_U8 : CT_I64;
}

#ifdef __SSE2__
/* lanes of m set: a, else b */
static inline __m128 select_ps(__m128 m, __m128 a, __m128 b) { return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)); }

/* Four outputs of MaxPool2d(2) from eight columns of two rows: the even and odd columns split by
 * shuffles, the winner chosen by selects, because which element wins is data-dependent and a
 * branch per element mispredicts (docs/perf.md). */
static inline void pool4_f32(const float *r0, const float *r1, int relu, float *y, uint8_t *a) {
  __m128 a0 = _mm_loadu_ps(r0), a1 = _mm_loadu_ps(r0 + 4), b0 = _mm_loadu_ps(r1), b1 = _mm_loadu_ps(r1 + 4);
  __m128 v[4] = {_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)), _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)),
                 _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1))};
  if (relu) /* max(0, v) returns v for a NaN v: relu passes NaN, as torch's does */
    for (int k = 0; k < 4; k++) v[k] = _mm_max_ps(_mm_setzero_ps(), v[k]);
  __m128 best = v[0], idx = _mm_setzero_ps();
  for (int k = 1; k < 4; k++) {
    __m128 m = _mm_or_ps(_mm_cmpgt_ps(v[k], best), _mm_cmpunord_ps(v[k], v[k]));
    best = select_ps(m, v[k], best);
    idx = select_ps(m, _mm_castsi128_ps(_mm_set1_epi32(k)), idx);
  }
  if (relu) /* a maximum of 0: position 4, no gradient (relu's is 0 there); NaN keeps its winner */
    idx = select_ps(_mm_cmpnle_ps(best, _mm_setzero_ps()), idx, _mm_castsi128_ps(_mm_set1_epi32(4)));
  _mm_storeu_ps(y, best);
  __m128i i16 = _mm_packs_epi32(_mm_castps_si128(idx), _mm_castps_si128(idx));
  int32_t bytes = _mm_cvtsi128_si32(_mm_packus_epi16(i16, i16));
  memcpy(a, &bytes, 4);
}
#endif

/* MaxPool2d(2) in float32, one (H, W) plane, four outputs at a time; the last one to three of a
 * row go through the same code on a padded copy (the cnn's 7-wide rows would otherwise run three
 * of seven outputs through scalar branches). */
void ct__maxpool2x2_plane_f32(const float *xp, int64_t H, int64_t W, float *yp, uint8_t *ap, int64_t Ho, int64_t Wo,
                              int relu) {
  (void)H;
  for (int64_t ho = 0; ho < Ho; ho++) {
    const float *r0 = xp + 2 * ho * W, *r1 = r0 + W;
    float *yr = yp + ho * Wo;
    uint8_t *ar = ap + ho * Wo;
    int64_t wo = 0;
#ifdef __SSE2__
    for (; wo + 4 <= Wo; wo += 4) pool4_f32(r0 + 2 * wo, r1 + 2 * wo, relu, yr + wo, ar + wo);
    if (wo < Wo) {
      int64_t rem = Wo - wo;
      float t0[8] = {0}, t1[8] = {0}, ty[4];
      uint8_t ta[4];
      memcpy(t0, r0 + 2 * wo, (size_t)(2 * rem) * sizeof(float));
      memcpy(t1, r1 + 2 * wo, (size_t)(2 * rem) * sizeof(float));
      pool4_f32(t0, t1, relu, ty, ta);
      memcpy(yr + wo, ty, (size_t)rem * sizeof(float));
      memcpy(ar + wo, ta, (size_t)rem);
      wo = Wo;
    }
#endif
    for (; wo < Wo; wo++) {
      float v[4] = {r0[2 * wo], r0[2 * wo + 1], r1[2 * wo], r1[2 * wo + 1]};
      for (int k = 0; relu && k < 4; k++) v[k] = !(v[k] <= 0) ? v[k] : 0.0f;
      float best = v[0];
      uint8_t bi = 0;
      for (uint8_t k = 1; k < 4; k++)
        if (v[k] > best || v[k] != v[k]) best = v[k], bi = k;
      if (relu && best <= 0) bi = 4;
      yr[wo] = best;
      ar[wo] = bi;
    }
  }
}

static ct_status maxpool2x2_f32(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, int relu) {
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], Ho = y->shape[2], Wo = y->shape[3];
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
  for (int64_t p = 0; p < NC; p++)
    ct__maxpool2x2_plane_f32((const float *)ct__ptr(x) + p * H * W, H, W, (float *)ct__ptr(y) + p * Ho * Wo,
                             (uint8_t *)ct__ptr(argmax) + p * Ho * Wo, Ho, Wo, relu);
  return CT_OK;
}

/* Its backward: the 2x2 windows do not overlap, so every covered gx element is written once (the
 * gradient or 0) and only an odd last row or column needs zeroing. */
void ct__maxpool2x2_plane_backward_f32(float *gxp, int64_t H, int64_t W, const float *gyp, const uint8_t *ap, int64_t Ho,
                                       int64_t Wo) {
  for (int64_t ho = 0; ho < Ho; ho++) {
    float *r0 = gxp + 2 * ho * W, *r1 = r0 + W;
    const float *gr = gyp + ho * Wo;
    const uint8_t *ar = ap + ho * Wo;
    int64_t wo = 0;
#ifdef __SSE2__
    for (; wo + 4 <= Wo; wo += 4) {
      int32_t bytes;
      memcpy(&bytes, ar + wo, 4);
      __m128i zero = _mm_setzero_si128();
      __m128i a = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), zero), zero);
      __m128 g = _mm_loadu_ps(gr + wo), v[4];
      for (int k = 0; k < 4; k++) v[k] = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(a, _mm_set1_epi32(k))), g);
      _mm_storeu_ps(r0 + 2 * wo, _mm_unpacklo_ps(v[0], v[1]));
      _mm_storeu_ps(r0 + 2 * wo + 4, _mm_unpackhi_ps(v[0], v[1]));
      _mm_storeu_ps(r1 + 2 * wo, _mm_unpacklo_ps(v[2], v[3]));
      _mm_storeu_ps(r1 + 2 * wo + 4, _mm_unpackhi_ps(v[2], v[3]));
    }
#endif
    for (; wo < Wo; wo++) {
      float g = gr[wo];
      uint8_t a = ar[wo];
      r0[2 * wo] = a == 0 ? g : 0.0f, r0[2 * wo + 1] = a == 1 ? g : 0.0f;
      r1[2 * wo] = a == 2 ? g : 0.0f, r1[2 * wo + 1] = a == 3 ? g : 0.0f;
    }
    for (int64_t w = 2 * Wo; w < W; w++) r0[w] = r1[w] = 0.0f; /* an odd last column */
  }
  for (int64_t h = 2 * Ho; h < H; h++) memset(gxp + h * W, 0, (size_t)W * sizeof(float)); /* an odd last row */
}

static ct_status maxpool2x2_f32_backward(ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax) {
  int64_t NC = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3], Ho = gy->shape[2], Wo = gy->shape[3];
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
  for (int64_t p = 0; p < NC; p++)
    ct__maxpool2x2_plane_backward_f32((float *)ct__ptr(gx) + p * H * W, H, W, (const float *)ct__ptr(gy) + p * Ho * Wo,
                                      (const uint8_t *)ct__ptr(argmax) + p * Ho * Wo, Ho, Wo);
  return CT_OK;
}

ct_status ct__cpu_pool2d(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o) {
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], Ho = y->shape[2], Wo = y->shape[3];
  ct_dtype dt = x->dtype;
  size_t es = ct_dtype_size(dt);
  int kh = o->kernel[0], kw = o->kernel[1], sh = o->stride[0], sw = o->stride[1], ph = o->padding[0], pw = o->padding[1];
  int dh = o->dilation[0], dw = o->dilation[1];
  int f32 = dt == CT_F32, lp = ct__lp_tag(dt); /* halves: inlined conversions (half.h) */
  int relu = kind == CT_POOL_MAX_RELU;
  if (argmax && argmax->dtype == CT_U8) return maxpool2x2_f32(y, argmax, x, relu);
  if (f32 && kind != CT_POOL_AVG) { /* the training hot path: float compares, no conversions */
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
    for (int64_t p = 0; p < NC; p++) {
      const float *xp = (const float *)ct__ptr(x) + p * H * W;
      float *yp = (float *)ct__ptr(y) + p * Ho * Wo;
      int64_t *ap = argmax ? (int64_t *)ct__ptr(argmax) + p * Ho * Wo : NULL;
      for (int64_t ho = 0; ho < Ho; ho++) {
        ct__pool_span a = ct__pool_span_of(ho, H, kh, sh, ph, dh);
        for (int64_t wo = 0; wo < Wo; wo++) {
          ct__pool_span b = ct__pool_span_of(wo, W, kw, sw, pw, dw);
          if (a.lo >= a.hi || b.lo >= b.hi) { /* no element inside the input */
            yp[ho * Wo + wo] = -INFINITY;
            if (ap) ap[ho * Wo + wo] = -1;
            continue;
          }
          int64_t bi = a.lo * W + b.lo;
          float best = relu && xp[bi] <= 0 ? 0.0f : xp[bi];
          for (int64_t h = a.lo; h < a.hi; h += a.step)
            for (int64_t w = b.lo; w < b.hi; w += b.step) {
              float v = xp[h * W + w];
              if (relu) v = v <= 0 ? 0.0f : v; /* NaN passes */
              /* take v where it is larger or NaN (NaN propagates, as in torch), by masks on the bits:
               * which element wins is data-dependent, and gcc turns a float select into a branch
               * that mispredicts (resnet18's 3x3 stride-2 stem pool: 9.3 -> 7.6 ms, docs/perf.md) */
              uint64_t m = -(uint64_t)((v > best) | (v != v));
              uint32_t vb, bb;
              memcpy(&vb, &v, 4), memcpy(&bb, &best, 4);
              bb = (vb & (uint32_t)m) | (bb & ~(uint32_t)m);
              memcpy(&best, &bb, 4);
              bi = (int64_t)(((uint64_t)(h * W + w) & m) | ((uint64_t)bi & ~m));
            }
          if (relu && best <= 0) bi = -1;
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
    for (int64_t ho = 0; ho < Ho; ho++) {
      ct__pool_span a = ct__pool_span_of(ho, H, kh, sh, ph, dh);
      for (int64_t wo = 0; wo < Wo; wo++) {
        ct__pool_span b = ct__pool_span_of(wo, W, kw, sw, pw, dw);
        double best = kind == CT_POOL_AVG ? 0.0 : -INFINITY;
        int64_t best_i = -1;
        for (int64_t h = a.lo; h < a.hi; h += a.step)
          for (int64_t w = b.lo; w < b.hi; w += b.step) {
            const char *e = xp + (h * W + w) * (int64_t)es;
            double v = f32 ? *(const float *)e : lp ? ct__lp_load(e, lp) : ct__load(e, dt);
            if (relu && v <= 0) v = 0.0;
            if (kind == CT_POOL_AVG) best += v;
            else if (v > best || best_i < 0 || isnan(v)) best = v, best_i = h * W + w;
          }
        if (kind == CT_POOL_AVG && a.lo < a.hi && b.lo < b.hi) best /= (double)ct__pool_avg_divisor(&a, &b, o);
        if (relu && best <= 0) best_i = -1;
        if (f32) ((float *)yp)[ho * Wo + wo] = (float)best;
        else if (lp) ct__lp_store(yp + (ho * Wo + wo) * (int64_t)es, lp, best);
        else ct__store(yp + (ho * Wo + wo) * (int64_t)es, dt, best);
        if (ap) ap[ho * Wo + wo] = best_i;
      }
    }
  }
  return CT_OK;
}

ct_status ct__cpu_pool2d_backward(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o) {
  int64_t NC = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3], Ho = gy->shape[2], Wo = gy->shape[3];
  ct_dtype dt = gx->dtype;
  size_t es = ct_dtype_size(dt);
  int kh = o->kernel[0], kw = o->kernel[1], sh = o->stride[0], sw = o->stride[1], ph = o->padding[0], pw = o->padding[1];
  if (argmax && argmax->dtype == CT_U8) return maxpool2x2_f32_backward(gx, gy, argmax);
#pragma omp parallel for schedule(static) if (NC * Ho * Wo >= 16384)
  for (int64_t p = 0; p < NC; p++) {
    char *gxp = (char *)ct__ptr(gx) + p * H * W * (int64_t)es;
    memset(gxp, 0, (size_t)(H * W) * es); /* plane by plane on the threads: one memset of all of gx
                                              first left the other threads waiting */
    const char *gyp = (const char *)ct__ptr(gy) + p * Ho * Wo * (int64_t)es;
    const int64_t *ap = argmax ? (const int64_t *)ct__ptr(argmax) + p * Ho * Wo : NULL;
    if (kind != CT_POOL_AVG && dt == CT_F32) {
      for (int64_t q = 0; q < Ho * Wo; q++)
        if (ap[q] >= 0) ((float *)gxp)[ap[q]] += ((const float *)gyp)[q];
      continue;
    }
    for (int64_t q = 0; q < Ho * Wo; q++) {
      double g = ct__load(gyp + q * (int64_t)es, dt);
      if (kind != CT_POOL_AVG) {
        if (ap[q] < 0) continue;
        char *d = gxp + ap[q] * (int64_t)es;
        ct__store(d, dt, ct__load(d, dt) + g);
        continue;
      }
      int64_t ho = q / Wo, wo = q % Wo;
      ct__pool_span a = ct__pool_span_of(ho, H, kh, sh, ph, 1), b = ct__pool_span_of(wo, W, kw, sw, pw, 1);
      if (a.lo >= a.hi || b.lo >= b.hi) continue; /* a window with nothing inside the input */
      g /= (double)ct__pool_avg_divisor(&a, &b, o);
      for (int64_t h = a.lo; h < a.hi; h++)
        for (int64_t w = b.lo; w < b.hi; w++) {
          char *d = gxp + (h * W + w) * (int64_t)es;
          ct__store(d, dt, ct__load(d, dt) + g);
        }
    }
  }
  return CT_OK;
}

/* ---- adaptive average pooling, as ATen's adaptive_avg_pool2d
 * (aten/src/ATen/native/AdaptiveAveragePooling.cpp): output cell (oh, ow) of y (N, C, OH, OW)
 * averages the rows [floor(oh H / OH), ceil((oh + 1) H / OH)) and the columns
 * [floor(ow W / OW), ceil((ow + 1) W / OW)) of its plane of x (N, C, H, W); windows of neighbouring
 * cells may overlap. x, y (and gx, gy) contiguous, of one floating dtype, summed in double. */
static int64_t adaptive_start(int64_t o, int64_t O, int64_t I) { return o * I / O; }
static int64_t adaptive_end(int64_t o, int64_t O, int64_t I) { return ((o + 1) * I + O - 1) / O; }

ct_status ct__cpu_adaptive_avg_pool2d(ct_tensor *y, ct_tensor *x) {
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], OH = y->shape[2], OW = y->shape[3];
  const char *xp = ct__ptr(x);
  char *yp = ct__ptr(y);
  size_t es = ct_dtype_size(x->dtype);
  ct_dtype dt = x->dtype;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < NC; p++)
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t h0 = adaptive_start(oh, OH, H), h1 = adaptive_end(oh, OH, H);
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t w0 = adaptive_start(ow, OW, W), w1 = adaptive_end(ow, OW, W);
        double s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) s += ct__load(xp + ((p * H + h) * W + w) * es, dt);
        ct__store(yp + ((p * OH + oh) * OW + ow) * es, dt, s / (double)((h1 - h0) * (w1 - w0)));
      }
    }
  return CT_OK;
}

/* gx (N, C, H, W) = the sum over the output cells whose window holds (h, w) of gy / the window's
 * size. Gathered per input cell, no scratch: the cells whose rows hold h are
 * [adaptive_start(h, H, OH), adaptive_end(h, H, OH)) (the windows' rule read the other way), likewise
 * the columns; they are summed in (oh, ow) order in double and stored once. */
ct_status ct__cpu_adaptive_avg_pool2d_backward(ct_tensor *gx, ct_tensor *gy) {
  int64_t NC = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3], OH = gy->shape[2], OW = gy->shape[3];
  char *gxp = ct__ptr(gx);
  const char *gyp = ct__ptr(gy);
  size_t es = ct_dtype_size(gx->dtype);
  ct_dtype dt = gx->dtype;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < NC; p++)
    for (int64_t h = 0; h < H; h++) {
      int64_t oh0 = adaptive_start(h, H, OH), oh1 = adaptive_end(h, H, OH);
      for (int64_t w = 0; w < W; w++) {
        int64_t ow0 = adaptive_start(w, W, OW), ow1 = adaptive_end(w, W, OW);
        double a = 0;
        for (int64_t oh = oh0; oh < oh1; oh++) {
          int64_t rows = adaptive_end(oh, OH, H) - adaptive_start(oh, OH, H);
          for (int64_t ow = ow0; ow < ow1; ow++) {
            int64_t cols = adaptive_end(ow, OW, W) - adaptive_start(ow, OW, W);
            a += ct__load(gyp + ((p * OH + oh) * OW + ow) * es, dt) / (double)(rows * cols);
          }
        }
        ct__store(gxp + ((p * H + h) * W + w) * es, dt, a);
      }
    }
  return CT_OK;
}
