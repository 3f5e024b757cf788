/* src/backend/cpu/conv_relu_pool.c: conv2d, relu and MaxPool2d(2) fused, float32, float16 and bfloat16.
 * Per image (per block of images, when the conv output is small: conv_blocks.h), the conv output y_n (O,
 * Hc Wc) goes to a per-thread buffer that stays in cache, and is pooled from there (relu(max) with
 * the window position of the winner, pool.c); the backward rebuilds dy_n from the pooled gradient
 * and the positions in the same kind of buffer and runs the conv's per-block backward on it
 * (conv.c). The blocks are conv2d's, so the sums are conv2d's, bit for bit (but for maps smaller
 * than the kernel, which conv2d runs as one dense GEMM, conv_dense.c, and this op does not: there
 * the two agree to rounding; the cnn's maps are 28 x 28 and 14 x 14). The conv output and its
 * gradient, (N, O, Hc, Wc) each, never reach memory: for the cnn's first layer that is 12.8 MB
 * written and read back twice per step of 128 images (docs/perf-history.md). The halves run the same
 * float32 steps on per-block widened copies and keep their window positions two a byte
 * (fused_forward_half below). */
#include <omp.h>
#include <string.h>
#include "backend/cpu/conv_blocks.h"
#include "backend/cpu/half.h"

/* The conv output's size (Hc, Wc): y holds only its pooled (Hc/2, Wc/2), which loses an odd row or
 * column, so it is computed from x, w and the options as the front-end does. */
static void conv_size(const ct_tensor *x, const ct_tensor *w, const ct_conv2d_opts *o, int64_t *Hc, int64_t *Wc) {
  *Hc = (x->shape[2] + 2 * o->padding[0] - o->dilation[0] * (w->shape[2] - 1) - 1) / o->stride[0] + 1;
  *Wc = (x->shape[3] + 2 * o->padding[1] - o->dilation[1] * (w->shape[3] - 1) - 1) / o->stride[1] + 1;
}

/* ---- float16 and bfloat16 (ct__supports(CT_K_conv2d_relu_pool2x2) in memory.c): x, w, b, y, gy and the
 * gradients all of one half dtype, computed in float32 per image (per block). A block's x is widened
 * into a per-thread buffer (B C H W floats, cache-resident like the conv output) and the weights
 * once into a shared one (O K floats), so the f32 per-block steps of conv.c run unchanged on them;
 * pooled outputs and input gradients are rounded once, per plane or block, on the way out. No full-size
 * float32 copy of an activation or gradient is made: that is the point of this path under autocast
 * (issue 11: the float32 casts were 6x the float32 step's peak). Pooling the float32 conv output
 * and rounding after gives the same values as rounding the conv output first and pooling (rounding
 * is monotone); only a tie made by rounding can pick another winner, and then the float32 one is
 * the exact maximum, as a float64 reference picks it. */

/* n elements of half dtype tag lp at src widened to float32 at dst, and back (rounded to nearest even) */
static void widen(float *dst, const uint16_t *src, int64_t n, int lp) {
  if (lp == CT_LP_BF16)
    for (int64_t i = 0; i < n; i++) dst[i] = ct__bf16_to_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = ct__f16_to_f32(src[i]);
}
static void narrow(uint16_t *dst, const float *src, int64_t n, int lp) {
  if (lp == CT_LP_BF16)
    for (int64_t i = 0; i < n; i++) dst[i] = ct__f32_to_bf16(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = ct__f32_to_f16(src[i]);
}

/* The window positions of a plane (0-3, or 4 for none: pool.c) take 3 bits: the halves' argmax
 * keeps two a byte, the first in the low nibble (backend.h), which halves what the fused op keeps
 * for its backward besides its 16-bit output. */
static void pack_positions(uint8_t *dst, const uint8_t *pos, int64_t P) {
  for (int64_t i = 0; i < P / 2; i++) dst[i] = (uint8_t)(pos[2 * i] | pos[2 * i + 1] << 4);
  if (P % 2) dst[P / 2] = pos[P - 1];
}
static void unpack_positions(uint8_t *pos, const uint8_t *src, int64_t P) {
  for (int64_t i = 0; i < P / 2; i++) pos[2 * i] = src[i] & 15, pos[2 * i + 1] = src[i] >> 4;
  if (P % 2) pos[P - 1] = src[P / 2] & 15;
}

/* w widened into wf. The callers point the per-image steps, set up by ct__conv_*_setup on the half
 * tensors, at float32: element size, GEMM dtype and these weights; conv.c's scratch slots were
 * sized for the half's 2 bytes there, so they regrow them for 4. */
static void widen_weights(float *wf, const ct_tensor *w, int lp) {
  widen(wf, (const uint16_t *)ct__ptr((ct_tensor *)w), ct_tensor_numel(w), lp);
}

static ct_status fused_forward_half(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                    const ct_conv2d_opts *o, int64_t Hc, int64_t Wc) {
  int lp = ct__lp_tag(x->dtype);
  int64_t Hp = y->shape[2], Wp = y->shape[3], O = w->shape[0], L = Hc * Wc, P = Hp * Wp;
  int64_t CHW = x->shape[1] * x->shape[2] * x->shape[3], wn = ct_tensor_numel(w), nt = omp_get_max_threads();
  ct_conv_fw c;
  ct_status s = ct__conv_forward_setup(&c, x, w, b, Hc, Wc, o);
  if (s != CT_OK) return s;
  c.dt = CT_F32, c.es = 4; /* the bias is read with its own dtype (c.bdt) */
  int64_t B = c.B, ld = c.ld;
  c.bufs = ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)(nt * c.Kall * ld) * sizeof(float));
  /* [wf: O K] then per thread [conv output: O B L | the block's x: B C H W | one pooled plane: P | its positions] */
  int64_t PB = (P + 1) / 2, per = O * ld + B * CHW + P + (P + 3) / 4; /* (P + 3) / 4 floats: a plane's P positions */
  float *bufs = (float *)ct__conv_scratch(CT_CONV_SCRATCH_FUSED, (size_t)(wn + nt * per) * sizeof(float));
  if (!c.bufs || !bufs) return CT_ENOMEM;
  widen_weights(bufs, w, lp);
  c.wp = (const char *)bufs;
  const uint16_t *xp = ct__ptr(x);
  uint16_t *yp = ct__ptr(y);
  uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < c.nblk; i++) {
    int tid = omp_get_thread_num();
    int64_t n0, nb;
    ct__conv_block(i, c.nblk, c.g.N, &n0, &nb);
    float *yc = bufs + wn + tid * per, *xf = yc + O * ld, *pf = xf + B * CHW;
    uint8_t *pos = (uint8_t *)(pf + P);
    widen(xf, xp + n0 * CHW, nb * CHW, lp);
    ct_conv_fw ci = c; /* the block alone, read from xf */
    ci.xp = (const char *)xf, ci.g.N = nb;
    ct__conv_forward_block(&ci, 0, nb, tid, (char *)yc);
    for (int64_t b = 0; b < nb; b++)
      for (int64_t oc = 0; oc < O; oc++) {
        int64_t n = n0 + b;
        ct__maxpool2x2_plane_f32(yc + oc * ld + b * L, Hc, Wc, pf, pos, Hp, Wp, 1);
        narrow(yp + (n * O + oc) * P, pf, P, lp);
        pack_positions(ap + (n * O + oc) * PB, pos, P);
      }
  }
  return CT_OK;
}

static ct_status fused_backward_half(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *argmax,
                                     ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o, int64_t Hc, int64_t Wc) {
  int lp = ct__lp_tag(x->dtype);
  int64_t Hp = gy->shape[2], Wp = gy->shape[3], O = w->shape[0], L = Hc * Wc, P = Hp * Wp;
  int64_t CHW = x->shape[1] * x->shape[2] * x->shape[3], wn = ct_tensor_numel(w);
  ct_conv_bw c;
  ct_status s = ct__conv_backward_setup(&c, gx, gw, gb, x, w, Hc, Wc, o);
  if (s != CT_OK) return s;
  int64_t nt = c.nt, B = c.B, ld = c.ld, rows = nt * c.Kall * ld;
  /* the setup sized its scratch for 2-byte elements: regrow for float32 (zeroed on the threads by
   * ct__conv_backward_zero, which reads c's es) */
  c.dt = CT_F32, c.es = 4;
  c.cols = gw ? ct__conv_scratch(CT_CONV_SCRATCH_COLS, (size_t)rows * sizeof(float)) : NULL;
  c.dcols = gx ? ct__conv_scratch(CT_CONV_SCRATCH_DCOLS, (size_t)rows * sizeof(float)) : NULL;
  c.acc = gw ? ct__conv_scratch(CT_CONV_SCRATCH_WGRAD, (size_t)(nt * c.wsz) * sizeof(float)) : NULL;
  /* [wf: O K] then per thread [conv output gradient: O B L | the block's x | its gx: B C H W each | a gy plane: P |
   * its positions] */
  int64_t PB = (P + 1) / 2, per = O * ld + 2 * B * CHW + P + (P + 3) / 4;
  float *bufs = (float *)ct__conv_scratch(CT_CONV_SCRATCH_FUSED_GRAD, (size_t)(wn + nt * per) * sizeof(float));
  if ((gw && (!c.cols || !c.acc)) || (gx && !c.dcols) || !bufs) return CT_ENOMEM;
  widen_weights(bufs, w, lp);
  c.wp = (const char *)bufs;
  const uint16_t *xp = ct__ptr(x), *gyp = ct__ptr(gy);
  uint16_t *gxp = gx ? ct__ptr(gx) : NULL;
  const uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel
  {
    ct__conv_backward_zero(&c);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < c.nblk; i++) {
      int tid = omp_get_thread_num();
      int64_t n0, nb;
      ct__conv_block(i, c.nblk, c.g.N, &n0, &nb);
      float *gc = bufs + wn + tid * per, *xf = gc + O * ld, *gxf = xf + B * CHW, *gf = gxf + B * CHW;
      uint8_t *pos = (uint8_t *)(gf + P);
      for (int64_t b = 0; b < nb; b++)
        for (int64_t oc = 0; oc < O; oc++) {
          int64_t n = n0 + b;
          widen(gf, gyp + (n * O + oc) * P, P, lp);
          unpack_positions(pos, ap + (n * O + oc) * PB, P);
          ct__maxpool2x2_plane_backward_f32(gc + oc * ld + b * L, Hc, Wc, gf, pos, Hp, Wp);
        }
      ct_conv_bw ci = c; /* the block alone: its x from xf, its gx into gxf */
      ci.g.N = nb;
      if (gw) widen(xf, xp + n0 * CHW, nb * CHW, lp), ci.xp = (const char *)xf;
      ci.gxp = gx ? (char *)gxf : NULL;
      ct__conv_backward_block(&ci, 0, nb, tid, (const char *)gc);
      if (gx) narrow(gxp + n0 * CHW, gxf, nb * CHW, lp);
    }
  }
  /* conv.c's finish would store float32 sums into gw: sum the per-thread accumulators here and
   * round once into the half gw; the bias gradient goes through ct__store in gb's dtype as there */
  for (int64_t oc = 0; gb && oc < O; oc++) {
    double sum = 0;
    for (int64_t t = 0; t < nt; t++) sum += c.bacc[t * O + oc];
    ct__store((char *)ct__ptr(gb) + oc * (int64_t)ct_dtype_size(gb->dtype), gb->dtype, sum);
  }
  if (gw) {
    uint16_t *gwp = ct__ptr(gw);
    const float *acc = (const float *)c.acc;
    int64_t wsz = c.wsz;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < wsz; k++) {
      double sum = 0;
      for (int64_t t = 0; t < nt; t++) sum += acc[t * wsz + k];
      ct__lp_store((char *)(gwp + k), lp, sum);
    }
  }
  return CT_OK;
}

ct_status ct__cpu_conv2d_relu_pool2x2(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const ct_conv2d_opts *o) {
  int64_t Hc, Wc;
  conv_size(x, w, o, &Hc, &Wc);
  if (ct__lp_tag(x->dtype)) return fused_forward_half(y, argmax, x, w, b, o, Hc, Wc);
  int64_t Hp = y->shape[2], Wp = y->shape[3], O = w->shape[0], L = Hc * Wc;
  ct_conv_fw c;
  ct_status s = ct__conv_forward_setup(&c, x, w, b, Hc, Wc, o);
  if (s != CT_OK) return s;
  int64_t ld = c.ld;
  char *bufs = ct__conv_scratch(CT_CONV_SCRATCH_FUSED, (size_t)(omp_get_max_threads() * O * ld) * sizeof(float));
  if (!bufs) return CT_ENOMEM;
  float *yp = ct__ptr(y);
  uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < c.nblk; i++) {
    int tid = omp_get_thread_num();
    int64_t n0, nb;
    ct__conv_block(i, c.nblk, c.g.N, &n0, &nb);
    float *yc = (float *)bufs + tid * O * ld;
    ct__conv_forward_block(&c, n0, nb, tid, (char *)yc);
    for (int64_t b = 0; b < nb; b++)
      for (int64_t oc = 0; oc < O; oc++) {
        int64_t p = ((n0 + b) * O + oc) * Hp * Wp;
        ct__maxpool2x2_plane_f32(yc + oc * ld + b * L, Hc, Wc, yp + p, ap + p, Hp, Wp, 1);
      }
  }
  return CT_OK;
}

ct_status ct__cpu_conv2d_relu_pool2x2_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy,
                                               ct_tensor *argmax, ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o) {
  int64_t Hc, Wc;
  conv_size(x, w, o, &Hc, &Wc);
  if (ct__lp_tag(x->dtype)) return fused_backward_half(gx, gw, gb, gy, argmax, x, w, o, Hc, Wc);
  int64_t Hp = gy->shape[2], Wp = gy->shape[3], O = w->shape[0], L = Hc * Wc;
  ct_conv_bw c;
  ct_status s = ct__conv_backward_setup(&c, gx, gw, gb, x, w, Hc, Wc, o);
  if (s != CT_OK) return s;
  int64_t ld = c.ld;
  char *bufs = ct__conv_scratch(CT_CONV_SCRATCH_FUSED_GRAD, (size_t)(c.nt * O * ld) * sizeof(float));
  if (!bufs) return CT_ENOMEM;
  const float *gyp = ct__ptr(gy);
  const uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel
  {
    ct__conv_backward_zero(&c);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < c.nblk; i++) {
      int tid = omp_get_thread_num();
      int64_t n0, nb;
      ct__conv_block(i, c.nblk, c.g.N, &n0, &nb);
      float *gc = (float *)bufs + tid * O * ld;
      for (int64_t b = 0; b < nb; b++)
        for (int64_t oc = 0; oc < O; oc++) {
          int64_t p = ((n0 + b) * O + oc) * Hp * Wp;
          ct__maxpool2x2_plane_backward_f32(gc + oc * ld + b * L, Hc, Wc, gyp + p, ap + p, Hp, Wp);
        }
      ct__conv_backward_block(&c, n0, nb, tid, (const char *)gc);
    }
  }
  ct__conv_backward_finish(&c, gw, gb);
  return CT_OK;
}
