/* src/backend/opencl/kernels/pool.cl: 2-D max and average pooling, adaptive average pooling, and
 * their backward (src/backend/opencl/pool.c), over contiguous (N, C, H, W) of any floating dtype,
 * in REAL.
 *
 * The semantics are the CPU's (src/backend/cpu/pool.c): windows in row-major order, ties keep the
 * first element, a NaN wins over numbers and a later NaN over an earlier one; average pooling
 * divides by kH kW (count_include_pad); kind 2 (CT_POOL_MAX_RELU) pools relu(x) and records -1 for
 * a window whose maximum is 0. The argmax is the int64 flat index h W + w into x's plane. The
 * backward gathers: each gx element looks at the windows that contain it, in increasing (ho, wo)
 * order, so no two work-items write one element and no atomics are needed. */

/* The geometry, as pool.c's pool_geom (every field a long). */
typedef struct {
  long H, W, Ho, Wo, kh, kw, sh, sw, ph, pw;
} pool_geom;

/* y (N, C, Ho, Wo) and, for max pooling when has_am, argmax (int64, y's shape): one work-item per output. */
__kernel void pool2d(__global uchar *y, long yoff, __global const uchar *x, long xoff, int dt, __global long *am, long amoff,
                     int has_am, int kind, pool_geom g) {
  long idx = get_global_id(0);
  long wo = idx % g.Wo, ho = (idx / g.Wo) % g.Ho, plane = idx / (g.Wo * g.Ho);
  long base = xoff + plane * g.H * g.W;
  REAL best = kind == 1 /* avg */ ? (REAL)0 : (REAL)-INFINITY;
  long best_i = -1;
  for (long i = 0; i < g.kh; i++) {
    long h = ho * g.sh - g.ph + i;
    if (h < 0 || h >= g.H) continue;
    for (long j = 0; j < g.kw; j++) {
      long w = wo * g.sw - g.pw + j;
      if (w < 0 || w >= g.W) continue;
      REAL v = ld(x, base + h * g.W + w, dt);
      if (kind == 2 && v <= 0) v = 0; /* relu; a NaN passes */
      if (kind == 1) best += v;
      else if (v > best || best_i < 0 || isnan(v)) best = v, best_i = h * g.W + w;
    }
  }
  if (kind == 1) best /= (REAL)(g.kh * g.kw);
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
  /* outputs whose window [ho sh - ph, ho sh - ph + kh) holds h: ho in [ceil((h + ph - kh + 1) / sh), (h + ph) / sh] */
  long th = h + g.ph, tw = w + g.pw;
  long ho0 = th - g.kh + 1 > 0 ? (th - g.kh + 1 + g.sh - 1) / g.sh : 0, ho1 = th / g.sh;
  long wo0 = tw - g.kw + 1 > 0 ? (tw - g.kw + 1 + g.sw - 1) / g.sw : 0, wo1 = tw / g.sw;
  if (ho1 >= g.Ho) ho1 = g.Ho - 1;
  if (wo1 >= g.Wo) wo1 = g.Wo - 1;
  long obase = plane * g.Ho * g.Wo;
  REAL s = 0;
  for (long ho = ho0; ho <= ho1; ho++)
    for (long wo = wo0; wo <= wo1; wo++) {
      long q = obase + ho * g.Wo + wo;
      if (kind == 1) s += ld(gy, gyoff + q, dt) / (REAL)(g.kh * g.kw);
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
