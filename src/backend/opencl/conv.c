/* src/backend/opencl/conv.c: conv2d and its backward by im2col + CLBlast GEMM, in float32 and
 * float64, with stride, padding, dilation and groups as the CPU backend (src/backend/cpu/conv.c).
 *
 * x: (N, C, H, W), w: (O, C/G, kH, kW) -> y: (N, O, Ho, Wo), L = Ho Wo, K = C/G kH kW.
 * Images go in chunks of nb, as many as fit a scratch budget, and each chunk is lowered to
 * cols (C kH kW, M = nb L) (kernels/conv.cl), so that one GEMM per group covers the chunk rather
 * than one per image; PoCL pays a launch per GEMM. For group g:
 *   Yt_g (O/G, M) = W_g (O/G, K) @ cols_g (K, M), then y = swap(Yt) + b;
 *   gw_g (O/G, K) += gyT_g (O/G, M) @ cols_g^T (M, K), gyT = gy swapped to (O, nb, L);
 *   dcols_g (K, M) = W_g^T (K, O/G) @ gyT_g (O/G, M), then col2im gathers dcols into gx.
 * Everything runs on the compute queue in a fixed order with no atomics, so a result is the same
 * from run to run. */
#include <clblast_c.h>
#include "backend/opencl/opencl_backend.h"

/* The scratch a chunk may use (cols, dcols and the swapped output or gradient together). */
#define CONV_SCRATCH_BYTES ((int64_t)128 << 20)

/* kernels/conv.cl's conv_geom, field for field */
typedef struct {
  cl_long C, H, W, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw, n0, nb;
} conv_geom;

static conv_geom geometry(const ct_tensor *x, const ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  conv_geom g = {x->shape[1], x->shape[2], x->shape[3], w->shape[2], w->shape[3], Ho, Wo, o->stride[0], o->stride[1],
                 o->padding[0], o->padding[1], o->dilation[0], o->dilation[1], 0, 0};
  return g;
}

/* Images per chunk: the most whose scratch (rows rows of L columns per image) fits the budget, at least 1. */
static int64_t chunk_images(int64_t N, int64_t rows, int64_t L, size_t es) {
  int64_t per_image = rows * L * (int64_t)es, nb = per_image > 0 ? CONV_SCRATCH_BYTES / per_image : N;
  if (nb < 1) nb = 1;
  return nb < N ? nb : N;
}

/* C (M, N) = op(A) op(B) + beta C, row-major, on the compute queue of c (offsets in elements). */
static ct_status gemm(ct__ocl_ctx *c, ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, cl_mem a, size_t aoff,
                      size_t lda, cl_mem b, size_t boff, size_t ldb, double beta, cl_mem cm, size_t coff, size_t ldc) {
  CLBlastTranspose fa = ta ? CLBlastTransposeYes : CLBlastTransposeNo, fb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastStatusCode st;
  ct__ocl_blas_lock(c); /* CLBlast enqueues on the compute queue, between cuttle's launches */
  if (dt == CT_F32)
    st = CLBlastSgemm(CLBlastLayoutRowMajor, fa, fb, (size_t)M, (size_t)N, (size_t)K, 1.0f, a, aoff, lda, b, boff, ldb,
                      (float)beta, cm, coff, ldc, &c->compute, NULL);
  else
    st = CLBlastDgemm(CLBlastLayoutRowMajor, fa, fb, (size_t)M, (size_t)N, (size_t)K, 1.0, a, aoff, lda, b, boff, ldb, beta,
                      cm, coff, ldc, &c->compute, NULL);
  ct__ocl_blas_unlock(c);
  if (st == CLBlastSuccess) return CT_OK;
  if (ct__ocl_is_oom((cl_int)st)) /* CLBlast's codes above -1000 are OpenCL's */
    return ct__ocl_call_error(c->index, dt == CT_F32 ? "conv2d: CLBlastSgemm" : "conv2d: CLBlastDgemm", (cl_int)st);
  return ct__error(CT_EBACKEND, "opencl:%d: conv2d: CLBlast %cgemm (%lld x %lld x %lld) failed with status %d%s%s", c->index,
                   dt == CT_F32 ? 'S' : 'D', (long long)M, (long long)N, (long long)K, (int)st, st > -1000 ? ": " : "",
                   st > -1000 ? ct__ocl_errstr((cl_int)st) : "");
}

/* cols (C kH kW, nb L) of the chunk g.n0 .. g.n0 + g.nb - 1 of x. */
static ct_status im2col(int idx, const ct__ocl_buf *cols, const ct__ocl_buf *x, const conv_geom *g, int64_t Kall) {
  conv_geom gg = *g;
  ct__ocl_arg args[] = {CT_OCL_ARG(cols->mem), CT_OCL_ARG(cols->off), CT_OCL_ARG(cols->dt), CT_OCL_ARG(x->mem),
                        CT_OCL_ARG(x->off),    CT_OCL_ARG(x->dt),     CT_OCL_ARG(gg)};
  return ct__ocl_launch(idx, "conv_im2col", (size_t)(Kall * g->nb * g->Ho), 7, args);
}

/* out (B, A, L) = in (A, B, L) swapped, plus bias[a] when bias is given; offsets in elements. */
static ct_status swap01(int idx, cl_mem out, cl_long ooff, cl_mem in, cl_long ioff, cl_int dt, cl_long A, cl_long B, cl_long L,
                        const ct__ocl_buf *bias) {
  cl_int has_bias = bias != NULL, bdt = bias ? bias->dt : dt;
  cl_mem bmem = bias ? bias->mem : in;
  cl_long boff = bias ? bias->off : 0;
  ct__ocl_arg args[] = {CT_OCL_ARG(out), CT_OCL_ARG(ooff), CT_OCL_ARG(in),   CT_OCL_ARG(ioff), CT_OCL_ARG(dt),  CT_OCL_ARG(A),
                        CT_OCL_ARG(B),   CT_OCL_ARG(L),    CT_OCL_ARG(bmem), CT_OCL_ARG(boff), CT_OCL_ARG(bdt), CT_OCL_ARG(has_bias)};
  return ct__ocl_launch(idx, "conv_swap01", L > 0 ? (size_t)(A * B) : 0, 12, args);
}

// x: (N, C, H, W), w: (O, C/G, kH, kW), b: (O) or NULL -> y: (N, O, Ho, Wo)
ct_status ct__ocl_conv2d(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o) {
  int idx = y->device.index;
  ct_dtype dt = y->dtype;
  if (dt != CT_F32 && dt != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "opencl: conv2d computes in float32 or float64, got %s", ct_dtype_name(dt));
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups, Og = O / G;
  conv_geom g = geometry(x, w, y->shape[2], y->shape[3], o);
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G;
  if (N * O * L == 0) return CT_OK;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__ocl_tmp xt = {0}, wt = {0}, bt = {0}, cols = {0}, yt = {0};
  int64_t nb = chunk_images(N, Kall + O, L, ct_dtype_size(dt));
  ct_status s;
  if ((s = ct__ocl_tmp_contiguous(&xt, x)) != CT_OK || (s = ct__ocl_tmp_contiguous(&wt, w)) != CT_OK ||
      (b && (s = ct__ocl_tmp_contiguous(&bt, b)) != CT_OK) ||
      (s = ct__ocl_tmp_new(&cols, idx, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK ||
      (s = ct__ocl_tmp_new(&yt, idx, 2, (int64_t[]){O, nb * L}, dt)) != CT_OK)
    goto done;
  ct__ocl_buf xb, wb, bb, cb, ytb, yb;
  if ((s = ct__ocl_buf_of(&xt.t, &xb)) != CT_OK || (s = ct__ocl_buf_of(&wt.t, &wb)) != CT_OK ||
      (b && (s = ct__ocl_buf_of(&bt.t, &bb)) != CT_OK) || (s = ct__ocl_buf_of(&cols.t, &cb)) != CT_OK ||
      (s = ct__ocl_buf_of(&yt.t, &ytb)) != CT_OK || (s = ct__ocl_buf_of(y, &yb)) != CT_OK)
    goto done;
  for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += nb) {
    g.n0 = n0, g.nb = n0 + nb <= N ? nb : N - n0;
    int64_t M = g.nb * L;
    /* no input channels (K = 0): the products are empty sums, and CLBlast takes no empty GEMM */
    s = K == 0 ? ct__ocl_fill(&yt.t, 0) : im2col(idx, &cb, &xb, &g, Kall);
    for (int64_t gi = 0; gi < G && K > 0 && s == CT_OK; gi++)
      s = gemm(c, dt, 0, 0, Og, M, K, wb.mem, (size_t)(wb.off + gi * Og * K), (size_t)K, cb.mem, (size_t)(cb.off + gi * K * M),
               (size_t)M, 0.0, ytb.mem, (size_t)(ytb.off + gi * Og * M), (size_t)M);
    if (s == CT_OK) s = swap01(idx, yb.mem, yb.off + n0 * O * L, ytb.mem, ytb.off, (cl_int)dt, O, g.nb, L, b ? &bb : NULL);
  }
done:
  ct__ocl_tmp_free(&xt), ct__ocl_tmp_free(&wt), ct__ocl_tmp_free(&bt), ct__ocl_tmp_free(&cols), ct__ocl_tmp_free(&yt);
  return s;
}

// gy: (N, O, Ho, Wo), x: (N, C, H, W), w: (O, C/G, kH, kW) -> gx (x's shape), gw (w's shape), gb: (O); each may be NULL
ct_status ct__ocl_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                  const ct_conv2d_opts *o) {
  int idx = gy->device.index;
  ct_dtype dt = gy->dtype;
  if (dt != CT_F32 && dt != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "opencl: conv2d backward computes in float32 or float64, got %s", ct_dtype_name(dt));
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups, Og = O / G;
  conv_geom g = geometry(x, w, gy->shape[2], gy->shape[3], o);
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__ocl_tmp gyt = {0}, xt = {0}, wt = {0}, cols = {0}, dcols = {0}, gyT = {0};
  ct_status s;
  if ((s = ct__ocl_tmp_contiguous(&gyt, gy)) != CT_OK) return s;
  ct__ocl_buf gyb;
  if ((s = ct__ocl_buf_of(&gyt.t, &gyb)) != CT_OK) goto done;
  if (gb) { /* the bias gradient: gy's sums per channel */
    ct__ocl_buf gbb;
    if ((s = ct__ocl_buf_of(gb, &gbb)) != CT_OK) goto done;
    cl_long cN = N, cO = O, cL = L;
    ct__ocl_arg args[] = {CT_OCL_ARG(gbb.mem), CT_OCL_ARG(gbb.off), CT_OCL_ARG(gbb.dt), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off),
                          CT_OCL_ARG(gyb.dt),  CT_OCL_ARG(cN),      CT_OCL_ARG(cO),     CT_OCL_ARG(cL)};
    if ((s = ct__ocl_launch(idx, "conv_bias_grad", (size_t)O, 9, args)) != CT_OK) goto done;
  }
  if (!gx && !gw) goto done;
  if (N * L == 0 || K == 0) { /* nothing reaches the gradients: zeros */
    if (gx && (s = ct__ocl_fill(gx, 0)) != CT_OK) goto done;
    if (gw) s = ct__ocl_fill(gw, 0);
    goto done;
  }
  int64_t nb = chunk_images(N, O + Kall * ((gx != NULL) + (gw != NULL)), L, ct_dtype_size(dt));
  if ((gw && (s = ct__ocl_tmp_contiguous(&xt, x)) != CT_OK) || (gx && (s = ct__ocl_tmp_contiguous(&wt, w)) != CT_OK) ||
      (gw && (s = ct__ocl_tmp_new(&cols, idx, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK) ||
      (gx && (s = ct__ocl_tmp_new(&dcols, idx, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK) ||
      (s = ct__ocl_tmp_new(&gyT, idx, 2, (int64_t[]){O, nb * L}, dt)) != CT_OK)
    goto done;
  ct__ocl_buf xb = {0}, wb = {0}, cb = {0}, db = {0}, tb, gxb = {0}, gwb = {0};
  if ((gw && ((s = ct__ocl_buf_of(&xt.t, &xb)) != CT_OK || (s = ct__ocl_buf_of(&cols.t, &cb)) != CT_OK ||
              (s = ct__ocl_buf_of(gw, &gwb)) != CT_OK)) ||
      (gx && ((s = ct__ocl_buf_of(&wt.t, &wb)) != CT_OK || (s = ct__ocl_buf_of(&dcols.t, &db)) != CT_OK ||
              (s = ct__ocl_buf_of(gx, &gxb)) != CT_OK)) ||
      (s = ct__ocl_buf_of(&gyT.t, &tb)) != CT_OK)
    goto done;
  for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += nb) {
    g.n0 = n0, g.nb = n0 + nb <= N ? nb : N - n0;
    int64_t M = g.nb * L;
    /* gyT (O, nb, L) from the chunk's gy (nb, O, L) */
    s = swap01(idx, tb.mem, tb.off, gyb.mem, gyb.off + n0 * O * L, (cl_int)dt, g.nb, O, L, NULL);
    if (gw && s == CT_OK) { /* gw_g += gyT_g @ cols_g^T: the first chunk overwrites, later ones add */
      s = im2col(idx, &cb, &xb, &g, Kall);
      for (int64_t gi = 0; gi < G && s == CT_OK; gi++)
        s = gemm(c, dt, 0, 1, Og, K, M, tb.mem, (size_t)(tb.off + gi * Og * M), (size_t)M, cb.mem, (size_t)(cb.off + gi * K * M),
                 (size_t)M, n0 == 0 ? 0.0 : 1.0, gwb.mem, (size_t)(gwb.off + gi * Og * K), (size_t)K);
    }
    if (gx && s == CT_OK) { /* dcols_g = W_g^T @ gyT_g, then each gx element gathers its taps */
      for (int64_t gi = 0; gi < G && s == CT_OK; gi++)
        s = gemm(c, dt, 1, 0, K, M, Og, wb.mem, (size_t)(wb.off + gi * Og * K), (size_t)K, tb.mem, (size_t)(tb.off + gi * Og * M),
                 (size_t)M, 0.0, db.mem, (size_t)(db.off + gi * K * M), (size_t)M);
      conv_geom gg = g;
      ct__ocl_arg args[] = {CT_OCL_ARG(gxb.mem), CT_OCL_ARG(gxb.off), CT_OCL_ARG(gxb.dt), CT_OCL_ARG(db.mem),
                            CT_OCL_ARG(db.off),  CT_OCL_ARG(db.dt),   CT_OCL_ARG(gg)};
      if (s == CT_OK) s = ct__ocl_launch(idx, "conv_col2im", g.W > 0 ? (size_t)(g.nb * g.C * g.H) : 0, 7, args);
    }
  }
done:
  ct__ocl_tmp_free(&gyt), ct__ocl_tmp_free(&xt), ct__ocl_tmp_free(&wt);
  ct__ocl_tmp_free(&cols), ct__ocl_tmp_free(&dcols), ct__ocl_tmp_free(&gyT);
  return s;
}
