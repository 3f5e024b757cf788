/* src/backend/opencl/kernels/norm.cl: layer norm over the last D elements of a contiguous x and its
 * backward (core/kernels.def: layer_norm, layer_norm_backward), in REAL, with the CPU's formulas
 * (src/backend/cpu/layer_norm.c): one work-item per row for the statistics, y and gx, one per
 * column for the column sums gw and gb. An absent w or b (has_w, has_b 0) is never read. */
__kernel void layer_norm(__global uchar *y, long yoff, __global uchar *mean, long moff, __global uchar *rstd, long roff,
                         __global const uchar *x, long xoff, __global const uchar *w, long woff, int has_w,
                         __global const uchar *b, long boff, int has_b, int dt, long D, REAL eps) {
  long r = get_global_id(0), xr = xoff + r * D, yr = yoff + r * D;
  REAL s = 0, q = 0;
  for (long i = 0; i < D; i++) s += ld(x, xr + i, dt);
  REAL m = s / (REAL)D;
  for (long i = 0; i < D; i++) {
    REAL d = ld(x, xr + i, dt) - m;
    q += d * d;
  }
  REAL rs = (REAL)1 / sqrt(q / (REAL)D + eps);
  st(mean, moff + r, dt, m);
  st(rstd, roff + r, dt, rs);
  for (long i = 0; i < D; i++) {
    REAL v = (ld(x, xr + i, dt) - m) * rs;
    if (has_w) v *= ld(w, woff + i, dt);
    if (has_b) v += ld(b, boff + i, dt);
    st(y, yr + i, dt, v);
  }
}

/* gx = rstd (gy w - a - xhat c), a = sum(gy w) / D, c = sum(gy w xhat) / D, xhat = (x - mean) rstd */
__kernel void layer_norm_backward(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff,
                                  __global const uchar *x, long xoff, __global const uchar *w, long woff, int has_w,
                                  __global const uchar *mean, long moff, __global const uchar *rstd, long roff, int dt,
                                  long D) {
  long r = get_global_id(0), gr = gyoff + r * D, xr = xoff + r * D;
  REAL m = ld(mean, moff + r, dt), rs = ld(rstd, roff + r, dt), a = 0, c = 0;
  for (long i = 0; i < D; i++) {
    REAL g = ld(gy, gr + i, dt) * (has_w ? ld(w, woff + i, dt) : (REAL)1);
    a += g, c += g * ((ld(x, xr + i, dt) - m) * rs);
  }
  a /= (REAL)D, c /= (REAL)D;
  for (long i = 0; i < D; i++) {
    REAL g = ld(gy, gr + i, dt) * (has_w ? ld(w, woff + i, dt) : (REAL)1), xh = (ld(x, xr + i, dt) - m) * rs;
    st(gx, gxoff + r * D + i, dt, rs * (g - a - xh * c));
  }
}

/* column i: gw = sum over the R rows of gy xhat, gb = sum of gy (each written when wanted) */
__kernel void layer_norm_backward_params(__global uchar *gw, long gwoff, int has_gw, __global uchar *gb, long gboff,
                                         int has_gb, __global const uchar *gy, long gyoff, __global const uchar *x,
                                         long xoff, __global const uchar *mean, long moff, __global const uchar *rstd,
                                         long roff, int dt, long R, long D) {
  long i = get_global_id(0);
  REAL sw = 0, sb = 0;
  for (long r = 0; r < R; r++) {
    REAL g = ld(gy, gyoff + r * D + i, dt);
    sb += g;
    sw += g * ((ld(x, xoff + r * D + i, dt) - ld(mean, moff + r, dt)) * ld(rstd, roff + r, dt));
  }
  if (has_gw) st(gw, gwoff + i, dt, sw);
  if (has_gb) st(gb, gboff + i, dt, sb);
}
