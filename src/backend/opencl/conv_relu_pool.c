/* src/backend/opencl/conv_relu_pool.c: conv2d, relu and MaxPool2d(2) fused (the vtable's
 * conv2d_relu_pool2x2), in float32, float16 and bfloat16, computing in float32.
 *
 * As conv.c's conv2d, images go in chunks lowered to float32 cols (C kH kW, nb L) and one CLBlast
 * SGEMM per group gives the chunk's conv output (O, nb L); here that output is scratch that
 * kernels/conv_relu_pool.cl pools straight into y (adding the bias, in y's dtype) with the argmax,
 * so the conv output (N, O, Hc, Wc), its relu and their gradients never exist as tensors: the
 * unfused ops kept four such tensors, in float32 even under autocast (issue 11). The backward
 * rebuilds a chunk's conv output gradient from gy and the argmax, then runs conv.c's two GEMMs and
 * a col2im into gx. A half x or w is read by the kernels as it is (w widened once, it is small);
 * gw goes through a float32 copy of its size.
 *
 * The chunks are smaller than conv2d's (FUSED_SCRATCH_BYTES): the scratch is allocated bytes too,
 * and here it is the op's whole footprint besides its output and argmax. */
#include "backend/opencl/opencl_backend.h"

/* The scratch a chunk may use: 16 images of the cnn's second layer (backward: 0.5 MB an image).
 * On PoCL a cnn step at batch 128 took the same time with 8 and 32 MB (532 and 553 ms), while
 * its peak allocated bytes fell from 80 to 43 MB in float32 and from 59 to 20 MB under autocast. */
#define FUSED_SCRATCH_BYTES ((int64_t)8 << 20)

/* conv.c's geometry with the conv output's size (Hc, Wc), as the front-end computes it: y holds
 * only its pooled half. */
static ct__ocl_conv_geom geometry(const ct_tensor *x, const ct_tensor *w, const ct_conv2d_opts *o) {
  int64_t Hc = (x->shape[2] + 2 * o->padding[0] - o->dilation[0] * (w->shape[2] - 1) - 1) / o->stride[0] + 1;
  int64_t Wc = (x->shape[3] + 2 * o->padding[1] - o->dilation[1] * (w->shape[3] - 1) - 1) / o->stride[1] + 1;
  return ct__ocl_conv_geometry(x, w, Hc, Wc, o);
}

ct_status ct__ocl_conv2d_relu_pool2x2(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const ct_conv2d_opts *o) {
  int idx = y->device.index;
  ct_device dev = y->device;
  ct__ocl_conv_geom g = geometry(x, w, o);
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups, Og = O / G, Hp = y->shape[2], Wp = y->shape[3];
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G, P = Hp * Wp;
  if (N * O * P == 0) return CT_OK;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__be_tmp xt = {0}, wt = {0}, bt = {0}, cols = {0}, yt = {0};
  int64_t nb = ct__be_chunk(N, (Kall + O) * L * (int64_t)sizeof(float), FUSED_SCRATCH_BYTES);
  ct_status s;
  if ((s = ct__be_tmp_contiguous(&xt, x)) != CT_OK || (s = ct__be_tmp_cast(&wt, w, CT_F32)) != CT_OK ||
      (b && (s = ct__be_tmp_contiguous(&bt, b)) != CT_OK) ||
      (s = ct__be_tmp_new(&cols, dev, 2, (int64_t[]){Kall, nb * L}, CT_F32)) != CT_OK ||
      (s = ct__be_tmp_new(&yt, dev, 2, (int64_t[]){O, nb * L}, CT_F32)) != CT_OK)
    goto done;
  ct__ocl_buf xb, wb, bb, cb, tb, yb, ab;
  if ((s = ct__ocl_buf_of(&xt.t, &xb)) != CT_OK || (s = ct__ocl_buf_of(&wt.t, &wb)) != CT_OK ||
      (b && (s = ct__ocl_buf_of(&bt.t, &bb)) != CT_OK) || (s = ct__ocl_buf_of(&cols.t, &cb)) != CT_OK ||
      (s = ct__ocl_buf_of(&yt.t, &tb)) != CT_OK || (s = ct__ocl_buf_of(y, &yb)) != CT_OK ||
      (s = ct__ocl_buf_of(argmax, &ab)) != CT_OK)
    goto done;
  if (!b) bb = tb; /* a valid buffer argument; has_bias tells the kernel not to read it */
  cl_int packed = argmax->dtype == CT_U8, has_bias = b != NULL;
  cl_long cO = O, cHp = Hp, cWp = Wp;
  for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += nb) {
    g.n0 = n0, g.nb = n0 + nb <= N ? nb : N - n0;
    int64_t M = g.nb * L;
    /* no input channels (K = 0): the products are empty sums, and CLBlast takes no empty GEMM */
    s = K == 0 ? ct__ocl_fill(&yt.t, 0) : ct__ocl_im2col(idx, &cb, &xb, &g, Kall);
    for (int64_t gi = 0; gi < G && K > 0 && s == CT_OK; gi++)
      s = ct__ocl_gemm(c, "conv2d_relu_max_pool2d", CT_F32, 0, 0, Og, M, K, wb.mem, (size_t)(wb.off + gi * Og * K), (size_t)K,
                       cb.mem, (size_t)(cb.off + gi * K * M), (size_t)M, 0.0, tb.mem, (size_t)(tb.off + gi * Og * M), (size_t)M);
    ct__ocl_conv_geom gg = g;
    ct__ocl_arg args[] = {CT_OCL_ARG(yb.mem), CT_OCL_ARG(yb.off), CT_OCL_ARG(yb.dt),  CT_OCL_ARG(ab.mem),   CT_OCL_ARG(ab.off),
                          CT_OCL_ARG(packed), CT_OCL_ARG(tb.mem), CT_OCL_ARG(tb.off), CT_OCL_ARG(bb.mem),   CT_OCL_ARG(bb.off),
                          CT_OCL_ARG(bb.dt),  CT_OCL_ARG(has_bias), CT_OCL_ARG(cO),   CT_OCL_ARG(cHp),      CT_OCL_ARG(cWp),
                          CT_OCL_ARG(gg)};
    if (s == CT_OK) s = ct__ocl_launch(idx, "crp_pool", (size_t)(g.nb * O * ((P + 1) / 2)), 16, args);
  }
done:
  ct__be_tmp_free(&xt), ct__be_tmp_free(&wt), ct__be_tmp_free(&bt), ct__be_tmp_free(&cols), ct__be_tmp_free(&yt);
  return s;
}

ct_status ct__ocl_conv2d_relu_pool2x2_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *argmax,
                                               ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o) {
  int idx = gy->device.index;
  ct_device dev = gy->device;
  ct__ocl_conv_geom g = geometry(x, w, o);
  int64_t N = x->shape[0], O = w->shape[0], G = o->groups, Hp = gy->shape[2], Wp = gy->shape[3];
  int64_t L = g.Ho * g.Wo, Kall = g.C * g.kh * g.kw, K = Kall / G, P = Hp * Wp;
  ct__ocl_ctx *c = ct__ocl_ctx_get(idx);
  if (!c) return ct_last_status();
  ct__be_tmp gyt = {0}, amt = {0}, xt = {0}, wt = {0}, cols = {0}, dcols = {0}, gyT = {0}, gwt = {0};
  ct_status s;
  ct__ocl_buf gyb, ab;
  if ((s = ct__be_tmp_contiguous(&gyt, gy)) != CT_OK || (s = ct__be_tmp_contiguous(&amt, argmax)) != CT_OK ||
      (s = ct__ocl_buf_of(&gyt.t, &gyb)) != CT_OK || (s = ct__ocl_buf_of(&amt.t, &ab)) != CT_OK)
    goto done;
  cl_int packed = argmax->dtype == CT_U8;
  cl_long cN = N, cO = O, cP = P, cHp = Hp, cWp = Wp, cWc = g.Wo;
  if (gb) { /* what the conv output's gradient sums to per channel */
    ct__ocl_buf gbb;
    if ((s = ct__ocl_buf_of(gb, &gbb)) != CT_OK) goto done;
    ct__ocl_arg args[] = {CT_OCL_ARG(gbb.mem), CT_OCL_ARG(gbb.off), CT_OCL_ARG(gbb.dt), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off),
                          CT_OCL_ARG(gyb.dt),  CT_OCL_ARG(ab.mem),  CT_OCL_ARG(ab.off), CT_OCL_ARG(packed),  CT_OCL_ARG(cN),
                          CT_OCL_ARG(cO),      CT_OCL_ARG(cP),      CT_OCL_ARG(cWc)};
    if ((s = ct__ocl_launch(idx, "crp_bias_grad", (size_t)O, 13, args)) != CT_OK) goto done;
  }
  if (!gx && !gw) goto done;
  if (N * L == 0 || K == 0) { /* nothing reaches the gradients: zeros */
    if (gx && (s = ct__ocl_fill(gx, 0)) != CT_OK) goto done;
    if (gw) s = ct__ocl_fill(gw, 0);
    goto done;
  }
  int64_t nb = ct__be_chunk(N, (O + Kall * ((gx != NULL) + (gw != NULL))) * L * (int64_t)sizeof(float), FUSED_SCRATCH_BYTES);
  if ((gw && (s = ct__be_tmp_contiguous(&xt, x)) != CT_OK) || (gx && (s = ct__be_tmp_cast(&wt, w, CT_F32)) != CT_OK) ||
      (gw && (s = ct__be_tmp_new(&cols, dev, 2, (int64_t[]){Kall, nb * L}, CT_F32)) != CT_OK) ||
      (gx && (s = ct__be_tmp_new(&dcols, dev, 2, (int64_t[]){Kall, nb * L}, CT_F32)) != CT_OK) ||
      (gw && (s = ct__be_tmp_new(&gwt, dev, gw->ndim, gw->shape, CT_F32)) != CT_OK) || /* (O, K) */
      (s = ct__be_tmp_new(&gyT, dev, 2, (int64_t[]){O, nb * L}, CT_F32)) != CT_OK)
    goto done;
  ct__ocl_conv_grads bufs;
  if ((s = ct__ocl_conv_grads_init(&bufs, c, "conv2d_relu_max_pool2d", CT_F32, G, O, &gyT.t, &xt.t, &cols.t, gw ? &gwt.t : NULL,
                                   &wt.t, &dcols.t, gx)) != CT_OK)
    goto done;
  for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += nb) {
    g.n0 = n0, g.nb = n0 + nb <= N ? nb : N - n0;
    ct__ocl_conv_geom gg = g;
    ct__ocl_arg uargs[] = {CT_OCL_ARG(bufs.gyT.mem), CT_OCL_ARG(bufs.gyT.off), CT_OCL_ARG(gyb.mem), CT_OCL_ARG(gyb.off),
                           CT_OCL_ARG(gyb.dt),       CT_OCL_ARG(ab.mem),       CT_OCL_ARG(ab.off),  CT_OCL_ARG(packed),
                           CT_OCL_ARG(cO),           CT_OCL_ARG(cHp),          CT_OCL_ARG(cWp),     CT_OCL_ARG(gg)};
    s = ct__ocl_launch(idx, "crp_unpool", (size_t)(O * g.nb * g.Ho), 12, uargs);
    if (s == CT_OK) s = ct__ocl_conv_backward_chunk(&bufs, &g);
  }
  if (gw && s == CT_OK) s = ct__ocl_copy(gw, &gwt.t); /* into gw's dtype */
done:
  ct__be_tmp_free(&gyt), ct__be_tmp_free(&amt), ct__be_tmp_free(&xt), ct__be_tmp_free(&wt);
  ct__be_tmp_free(&cols), ct__be_tmp_free(&dcols), ct__be_tmp_free(&gyT), ct__be_tmp_free(&gwt);
  return s;
}
