/* src/backend/opencl/kernels/optim.cl: the fused SGD and Adam/AdamW updates over contiguous p, g
 * and state of one floating dtype, with the formulas of src/optim/optimizer.c in the CPU
 * backend's order (src/backend/cpu/optim.c), computed in REAL. */
__kernel void adam_step(__global uchar *p, long poff, __global const uchar *g, long goff, __global uchar *m, long moff,
                        __global uchar *v, long voff, int dt, REAL lr, REAL beta1, REAL beta2, REAL eps, REAL wd, int decoupled,
                        REAL bc1, REAL bc2) {
  long i = get_global_id(0);
  REAL pv = ld(p, poff + i, dt), gv = ld(g, goff + i, dt);
  REAL decay = decoupled ? (REAL)1 - lr * wd : (REAL)1, l2 = decoupled ? (REAL)0 : wd;
  gv += l2 * pv;
  REAL mv = beta1 * ld(m, moff + i, dt) + ((REAL)1 - beta1) * gv;
  REAL vv = beta2 * ld(v, voff + i, dt) + ((REAL)1 - beta2) * gv * gv;
  st(m, moff + i, dt, mv);
  st(v, voff + i, dt, vv);
  pv = pv * decay - (lr / bc1) * mv / (sqrt(vv) / sqrt(bc2) + eps);
  st(p, poff + i, dt, pv);
}

__kernel void sgd_step(__global uchar *p, long poff, __global const uchar *g, long goff, __global uchar *buf, long boff,
                       int has_buf, int dt, REAL lr, REAL momentum, REAL dampening, REAL wd, int nesterov, int first) {
  long i = get_global_id(0);
  REAL pv = ld(p, poff + i, dt), gv = ld(g, goff + i, dt) + wd * pv;
  if (has_buf) {
    REAL b = first ? gv : momentum * ld(buf, boff + i, dt) + ((REAL)1 - dampening) * gv;
    st(buf, boff + i, dt, b);
    gv = nesterov ? gv + momentum * b : b;
  }
  st(p, poff + i, dt, pv - lr * gv);
}
