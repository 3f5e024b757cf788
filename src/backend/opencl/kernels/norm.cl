/* src/backend/opencl/kernels/norm.cl: layer norm over the last D elements of a contiguous x and
 * batch norm per channel of a contiguous (N, C, S) x, each with its backward (core/kernels.def), in
 * REAL, with the CPU's formulas (src/backend/cpu/layer_norm.c, norm.c). Layer norm: one work-group
 * per row for the statistics, y and gx (its work-items striding over the row, summing with
 * group_sum), one work-item per column for the column sums gw and gb. Batch norm: one work-group
 * per channel (below). An absent operand (has_* 0) is never read; no barrier is under a condition. */
__kernel void layer_norm(__global uchar *y, long yoff, __global uchar *mean, long moff, __global uchar *rstd, long roff,
                         __global const uchar *x, long xoff, __global const uchar *w, long woff, int has_w,
                         __global const uchar *b, long boff, int has_b, int dt, long D, REAL eps) {
  __local REAL red[CT_OCL_GROUP_MAX];
  long r = get_group_id(0), l = get_local_id(0), L = get_local_size(0), xr = xoff + r * D, yr = yoff + r * D;
  REAL s = 0, q = 0;
  for (long i = l; i < D; i += L) s += ld(x, xr + i, dt);
  REAL m = group_sum(s, red) / (REAL)D;
  for (long i = l; i < D; i += L) {
    REAL d = ld(x, xr + i, dt) - m;
    q += d * d;
  }
  REAL rs = (REAL)1 / sqrt(group_sum(q, red) / (REAL)D + eps);
  if (l == 0) {
    st(mean, moff + r, dt, m);
    st(rstd, roff + r, dt, rs);
  }
  for (long i = l; i < D; i += L) {
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
  __local REAL red[CT_OCL_GROUP_MAX];
  long r = get_group_id(0), l = get_local_id(0), L = get_local_size(0), gr = gyoff + r * D, xr = xoff + r * D;
  REAL m = ld(mean, moff + r, dt), rs = ld(rstd, roff + r, dt), a = 0, c = 0;
  for (long i = l; i < D; i += L) {
    REAL g = ld(gy, gr + i, dt) * (has_w ? ld(w, woff + i, dt) : (REAL)1);
    a += g, c += g * ((ld(x, xr + i, dt) - m) * rs);
  }
  a = group_sum(a, red) / (REAL)D;
  c = group_sum(c, red) / (REAL)D;
  for (long i = l; i < D; i += L) {
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

/* Batch norm over a contiguous x (N, C, S), S the product of the dims after C, and its backward
 * (core/kernels.def: batch_norm, batch_norm_backward), in REAL, with the CPU's formulas
 * (src/backend/cpu/norm.c): one work-group per channel (ct__ocl_launch_groups), its work-items
 * striding over the channel's N S values and summing them with group_sum, so that a GPU runs C
 * groups of up to 256 work-items instead of C work-items walking a channel each. Channel c's value
 * i is x[(n C + c) S + s] with n = i / S, s = i - n S (bn_at). Every barrier (group_sum) is
 * reached by every work-item unconditionally. The running statistics are read and
 * written at their strides (rms, rvs, in elements); has_run 0: absent (training without them). */
long bn_at(long i, long c, long C, long S) {
  /* a 32-bit division where it fits: GPUs emulate the 64-bit one in many instructions */
  long n = i <= 0x7fffffffL && S <= 0x7fffffffL ? (long)((uint)i / (uint)S) : i / S;
  return (n * C + c) * S + (i - n * S);
}

__kernel void batch_norm(__global uchar *y, long yoff, __global uchar *mean, long moff, __global uchar *invstd,
                         long ioff, __global const uchar *x, long xoff, __global const uchar *w, long woff, int has_w,
                         __global const uchar *b, long boff, int has_b, __global uchar *rm, long rmoff, long rms,
                         __global uchar *rv, long rvoff, long rvs, int has_run, int training, int dt, long N, long C,
                         long S, REAL momentum, REAL eps) {
  __local REAL red[CT_OCL_GROUP_MAX];
  long c = get_group_id(0), l = get_local_id(0), L = get_local_size(0), cnt = N * S;
  /* The group_sums run in eval too, on zeros: PoCL 3.1's work-group functions crashed (SIGSEGV)
   * on barriers inside `if (training)`, uniform as it is, so no barrier is under a condition. */
  REAL m, is, n = (REAL)N * (REAL)S, s = 0, q = 0;
  for (long i = l; training && i < cnt; i += L) s += ld(x, xoff + bn_at(i, c, C, S), dt);
  m = group_sum(s, red) / n;
  for (long i = l; training && i < cnt; i += L) {
    REAL d = ld(x, xoff + bn_at(i, c, C, S), dt) - m;
    q += d * d;
  }
  q = group_sum(q, red);
  if (training) {
    is = (REAL)1 / sqrt(q / n + eps);
    if (has_run && l == 0) {
      long a = rmoff + c * rms, v = rvoff + c * rvs;
      st(rm, a, dt, ((REAL)1 - momentum) * ld(rm, a, dt) + momentum * m);
      st(rv, v, dt, ((REAL)1 - momentum) * ld(rv, v, dt) + momentum * (q / (n - (REAL)1)));
    }
  } else {
    m = ld(rm, rmoff + c * rms, dt);
    is = (REAL)1 / sqrt(ld(rv, rvoff + c * rvs, dt) + eps);
  }
  if (l == 0) {
    st(mean, moff + c, dt, m);
    st(invstd, ioff + c, dt, is);
  }
  REAL sc = is * (has_w ? ld(w, woff + c, dt) : (REAL)1), sh = has_b ? ld(b, boff + c, dt) : (REAL)0;
  for (long i = l; i < cnt; i += L) {
    long o = bn_at(i, c, C, S);
    st(y, yoff + o, dt, (ld(x, xoff + o, dt) - m) * sc + sh);
  }
}

/* gb = sum(gy), gw = sum(gy (x - mean)) invstd, and gx = A gy - B (x - mean) - D with A = invstd w,
 * B = A sum(gy (x - mean)) invstd^2 / n and D = A sum(gy) / n in training (B = D = 0 in eval). */
__kernel void batch_norm_backward(__global uchar *gx, long gxoff, int has_gx, __global uchar *gw, long gwoff,
                                  int has_gw, __global uchar *gb, long gboff, int has_gb, __global const uchar *gy,
                                  long gyoff, __global const uchar *x, long xoff, __global const uchar *w, long woff,
                                  int has_w, __global const uchar *mean, long moff, __global const uchar *invstd,
                                  long ioff, int training, int dt, long N, long C, long S) {
  __local REAL red[CT_OCL_GROUP_MAX];
  long c = get_group_id(0), l = get_local_id(0), L = get_local_size(0), cnt = N * S;
  REAL m = ld(mean, moff + c, dt), is = ld(invstd, ioff + c, dt), n = (REAL)N * (REAL)S, s = 0, d = 0;
  int sums = has_gw || has_gb || (has_gx && training);
  for (long i = l; sums && i < cnt; i += L) {
    long o = bn_at(i, c, C, S);
    REAL g = ld(gy, gyoff + o, dt);
    s += g, d += g * (ld(x, xoff + o, dt) - m);
  }
  s = group_sum(s, red); /* unconditionally, as in batch_norm: no barrier under a condition */
  d = group_sum(d, red);
  if (has_gb && l == 0) st(gb, gboff + c, dt, s);
  if (has_gw && l == 0) st(gw, gwoff + c, dt, d * is);
  if (!has_gx) return;
  REAL A = is * (has_w ? ld(w, woff + c, dt) : (REAL)1);
  REAL B = training ? A * d * is * is / n : (REAL)0, D = training ? A * s / n : (REAL)0;
  for (long i = l; i < cnt; i += L) {
    long o = bn_at(i, c, C, S);
    st(gx, gxoff + o, dt, A * ld(gy, gyoff + o, dt) - B * (ld(x, xoff + o, dt) - m) - D);
  }
}
