/* src/nn/alignment.c: the tensor-core alignment check (ct_module_check_alignment, nn.h).
 *
 * The rule, from NVIDIA's "Optimizing GPU performance with Tensor Cores": the sizes of a matrix
 * multiply or a convolution are multiples of 8 for float16 and bfloat16 and of 16 for 8-bit
 * integers. The check walks the module tree in forward order,
 * carrying the input's shape from layer to layer with the same shape rules as the ops (no tensor
 * is touched), and lists every Linear's features, every Conv2d's channels and the batch size that
 * break it, each with its fix: the next multiple. An input that does not fit a layer (Linear(128,
 * 64) fed 15 features) is the error ct_module_forward would give, named the same way. */
#include <string.h>
#include "cuttle/nn.h"
#include "nn/module.h"

int ct_alignment_multiple(ct_dtype dt) {
  if (!ct__check_dtype("ct_alignment_multiple", dt)) return -1;
  switch (dt) {
    case CT_F16:
    case CT_BF16: return 8;
    case CT_U8: return 16; /* cuttle's 8-bit integer type stands for int8 (see nn.h) */
    default: return 0;
  }
}

/* The state of one walk: the rule, the issues found, and the shape flowing between layers. */
typedef struct {
  ct_dtype dt;
  int mult; /* 0: no rule */
  ct_alignment_issue *out;
  int cap, count;
  int batch_done;     /* the batch size is checked once, at the first Linear or Conv2d */
  int known;          /* 0 once a layer could not produce a shape (then only sizes are checked) */
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  ct_status mismatch; /* CT_ESHAPE after the first input that does not fit */
  char first[2048];   /* that error's message (as long as ct_last_error's buffer) */
} walk;

static void issue(walk *w, const char *path, const ct_module *m, const char *what, int64_t value) {
  if (!w->mult || value % w->mult == 0) return;
  if (w->count < w->cap) {
    ct_alignment_issue *is = &w->out[w->count];
    memset(is, 0, sizeof *is);
    snprintf(is->layer, sizeof is->layer, "%s", path);
    ct__module_desc(m, is->module, sizeof is->module);
    is->what = what;
    is->value = value;
    is->multiple = w->mult;
    is->padded = (value / w->mult + 1) * w->mult;
    char where[96] = "";
    if (path[0]) snprintf(where, sizeof where, " [layer %s]", path);
    snprintf(is->message, sizeof is->message, "%s%s: %s %lld is not a multiple of %d for %s: pad to %lld%s", is->module, where,
             what, (long long)value, w->mult, ct_dtype_name(w->dt), (long long)is->padded,
             strcmp(what, "batch size") == 0 ? " (or choose such a batch size, and drop or pad a smaller last batch)" : "");
  }
  w->count++;
}

/* Record an input that does not fit (the error is set): the first one is kept, named by layer. */
static void mismatch(walk *w, const char *path, const ct_module *m) {
  if (w->mismatch != CT_OK) return;
  char d[96];
  if (path[0]) ct__error_prefix("ct_module_check_alignment: layer %s, %s", path, ct__module_desc(m, d, sizeof d));
  else ct__error_prefix("ct_module_check_alignment: %s", ct__module_desc(m, d, sizeof d));
  w->mismatch = ct_last_status();
  snprintf(w->first, sizeof w->first, "%s", ct_last_error());
}

/* The batch size (the rows of a matrix multiply), once per walk. */
static void batch(walk *w, const char *path, const ct_module *m, int64_t rows) {
  if (w->batch_done) return;
  w->batch_done = 1;
  issue(w, path, m, "batch size", rows);
}

/* Output size of a window of size k (dilated) over n with padding p and stride s, as the conv and
 * pool ops compute it; -1 when the window does not fit (or the sizes overflow). */
static int64_t window_out(int64_t n, int p, int64_t k, int s) {
  int64_t padded;
  if (__builtin_add_overflow(n, 2 * (int64_t)p, &padded) || padded < k) return -1;
  return (padded - k) / s + 1;
}

/* A pooling window's output size along dim d (0: H, 1: W), as ct_max_pool2d and ct_avg_pool2d
 * compute it (torch's pooling_output_shape_pad_lr: dilation, and ceil_mode's rule that the last
 * window must start inside the input or the left padding); -1 when the window does not fit. */
static int64_t pool_window_out(int64_t n, const ct_pool2d_opts *o, int d) {
  int64_t k = o->kernel[d], s = o->stride[d] ? o->stride[d] : k, p = o->padding[d], dil = o->dilation[d] ? o->dilation[d] : 1;
  int64_t eff = dil * (k - 1) + 1;
  if (window_out(n, (int)p, eff, (int)s) < 1) return -1;
  int64_t out = (n + 2 * p - eff + (o->ceil_mode ? s - 1 : 0)) / s + 1;
  if (o->ceil_mode && (out - 1) * s >= n + p) out--;
  return out;
}

static void spatial_mismatch(walk *w, const char *path, const ct_module *m, const char *what) {
  char s[160];
  ct__error(CT_ESHAPE, "input (H, W) of shape %s is smaller than the %s after padding", ct__shape_str(w->ndim, w->shape, s, sizeof s),
            what);
  mismatch(w, path, m);
  w->known = 0;
}

static void visit(walk *w, const ct_module *m, const char *path) {
  switch (m->kind) {
    case CT_M_LINEAR:
      issue(w, path, m, "in_features", m->in);
      issue(w, path, m, "out_features", m->out);
      if (!w->known) return;
      if (w->ndim >= 2) {
        int64_t rows = 1;
        for (int d = 0; d < w->ndim - 1; d++)
          if (__builtin_mul_overflow(rows, w->shape[d], &rows)) rows = 0;
        batch(w, path, m, rows);
      }
      if (!ct__module_input_fits(m, w->ndim, w->shape)) mismatch(w, path, m);
      if (w->ndim < 1) w->known = 0;
      else w->shape[w->ndim - 1] = m->out; /* as if it had fitted */
      return;
    case CT_M_CONV2D: {
      issue(w, path, m, "in_channels", m->in);
      issue(w, path, m, "out_channels", m->out);
      if (!w->known) return;
      if (w->ndim == 4) batch(w, path, m, w->shape[0]);
      if (!ct__module_input_fits(m, w->ndim, w->shape)) {
        mismatch(w, path, m);
        if (w->ndim != 4) return (void)(w->known = 0);
      }
      int64_t ho = window_out(w->shape[2], m->conv.padding[0], (int64_t)m->conv.dilation[0] * (m->kernel - 1) + 1, m->conv.stride[0]);
      int64_t wo = window_out(w->shape[3], m->conv.padding[1], (int64_t)m->conv.dilation[1] * (m->kernel - 1) + 1, m->conv.stride[1]);
      if (ho <= 0 || wo <= 0) return spatial_mismatch(w, path, m, "(dilated) kernel");
      w->shape[1] = m->out, w->shape[2] = ho, w->shape[3] = wo;
      return;
    }
    case CT_M_LAYERNORM:
      if (w->known && !ct__module_input_fits(m, w->ndim, w->shape)) mismatch(w, path, m), w->known = 0;
      return;
    case CT_M_BATCHNORM1D:
    case CT_M_BATCHNORM2D:
      if (w->known && !ct__module_input_fits(m, w->ndim, w->shape)) {
        mismatch(w, path, m);
        if (w->ndim < 2) w->known = 0;
        else w->shape[1] = m->out;
      }
      return;
    case CT_M_ADAPTIVEAVGPOOL2D:
    case CT_M_AVGPOOL2D:
    case CT_M_MAXPOOL2D: {
      if (!w->known) return;
      if (w->ndim != 4) {
        char s[160];
        ct__error(CT_ESHAPE, "input has shape %s, expected (N, C, H, W)", ct__shape_str(w->ndim, w->shape, s, sizeof s));
        mismatch(w, path, m);
        return (void)(w->known = 0);
      }
      if (m->kind == CT_M_ADAPTIVEAVGPOOL2D) {
        w->shape[2] = m->out_size[0], w->shape[3] = m->out_size[1];
        return;
      }
      int64_t ho = pool_window_out(w->shape[2], &m->pool, 0), wo = pool_window_out(w->shape[3], &m->pool, 1);
      if (ho <= 0 || wo <= 0) return spatial_mismatch(w, path, m, "pooling window");
      w->shape[2] = ho, w->shape[3] = wo;
      return;
    }
    case CT_M_FLATTEN: { /* dims 1..-1 into one */
      if (!w->known) return;
      if (w->ndim < 2) {
        char s[160];
        ct__error(CT_ESHAPE, "input has shape %s, expected at least 2 dims (N, *) to flatten dims 1..-1",
                  ct__shape_str(w->ndim, w->shape, s, sizeof s));
        mismatch(w, path, m);
        return (void)(w->known = 0);
      }
      int64_t f = 1;
      for (int d = 1; d < w->ndim; d++)
        if (__builtin_mul_overflow(f, w->shape[d], &f)) return (void)(w->known = 0);
      w->shape[1] = f, w->ndim = 2;
      return;
    }
    case CT_M_SEQUENTIAL:
      for (int i = 0; i < m->n_children; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s%s%s", path, path[0] ? "." : "", m->child_name[i]);
        visit(w, m->children[i], p);
      }
      return;
    case CT_M_EMBEDDING: /* indices (*) -> (*, embedding_dim) */
      if (w->known && w->ndim < CT_MAX_DIMS) w->shape[w->ndim++] = m->out;
      else w->known = 0;
      return;
    case CT_M_USER: /* a forward cuttle cannot follow: its layers' sizes are checked, not the shapes between them */
      if (w->known && w->ndim >= 1) batch(w, path, m, w->shape[0]);
      w->known = 0;
      for (int i = 0; i < m->n_children; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s%s%s", path, path[0] ? "." : "", m->child_name[i]);
        visit(w, m->children[i], p);
      }
      return;
    default: return; /* elementwise layers keep the shape */
  }
}

ct_status ct_module_check_alignment(ct_module *m, int ndim, const int64_t *input_shape, ct_dtype dtype, ct_alignment_issue *out,
                                    int cap, int *count) {
  const char *op = "ct_module_check_alignment";
  if (count) *count = 0;
  if (!m) return ct__null_status(op, "m");
  if (!ct__checked_numel(op, ndim, input_shape, NULL)) return ct_last_status();
  if (!ct__check_dtype(op, dtype)) return ct_last_status();
  if (cap < 0) return ct__error(CT_EINVAL, "%s: cap must be >= 0, got %d", op, cap);
  if (cap > 0 && !out) return ct__error(CT_EINVAL, "%s: out is NULL with cap = %d; pass an array of cap issues, or cap 0 to count", op, cap);
  walk w = {.dt = dtype, .mult = ct_alignment_multiple(dtype), .out = out, .cap = cap, .known = 1, .ndim = ndim};
  if (ndim > 0) memcpy(w.shape, input_shape, (size_t)ndim * sizeof *input_shape);
  visit(&w, m, "");
  if (count) *count = w.count;
  if (w.mismatch != CT_OK) return ct__error(w.mismatch, "%s", w.first); /* the first, not a later one */
  return CT_OK;
}
