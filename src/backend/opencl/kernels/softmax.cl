/* src/backend/opencl/kernels/softmax.cl: softmax and log_softmax over the last dim of a contiguous
 * (R, C) tensor and their backward, one work-item per row, in REAL. */
__kernel void softmax(__global uchar *y, long yoff, __global const uchar *x, long xoff, int dt, long C, int log_) {
  long r = get_global_id(0), base = r * C;
  REAL m = -INFINITY, s = 0;
  for (long c = 0; c < C; c++) m = fmax(m, ld(x, xoff + base + c, dt));
  for (long c = 0; c < C; c++) s += exp(ld(x, xoff + base + c, dt) - m);
  REAL ls = log(s);
  for (long c = 0; c < C; c++) {
    REAL v = ld(x, xoff + base + c, dt) - m;
    st(y, yoff + base + c, dt, log_ ? v - ls : exp(v) / s);
  }
}

/* softmax: gx = y (gy - sum(gy y)); log_softmax: gx = gy - exp(y) sum(gy) */
__kernel void softmax_backward(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff, __global const uchar *y,
                               long yoff, int dt, long C, int log_) {
  long r = get_global_id(0), base = r * C;
  REAL s = 0;
  for (long c = 0; c < C; c++) {
    REAL g = ld(gy, gyoff + base + c, dt);
    s += log_ ? g : g * ld(y, yoff + base + c, dt);
  }
  for (long c = 0; c < C; c++) {
    REAL g = ld(gy, gyoff + base + c, dt), yv = ld(y, yoff + base + c, dt);
    st(gx, gxoff + base + c, dt, log_ ? g - exp(yv) * s : yv * (g - s));
  }
}
