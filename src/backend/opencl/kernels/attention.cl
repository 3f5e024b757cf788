/* src/backend/opencl/kernels/attention.cl: the fused scaled dot-product attention (core/kernels.def's
 * attention and attention_backward), FlashAttention-2's algorithms 1 and 2 (Dao 2023,
 * "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning") with one
 * work-item per row: the forward and the backward's gq per query row, the backward's gk and gv per
 * key row, so every output element is written by one work-item in one order (no atomics:
 * deterministic). Keys (or queries) go by in blocks of AT_BLOCK, whose scores live in private
 * arrays; the accumulators are the output rows themselves (out, gq, gk, gv, in the inputs' dtype, as
 * the CPU's tiles accumulate in it), so nothing of size (Tq, Tk) is ever stored. Arithmetic in REAL
 * (double where the device has cl_khr_fp64), loads and stores by dtype tag (a_common.cl). The
 * dtypes are float32 and float64; the front-end widens the halves (backend.c's ocl_supports). */

#define AT_BLOCK 32

/* Philox4x32-10, defined in random.cl (which follows this file in the program): the draws of
 * ct_rand, so that dropout here drops the elements the composed form and the CPU drop. */
void philox(ulong seed, ulong ctr_lo, uint out[4]);

/* The shapes and settings, field for field as attention.c's at_geom (all 64-bit, so both sides lay
 * it out alike). ms: the additive mask's strides over (B, H, Tq, Tk), in elements (0: broadcast). */
typedef struct {
  long B, H, Tq, Tk, D, Dv;
  long causal, has_mask, dropout;
  long ms[4];
  ulong seed, offset;
} at_geom;

/* Dropout's factor for element e of the (B, H, Tq, Tk) scores (kernels.def): word e % 4 of Philox
 * block offset + e / 4, u = (word >> 8) 2^-24 (ct_rand's float32 uniform), kept (times inv) when
 * u < keep_below. *blk and w cache the last block, since a row's consecutive keys share it. */
REAL at_drop(const at_geom *g, ulong e, ulong *blk, uint w[4], REAL keep_below, REAL inv) {
  ulong b = e / 4;
  if (b != *blk) philox(g->seed, g->offset + b, w), *blk = b;
  return (REAL)(w[e % 4] >> 8) * (REAL)(1.0 / 16777216.0) < keep_below ? inv : (REAL)0;
}

/* Score of query row i against key row j of head (b, h), whose q and k rows start at qr and kr:
 * scale q_i . k_j plus the mask (causality is the callers' loop bounds). */
REAL at_score(const at_geom *g, __global const uchar *q, long qr, __global const uchar *k, long kr,
              __global const uchar *mask, long moff, int dt, long b, long h, long i, long j, REAL scale) {
  REAL acc = 0;
  for (long d = 0; d < g->D; d++) acc += ld(q, qr + d, dt) * ld(k, kr + d, dt);
  acc *= scale;
  if (g->has_mask) acc += ld(mask, moff + b * g->ms[0] + h * g->ms[1] + i * g->ms[2] + j * g->ms[3], dt);
  return acc;
}

/* The forward for query row i (work-item (b h) Tq + i): FlashAttention-2's online softmax (a
 * running maximum m and sum l, the accumulator rescaled by exp(m_old - m) when m grows) over blocks
 * of keys, out = acc / l and lse = m + log l at the end. A row with no key left keeps l = 0: out is
 * 0 / 0 = NaN and lse -inf, as softmax gives. Causal: torch's top-left tril, keys j <= i. */
__kernel void attention(__global uchar *out, long ooff, __global uchar *lse, long loff, __global const uchar *q, long qoff,
                        __global const uchar *k, long koff, __global const uchar *v, long voff, __global const uchar *mask,
                        long moff, int dt, at_geom g, REAL scale, REAL keep_below, REAL inv) {
  long row = get_global_id(0), bh = row / g.Tq, i = row % g.Tq, b = bh / g.H, h = bh % g.H, Dv = g.Dv;
  long qr = qoff + row * g.D, kb = koff + bh * g.Tk * g.D, vb = voff + bh * g.Tk * Dv, orow = ooff + row * Dv;
  long jend = g.causal ? min(i + 1, g.Tk) : g.Tk;
  ulong e0 = (ulong)row * (ulong)g.Tk, blk = ~(ulong)0;
  uint w[4];
  REAL s[AT_BLOCK], m = -INFINITY, l = 0;
  for (long d = 0; d < Dv; d++) st(out, orow + d, dt, 0);
  for (long j0 = 0; j0 < jend; j0 += AT_BLOCK) {
    int bc = (int)min((long)AT_BLOCK, jend - j0);
    REAL mx = m;
    for (int c = 0; c < bc; c++) {
      s[c] = at_score(&g, q, qr, k, kb + (j0 + c) * g.D, mask, moff, dt, b, h, i, j0 + c, scale);
      mx = s[c] > mx ? s[c] : mx;
    }
    if (mx == -INFINITY) continue; /* nothing seen in this row yet: no weight */
    REAL alpha = exp(m - mx), sum = 0;
    for (int c = 0; c < bc; c++) {
      s[c] = exp(s[c] - mx), sum += s[c];
      if (g.dropout) s[c] *= at_drop(&g, e0 + (ulong)(j0 + c), &blk, w, keep_below, inv);
    }
    l = l * alpha + sum, m = mx;
    for (long d = 0; d < Dv; d++) {
      REAL a = ld(out, orow + d, dt) * alpha;
      for (int c = 0; c < bc; c++) a += s[c] * ld(v, vb + (j0 + c) * Dv + d, dt);
      st(out, orow + d, dt, a);
    }
  }
  REAL rl = (REAL)1 / l; /* l = 0: 0 * inf = NaN */
  for (long d = 0; d < Dv; d++) st(out, orow + d, dt, ld(out, orow + d, dt) * rl);
  st(lse, loff + row, dt, m + log(l));
}

/* The backward's first pass, for query row i: D_i = gout_i . out_i (kept in dsum for the second
 * pass) and gq_i = scale sum_j dS_ij k_j over the row's keys, with P = exp(s - lse) recomputed
 * (0 where lse is -inf) and dS = P (drop (gout_i . v_j) - D_i): FlashAttention-2's algorithm 2, its
 * gq loop run per row instead of by atomics. */
__kernel void attention_backward_q(__global uchar *gq, long gqoff, __global uchar *dsum, long dsoff,
                                   __global const uchar *gout, long gooff, __global const uchar *q, long qoff,
                                   __global const uchar *k, long koff, __global const uchar *v, long voff,
                                   __global const uchar *out, long ooff, __global const uchar *lse, long loff,
                                   __global const uchar *mask, long moff, int dt, at_geom g, REAL scale, REAL keep_below,
                                   REAL inv) {
  long row = get_global_id(0), bh = row / g.Tq, i = row % g.Tq, b = bh / g.H, h = bh % g.H, D = g.D, Dv = g.Dv;
  long qr = qoff + row * D, kb = koff + bh * g.Tk * D, vb = voff + bh * g.Tk * Dv, gr = gooff + row * Dv;
  long gqr = gqoff + row * D, jend = g.causal ? min(i + 1, g.Tk) : g.Tk;
  ulong e0 = (ulong)row * (ulong)g.Tk, blk = ~(ulong)0;
  uint w[4];
  REAL di = 0, li = ld(lse, loff + row, dt), ds[AT_BLOCK];
  for (long d = 0; d < Dv; d++) di += ld(gout, gr + d, dt) * ld(out, ooff + row * Dv + d, dt);
  st(dsum, dsoff + row, dt, di);
  for (long d = 0; d < D; d++) st(gq, gqr + d, dt, 0);
  for (long j0 = 0; j0 < jend; j0 += AT_BLOCK) {
    int bc = (int)min((long)AT_BLOCK, jend - j0);
    for (int c = 0; c < bc; c++) {
      long j = j0 + c;
      REAL s = at_score(&g, q, qr, k, kb + j * D, mask, moff, dt, b, h, i, j, scale);
      REAL p = li == -INFINITY ? (REAL)0 : exp(s - li), dp = 0;
      for (long d = 0; d < Dv; d++) dp += ld(gout, gr + d, dt) * ld(v, vb + j * Dv + d, dt);
      if (g.dropout) dp *= at_drop(&g, e0 + (ulong)j, &blk, w, keep_below, inv);
      ds[c] = p * (dp - di);
    }
    for (long d = 0; d < D; d++) {
      REAL a = 0;
      for (int c = 0; c < bc; c++) a += ds[c] * ld(k, kb + (j0 + c) * D + d, dt);
      st(gq, gqr + d, dt, ld(gq, gqr + d, dt) + scale * a);
    }
  }
}

/* The backward's second pass, for key row j: gv_j = sum_i drop P_ij gout_i and gk_j = scale sum_i
 * dS_ij q_i over the queries that see the key (i >= j when causal), with P and dS recomputed as in
 * the first pass, whose D_i it reads from dsum (the queue is in order). */
__kernel void attention_backward_kv(__global uchar *gk, long gkoff, __global uchar *gv, long gvoff,
                                    __global const uchar *dsum, long dsoff, __global const uchar *gout, long gooff,
                                    __global const uchar *q, long qoff, __global const uchar *k, long koff,
                                    __global const uchar *v, long voff, __global const uchar *lse, long loff,
                                    __global const uchar *mask, long moff, int dt, at_geom g, REAL scale, REAL keep_below,
                                    REAL inv) {
  long row = get_global_id(0), bh = row / g.Tk, j = row % g.Tk, b = bh / g.H, h = bh % g.H, D = g.D, Dv = g.Dv;
  long kr = koff + row * D, vr = voff + row * Dv, qb = qoff + bh * g.Tq * D, gb = gooff + bh * g.Tq * Dv;
  long gkr = gkoff + row * D, gvr = gvoff + row * Dv, i0s = g.causal ? j : 0;
  ulong blk = ~(ulong)0;
  uint w[4];
  REAL z[AT_BLOCK], ds[AT_BLOCK];
  for (long d = 0; d < D; d++) st(gk, gkr + d, dt, 0);
  for (long d = 0; d < Dv; d++) st(gv, gvr + d, dt, 0);
  for (long i0 = i0s; i0 < g.Tq; i0 += AT_BLOCK) {
    int br = (int)min((long)AT_BLOCK, g.Tq - i0);
    for (int r = 0; r < br; r++) {
      long i = i0 + r;
      REAL s = at_score(&g, q, qb + i * D, k, kr, mask, moff, dt, b, h, i, j, scale);
      REAL li = ld(lse, loff + bh * g.Tq + i, dt), p = li == -INFINITY ? (REAL)0 : exp(s - li), dp = 0;
      REAL f = g.dropout ? at_drop(&g, ((ulong)(bh * g.Tq + i)) * (ulong)g.Tk + (ulong)j, &blk, w, keep_below, inv) : (REAL)1;
      for (long d = 0; d < Dv; d++) dp += ld(gout, gb + i * Dv + d, dt) * ld(v, vr + d, dt);
      z[r] = p * f;
      ds[r] = p * (f * dp - ld(dsum, dsoff + bh * g.Tq + i, dt));
    }
    for (long d = 0; d < Dv; d++) {
      REAL a = 0;
      for (int r = 0; r < br; r++) a += z[r] * ld(gout, gb + (i0 + r) * Dv + d, dt);
      st(gv, gvr + d, dt, ld(gv, gvr + d, dt) + a);
    }
    for (long d = 0; d < D; d++) {
      REAL a = 0;
      for (int r = 0; r < br; r++) a += ds[r] * ld(q, qb + (i0 + r) * D + d, dt);
      st(gk, gkr + d, dt, ld(gk, gkr + d, dt) + scale * a);
    }
  }
}
