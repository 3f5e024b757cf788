/* src/backend/opencl/kernels/pool.cl: 2-D max and average pooling, adaptive average pooling, and
 * their backward (src/backend/opencl/pool.c), over contiguous (N, C, H, W) of any floating dtype,
 * in REAL.
 *
 * The semantics are the CPU's (src/backend/cpu/pool.c, pool_window.h): torch's windows (output o's
 * holds start + i d, i < k, start = o s - p; max pooling visits those inside the input), ties keep
 * the first element in row-major order, a NaN wins over numbers and a later NaN over an earlier
 * one, a window with nothing inside the input gives -inf (max) or 0 (avg) and no gradient; average
 * pooling (d = 1) divides as torch's cpu_avg_pool (aten/src/ATen/native/cpu/AvgPoolKernel.cpp):
 * divisor_override, else with count_include_pad the window clipped to the padded input [-p, n + p)
 * (kH kW but for a ceil_mode window past it), else its elements inside the input; kind 2
 * (CT_POOL_MAX_RELU) pools relu(x) and records -1 for a window whose maximum is 0. The argmax is the
 * int64 flat index h W + w into x's plane. The backward gathers: each gx element looks at the
 * windows that contain it, in increasing (ho, wo) order, so no two work-items write one element
 * and no atomics are needed. */

/* The geometry, as pool.c's pool_geom (every field a long). */
typedef struct {
  long H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, exclude_pad, divisor;
} pool_geom;

/* One side of output o's window: the first element inside the input (*lo), the end of the
 * elements inside it (*hi, exclusive; lo >= hi: none), and the return value, the window's length
 * clipped to the padded input (count_include_pad's factor; meaningful for d = 1). */
long pool_side(long o, long n, long k, long s, long p, long d, long *lo, long *hi) {
  long start = o * s - p, end = start + d * (k - 1) + 1;
  *lo = start < 0 ? start + (-start + d - 1) / d * d : start;
  *hi = end < n ? end : n;
  return (end < n + p ? end : n + p) - start;
}

/* average pooling's divisor for output (ho, wo), > 0 where its window holds an input element */
long pool_divisor(long ho, long wo, pool_geom g) {
  long h0, h1, w0, w1;
  long ph = pool_side(ho, g.H, g.kh, g.sh, g.ph, 1, &h0, &h1), pw = pool_side(wo, g.W, g.kw, g.sw, g.pw, 1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) return 0;
  return g.divisor ? g.divisor : g.exclude_pad ? (h1 - h0) * (w1 - w0) : ph * pw;
}

/* y (N, C, Ho, Wo) and, for max pooling when has_am, argmax (int64, y's shape): one work-item per output. */
__kernel void pool2d(__global uchar *y, long yoff, __global const uchar *x, long xoff, int dt, __global long *am, long amoff,
                     int has_am, int kind, pool_geom g) {
  long idx = get_global_id(0);
  long wo = idx % g.Wo, ho = (idx / g.Wo) % g.Ho, plane = idx / (g.Wo * g.Ho);
  long base = xoff + plane * g.H * g.W;
  long dh = kind == 1 ? 1 : g.dh, dw = kind == 1 ? 1 : g.dw;
  long h0, h1, w0, w1;
  pool_side(ho, g.H, g.kh, g.sh, g.ph, dh, &h0, &h1);
  pool_side(wo, g.W, g.kw, g.sw, g.pw, dw, &w0, &w1);
  REAL best = kind == 1 /* avg */ ? (REAL)0 : (REAL)-INFINITY;
  long best_i = -1;
  for (long h = h0; h < h1; h += dh)
    for (long w = w0; w < w1; w += dw) {
      REAL v = ld(x, base + h * g.W + w, dt);
      if (kind == 2 && v <= 0) v = 0; /* relu; a NaN passes */
      if (kind == 1) best += v;
      else if (v > best || best_i < 0 || isnan(v)) best = v, best_i = h * g.W + w;
    }
  if (kind == 1) {
    long dv = pool_divisor(ho, wo, g);
    if (dv > 0) best /= (REAL)dv;
  }
  if (kind == 2 && best <= 0) best_i = -1;
  st(y, yoff + idx, dt, best);
  if (has_am) am[amoff + idx] = best_i;
}

/* gx (N, C, H, W) from gy (N, C, Ho, Wo) and, for max pooling, the forward's argmax: one
 * work-item per input element, summing over the outputs whose window holds it. */
__kernel void pool2d_backward(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff, int dt,
                              __global const long *am, long amoff, int kind, pool_geom g) {
  long idx = get_global_id(0);
  long w = idx % g.W, h = (idx / g.W) % g.H, plane = idx / (g.W * g.H), flat = h * g.W + w;
  /* outputs whose (dilated) window [ho sh - ph, ho sh - ph + ek) holds h, ek = dh (kh - 1) + 1:
   * ho in [ceil((h + ph - ek + 1) / sh), (h + ph) / sh]; max pooling's argmax picks the one element,
   * average pooling has no dilation, so every element of the span is in the window */
  long dh = kind == 1 ? 1 : g.dh, dw = kind == 1 ? 1 : g.dw;
  long ekh = dh * (g.kh - 1) + 1, ekw = dw * (g.kw - 1) + 1;
  long th = h + g.ph, tw = w + g.pw;
  long ho0 = th - ekh + 1 > 0 ? (th - ekh + 1 + g.sh - 1) / g.sh : 0, ho1 = th / g.sh;
  long wo0 = tw - ekw + 1 > 0 ? (tw - ekw + 1 + g.sw - 1) / g.sw : 0, wo1 = tw / g.sw;
  if (ho1 >= g.Ho) ho1 = g.Ho - 1;
  if (wo1 >= g.Wo) wo1 = g.Wo - 1;
  long obase = plane * g.Ho * g.Wo;
  REAL s = 0;
  for (long ho = ho0; ho <= ho1; ho++)
    for (long wo = wo0; wo <= wo1; wo++) {
      long q = obase + ho * g.Wo + wo;
      if (kind == 1) s += ld(gy, gyoff + q, dt) / (REAL)pool_divisor(ho, wo, g);
      else if (am[amoff + q] == flat) s += ld(gy, gyoff + q, dt);
    }
  st(gx, gxoff + idx, dt, s);
}

/* ---- adaptive average pooling, as the CPU's (src/backend/cpu/pool.c) and ATen's
 * (aten/src/ATen/native/AdaptiveAveragePooling.cpp): output cell o of O along an input side of I
 * averages [adaptive_lo(o, O, I), adaptive_hi(o, O, I)) = [floor(o I / O), ceil((o + 1) I / O));
 * neighbouring windows may overlap. Read the other way (adaptive_lo(i, I, O), adaptive_hi(i, I, O)),
 * the same rule gives the output cells whose windows hold input i. */
long adaptive_lo(long o, long O, long I) { return o * I / O; }
long adaptive_hi(long o, long O, long I) { return ((o + 1) * I + O - 1) / O; }

/* y (N, C, OH, OW) from x (N, C, H, W): one work-item per output, summed in row-major order. */
__kernel void adaptive_avg_pool2d(__global uchar *y, long yoff, __global const uchar *x, long xoff, int dt, long H, long W,
                                  long OH, long OW) {
  long idx = get_global_id(0);
  long ow = idx % OW, oh = (idx / OW) % OH, plane = idx / (OW * OH);
  long h0 = adaptive_lo(oh, OH, H), h1 = adaptive_hi(oh, OH, H), w0 = adaptive_lo(ow, OW, W), w1 = adaptive_hi(ow, OW, W);
  long base = xoff + plane * H * W;
  REAL s = 0;
  for (long h = h0; h < h1; h++)
    for (long w = w0; w < w1; w++) s += ld(x, base + h * W + w, dt);
  st(y, yoff + idx, dt, s / (REAL)((h1 - h0) * (w1 - w0)));
}

/* gx (N, C, H, W) from gy (N, C, OH, OW): one work-item per input element, the sum over the output
 * cells whose window holds it, in increasing (oh, ow) order, of gy / the window's size; a gather, so
 * no atomics and the same sums every run. */
__kernel void adaptive_avg_pool2d_backward(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff, int dt, long H,
                                           long W, long OH, long OW) {
  long idx = get_global_id(0);
  long w = idx % W, h = (idx / W) % H, plane = idx / (W * H);
  long oh0 = adaptive_lo(h, H, OH), oh1 = adaptive_hi(h, H, OH), ow0 = adaptive_lo(w, W, OW), ow1 = adaptive_hi(w, W, OW);
  long obase = gyoff + plane * OH * OW;
  REAL s = 0;
  for (long oh = oh0; oh < oh1; oh++) {
    long rows = adaptive_hi(oh, OH, H) - adaptive_lo(oh, OH, H);
    for (long ow = ow0; ow < ow1; ow++) {
      long cols = adaptive_hi(ow, OW, W) - adaptive_lo(ow, OW, W);
      s += ld(gy, obase + oh * OW + ow, dt) / (REAL)(rows * cols);
    }
  }
  st(gx, gxoff + idx, dt, s);
}
