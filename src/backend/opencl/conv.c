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
 * from run to run. The geometry and im2col are shared with conv_relu_pool.c (opencl_backend.h), the
 * GEMM is matmul.c's ct__ocl_gemm and the chunk size backend/common.h's ct__be_chunk. */
#include <string.h>
#include "backend/opencl/opencl_backend.h"

/* The scratch a chunk may use (cols, dcols and the swapped output or gradient together). */
#define CONV_SCRATCH_BYTES ((int64_t)128 << 20)

ct__ocl_conv_geom ct__ocl_conv_geometry(const ct_tensor *x, const ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o) {
  ct__ocl_conv_geom g = {x->shape[1], x->shape[2], x->shape[3], w->shape[2], w->shape[3], Ho, Wo, o->stride[0], o->stride[1],
                         o->padding[0], o->padding[1], o->dilation[0], o->dilation[1], 0, 0};
  return g;
}

ct_status ct__ocl_im2col(int idx, const ct__ocl_buf *cols, const ct__ocl_buf *x, const ct__ocl_conv_geom *g, int64_t Kall) {
  ct__ocl_conv_geom gg = *g;
  ct__ocl_arg args[] = {CT_OCL_ARG(cols->mem), CT_OCL_ARG(cols->off), CT_OCL_ARG(cols->dt), CT_OCL_ARG(x->mem),
                        CT_OCL_ARG(x->off),    CT_OCL_ARG(x->dt),     CT_OCL_ARG(gg)};
  return ct__ocl_launch(idx, "conv_im2col", (size_t)(Kall * g->nb * g->Ho), 7, args);
}

ct_status ct__ocl_conv_grads_init(ct__ocl_conv_grads *b, ct__ocl_ctx *c, const char *op, ct_dtype dt, int64_t G, int64_t O,
                                  ct_tensor *gyT, ct_tensor *x, ct_tensor *cols, ct_tensor *gw, ct_tensor *w, ct_tensor *dcols,
                                  ct_tensor *gx) {
  memset(b, 0, sizeof *b);
  b->c = c, b->op = op, b->dt = dt, b->G = G, b->O = O, b->want_gw = gw != NULL, b->want_gx = gx != NULL;
  if (gw) {
    CT_TRY(ct__ocl_buf_of(x, &b->x));
    CT_TRY(ct__ocl_buf_of(cols, &b->cols));
    CT_TRY(ct__ocl_buf_of(gw, &b->gw));
  }
  if (gx) {
    CT_TRY(ct__ocl_buf_of(w, &b->w));
    CT_TRY(ct__ocl_buf_of(dcols, &b->dcols));
    CT_TRY(ct__ocl_buf_of(gx, &b->gx));
  }
  return ct__ocl_buf_of(gyT, &b->gyT);
}

ct_status ct__ocl_conv_backward_chunk(const ct__ocl_conv_grads *b, const ct__ocl_conv_geom *g) {
  int idx = b->c->index;
  int64_t Kall = g->C * g->kh * g->kw, K = Kall / b->G, Og = b->O / b->G, M = g->nb * g->Ho * g->Wo;
  const ct__ocl_buf *t = &b->gyT;
  ct_status s = CT_OK;
  if (b->want_gw) { /* gw_g += gyT_g @ cols_g^T: the first chunk overwrites, later ones add */
    s = ct__ocl_im2col(idx, &b->cols, &b->x, g, Kall);
    for (int64_t gi = 0; gi < b->G && s == CT_OK; gi++)
      s = ct__ocl_gemm(b->c, b->op, b->dt, 0, 1, Og, K, M, t->mem, (size_t)(t->off + gi * Og * M), (size_t)M, b->cols.mem,
                       (size_t)(b->cols.off + gi * K * M), (size_t)M, g->n0 == 0 ? 0.0 : 1.0, b->gw.mem,
                       (size_t)(b->gw.off + gi * Og * K), (size_t)K);
  }
  if (b->want_gx && s == CT_OK) { /* dcols_g = W_g^T @ gyT_g, then each gx element gathers its taps */
    for (int64_t gi = 0; gi < b->G && s == CT_OK; gi++)
      s = ct__ocl_gemm(b->c, b->op, b->dt, 1, 0, K, M, Og, b->w.mem, (size_t)(b->w.off + gi * Og * K), (size_t)K, t->mem,
                       (size_t)(t->off + gi * Og * M), (size_t)M, 0.0, b->dcols.mem, (size_t)(b->dcols.off + gi * K * M),
                       (size_t)M);
    ct__ocl_conv_geom gg = *g;
    ct__ocl_arg args[] = {CT_OCL_ARG(b->gx.mem),    CT_OCL_ARG(b->gx.off),    CT_OCL_ARG(b->gx.dt), CT_OCL_ARG(b->dcols.mem),
                          CT_OCL_ARG(b->dcols.off), CT_OCL_ARG(b->dcols.dt), CT_OCL_ARG(gg)};
    if (s == CT_OK) s = ct__ocl_launch(idx, "conv_col2im", g->W > 0 ? (size_t)(g->nb * g->C * g->H) : 0, 7, args);
  }
  return s;
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
  ct_device dev = y->device;
  ct_dtype dt = y->dtype;
  if (dt != CT_F32 && dt != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "opencl: conv2d computes in float32 or float64, got %s", ct_dtype_name(dt));
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups, Og = O / G;
  ct__ocl_conv_geom g = ct__ocl_conv_geometry(x, w, y->shape[2], y->shape[3], o);
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G;
  if (N * O * L == 0) return CT_OK;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__be_tmp xt = {0}, wt = {0}, bt = {0}, cols = {0}, yt = {0};
  int64_t nb = ct__be_chunk(N, (Kall + O) * L * (int64_t)ct_dtype_size(dt), CONV_SCRATCH_BYTES);
  ct_status s;
  if ((s = ct__be_tmp_contiguous(&xt, x)) != CT_OK || (s = ct__be_tmp_contiguous(&wt, w)) != CT_OK ||
      (b && (s = ct__be_tmp_contiguous(&bt, b)) != CT_OK) ||
      (s = ct__be_tmp_new(&cols, dev, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK ||
      (s = ct__be_tmp_new(&yt, dev, 2, (int64_t[]){O, nb * L}, dt)) != CT_OK)
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
    s = K == 0 ? ct__ocl_fill(&yt.t, 0) : ct__ocl_im2col(idx, &cb, &xb, &g, Kall);
    for (int64_t gi = 0; gi < G && K > 0 && s == CT_OK; gi++)
      s = ct__ocl_gemm(c, "conv2d", dt, 0, 0, Og, M, K, wb.mem, (size_t)(wb.off + gi * Og * K), (size_t)K, cb.mem,
                       (size_t)(cb.off + gi * K * M), (size_t)M, 0.0, ytb.mem, (size_t)(ytb.off + gi * Og * M), (size_t)M);
    if (s == CT_OK) s = swap01(idx, yb.mem, yb.off + n0 * O * L, ytb.mem, ytb.off, (cl_int)dt, O, g.nb, L, b ? &bb : NULL);
  }
done:
  ct__be_tmp_free(&xt), ct__be_tmp_free(&wt), ct__be_tmp_free(&bt), ct__be_tmp_free(&cols), ct__be_tmp_free(&yt);
  return s;
}

// gy: (N, O, Ho, Wo), x: (N, C, H, W), w: (O, C/G, kH, kW) -> gx (x's shape), gw (w's shape), gb: (O); each may be NULL
ct_status ct__ocl_conv2d_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                  const ct_conv2d_opts *o) {
  int idx = gy->device.index;
  ct_device dev = gy->device;
  ct_dtype dt = gy->dtype;
  if (dt != CT_F32 && dt != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "opencl: conv2d backward computes in float32 or float64, got %s", ct_dtype_name(dt));
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups;
  ct__ocl_conv_geom g = ct__ocl_conv_geometry(x, w, gy->shape[2], gy->shape[3], o);
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__be_tmp gyt = {0}, xt = {0}, wt = {0}, cols = {0}, dcols = {0}, gyT = {0};
  ct_status s;
  if ((s = ct__be_tmp_contiguous(&gyt, gy)) != CT_OK) return s;
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
  int64_t nb = ct__be_chunk(N, (O + Kall * ((gx != NULL) + (gw != NULL))) * L * (int64_t)ct_dtype_size(dt), CONV_SCRATCH_BYTES);
  if ((gw && (s = ct__be_tmp_contiguous(&xt, x)) != CT_OK) || (gx && (s = ct__be_tmp_contiguous(&wt, w)) != CT_OK) ||
      (gw && (s = ct__be_tmp_new(&cols, dev, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK) ||
      (gx && (s = ct__be_tmp_new(&dcols, dev, 2, (int64_t[]){Kall, nb * L}, dt)) != CT_OK) ||
      (s = ct__be_tmp_new(&gyT, dev, 2, (int64_t[]){O, nb * L}, dt)) != CT_OK)
    goto done;
  ct__ocl_conv_grads bufs;
  if ((s = ct__ocl_conv_grads_init(&bufs, c, "conv2d", dt, G, O, &gyT.t, &xt.t, &cols.t, gw, &wt.t, &dcols.t, gx)) != CT_OK)
    goto done;
  for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += nb) {
    g.n0 = n0, g.nb = n0 + nb <= N ? nb : N - n0;
    /* gyT (O, nb, L) from the chunk's gy (nb, O, L) */
    s = swap01(idx, bufs.gyT.mem, bufs.gyT.off, gyb.mem, gyb.off + n0 * O * L, (cl_int)dt, g.nb, O, L, NULL);
    if (s == CT_OK) s = ct__ocl_conv_backward_chunk(&bufs, &g);
  }
done:
  ct__be_tmp_free(&gyt), ct__be_tmp_free(&xt), ct__be_tmp_free(&wt);
  ct__be_tmp_free(&cols), ct__be_tmp_free(&dcols), ct__be_tmp_free(&gyT);
  return s;
}
