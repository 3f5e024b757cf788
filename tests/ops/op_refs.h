/* tests/ops/op_refs.h: plain-C float64 reference implementations of the ops, over host arrays
 * (row-major, contiguous), written with naive loops and independently of cuttle's code. The table
 * in op_cases.h pairs each with the cuttle op it checks. */
#ifndef CUTTLE_TESTS_OP_REFS_H
#define CUTTLE_TESTS_OP_REFS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OC_MAX_DIMS 8

/* A host array: shape and numel doubles. */
typedef struct {
  int ndim;
  int64_t shape[OC_MAX_DIMS];
  int64_t numel;
  double *v;
} oc_arr;

static void oc_alloc(oc_arr *a, int ndim, const int64_t *shape) {
  a->ndim = ndim;
  a->numel = 1;
  for (int i = 0; i < ndim; i++) a->shape[i] = shape[i], a->numel *= shape[i];
  a->v = calloc((size_t)(a->numel ? a->numel : 1), sizeof(double));
}

/* Row-major multi-index of flat index f in shape. */
static void oc_unravel(int ndim, const int64_t *shape, int64_t f, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) idx[d] = f % shape[d], f /= shape[d];
}

static int64_t oc_ravel(int ndim, const int64_t *shape, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < ndim; d++) f = f * shape[d] + idx[d];
  return f;
}

/* The element of a that broadcasts to multi-index idx of an nd-dim result. */
static double oc_bget(const oc_arr *a, int nd, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < a->ndim; d++) {
    int64_t i = idx[nd - a->ndim + d];
    f = f * a->shape[d] + (a->shape[d] == 1 ? 0 : i);
  }
  return a->v[f];
}

static void oc_bshape(int n, const oc_arr *const *as, int *nd, int64_t *shape) {
  *nd = 0;
  for (int k = 0; k < n; k++)
    if (as[k]->ndim > *nd) *nd = as[k]->ndim;
  for (int d = 0; d < *nd; d++) shape[d] = 1;
  for (int k = 0; k < n; k++)
    for (int d = 0; d < as[k]->ndim; d++) {
      int64_t s = as[k]->shape[d];
      if (s != 1) shape[*nd - as[k]->ndim + d] = s;
    }
}

/* ---- elementwise */
typedef double (*oc_f2)(double, double);
static void oc_ref_binary(const oc_arr *a, const oc_arr *b, oc_arr *out, oc_f2 f) {
  int nd;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS];
  oc_bshape(2, (const oc_arr *[]){a, b}, &nd, shape);
  oc_alloc(out, nd, shape);
  for (int64_t i = 0; i < out->numel; i++) {
    oc_unravel(nd, shape, i, idx);
    out->v[i] = f(oc_bget(a, nd, idx), oc_bget(b, nd, idx));
  }
}

static void oc_ref_unary(const oc_arr *a, oc_arr *out, double (*f)(double)) {
  oc_alloc(out, a->ndim, a->shape);
  for (int64_t i = 0; i < a->numel; i++) out->v[i] = f(a->v[i]);
}

static void oc_ref_where(const oc_arr *c, const oc_arr *a, const oc_arr *b, oc_arr *out) {
  int nd;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS];
  oc_bshape(3, (const oc_arr *[]){c, a, b}, &nd, shape);
  oc_alloc(out, nd, shape);
  for (int64_t i = 0; i < out->numel; i++) {
    oc_unravel(nd, shape, i, idx);
    out->v[i] = oc_bget(c, nd, idx) != 0 ? oc_bget(a, nd, idx) : oc_bget(b, nd, idx);
  }
}

/* ---- reductions. red[d] = 1 for a reduced dim (all when ndims 0). */
static void oc_red_mask(const oc_arr *x, int ndims, const int *dims, int *red) {
  for (int d = 0; d < x->ndim; d++) red[d] = ndims == 0;
  for (int k = 0; k < ndims; k++) red[dims[k] < 0 ? dims[k] + x->ndim : dims[k]] = 1;
}

static void oc_red_shape(const oc_arr *x, const int *red, int keepdim, int *nd, int64_t *shape) {
  *nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (!red[d]) shape[(*nd)++] = x->shape[d];
    else if (keepdim) shape[(*nd)++] = 1;
  }
}

/* The flat index into the reduced (keepdim-free) result for element idx of x. */
static int64_t oc_red_index(const oc_arr *x, const int *red, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!red[d]) f = f * x->shape[d] + idx[d];
  return f;
}

/* kind: 0 sum, 1 mean, 2 var (with correction) */
static void oc_ref_reduce(const oc_arr *x, int ndims, const int *dims, int keepdim, int kind, int correction, oc_arr *out) {
  int red[OC_MAX_DIMS] = {0}, nd;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS], count = 1;
  oc_red_mask(x, ndims, dims, red);
  oc_red_shape(x, red, keepdim, &nd, shape);
  for (int d = 0; d < x->ndim; d++)
    if (red[d]) count *= x->shape[d];
  oc_alloc(out, nd, shape);
  double *mean = calloc((size_t)out->numel, sizeof(double));
  for (int64_t i = 0; i < x->numel; i++) {
    oc_unravel(x->ndim, x->shape, i, idx);
    mean[oc_red_index(x, red, idx)] += x->v[i];
  }
  for (int64_t j = 0; j < out->numel; j++) out->v[j] = kind == 0 ? mean[j] : mean[j] / (double)count;
  if (kind == 2) {
    for (int64_t j = 0; j < out->numel; j++) out->v[j] = 0;
    for (int64_t i = 0; i < x->numel; i++) {
      oc_unravel(x->ndim, x->shape, i, idx);
      int64_t j = oc_red_index(x, red, idx);
      double m = mean[j] / (double)count;
      out->v[j] += (x->v[i] - m) * (x->v[i] - m);
    }
    for (int64_t j = 0; j < out->numel; j++) out->v[j] /= (double)(count - correction);
  }
  free(mean);
}

/* which: 0 max values, 1 max indices, 2 min values, 3 min indices (first extreme wins) */
static void oc_ref_maxmin(const oc_arr *x, int dim, int keepdim, int which, oc_arr *out) {
  int red[OC_MAX_DIMS] = {0}, nd;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS];
  oc_red_mask(x, 1, &dim, red);
  oc_red_shape(x, red, keepdim, &nd, shape);
  oc_alloc(out, nd, shape);
  double *best = malloc((size_t)out->numel * sizeof(double));
  int is_min = which >= 2;
  for (int64_t j = 0; j < out->numel; j++) best[j] = is_min ? INFINITY : -INFINITY, out->v[j] = -1;
  int d = dim < 0 ? dim + x->ndim : dim;
  for (int64_t i = 0; i < x->numel; i++) {
    oc_unravel(x->ndim, x->shape, i, idx);
    int64_t j = oc_red_index(x, red, idx);
    double v = x->v[i];
    if (is_min ? v < best[j] : v > best[j]) best[j] = v, out->v[j] = (double)idx[d];
  }
  if (which == 0 || which == 2)
    for (int64_t j = 0; j < out->numel; j++) out->v[j] = best[j];
  free(best);
}

/* ---- matmul with torch.matmul's rules */
static void oc_ref_matmul(const oc_arr *a, const oc_arr *b, oc_arr *out) {
  int64_t M = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
  int64_t N = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0, nbd = na > nb ? na : nb;
  int64_t bs[OC_MAX_DIMS], os[OC_MAX_DIMS], bi[OC_MAX_DIMS];
  for (int d = 0; d < nbd; d++) {
    int64_t x = d < nbd - na ? 1 : a->shape[d - (nbd - na)], y = d < nbd - nb ? 1 : b->shape[d - (nbd - nb)];
    bs[d] = x == 1 ? y : x;
  }
  int k = 0;
  for (int d = 0; d < nbd; d++) os[k++] = bs[d];
  if (a->ndim > 1) os[k++] = M;
  if (b->ndim > 1) os[k++] = N;
  oc_alloc(out, k, os);
  int64_t B = 1;
  for (int d = 0; d < nbd; d++) B *= bs[d];
  for (int64_t t = 0; t < B; t++) {
    oc_unravel(nbd, bs, t, bi);
    int64_t fa = 0, fb = 0;
    for (int d = 0; d < na; d++) fa = fa * a->shape[d] + (a->shape[d] == 1 ? 0 : bi[d + nbd - na]);
    for (int d = 0; d < nb; d++) fb = fb * b->shape[d] + (b->shape[d] == 1 ? 0 : bi[d + nbd - nb]);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t q = 0; q < K; q++) s += a->v[fa * M * K + i * K + q] * b->v[fb * K * N + q * N + j];
        out->v[t * M * N + i * N + j] = s;
      }
  }
}

/* ---- conv2d and pooling, NCHW. b may be NULL. */
static void oc_ref_conv2d(const oc_arr *x, const oc_arr *w, const oc_arr *b, const int *st, const int *pad,
                          const int *dil, int groups, oc_arr *out) {
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t O = w->shape[0], Cg = w->shape[1], kH = w->shape[2], kW = w->shape[3];
  int64_t Ho = (H + 2 * pad[0] - dil[0] * (kH - 1) - 1) / st[0] + 1, Wo = (W + 2 * pad[1] - dil[1] * (kW - 1) - 1) / st[1] + 1;
  oc_alloc(out, 4, (int64_t[]){N, O, Ho, Wo});
  int64_t Og = O / groups;
  (void)C;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < Ho; i++)
        for (int64_t j = 0; j < Wo; j++) {
          double s = b ? b->v[o] : 0;
          int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t p = 0; p < kH; p++)
              for (int64_t q = 0; q < kW; q++) {
                int64_t h = i * st[0] - pad[0] + p * dil[0], ww = j * st[1] - pad[1] + q * dil[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                s += x->v[((n * C + g * Cg + c) * H + h) * W + ww] * w->v[((o * Cg + c) * kH + p) * kW + q];
              }
          out->v[((n * O + o) * Ho + i) * Wo + j] = s;
        }
}

static void oc_ref_pool(const oc_arr *x, const int *k, const int *st, const int *pad, int is_max, oc_arr *out) {
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Ho = (H + 2 * pad[0] - k[0]) / st[0] + 1, Wo = (W + 2 * pad[1] - k[1]) / st[1] + 1;
  oc_alloc(out, 4, (int64_t[]){N, C, Ho, Wo});
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t i = 0; i < Ho; i++)
      for (int64_t j = 0; j < Wo; j++) {
        double m = -INFINITY, s = 0;
        for (int p = 0; p < k[0]; p++)
          for (int q = 0; q < k[1]; q++) {
            int64_t h = i * st[0] - pad[0] + p, ww = j * st[1] - pad[1] + q;
            if (h < 0 || h >= H || ww < 0 || ww >= W) continue; /* padding: -inf for max, 0 for avg */
            double v = x->v[(nc * H + h) * W + ww];
            if (v > m) m = v;
            s += v;
          }
        out->v[(nc * Ho + i) * Wo + j] = is_max ? m : s / (double)(k[0] * k[1]);
      }
}

/* ---- batch norm, x: (N, C, *). w, b, rm, rv may be NULL. training: batch statistics; the updated
 * running statistics go to new_rm/new_rv when given. */
static void oc_ref_batch_norm(const oc_arr *x, const oc_arr *rm, const oc_arr *rv, const oc_arr *w, const oc_arr *b,
                              int training, double mom, double eps, oc_arr *out, double *new_rm, double *new_rv) {
  int64_t N = x->shape[0], C = x->shape[1], S = 1;
  for (int d = 2; d < x->ndim; d++) S *= x->shape[d];
  oc_alloc(out, x->ndim, x->shape);
  for (int64_t c = 0; c < C; c++) {
    double mean = 0, var = 0, cnt = (double)(N * S);
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) mean += x->v[(n * C + c) * S + s];
    mean /= cnt;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) var += pow(x->v[(n * C + c) * S + s] - mean, 2);
    double bvar = var / cnt, uvar = var / (cnt - 1);
    if (training && new_rm) new_rm[c] = (1 - mom) * rm->v[c] + mom * mean;
    if (training && new_rv) new_rv[c] = (1 - mom) * rv->v[c] + mom * uvar;
    double m = training ? mean : rm->v[c], v = training ? bvar : rv->v[c];
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        int64_t i = (n * C + c) * S + s;
        out->v[i] = (x->v[i] - m) / sqrt(v + eps) * (w ? w->v[c] : 1) + (b ? b->v[c] : 0);
      }
  }
}

/* ---- layer norm over the last k dims of x: each slice of D = prod(those dims) elements
 * normalized by its mean and biased variance, then scaled by w and shifted by b (each D elements,
 * row-major over those dims, or NULL). */
static void oc_ref_layer_norm(const oc_arr *x, int k, const oc_arr *w, const oc_arr *b, double eps, oc_arr *out) {
  int64_t D = 1;
  for (int d = x->ndim - k; d < x->ndim; d++) D *= x->shape[d];
  oc_alloc(out, x->ndim, x->shape);
  for (int64_t r = 0; D > 0 && r < x->numel / D; r++) {
    const double *xs = x->v + r * D;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < D; j++) mean += xs[j];
    mean /= (double)D;
    for (int64_t j = 0; j < D; j++) var += (xs[j] - mean) * (xs[j] - mean);
    var /= (double)D;
    for (int64_t j = 0; j < D; j++)
      out->v[r * D + j] = (xs[j] - mean) / sqrt(var + eps) * (w ? w->v[j] : 1) + (b ? b->v[j] : 0);
  }
}

/* ---- softmax over dim */
static void oc_ref_softmax(const oc_arr *x, int dim, int log_, oc_arr *out) {
  int d = dim < 0 ? dim + x->ndim : dim;
  int64_t outer = 1, L = x->shape[d], inner = 1;
  for (int k = 0; k < d; k++) outer *= x->shape[k];
  for (int k = d + 1; k < x->ndim; k++) inner *= x->shape[k];
  oc_alloc(out, x->ndim, x->shape);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += exp(x->v[(o * L + l) * inner + i]);
      for (int64_t l = 0; l < L; l++) {
        double v = x->v[(o * L + l) * inner + i];
        out->v[(o * L + l) * inner + i] = log_ ? v - log(s) : exp(v) / s;
      }
    }
}

/* reduction: 0 mean, 1 sum, 2 none */
static void oc_ref_reduction(const double *l, int64_t n, int reduction, oc_arr *out) {
  if (reduction == 2) {
    oc_alloc(out, 1, &n);
    memcpy(out->v, l, (size_t)n * sizeof(double));
    return;
  }
  oc_alloc(out, 0, NULL);
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += l[i];
  out->v[0] = reduction == 1 ? s : s / (double)n;
}

static void oc_ref_cross_entropy(const oc_arr *x, const oc_arr *t, int reduction, double ls, oc_arr *out) {
  int64_t N = x->shape[0], C = x->shape[1];
  double *l = calloc((size_t)N, sizeof(double));
  for (int64_t i = 0; i < N; i++) {
    double s = 0, all = 0;
    for (int64_t c = 0; c < C; c++) s += exp(x->v[i * C + c]);
    for (int64_t c = 0; c < C; c++) all += -(x->v[i * C + c] - log(s));
    double nll = -(x->v[i * C + (int64_t)t->v[i]] - log(s));
    l[i] = (1 - ls) * nll + ls * all / (double)C;
  }
  oc_ref_reduction(l, N, reduction, out);
  free(l);
}

/* torch's cross_entropy with class weights w (NULL: ones), ignore_index and label smoothing ls,
 * written from the formula of aten/src/ATen/native/LossNLL.cpp: the mean divides by the summed
 * weights of the samples not ignored. */
static void oc_ref_cross_entropy_ex(const oc_arr *x, const oc_arr *t, const oc_arr *w, int64_t ignore, int reduction,
                                    double ls, oc_arr *out) {
  int64_t N = x->shape[0], C = x->shape[1];
  double *l = calloc((size_t)N, sizeof(double)), den = 0;
  for (int64_t i = 0; i < N; i++) {
    int64_t y = (int64_t)t->v[i];
    if (y == ignore) continue;
    double s = 0, all = 0;
    for (int64_t c = 0; c < C; c++) s += exp(x->v[i * C + c]);
    for (int64_t c = 0; c < C; c++) all += -(w ? w->v[c] : 1.0) * (x->v[i * C + c] - log(s));
    double wy = w ? w->v[y] : 1.0;
    l[i] = (1 - ls) * wy * -(x->v[i * C + y] - log(s)) + ls * all / (double)C;
    den += wy;
  }
  if (reduction == 0) {
    oc_alloc(out, 0, NULL);
    for (int64_t i = 0; i < N; i++) out->v[0] += l[i];
    out->v[0] /= den;
  } else oc_ref_reduction(l, N, reduction, out);
  free(l);
}

/* torch.nn.functional.embedding: out[(*), :] = w[idx[(*)], :] */
static void oc_ref_embedding(const oc_arr *w, const oc_arr *idx, oc_arr *out) {
  int64_t D = w->shape[1], shape[OC_MAX_DIMS];
  memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
  shape[idx->ndim] = D;
  oc_alloc(out, idx->ndim + 1, shape);
  for (int64_t i = 0; i < idx->numel; i++)
    for (int64_t d = 0; d < D; d++) out->v[i * D + d] = w->v[(int64_t)idx->v[i] * D + d];
}

/* torch.topk along dim (values, or their positions when want_idx): each line's elements ranked by
 * a selection that keeps the first of equal values. */
static void oc_ref_topk(const oc_arr *x, int64_t k, int dim, int largest, int want_idx, oc_arr *out) {
  int nd = x->ndim, d = dim < 0 ? dim + nd : dim;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS], n = x->shape[d];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = k;
  oc_alloc(out, nd, shape);
  char *taken = calloc((size_t)n, 1);
  for (int64_t i = 0; i < out->numel; i++) {
    oc_unravel(nd, shape, i, idx);
    if (idx[d] != 0) continue; /* each line once, from its first output */
    memset(taken, 0, (size_t)n);
    for (int64_t j = 0; j < k; j++) {
      int64_t best = -1;
      for (int64_t e = 0; e < n; e++) {
        if (taken[e]) continue;
        idx[d] = e;
        double v = x->v[oc_ravel(nd, x->shape, idx)];
        idx[d] = best;
        double b = best < 0 ? 0 : x->v[oc_ravel(nd, x->shape, idx)];
        if (best < 0 || (largest ? v > b : v < b)) best = e;
      }
      taken[best] = 1;
      idx[d] = best;
      double v = x->v[oc_ravel(nd, x->shape, idx)];
      idx[d] = j;
      out->v[oc_ravel(nd, shape, idx)] = want_idx ? (double)best : v;
    }
    idx[d] = 0;
  }
  free(taken);
}

/* torch's scaled_dot_product_attention, math form, in double: q (B, H, Tq, D), k (B, H, Tk, D),
 * v (B, H, Tk, Dv); mask_kind 0 none, 1 causal (key j <= query i), 2 bool mask m (true: attend;
 * key 0 always attends, as the runner makes it), 3 additive mask m; m broadcasts from its trailing
 * dims (Tq, Tk) or (1, H, Tq, Tk). */
static void oc_ref_sdpa(const oc_arr *q, const oc_arr *k, const oc_arr *v, int mask_kind, const oc_arr *m, double scale,
                        oc_arr *out) {
  int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], D = q->shape[3], Tk = k->shape[2], Dv = v->shape[3];
  if (scale == 0) scale = 1 / sqrt((double)D);
  oc_alloc(out, 4, (int64_t[]){B, H, Tq, Dv});
  double *s = calloc((size_t)Tk, sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Tq; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < Tk; j++) {
          double acc = 0;
          for (int64_t d = 0; d < D; d++) acc += q->v[((b * H + h) * Tq + i) * D + d] * k->v[((b * H + h) * Tk + j) * D + d];
          acc *= scale;
          int64_t mi = m && m->ndim == 4 ? (h * Tq + i) * Tk + j : i * Tk + j;
          if (mask_kind == 1 && j > i) acc = -INFINITY;
          if (mask_kind == 2 && !(m->v[mi] != 0 || j == 0)) acc = -INFINITY;
          if (mask_kind == 3) acc += m->v[mi];
          s[j] = acc;
          if (acc > mx) mx = acc;
        }
        for (int64_t j = 0; j < Tk; j++) s[j] = exp(s[j] - mx), sum += s[j];
        for (int64_t d = 0; d < Dv; d++) {
          double acc = 0;
          for (int64_t j = 0; j < Tk; j++) acc += s[j] / sum * v->v[((b * H + h) * Tk + j) * Dv + d];
          out->v[((b * H + h) * Tq + i) * Dv + d] = acc;
        }
      }
  free(s);
}

static void oc_ref_mse(const oc_arr *a, const oc_arr *b, int reduction, oc_arr *out) {
  double *l = calloc((size_t)a->numel, sizeof(double));
  for (int64_t i = 0; i < a->numel; i++) l[i] = (a->v[i] - b->v[i]) * (a->v[i] - b->v[i]);
  if (reduction == 2) {
    oc_alloc(out, a->ndim, a->shape);
    memcpy(out->v, l, (size_t)a->numel * sizeof(double));
  } else oc_ref_reduction(l, a->numel, reduction, out);
  free(l);
}

/* ---- joining, indexing and views */
static void oc_ref_cat(int n, const oc_arr *const *as, int dim, oc_arr *out) {
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS];
  int nd = as[0]->ndim, d = dim < 0 ? dim + nd : dim;
  memcpy(shape, as[0]->shape, sizeof shape);
  shape[d] = 0;
  for (int k = 0; k < n; k++) shape[d] += as[k]->shape[d];
  oc_alloc(out, nd, shape);
  int64_t base = 0;
  for (int k = 0; k < n; k++) {
    for (int64_t i = 0; i < as[k]->numel; i++) {
      oc_unravel(nd, as[k]->shape, i, idx);
      idx[d] += base;
      out->v[oc_ravel(nd, shape, idx)] = as[k]->v[i];
    }
    base += as[k]->shape[d];
  }
}

static void oc_ref_stack(int n, const oc_arr *const *as, int dim, oc_arr *out) {
  oc_arr u[4];
  const oc_arr *pu[4];
  int nd = as[0]->ndim + 1, d = dim < 0 ? dim + nd : dim;
  for (int k = 0; k < n; k++) {
    u[k] = *as[k];
    u[k].ndim = nd;
    for (int q = 0, r = 0; q < nd; q++) u[k].shape[q] = q == d ? 1 : as[k]->shape[r++];
    pu[k] = &u[k];
  }
  oc_ref_cat(n, pu, d, out);
}

/* gather (is_gather) or index_select along dim */
static void oc_ref_index(const oc_arr *x, int dim, const oc_arr *index, int is_gather, oc_arr *out) {
  int nd = x->ndim, d = dim < 0 ? dim + nd : dim;
  int64_t shape[OC_MAX_DIMS], idx[OC_MAX_DIMS];
  if (is_gather) memcpy(shape, index->shape, sizeof shape);
  else memcpy(shape, x->shape, sizeof shape), shape[d] = index->shape[0];
  oc_alloc(out, nd, shape);
  for (int64_t i = 0; i < out->numel; i++) {
    oc_unravel(nd, shape, i, idx);
    idx[d] = (int64_t)index->v[is_gather ? i : idx[d]];
    out->v[i] = x->v[oc_ravel(nd, x->shape, idx)];
  }
}

/* out[i] = x[sum_d idx_d * strides_d + offset]: any view described by shape, strides and offset
 * over x's row-major data. */
static void oc_ref_strided(const oc_arr *x, int nd, const int64_t *shape, const int64_t *strides, int64_t offset,
                           oc_arr *out) {
  int64_t idx[OC_MAX_DIMS];
  oc_alloc(out, nd, shape);
  for (int64_t i = 0; i < out->numel; i++) {
    oc_unravel(nd, shape, i, idx);
    int64_t f = offset;
    for (int d = 0; d < nd; d++) f += idx[d] * strides[d];
    out->v[i] = x->v[f];
  }
}

static void oc_rowmajor_strides(int nd, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) st[d] = s, s *= shape[d];
}

#endif
