/* src/backend/opencl/kernels/optim.cl: the fused SGD and Adam/AdamW updates over contiguous p, g
 * and state of one floating dtype, with the formulas of src/optim/optimizer.c in the CPU
 * backend's order (src/backend/cpu/optim.c), computed in REAL. */
/* The constants come from the host, computed in double as the CPU computes them (b1, nb1 = 1 - beta1,
 * b2, nb2 = 1 - beta2, eps, step = lr / bc1, sbc2 = sqrt(bc2), decay = 1 - lr wd for AdamW else 1,
 * l2 = wd for Adam else 0); the update is the CPU's, in its order:
 *   p = p decay - step m / (sqrt(v) / sbc2 + eps).
 * A capturable step (has_t) reads its count t from the float32 buffer (t, toff) and computes
 * step = lr / (1 - b1^t) and sbc2 = sqrt(1 - b2^t) itself, in REAL. */
__kernel void adam_step(__global uchar *p, long poff, __global const uchar *g, long goff, __global uchar *m, long moff,
                        __global uchar *v, long voff, int dt, REAL b1, REAL nb1, REAL b2, REAL nb2, REAL eps,
                        REAL step, REAL sbc2, REAL decay, REAL l2, __global const uchar *t, long toff, int has_t,
                        REAL lr) {
  long i = get_global_id(0);
  if (has_t) {
    REAL tv = ld(t, toff, DT_F32);
    step = lr / ((REAL)1 - pow(b1, tv));
    sbc2 = sqrt((REAL)1 - pow(b2, tv));
  }
  REAL pv = ld(p, poff + i, dt), gv = ld(g, goff + i, dt);
  gv = gv + l2 * pv;
  REAL mv = b1 * ld(m, moff + i, dt) + nb1 * gv;
  REAL vv = b2 * ld(v, voff + i, dt) + nb2 * gv * gv;
  st(m, moff + i, dt, mv);
  st(v, voff + i, dt, vv);
  pv = pv * decay - step * mv / (sqrt(vv) / sbc2 + eps);
  st(p, poff + i, dt, pv);
}

__kernel void sgd_step(__global uchar *p, long poff, __global const uchar *g, long goff, __global uchar *buf, long boff,
                       int has_buf, int dt, REAL lr, REAL momentum, REAL dampening, REAL wd, int nesterov, int first,
                       __global const uchar *t, long toff, int has_t) {
  long i = get_global_id(0);
  if (has_t) first = ld(t, toff, DT_F32) == (REAL)1; /* a capturable step's count */
  REAL pv = ld(p, poff + i, dt), gv = ld(g, goff + i, dt) + wd * pv;
  if (has_buf) {
    REAL b = first ? gv : momentum * ld(buf, boff + i, dt) + ((REAL)1 - dampening) * gv;
    st(buf, boff + i, dt, b);
    gv = nesterov ? gv + momentum * b : b;
  }
  st(p, poff + i, dt, pv - lr * gv);
}
