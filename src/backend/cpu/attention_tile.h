/* src/backend/cpu/attention_tile.h: the CPU's fused attention for one real type, included by
 * attention.c once for float (REAL float, GEMM cblas_sgemm, EXP and EXP_ROW its exps, SUF f32) and
 * once for double.
 * The algorithms are FlashAttention-2's (Dao 2023, algorithms 1 and 2) over tiles of BR query rows
 * and BC key rows: the forward keeps a running maximum m and sum l per query row and rescales its
 * output accumulator when m grows (the online softmax of Milakov and Gimelshein 2018), the backward
 * recomputes each tile's probabilities from the saved log-sum-exp. Tile products go through
 * OpenBLAS; everything else is plain loops the compiler vectorizes. */

/* Scores of query rows [i0, i0 + br) against key rows [j0, j0 + bc) of head (b, h) into s (ld BC):
 * scale q k^T, plus the mask, -inf past the causal diagonal. */
static void CT_CONCAT(scores_, SUF)(const attn_geom *g, int64_t b, int64_t h, const REAL *q, const REAL *k, int64_t i0,
                                    int64_t br, int64_t j0, int64_t bc, REAL *s) {
  GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)br, (int)bc, (int)g->D, (REAL)g->scale, q + i0 * g->D, (int)g->D,
       k + j0 * g->D, (int)g->D, 0, s, BC);
  for (int64_t r = 0; r < br; r++) {
    REAL *sr = s + r * BC;
    if (g->mask) {
      const REAL *mr = (const REAL *)g->mask + b * g->ms[0] + h * g->ms[1] + (i0 + r) * g->ms[2] + j0 * g->ms[3];
      for (int64_t c = 0; c < bc; c++) sr[c] += mr[c * g->ms[3]];
    }
    if (g->causal)
      for (int64_t c = i0 + r + 1 - j0 < 0 ? 0 : i0 + r + 1 - j0; c < bc; c++) sr[c] = -(REAL)INFINITY;
  }
}

/* p (ld BC) times dropout's factor for each element: 0 or 1 / (1 - p) */
static void CT_CONCAT(dropout_, SUF)(const attn_geom *g, int64_t b, int64_t h, int64_t i0, int64_t br, int64_t j0, int64_t bc,
                                     REAL *p) {
  REAL inv = (REAL)(1.0 / (1.0 - g->p));
  for (int64_t r = 0; r < br; r++) {
    uint64_t e0 = (uint64_t)(((b * g->H + h) * g->Tq + i0 + r) * g->Tk + j0);
    for (int64_t c = 0; c < bc; c++) p[r * BC + c] *= attn_keep(g, e0 + (uint64_t)c) ? inv : 0;
  }
}

/* scratch: per thread, BR * BC + BR * Dv reals (attention.c's forward_scratch) */
static void CT_CONCAT(forward_, SUF)(const attn_geom *g, const REAL *Q, const REAL *K, const REAL *V, REAL *O, REAL *L,
                                     REAL *scratch) {
  int64_t nqb = (g->Tq + BR - 1) / BR, D = g->D, Dv = g->Dv;
#pragma omp parallel
  {
    REAL *s = scratch + (size_t)omp_get_thread_num() * (size_t)(BR * BC + BR * Dv), *acc = s + BR * BC;
    REAL m[BR], l[BR];
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g->B * g->H * nqb; t++) {
      int64_t bh = t / nqb, i0 = (t % nqb) * BR, br = g->Tq - i0 < BR ? g->Tq - i0 : BR, b = bh / g->H, h = bh % g->H;
      const REAL *q = Q + bh * g->Tq * D, *k = K + bh * g->Tk * D, *v = V + bh * g->Tk * Dv;
      for (int64_t r = 0; r < br; r++) m[r] = -(REAL)INFINITY, l[r] = 0;
      memset(acc, 0, sizeof(REAL) * (size_t)(br * Dv));
      int64_t jend = g->causal ? (i0 + br < g->Tk ? i0 + br : g->Tk) : g->Tk;
      for (int64_t j0 = 0; j0 < jend; j0 += BC) {
        int64_t bc = jend - j0 < BC ? jend - j0 : BC;
        CT_CONCAT(scores_, SUF)(g, b, h, q, k, i0, br, j0, bc, s);
        for (int64_t r = 0; r < br; r++) {
          REAL *sr = s + r * BC, mx = m[r];
#pragma omp simd reduction(max : mx)
          for (int64_t c = 0; c < bc; c++) mx = sr[c] > mx ? sr[c] : mx;
          if (mx == -(REAL)INFINITY) { /* nothing seen in this row yet: no weight */
            for (int64_t c = 0; c < bc; c++) sr[c] = 0;
            continue;
          }
          REAL alpha = EXP(m[r] - mx), sum = 0;
          EXP_ROW(sr, bc, mx);
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < bc; c++) sum += sr[c];
          l[r] = l[r] * alpha + sum, m[r] = mx;
          if (alpha != 1)
            for (int64_t d = 0; d < Dv; d++) acc[r * Dv + d] *= alpha;
        }
        if (g->p > 0) CT_CONCAT(dropout_, SUF)(g, b, h, i0, br, j0, bc, s);
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)br, (int)Dv, (int)bc, 1, s, BC, v + j0 * Dv, (int)Dv, 1, acc,
             (int)Dv);
      }
      for (int64_t r = 0; r < br; r++) {
        REAL *o = O + (bh * g->Tq + i0 + r) * Dv, inv = 1 / l[r]; /* l = 0: 0 * inf = NaN, as softmax of no key */
        for (int64_t d = 0; d < Dv; d++) o[d] = acc[r * Dv + d] * inv;
        L[bh * g->Tq + i0 + r] = m[r] + (REAL)log((double)l[r]);
      }
    }
  }
}

/* scratch: per thread, 3 BR * BC + Tq reals (attention.c's backward_scratch) */
static void CT_CONCAT(backward_, SUF)(const attn_geom *g, const REAL *Q, const REAL *K, const REAL *V, const REAL *O,
                                      const REAL *L, const REAL *GO, REAL *GQ, REAL *GK, REAL *GV, REAL *scratch) {
  int64_t D = g->D, Dv = g->Dv;
  memset(GQ, 0, sizeof(REAL) * (size_t)(g->B * g->H * g->Tq * D));
  memset(GK, 0, sizeof(REAL) * (size_t)(g->B * g->H * g->Tk * D));
  memset(GV, 0, sizeof(REAL) * (size_t)(g->B * g->H * g->Tk * Dv));
  /* one head per task: its gq, gk and gv are written by one thread, in one order (deterministic) */
#pragma omp parallel
  {
    REAL *p = scratch + (size_t)omp_get_thread_num() * (size_t)(3 * BR * BC + g->Tq), *z = p + BR * BC, *dp = z + BR * BC;
    REAL *drow = dp + BR * BC;
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < g->B * g->H; bh++) {
      int64_t b = bh / g->H, h = bh % g->H;
      const REAL *q = Q + bh * g->Tq * D, *k = K + bh * g->Tk * D, *v = V + bh * g->Tk * Dv;
      const REAL *o = O + bh * g->Tq * Dv, *go = GO + bh * g->Tq * Dv, *lse = L + bh * g->Tq;
      REAL *gq = GQ + bh * g->Tq * D, *gk = GK + bh * g->Tk * D, *gv = GV + bh * g->Tk * Dv;
      for (int64_t i = 0; i < g->Tq; i++) {
        REAL acc = 0;
        for (int64_t d = 0; d < Dv; d++) acc += go[i * Dv + d] * o[i * Dv + d];
        drow[i] = acc;
      }
      for (int64_t j0 = 0; j0 < g->Tk; j0 += BC) {
        int64_t bc = g->Tk - j0 < BC ? g->Tk - j0 : BC;
        for (int64_t i0 = g->causal ? j0 / BR * BR : 0; i0 < g->Tq; i0 += BR) {
          int64_t br = g->Tq - i0 < BR ? g->Tq - i0 : BR;
          CT_CONCAT(scores_, SUF)(g, b, h, q, k, i0, br, j0, bc, p);
          for (int64_t r = 0; r < br; r++) {
            REAL lr = lse[i0 + r], *pr = p + r * BC;
            if (lr == -(REAL)INFINITY) { /* a row with no key: no probability anywhere */
              memset(pr, 0, sizeof(REAL) * (size_t)bc);
              continue;
            }
            EXP_ROW(pr, bc, lr);
          }
          REAL *zz = p;
          if (g->p > 0) {
            for (int64_t r = 0; r < br; r++) memcpy(z + r * BC, p + r * BC, sizeof(REAL) * (size_t)bc);
            CT_CONCAT(dropout_, SUF)(g, b, h, i0, br, j0, bc, z);
            zz = z;
          }
          /* gv_j += z^T go_i; dz = go_i v_j^T */
          GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bc, (int)Dv, (int)br, 1, zz, BC, go + i0 * Dv, (int)Dv, 1,
               gv + j0 * Dv, (int)Dv);
          GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)br, (int)bc, (int)Dv, 1, go + i0 * Dv, (int)Dv, v + j0 * Dv,
               (int)Dv, 0, dp, BC);
          if (g->p > 0) CT_CONCAT(dropout_, SUF)(g, b, h, i0, br, j0, bc, dp);
          for (int64_t r = 0; r < br; r++) {
            REAL dr = drow[i0 + r];
#pragma omp simd
            for (int64_t c = 0; c < bc; c++) dp[r * BC + c] = p[r * BC + c] * (dp[r * BC + c] - dr);
          }
          /* gq_i += scale ds k_j; gk_j += scale ds^T q_i */
          GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)br, (int)D, (int)bc, (REAL)g->scale, dp, BC, k + j0 * D,
               (int)D, 1, gq + i0 * D, (int)D);
          GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bc, (int)D, (int)br, (REAL)g->scale, dp, BC, q + i0 * D,
               (int)D, 1, gk + j0 * D, (int)D);
        }
      }
    }
  }
}
