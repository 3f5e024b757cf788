/* src/backend/opencl/kernels/conv_relu_pool.cl: the data movement of the fused conv2d + relu +
 * MaxPool2d(2) (src/backend/opencl/conv_relu_pool.c) around its float32 GEMMs, for x, w, y and the
 * gradients in float32, float16 or bfloat16. conv_geom and the im2col and col2im kernels (run with
 * float32 columns) are conv.cl's, which comes first in the program. A chunk's conv output, or its
 * gradient, is (O, nb, L) float32 scratch in the GEMM's layout, L = Hc Wc; every kernel writes each
 * element from one work-item in a fixed order, as conv.cl's do, so results are the same run to run.
 *
 * The pooling is the CPU's (src/backend/cpu/pool.c, CT_POOL_MAX_RELU): relu (a NaN passes), the
 * first of a tie, a NaN winning over numbers and a later NaN over an earlier one, and no winner
 * (position 4) when the maximum is 0. The argmax is, as the front-end allocates it, either int64
 * flat indices h Wc + w into the conv plane (-1 for none; float32, the vtable's
 * pool2d_argmax_dtype being NULL) or, for the halves, each plane's window positions two a byte,
 * the first in the low nibble (backend.h's conv2d_relu_pool2x2_halves). */

/* One pooled output (n, o, ho, wo) of the chunk from yt (O, nb, L) plus the bias: its value and
 * its window position 0-3, or 4 for none. */
float crp_window(__global const float *yt, long ytoff, long o, long nl, long ho, long wo, float bias, conv_geom g, int *pos) {
  long L = g.Ho * g.Wo, base = ytoff + (o * g.nb + nl) * L + 2 * ho * g.Wo + 2 * wo;
  float v[4] = {yt[base] + bias, yt[base + 1] + bias, yt[base + g.Wo] + bias, yt[base + g.Wo + 1] + bias};
  for (int k = 0; k < 4; k++) v[k] = v[k] <= 0.0f ? 0.0f : v[k]; /* relu; a NaN passes */
  float best = v[0];
  int bi = 0;
  for (int k = 1; k < 4; k++)
    if (v[k] > best || isnan(v[k])) best = v[k], bi = k;
  if (best <= 0.0f) bi = 4;
  *pos = bi;
  return best;
}

/* y (N, O, Hp, Wp) of dtype ydt for the chunk's images, and the argmax (packed: uchar, two
 * positions a byte; else int64 flat indices). One work-item per pair of outputs of a plane
 * (q = 2 p, 2 p + 1 of P = Hp Wp), so that a packed byte has one writer. */
__kernel void crp_pool(__global uchar *y, long yoff, int ydt, __global uchar *am, long amoff, int packed,
                       __global const float *yt, long ytoff, __global const uchar *bias, long boff, int bdt, int has_bias,
                       long O, long Hp, long Wp, conv_geom g) {
  long idx = get_global_id(0), P = Hp * Wp, PB = (P + 1) / 2;
  long p = idx % PB, o = (idx / PB) % O, nl = idx / (PB * O);
  float b = has_bias ? (float)ld(bias, boff + o, bdt) : 0.0f;
  long plane = (g.n0 + nl) * O + o;
  int pos[2] = {4, 4};
  for (int e = 0; e < 2; e++) {
    long q = 2 * p + e;
    if (q >= P) break;
    long ho = q / Wp, wo = q % Wp;
    float v = crp_window(yt, ytoff, o, nl, ho, wo, b, g, &pos[e]);
    st(y, yoff + plane * P + q, ydt, (REAL)v);
    if (!packed) {
      int k = pos[e];
      ((__global long *)am)[amoff + plane * P + q] = k == 4 ? -1 : (2 * ho + k / 2) * g.Wo + 2 * wo + k % 2;
    }
  }
  if (packed) am[amoff + plane * PB + p] = (uchar)(pos[0] | (2 * p + 1 < P ? pos[1] << 4 : 0));
}

/* The window position (0-3, 4 none) recorded for pooled output q of plane `plane`. */
int crp_pos(__global const uchar *am, long amoff, int packed, long plane, long P, long q, long Wc) {
  if (packed) {
    uchar byte = am[amoff + plane * ((P + 1) / 2) + q / 2];
    return q % 2 ? byte >> 4 : byte & 15;
  }
  long f = ((__global const long *)am)[amoff + plane * P + q];
  if (f < 0) return 4;
  return (int)(((f / Wc) % 2) * 2 + (f % Wc) % 2);
}

/* gyT (O, nb, L) float32: the conv output's gradient for the chunk, gy (N, O, Hp, Wp) of dtype
 * gdt where the element won its window, else 0 (an odd last row or column, outside every window,
 * gets 0). One work-item per row (o, image, h) of Wc elements. */
__kernel void crp_unpool(__global float *gyT, long toff, __global const uchar *gy, long gyoff, int gdt,
                         __global const uchar *am, long amoff, int packed, long O, long Hp, long Wp, conv_geom g) {
  long idx = get_global_id(0), L = g.Ho * g.Wo, P = Hp * Wp;
  long h = idx % g.Ho, nl = (idx / g.Ho) % g.nb, o = idx / (g.Ho * g.nb);
  long plane = (g.n0 + nl) * O + o, ho = h / 2;
  __global float *row = gyT + toff + (o * g.nb + nl) * L + h * g.Wo;
  for (long w = 0; w < g.Wo; w++) {
    long wo = w / 2;
    float v = 0.0f;
    if (ho < Hp && wo < Wp) {
      long q = ho * Wp + wo;
      if (crp_pos(am, amoff, packed, plane, P, q, g.Wo) == (int)((h % 2) * 2 + w % 2))
        v = (float)ld(gy, gyoff + plane * P + q, gdt);
    }
    row[w] = v;
  }
}

/* gb[o] = the sum over images and pooled outputs with a winner of gy: what the conv output's
 * gradient sums to. One work-item per channel, in a fixed order, in REAL. */
__kernel void crp_bias_grad(__global uchar *gb, long gboff, int gbdt, __global const uchar *gy, long gyoff, int gdt,
                            __global const uchar *am, long amoff, int packed, long N, long O, long P, long Wc) {
  long o = get_global_id(0);
  REAL s = 0;
  for (long n = 0; n < N; n++)
    for (long q = 0; q < P; q++)
      if (crp_pos(am, amoff, packed, n * O + o, P, q, Wc) != 4) s += ld(gy, gyoff + (n * O + o) * P + q, gdt);
  st(gb, gboff + o, gbdt, s);
}

