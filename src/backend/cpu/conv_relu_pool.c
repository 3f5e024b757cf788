/* src/backend/cpu/conv_relu_pool.c: conv2d, relu and MaxPool2d(2) fused, float32.
 * Per image, the conv output y_n (O, Hc Wc) goes to a per-thread buffer that stays in cache, and
 * is pooled from there (relu(max) with the window position of the winner, pool.c); the backward
 * rebuilds dy_n from the pooled gradient and the positions in the same kind of buffer and runs the
 * conv's per-image backward on it (conv.c). The conv output and its gradient, (N, O, Hc, Wc) each,
 * never reach memory: for the cnn's first layer that is 12.8 MB written and read back twice per
 * step of 128 images (docs/perf.md). */
#include <omp.h>
#include "backend/cpu/conv.h"

/* The conv output's size (Hc, Wc): y holds only its pooled (Hc/2, Wc/2), which loses an odd row or
 * column, so it is computed from x, w and the options as the front-end does. */
static void conv_size(const ct_tensor *x, const ct_tensor *w, const ct_conv2d_opts *o, int64_t *Hc, int64_t *Wc) {
  *Hc = (x->shape[2] + 2 * o->padding[0] - o->dilation[0] * (w->shape[2] - 1) - 1) / o->stride[0] + 1;
  *Wc = (x->shape[3] + 2 * o->padding[1] - o->dilation[1] * (w->shape[3] - 1) - 1) / o->stride[1] + 1;
}

ct_status ct__cpu_conv2d_relu_pool2x2(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const ct_conv2d_opts *o) {
  int64_t Hc, Wc;
  conv_size(x, w, o, &Hc, &Wc);
  int64_t Hp = y->shape[2], Wp = y->shape[3], O = w->shape[0], L = Hc * Wc;
  ct_conv_fw c;
  ct_status s = ct__conv_forward_setup(&c, x, w, b, Hc, Wc, o);
  if (s != CT_OK) return s;
  char *bufs = ct__conv_scratch(CT_CONV_SCRATCH_FUSED, (size_t)(omp_get_max_threads() * O * L) * sizeof(float));
  if (!bufs) return CT_ENOMEM;
  float *yp = ct__ptr(y);
  uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < c.g.N; n++) {
    int tid = omp_get_thread_num();
    float *yc = (float *)bufs + tid * O * L;
    ct__conv_forward_image(&c, n, tid, (char *)yc);
    for (int64_t oc = 0; oc < O; oc++)
      ct__maxpool2x2_plane_f32(yc + oc * L, Hc, Wc, yp + (n * O + oc) * Hp * Wp, ap + (n * O + oc) * Hp * Wp, Hp, Wp, 1);
  }
  return CT_OK;
}

ct_status ct__cpu_conv2d_relu_pool2x2_backward(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy,
                                               ct_tensor *argmax, ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o) {
  int64_t Hc, Wc;
  conv_size(x, w, o, &Hc, &Wc);
  int64_t Hp = gy->shape[2], Wp = gy->shape[3], O = w->shape[0], L = Hc * Wc;
  ct_conv_bw c;
  ct_status s = ct__conv_backward_setup(&c, gx, gw, gb, x, w, Hc, Wc, o);
  if (s != CT_OK) return s;
  char *bufs = ct__conv_scratch(CT_CONV_SCRATCH_FUSED_GRAD, (size_t)(c.nt * O * L) * sizeof(float));
  if (!bufs) return CT_ENOMEM;
  const float *gyp = ct__ptr(gy);
  const uint8_t *ap = ct__ptr(argmax);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < c.g.N; n++) {
    int tid = omp_get_thread_num();
    float *gc = (float *)bufs + tid * O * L;
    for (int64_t oc = 0; oc < O; oc++)
      ct__maxpool2x2_plane_backward_f32(gc + oc * L, Hc, Wc, gyp + (n * O + oc) * Hp * Wp, ap + (n * O + oc) * Hp * Wp, Hp, Wp);
    ct__conv_backward_image(&c, n, tid, (const char *)gc);
  }
  ct__conv_backward_finish(&c, gw, gb);
  return CT_OK;
}
