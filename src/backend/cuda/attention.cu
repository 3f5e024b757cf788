/* src/backend/cuda/attention.cu: the fused scaled dot-product attention (core/kernels.def's
 * attention and attention_backward), FlashAttention-2's algorithms 1 and 2 (Dao 2023,
 * "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning") in OpenCL's
 * simple form (src/backend/opencl/kernels/attention.cl): one thread per row. The forward runs over
 * the B H Tq query rows; the backward in two passes, gq (and D_i) per query row, then gk and gv per
 * key row, so every output element is written by one thread in one order (no float atomics:
 * deterministic). Keys (or queries) go by in blocks of AT_BLOCK whose scores live in the thread's
 * arrays; the accumulators are the output rows themselves (out, gq, gk, gv), so nothing of size
 * (Tq, Tk) is ever stored. float32 (arithmetic in float) and float64 only: cuda_supports
 * (backend.cu) answers no for the halves, which the front-end widens to float32 around the kernels.
 * Memory beyond the inputs and outputs: the backward's D_i, B H Tq elements. Dropout draws
 * common.cuh's Philox with kernels.def's counter mapping, so it drops the CPU's elements.
 * A tiled shared-memory form (a block of query rows per thread block) is a later optimization.
 * cuDNN's fused SDPA (its graph API's flash attention) is not used yet: these kernels run every case. */
#include <math.h>
#include <string.h>

#include "backend/cuda/common.cuh"

#define AT_BLOCK 32   /* keys (or queries) whose scores a thread holds at once */
#define AT_THREADS 64 /* threads (rows) a block: few rows per block spread a small problem over the SMs */

/* The shapes and settings. ms: the additive mask's strides over (B, H, Tq, Tk), in elements (0: a
 * broadcast dim); mask NULL when there is none. */
struct at_geom {
  int64_t B, H, Tq, Tk, D, Dv;
  int64_t ms[4];
  uint64_t seed, offset;
  int causal, dropout;
};

/* Dropout's factor for element e of the (B, H, Tq, Tk) scores (kernels.def): word e % 4 of Philox
 * block offset + e / 4, u = (word >> 8) 2^-24 (ct_rand's float32 uniform, exact in float), kept
 * (times inv) when u < keep_below. *blk and w cache the last block, since a row's consecutive keys
 * share it. */
template <typename C>
static __device__ __forceinline__ C at_drop(const at_geom &g, uint64_t e, uint64_t *blk, uint32_t w[4], C keep_below, C inv) {
  uint64_t b = e / 4;
  if (b != *blk) ct_philox4x32_10(g.seed, g.offset + b, 0, w), *blk = b;
  return (C)(w[e % 4] >> 8) * (C)(1.0 / 16777216.0) < keep_below ? inv : (C)0;
}

/* Score of query row qr against key row kr of head (b, h), query i, key j: scale q_i . k_j plus
 * the mask (causality is the callers' loop bounds). */
template <typename C>
static __device__ __forceinline__ C at_score(const at_geom &g, const C *qr, const C *kr, const C *mask, int64_t b, int64_t h,
                                             int64_t i, int64_t j, C scale) {
  C acc = 0;
  for (int64_t d = 0; d < g.D; d++) acc += qr[d] * kr[d];
  acc *= scale;
  if (mask) acc += mask[b * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j * g.ms[3]];
  return acc;
}

/* The keys query row i sees: all, or j <= i when causal (torch's top-left tril). */
static __device__ __forceinline__ int64_t at_jend(const at_geom &g, int64_t i) {
  return g.causal ? (i + 1 < g.Tk ? i + 1 : g.Tk) : g.Tk;
}

/* The forward, a thread per query row (grid-stride): FlashAttention-2's online softmax (a running
 * maximum m and sum l, the accumulator rescaled by exp(m_old - m) when m grows) over blocks of
 * keys, out = acc / l and lse = m + log l at the end. A row with no key left keeps l = 0: out is
 * 0 / 0 = NaN and lse -inf, as softmax gives. */
template <typename C>
__global__ void attention_kernel(C *__restrict__ out, C *__restrict__ lse, const C *__restrict__ q, const C *__restrict__ k,
                                 const C *__restrict__ v, const C *__restrict__ mask, at_geom g, C scale, C keep_below, C inv) {
  const int64_t rows = g.B * g.H * g.Tq, D = g.D, Dv = g.Dv;
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < rows; row += (int64_t)gridDim.x * blockDim.x) {
    int64_t bh = row / g.Tq, i = row % g.Tq, b = bh / g.H, h = bh % g.H, jend = at_jend(g, i);
    const C *qr = q + row * D, *kb = k + bh * g.Tk * D, *vb = v + bh * g.Tk * Dv;
    C *orow = out + row * Dv;
    uint64_t e0 = (uint64_t)row * (uint64_t)g.Tk, blk = ~(uint64_t)0;
    uint32_t w[4];
    C s[AT_BLOCK], m = -INFINITY, l = 0;
    for (int64_t d = 0; d < Dv; d++) orow[d] = 0;
    for (int64_t j0 = 0; j0 < jend; j0 += AT_BLOCK) {
      int bc = (int)(jend - j0 < AT_BLOCK ? jend - j0 : AT_BLOCK);
      C mx = m;
      for (int c = 0; c < bc; c++) {
        s[c] = at_score(g, qr, kb + (j0 + c) * D, mask, b, h, i, j0 + c, scale);
        mx = s[c] > mx ? s[c] : mx;
      }
      if (mx == -INFINITY) continue; /* nothing seen in this row yet: no weight */
      C alpha = exp(m - mx), sum = 0;
      for (int c = 0; c < bc; c++) {
        s[c] = exp(s[c] - mx), sum += s[c];
        if (g.dropout) s[c] *= at_drop(g, e0 + (uint64_t)(j0 + c), &blk, w, keep_below, inv);
      }
      l = l * alpha + sum, m = mx;
      for (int64_t d = 0; d < Dv; d++) {
        C a = orow[d] * alpha;
        for (int c = 0; c < bc; c++) a += s[c] * vb[(j0 + c) * Dv + d];
        orow[d] = a;
      }
    }
    C rl = (C)1 / l; /* l = 0: 0 * inf = NaN */
    for (int64_t d = 0; d < Dv; d++) orow[d] *= rl;
    lse[row] = m + log(l);
  }
}

/* The backward's first pass, a thread per query row: D_i = gout_i . out_i (kept in dsum for the
 * second pass) and gq_i = scale sum_j dS_ij k_j over the row's keys, with P = exp(s - lse)
 * recomputed (0 where lse is -inf) and dS = P (drop (gout_i . v_j) - D_i): FlashAttention-2's
 * algorithm 2, its gq loop run per row instead of by atomics. */
template <typename C>
__global__ void attention_backward_q_kernel(C *__restrict__ gq, C *__restrict__ dsum, const C *__restrict__ gout,
                                            const C *__restrict__ q, const C *__restrict__ k, const C *__restrict__ v,
                                            const C *__restrict__ out, const C *__restrict__ lse, const C *__restrict__ mask,
                                            at_geom g, C scale, C keep_below, C inv) {
  const int64_t rows = g.B * g.H * g.Tq, D = g.D, Dv = g.Dv;
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < rows; row += (int64_t)gridDim.x * blockDim.x) {
    int64_t bh = row / g.Tq, i = row % g.Tq, b = bh / g.H, h = bh % g.H, jend = at_jend(g, i);
    const C *qr = q + row * D, *kb = k + bh * g.Tk * D, *vb = v + bh * g.Tk * Dv, *gr = gout + row * Dv, *orow = out + row * Dv;
    C *gqr = gq + row * D;
    uint64_t e0 = (uint64_t)row * (uint64_t)g.Tk, blk = ~(uint64_t)0;
    uint32_t w[4];
    C di = 0, li = lse[row], ds[AT_BLOCK];
    for (int64_t d = 0; d < Dv; d++) di += gr[d] * orow[d];
    dsum[row] = di;
    for (int64_t d = 0; d < D; d++) gqr[d] = 0;
    for (int64_t j0 = 0; j0 < jend; j0 += AT_BLOCK) {
      int bc = (int)(jend - j0 < AT_BLOCK ? jend - j0 : AT_BLOCK);
      for (int c = 0; c < bc; c++) {
        int64_t j = j0 + c;
        C s = at_score(g, qr, kb + j * D, mask, b, h, i, j, scale);
        C p = li == -INFINITY ? (C)0 : exp(s - li), dp = 0;
        for (int64_t d = 0; d < Dv; d++) dp += gr[d] * vb[j * Dv + d];
        if (g.dropout) dp *= at_drop(g, e0 + (uint64_t)j, &blk, w, keep_below, inv);
        ds[c] = p * (dp - di);
      }
      for (int64_t d = 0; d < D; d++) {
        C a = 0;
        for (int c = 0; c < bc; c++) a += ds[c] * kb[(j0 + c) * D + d];
        gqr[d] += scale * a;
      }
    }
  }
}

/* The backward's second pass, a thread per key row j: gv_j = sum_i drop P_ij gout_i and gk_j =
 * scale sum_i dS_ij q_i over the queries that see the key (i >= j when causal), with P and dS
 * recomputed as in the first pass, whose D_i it reads from dsum (the stream is in order). */
template <typename C>
__global__ void attention_backward_kv_kernel(C *__restrict__ gk, C *__restrict__ gv, const C *__restrict__ dsum,
                                             const C *__restrict__ gout, const C *__restrict__ q, const C *__restrict__ k,
                                             const C *__restrict__ v, const C *__restrict__ lse, const C *__restrict__ mask,
                                             at_geom g, C scale, C keep_below, C inv) {
  const int64_t rows = g.B * g.H * g.Tk, D = g.D, Dv = g.Dv;
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < rows; row += (int64_t)gridDim.x * blockDim.x) {
    int64_t bh = row / g.Tk, j = row % g.Tk, b = bh / g.H, h = bh % g.H;
    const C *kr = k + row * D, *vr = v + row * Dv, *qb = q + bh * g.Tq * D, *gb = gout + bh * g.Tq * Dv;
    const C *lb = lse + bh * g.Tq, *db = dsum + bh * g.Tq;
    C *gkr = gk + row * D, *gvr = gv + row * Dv;
    uint64_t blk = ~(uint64_t)0;
    uint32_t w[4];
    C z[AT_BLOCK], ds[AT_BLOCK];
    for (int64_t d = 0; d < D; d++) gkr[d] = 0;
    for (int64_t d = 0; d < Dv; d++) gvr[d] = 0;
    for (int64_t i0 = g.causal ? j : 0; i0 < g.Tq; i0 += AT_BLOCK) {
      int br = (int)(g.Tq - i0 < AT_BLOCK ? g.Tq - i0 : AT_BLOCK);
      for (int r = 0; r < br; r++) {
        int64_t i = i0 + r;
        C s = at_score(g, qb + i * D, kr, mask, b, h, i, j, scale);
        C li = lb[i], p = li == -INFINITY ? (C)0 : exp(s - li), dp = 0;
        C f = g.dropout ? at_drop(g, (uint64_t)(bh * g.Tq + i) * (uint64_t)g.Tk + (uint64_t)j, &blk, w, keep_below, inv) : (C)1;
        for (int64_t d = 0; d < Dv; d++) dp += gb[i * Dv + d] * vr[d];
        z[r] = p * f;
        ds[r] = p * (f * dp - db[i]);
      }
      for (int64_t d = 0; d < Dv; d++) {
        C a = 0;
        for (int r = 0; r < br; r++) a += z[r] * gb[(i0 + r) * Dv + d];
        gvr[d] += a;
      }
      for (int64_t d = 0; d < D; d++) {
        C a = 0;
        for (int r = 0; r < br; r++) a += ds[r] * qb[(i0 + r) * D + d];
        gkr[d] += scale * a;
      }
    }
  }
}

/* ---- launchers */

/* Blocks for n rows at AT_THREADS a block, capped (the kernels' row loop takes the rest). */
static unsigned at_blocks(const ct__cuda_ctx *ctx, int64_t n) {
  int64_t b = (n + AT_THREADS - 1) / AT_THREADS;
  int64_t cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 80) * 64;
  if (b > cap) b = cap;
  return (unsigned)(b < 1 ? 1 : b);
}

/* What every launch shares: the geometry and the three scalars (scale, dropout's threshold and
 * factor). The threshold is the composed op's comparison (ct_rand's uniform < 1 - p in the inputs'
 * dtype: (float)(1 - p) for float32), so the draws and the decisions are the CPU's
 * (src/backend/cpu/attention.c's geom_of). CT_EUNSUPPORTED for a dtype the kernels do not take;
 * CT_EINVAL when the tensors are not contiguous and of q's dtype (the front-end's promise). */
struct at_common {
  at_geom g;
  double scale, keep_below, inv;
};

static ct_status common_of(at_common *c, ct_tensor *const *t, int nt, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                           const ct_attention_args *a) {
  if (q->dtype != CT_F32 && q->dtype != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "attention: CUDA's fused kernel takes float32 and float64, got %s",
                     ct_dtype_name(q->dtype));
  for (int i = 0; i < nt; i++)
    if (!ct_tensor_is_contiguous(t[i]) || t[i]->dtype != q->dtype)
      return ct__error(CT_EINVAL, "cuda: attention wants contiguous tensors of one dtype (%s), got one of %s%s",
                       ct_dtype_name(q->dtype), ct_dtype_name(t[i]->dtype),
                       ct_tensor_is_contiguous(t[i]) ? "" : ", not contiguous");
  if (mask && mask->dtype != q->dtype)
    return ct__error(CT_EINVAL, "cuda: attention wants an additive mask of %s, got %s", ct_dtype_name(q->dtype),
                     ct_dtype_name(mask->dtype));
  c->g = at_geom{q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], v->shape[3], {0, 0, 0, 0},
                 a->seed,     a->offset,   a->causal ? 1 : 0, a->dropout_p > 0 ? 1 : 0};
  if (mask)
    for (int d = 0; d < 4; d++) c->g.ms[d] = mask->stride[d];
  c->scale = a->scale;
  c->keep_below = q->dtype == CT_F64 ? 1.0 - a->dropout_p : (double)(float)(1.0 - a->dropout_p);
  c->inv = 1.0 / (1.0 - a->dropout_p);
  return CT_OK;
}

template <typename C>
static void launch_forward(const ct__cuda_ctx *ctx, const at_common *c, ct_tensor *out, ct_tensor *lse, ct_tensor *q,
                           ct_tensor *k, ct_tensor *v, ct_tensor *mask) {
  int64_t rows = c->g.B * c->g.H * c->g.Tq;
  attention_kernel<C><<<at_blocks(ctx, rows), AT_THREADS, 0, ctx->compute>>>(
      (C *)ct__ptr(out), (C *)ct__ptr(lse), (const C *)ct__ptr(q), (const C *)ct__ptr(k), (const C *)ct__ptr(v),
      mask ? (const C *)ct__ptr(mask) : NULL, c->g, (C)c->scale, (C)c->keep_below, (C)c->inv);
}

/* The forward: a thread per query row, B H Tq in all, writing out and lse. */
ct_status ct__cuda_attention(ct_tensor *out, ct_tensor *lse, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                             const ct_attention_args *a) {
  at_common c{};
  ct_tensor *all[] = {out, lse, q, k, v};
  CT_TRY(common_of(&c, all, 5, q, k, v, mask, a));
  if (c.g.B * c.g.H * c.g.Tq == 0) return CT_OK;
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(q);
  if (!ctx) return ct_last_status();
  if (q->dtype == CT_F32) launch_forward<float>(ctx, &c, out, lse, q, k, v, mask);
  else launch_forward<double>(ctx, &c, out, lse, q, k, v, mask);
  CT_CUDA_LAUNCHED("attention_kernel");
  return CT_OK;
}

/* The two passes, with D_i in ds between them (the compute stream orders them). */
template <typename C>
static ct_status launch_backward(const ct__cuda_ctx *ctx, const at_common *c, ct_tensor *gq, ct_tensor *gk, ct_tensor *gv,
                                 ct_tensor *ds, ct_tensor *gout, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *out,
                                 ct_tensor *lse, ct_tensor *mask) {
  const at_geom &g = c->g;
  const C *m = mask ? (const C *)ct__ptr(mask) : NULL;
  int64_t qrows = g.B * g.H * g.Tq, krows = g.B * g.H * g.Tk;
  if (qrows > 0) {
    attention_backward_q_kernel<C><<<at_blocks(ctx, qrows), AT_THREADS, 0, ctx->compute>>>(
        (C *)ct__ptr(gq), (C *)ct__ptr(ds), (const C *)ct__ptr(gout), (const C *)ct__ptr(q), (const C *)ct__ptr(k),
        (const C *)ct__ptr(v), (const C *)ct__ptr(out), (const C *)ct__ptr(lse), m, g, (C)c->scale, (C)c->keep_below,
        (C)c->inv);
    CT_CUDA_LAUNCHED("attention_backward_q_kernel");
  }
  if (krows > 0) {
    attention_backward_kv_kernel<C><<<at_blocks(ctx, krows), AT_THREADS, 0, ctx->compute>>>(
        (C *)ct__ptr(gk), (C *)ct__ptr(gv), (const C *)ct__ptr(ds), (const C *)ct__ptr(gout), (const C *)ct__ptr(q),
        (const C *)ct__ptr(k), (const C *)ct__ptr(v), (const C *)ct__ptr(lse), m, g, (C)c->scale, (C)c->keep_below,
        (C)c->inv);
    CT_CUDA_LAUNCHED("attention_backward_kv_kernel");
  }
  return CT_OK;
}

/* The backward: D_i into a temporary of B H Tq elements (the second pass needs every row's), then
 * the two passes; each gradient is written whole, zeros included, as kernels.def asks. */
ct_status ct__cuda_attention_backward(ct_tensor *gq, ct_tensor *gk, ct_tensor *gv, ct_tensor *gout, ct_tensor *q, ct_tensor *k,
                                      ct_tensor *v, ct_tensor *out, ct_tensor *lse, ct_tensor *mask,
                                      const ct_attention_args *a) {
  at_common c{};
  ct_tensor *all[] = {gq, gk, gv, gout, q, k, v, out, lse};
  CT_TRY(common_of(&c, all, 9, q, k, v, mask, a));
  int64_t qrows = c.g.B * c.g.H * c.g.Tq;
  if (qrows == 0 && c.g.B * c.g.H * c.g.Tk == 0) return CT_OK;
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(q);
  if (!ctx) return ct_last_status();
  ct__be_tmp ds;
  memset(&ds, 0, sizeof ds);
  int64_t n = qrows > 0 ? qrows : 1; /* a buffer even for no query rows */
  CT_TRY(ct__be_tmp_new(&ds, q->device, 1, &n, q->dtype));
  ct_status s = q->dtype == CT_F32 ? launch_backward<float>(ctx, &c, gq, gk, gv, &ds.t, gout, q, k, v, out, lse, mask)
                                   : launch_backward<double>(ctx, &c, gq, gk, gv, &ds.t, gout, q, k, v, out, lse, mask);
  ct__be_tmp_free(&ds); /* stream-ordered: whoever gets the block next runs after the passes */
  return s;
}
