/* src/backend/opencl/kernels/conv.cl: the data movement around conv2d's GEMMs (src/backend/opencl/conv.c).
 *
 * A chunk of nb images n0 .. n0 + nb - 1 is lowered to cols (C kH kW, M) with M = nb L, L = Ho Wo:
 * row (c, i, j), column m = (n - n0) L + ho Wo + wo holds x[n, c, ho sh - ph + i dh, wo sw - pw + j dw]
 * (0 outside the image). One GEMM per group then covers the whole chunk, and its result
 * (O, nb, L) is swapped back to y's (N, O, L) layout. Every kernel here writes each output element
 * from one work-item that reads a fixed set of inputs in a fixed order, so results do not depend
 * on scheduling: col2im gathers, it never scatters with atomics. */

/* The geometry, as conv.c's ct__ocl_conv_geom (every field a long, so host and device agree on
 * the layout). */
typedef struct {
  long C, H, W, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw, n0, nb;
} conv_geom;

/* cols (C kH kW, nb L) of dtype cdt from x (N, C, H, W) of dtype xdt (the fused conv + relu +
 * pool keeps float32 columns for half inputs): one work-item per row segment (r, image, ho) of Wo
 * elements, so the index arithmetic is paid per segment, not per element. */
__kernel void conv_im2col(__global uchar *cols, long coff, int cdt, __global const uchar *x, long xoff, int xdt,
                          conv_geom g) {
  long idx = get_global_id(0), L = g.Ho * g.Wo, M = g.nb * L;
  long ho = idx % g.Ho, nl = (idx / g.Ho) % g.nb, r = idx / (g.Ho * g.nb);
  long c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
  long h = ho * g.sh - g.ph + i * g.dh, w0 = j * g.dw - g.pw;
  long out = coff + r * M + nl * L + ho * g.Wo, in = xoff + ((g.n0 + nl) * g.C + c) * g.H * g.W + h * g.W;
  int row_in = h >= 0 && h < g.H;
  for (long wo = 0; wo < g.Wo; wo++) {
    long w = wo * g.sw + w0;
    st(cols, out + wo, cdt, row_in && w >= 0 && w < g.W ? ld(x, in + w, xdt) : (REAL)0);
  }
}

/* gx (N, C, H, W) of dtype gxdt for the chunk's images from dcols (C kH kW, nb L) of dtype ddt:
 * each input element sums the taps (i, j) that read it, in increasing (i, j) order. One work-item
 * per row (image, c, h). */
__kernel void conv_col2im(__global uchar *gx, long gxoff, int gxdt, __global const uchar *dcols, long doff, int ddt,
                          conv_geom g) {
  long idx = get_global_id(0), L = g.Ho * g.Wo, M = g.nb * L;
  long h = idx % g.H, c = (idx / g.H) % g.C, nl = idx / (g.H * g.C);
  long out = gxoff + ((g.n0 + nl) * g.C + c) * g.H * g.W + h * g.W;
  for (long w = 0; w < g.W; w++) {
    REAL sum = 0;
    for (long i = 0; i < g.kh; i++) {
      long t = h + g.ph - i * g.dh; /* = ho sh */
      if (t < 0 || t % g.sh != 0 || t / g.sh >= g.Ho) continue;
      long ho = t / g.sh;
      for (long j = 0; j < g.kw; j++) {
        long u = w + g.pw - j * g.dw; /* = wo sw */
        if (u < 0 || u % g.sw != 0 || u / g.sw >= g.Wo) continue;
        sum += ld(dcols, doff + ((c * g.kh + i) * g.kw + j) * M + nl * L + ho * g.Wo + u / g.sw, ddt);
      }
    }
    st(gx, out + w, gxdt, sum);
  }
}

/* out (B, A, L) = in (A, B, L) with its first two dims swapped, plus bias[a] when has_bias (the
 * forward's (O, nb, L) GEMM result into y's (nb, O, L), and gy's (nb, O, L) into (O, nb, L)).
 * One work-item per run of L elements. */
__kernel void conv_swap01(__global uchar *out, long ooff, __global const uchar *in, long ioff, int dt, long A, long B, long L,
                          __global const uchar *bias, long boff, int bdt, int has_bias) {
  long idx = get_global_id(0); /* = b A + a */
  long a = idx % A, b = idx / A;
  REAL add = has_bias ? ld(bias, boff + a, bdt) : (REAL)0;
  long o = ooff + idx * L, s = ioff + (a * B + b) * L;
  for (long l = 0; l < L; l++) {
    REAL v = ld(in, s + l, dt);
    st(out, o + l, dt, has_bias ? v + add : v);
  }
}

/* gb[o] = sum over n and l of gy[n, o, l], gy (N, O, L): one work-item per channel, summing in REAL
 * in a fixed order. */
__kernel void conv_bias_grad(__global uchar *gb, long gboff, int gbdt, __global const uchar *gy, long gyoff, int dt, long N, long O,
                             long L) {
  long o = get_global_id(0);
  REAL s = 0;
  for (long n = 0; n < N; n++) {
    long base = gyoff + (n * O + o) * L;
    for (long l = 0; l < L; l++) s += ld(gy, base + l, dt);
  }
  st(gb, gboff + o, gbdt, s);
}
