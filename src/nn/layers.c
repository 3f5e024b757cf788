/* src/nn/layers.c: the layers (Linear, Conv2d, BatchNorm1d/2d, LayerNorm, ReLU, Sigmoid, Tanh,
 * GELU, SiLU, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout, Identity, Sequential):
 * constructors with PyTorch's default initialization, and forward (also a user module's). */
#include <math.h>
#include <string.h>
#include "nn/module.h"

/* U(-bound, bound) in float32 on dev: kaiming_uniform_(a=sqrt(5)) gives bound = 1/sqrt(fan_in)
 * for the weights of Linear and Conv2d, and their biases use the same bound (torch.nn.Linear's
 * reset_parameters). */
static ct_tensor *uniform_param(int ndim, const int64_t *shape, double bound, ct_device dev, ct_generator *gen) {
  ct_tensor *t = ct_rand(ndim, shape, -bound, bound, CT_F32, dev, gen);
  if (t) ct_requires_grad_(t, 1);
  return t;
}

ct_module *ct_linear_new(int64_t in_features, int64_t out_features, int bias, ct_device dev, ct_generator *gen) {
  if (in_features <= 0 || out_features <= 0)
    CT_FAIL_NULL(CT_EINVAL, "ct_linear_new: in_features and out_features must be positive, got %lld and %lld",
                 (long long)in_features, (long long)out_features);
  /* the weight's shape and the device, checked here so that a bad one is this function's error */
  if (!ct__check_new("ct_linear_new", 2, (int64_t[]){out_features, in_features}, CT_F32, dev)) return NULL;
  ct_module *m = ct__module_alloc(CT_M_LINEAR);
  if (!m) return NULL;
  m->in = in_features, m->out = out_features;
  double bound = 1.0 / sqrt((double)in_features);
  ct_tensor *w = uniform_param(2, (int64_t[]){out_features, in_features}, bound, dev, gen);
  if (!w) return ct__error_prefix("ct_linear_new"), ct_module_free(m), NULL;
  if (ct__module_add(m, "weight", w, 0) != CT_OK) return ct__error_prefix("ct_linear_new"), ct_module_free(m), NULL;
  if (bias) {
    ct_tensor *b = uniform_param(1, &out_features, bound, dev, gen);
    if (!b || ct__module_add(m, "bias", b, 0) != CT_OK) return ct__error_prefix("ct_linear_new"), ct_module_free(m), NULL;
  }
  return m;
}

ct_module *ct_conv2d_new(int64_t in_channels, int64_t out_channels, int kernel_size, const ct_conv2d_opts *opts, int bias,
                         ct_device dev, ct_generator *gen) {
  ct_conv2d_opts o = opts ? *opts : (ct_conv2d_opts){0};
  int groups = o.groups ? o.groups : 1;
  if (in_channels <= 0 || out_channels <= 0)
    CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: in_channels and out_channels must be positive, got %lld and %lld",
                 (long long)in_channels, (long long)out_channels);
  if (kernel_size <= 0) CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: kernel_size must be positive, got %d", kernel_size);
  if (groups < 0) CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: groups must be positive, got %d (0 means 1)", groups);
  if (in_channels % groups || out_channels % groups)
    CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: in_channels %lld and out_channels %lld must both be divisible by groups = %d",
                 (long long)in_channels, (long long)out_channels, groups);
  /* As torch.nn.Conv2d: a negative stride, padding or dilation is an error here, not at the first
   * forward (a zero stride or dilation means the default, 1). */
  for (int i = 0; i < 2; i++) {
    if (o.stride[i] < 0)
      CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: stride must be positive, got stride[%d] = %d (0 means 1)", i, o.stride[i]);
    if (o.padding[i] < 0) CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: padding must be >= 0, got padding[%d] = %d", i, o.padding[i]);
    if (o.dilation[i] < 0)
      CT_FAIL_NULL(CT_EINVAL, "ct_conv2d_new: dilation must be positive, got dilation[%d] = %d (0 means 1)", i, o.dilation[i]);
  }
  /* the weight's shape, checked before anything multiplies its sizes (fan_in below) */
  if (!ct__check_new("ct_conv2d_new", 4, (int64_t[]){out_channels, in_channels / groups, kernel_size, kernel_size}, CT_F32,
                     dev))
    return NULL;
  ct_module *m = ct__module_alloc(CT_M_CONV2D);
  if (!m) return NULL;
  m->in = in_channels, m->out = out_channels, m->kernel = kernel_size, m->conv = o;
  for (int i = 0; i < 2; i++) {
    if (!m->conv.stride[i]) m->conv.stride[i] = 1;
    if (!m->conv.dilation[i]) m->conv.dilation[i] = 1;
  }
  m->conv.groups = groups;
  int64_t fan_in = in_channels / groups * kernel_size * kernel_size;
  double bound = 1.0 / sqrt((double)fan_in);
  ct_tensor *w = uniform_param(4, (int64_t[]){out_channels, in_channels / groups, kernel_size, kernel_size}, bound, dev, gen);
  if (!w) return ct__error_prefix("ct_conv2d_new"), ct_module_free(m), NULL;
  if (ct__module_add(m, "weight", w, 0) != CT_OK) return ct__error_prefix("ct_conv2d_new"), ct_module_free(m), NULL;
  if (bias) {
    ct_tensor *b = uniform_param(1, &out_channels, bound, dev, gen);
    if (!b || ct__module_add(m, "bias", b, 0) != CT_OK) return ct__error_prefix("ct_conv2d_new"), ct_module_free(m), NULL;
  }
  return m;
}

/* BatchNorm1d and BatchNorm2d: weight 1, bias 0, running_mean 0, running_var 1 (float32), and
 * num_batches_tracked, an int64 scalar 0, as torch.nn.modules.batchnorm._NormBase. */
static ct_module *batchnorm_new(const char *op, ct_module_kind kind, int64_t num_features, double eps, double momentum,
                                ct_device dev) {
  if (num_features <= 0) CT_FAIL_NULL(CT_EINVAL, "%s: num_features must be positive, got %lld", op, (long long)num_features);
  if (!(eps >= 0)) CT_FAIL_NULL(CT_EINVAL, "%s: eps must be >= 0, got %g (0 takes the default, 1e-5)", op, eps);
  if (!(momentum >= 0 && momentum <= 1))
    CT_FAIL_NULL(CT_EINVAL, "%s: momentum must be in [0, 1], got %g (0 takes the default, 0.1)", op, momentum);
  if (!ct__check_new(op, 1, &num_features, CT_F32, dev)) return NULL;
  ct_module *m = ct__module_alloc(kind);
  if (!m) return NULL;
  m->out = num_features;
  m->eps = eps > 0 ? eps : 1e-5;
  m->momentum = momentum > 0 ? momentum : 0.1;
  const char *names[5] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  double init[4] = {1, 0, 0, 1};
  for (int i = 0; i < 5; i++) {
    ct_tensor *t = i < 4 ? ct_full(1, &num_features, init[i], CT_F32, dev) : ct_zeros(0, NULL, CT_I64, dev);
    if (t && i < 2) ct_requires_grad_(t, 1);
    if (!t || ct__module_add(m, names[i], t, i >= 2) != CT_OK) return ct__error_prefix("%s", op), ct_module_free(m), NULL;
  }
  return m;
}

ct_module *ct_batchnorm2d_new(int64_t num_features, double eps, double momentum, ct_device dev) {
  return batchnorm_new("ct_batchnorm2d_new", CT_M_BATCHNORM2D, num_features, eps, momentum, dev);
}

ct_module *ct_batchnorm1d_new(int64_t num_features, double eps, double momentum, ct_device dev) {
  return batchnorm_new("ct_batchnorm1d_new", CT_M_BATCHNORM1D, num_features, eps, momentum, dev);
}

/* Count one more batch in num_batches_tracked (slot 4), as torch's BatchNorm does in training
 * mode. The count only informs (cuttle's momentum is never None, so it never sets the average's
 * factor); it is kept so that state_dicts match. A module loaded without it has it still. */
static ct_status count_batch(ct_module *m) {
  if (m->n_slots < 5) return CT_OK;
  ct_no_grad_begin();
  ct_tensor *n1 = ct_add_scalar(m->slot[4], 1.0);
  ct_status s = n1 ? ct_copy_(m->slot[4], n1) : ct_last_status();
  ct_no_grad_end();
  ct_tensor_free(n1);
  return s;
}

ct_module *ct_relu_new(void) { return ct__module_alloc(CT_M_RELU); }
ct_module *ct_flatten_new(void) { return ct__module_alloc(CT_M_FLATTEN); }

/* The checks of ct_max_pool2d and ct_avg_pool2d, made here as torch.nn.MaxPool2d's are at
 * construction; the module keeps the options with a zero stride replaced by the kernel size. */
static ct_module *pool_new(const char *op, ct_module_kind kind, const ct_pool2d_opts *opts) {
  if (!opts)
    CT_FAIL_NULL(CT_EINVAL, "%s: opts is NULL; pass a kernel size >= 1, e.g. &(ct_pool2d_opts){.kernel = {2, 2}}", op);
  for (int i = 0; i < 2; i++) {
    if (opts->kernel[i] < 1)
      CT_FAIL_NULL(CT_EINVAL, "%s: kernel size must be positive, got kernel[%d] = %d", op, i, opts->kernel[i]);
    if (opts->stride[i] < 0)
      CT_FAIL_NULL(CT_EINVAL, "%s: stride must be positive, got stride[%d] = %d (0 means the kernel size)", op, i,
                   opts->stride[i]);
    if (opts->padding[i] < 0 || opts->padding[i] > opts->kernel[i] / 2)
      CT_FAIL_NULL(CT_EINVAL, "%s: padding must be between 0 and kernel/2 = %d, got padding[%d] = %d", op, opts->kernel[i] / 2,
                   i, opts->padding[i]);
  }
  ct_module *m = ct__module_alloc(kind);
  if (!m) return NULL;
  m->pool = *opts;
  for (int i = 0; i < 2; i++)
    if (!m->pool.stride[i]) m->pool.stride[i] = m->pool.kernel[i];
  return m;
}

ct_module *ct_max_pool2d_new(const ct_pool2d_opts *opts) { return pool_new("ct_max_pool2d_new", CT_M_MAXPOOL2D, opts); }
ct_module *ct_avg_pool2d_new(const ct_pool2d_opts *opts) { return pool_new("ct_avg_pool2d_new", CT_M_AVGPOOL2D, opts); }

ct_module *ct_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w) {
  if (out_h < 1 || out_w < 1)
    CT_FAIL_NULL(CT_EINVAL, "ct_adaptive_avg_pool2d_new: the output size must be >= 1, got (%lld, %lld)", (long long)out_h,
                 (long long)out_w);
  ct_module *m = ct__module_alloc(CT_M_ADAPTIVEAVGPOOL2D);
  if (m) m->out_size[0] = out_h, m->out_size[1] = out_w;
  return m;
}

ct_module *ct_identity_new(void) { return ct__module_alloc(CT_M_IDENTITY); }
ct_module *ct_sigmoid_new(void) { return ct__module_alloc(CT_M_SIGMOID); }
ct_module *ct_tanh_new(void) { return ct__module_alloc(CT_M_TANH); }
ct_module *ct_silu_new(void) { return ct__module_alloc(CT_M_SILU); }

ct_module *ct_gelu_new(int approximate) {
  if (approximate != 0 && approximate != 1)
    CT_FAIL_NULL(CT_EINVAL, "ct_gelu_new: approximate must be 0 (PyTorch's 'none') or 1 ('tanh'), got %d", approximate);
  ct_module *m = ct__module_alloc(CT_M_GELU);
  if (m) m->approximate = approximate;
  return m;
}

ct_module *ct_layernorm_new(int ndim, const int64_t *normalized_shape, double eps, int elementwise_affine, ct_device dev) {
  const char *op = "ct_layernorm_new";
  if (ndim < 1 || ndim > CT_MAX_DIMS || !normalized_shape)
    CT_FAIL_NULL(CT_EINVAL, "%s: normalized_shape must have 1 to %d dims, got %d%s", op, CT_MAX_DIMS, ndim,
                 normalized_shape ? "" : " and a NULL shape");
  for (int d = 0; d < ndim; d++)
    if (normalized_shape[d] < 1)
      CT_FAIL_NULL(CT_EINVAL, "%s: normalized_shape[%d] must be >= 1, got %lld", op, d, (long long)normalized_shape[d]);
  if (!(eps >= 0)) CT_FAIL_NULL(CT_EINVAL, "%s: eps must be >= 0, got %g (0 takes the default, 1e-5)", op, eps);
  if (!ct__check_new(op, ndim, normalized_shape, CT_F32, dev)) return NULL;
  ct_module *m = ct__module_alloc(CT_M_LAYERNORM);
  if (!m) return NULL;
  m->norm_ndim = ndim;
  memcpy(m->norm_shape, normalized_shape, (size_t)ndim * sizeof *normalized_shape);
  m->eps = eps > 0 ? eps : 1e-5;
  for (int i = 0; elementwise_affine && i < 2; i++) {
    ct_tensor *t = ct_full(ndim, normalized_shape, i == 0 ? 1.0 : 0.0, CT_F32, dev);
    if (t) ct_requires_grad_(t, 1);
    if (!t || ct__module_add(m, i == 0 ? "weight" : "bias", t, 0) != CT_OK)
      return ct__error_prefix("%s", op), ct_module_free(m), NULL;
  }
  return m;
}

ct_module *ct_embedding_new(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, ct_device dev, ct_generator *gen) {
  const char *op = "ct_embedding_new";
  if (num_embeddings < 1 || embedding_dim < 1)
    CT_FAIL_NULL(CT_EINVAL, "%s: num_embeddings and embedding_dim must be >= 1, got %lld and %lld", op, (long long)num_embeddings,
                 (long long)embedding_dim);
  if (padding_idx != CT_NO_PADDING_IDX && (padding_idx < -num_embeddings || padding_idx >= num_embeddings))
    CT_FAIL_NULL(CT_EINVAL, "%s: padding_idx %lld must be within num_embeddings (in [-%lld, %lld), or CT_NO_PADDING_IDX)", op,
                 (long long)padding_idx, (long long)num_embeddings, (long long)num_embeddings);
  int64_t shape[2] = {num_embeddings, embedding_dim};
  if (!ct__check_new(op, 2, shape, CT_F32, dev)) return NULL;
  ct_module *m = ct__module_alloc(CT_M_EMBEDDING);
  if (!m) return NULL;
  m->in = num_embeddings, m->out = embedding_dim;
  m->padding_idx = padding_idx == CT_NO_PADDING_IDX ? -1 : padding_idx < 0 ? padding_idx + num_embeddings : padding_idx;
  /* torch.nn.Embedding.reset_parameters: normal_(0, 1), then the padding row zeroed */
  ct_tensor *w = ct_randn(2, shape, 0, 1, CT_F32, dev, gen);
  if (w && m->padding_idx >= 0) {
    ct_tensor *row = ct_narrow(w, 0, m->padding_idx, 1);
    ct_status s = row ? ct_zero_(row) : ct_last_status();
    ct_tensor_free(row);
    if (s != CT_OK) ct_tensor_free(w), w = NULL;
  }
  if (w) ct_requires_grad_(w, 1);
  if (!w || ct__module_add(m, "weight", w, 0) != CT_OK) return ct__error_prefix("%s", op), ct_module_free(m), NULL;
  return m;
}

ct_module *ct_dropout_new(double p) {
  if (!(p >= 0 && p <= 1)) CT_FAIL_NULL(CT_EINVAL, "ct_dropout_new: p must be in [0, 1], got %g", p);
  ct_module *m = ct__module_alloc(CT_M_DROPOUT);
  if (m) m->p = p;
  return m;
}

ct_module *ct_sequential_new(int n, ct_module **children) {
  if (n < 0 || (n > 0 && !children))
    CT_FAIL_NULL(CT_EINVAL, "ct_sequential_new: need n >= 0 children and a list of them, got n = %d and children %s", n,
                 children ? "non-NULL" : "NULL");
  for (int i = 0; i < n; i++)
    if (!children[i]) {
      for (int j = 0; j < n; j++) ct_module_free(children[j]); /* it owns them, even on failure */
      /* a child whose constructor failed left its error: keep it (the message is read before a new
       * one is written, so it is never formatted into itself) */
      if (ct_last_status() != CT_OK) return NULL;
      CT_FAIL_NULL(CT_EINVAL, "ct_sequential_new: child %d is NULL (pass n modules)", i);
    }
  ct_module *m = ct__module_alloc(CT_M_SEQUENTIAL);
  if (!m) {
    for (int j = 0; j < n; j++) ct_module_free(children[j]);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "%d", i); /* nn.Sequential's keys: "0", "1", ... */
    if (ct__module_add_child(m, name, children[i]) != CT_OK) {
      for (int j = i + 1; j < n; j++) ct_module_free(children[j]); /* children[i] was freed by the failed add */
      ct_module_free(m);
      return NULL;
    }
  }
  return m;
}

int ct__module_input_fits(const ct_module *m, int ndim, const int64_t *shape) {
  int fits = m->kind == CT_M_LINEAR        ? ndim >= 1 && shape[ndim - 1] == m->in
             : m->kind == CT_M_CONV2D      ? ndim == 4 && shape[1] == m->in
             : m->kind == CT_M_BATCHNORM2D ? ndim >= 2 && shape[1] == m->out
             : m->kind == CT_M_BATCHNORM1D ? (ndim == 2 || ndim == 3) && shape[1] == m->out
             : m->kind == CT_M_LAYERNORM   ? ndim >= m->norm_ndim &&
                                               !memcmp(shape + ndim - m->norm_ndim, m->norm_shape, (size_t)m->norm_ndim * sizeof *shape)
                                           : 1;
  if (fits) return 1;
  /* The message, formatted only when it is needed (this runs before every forward). It names the
   * layer's sizes and the input's shape, where torch says "mat1 and mat2 shapes cannot be
   * multiplied (128x15 and 128x64)". */
  char s[160], d[96];
  long long in = (long long)m->in;
  long long got = m->kind == CT_M_LINEAR ? (ndim >= 1 ? (long long)shape[ndim - 1] : 0) : (ndim >= 2 ? (long long)shape[1] : 0);
  ct__shape_str(ndim, shape, s, sizeof s);
  if (m->kind == CT_M_LINEAR && ndim < 1)
    ct__error(CT_ESHAPE, "input is a scalar (shape %s), expected (*, %lld) (in_features = %lld)", s, in, in);
  else if (m->kind == CT_M_LINEAR)
    ct__error(CT_ESHAPE, "input has %lld feature%s (shape %s), expected %lld; pass an input (*, %lld), or build %s", got,
              got == 1 ? "" : "s", s, in, in,
              ct__module_desc(&(ct_module){.kind = CT_M_LINEAR, .in = got, .out = m->out}, d, sizeof d));
  else if (m->kind == CT_M_CONV2D && ndim != 4)
    ct__error(CT_ESHAPE, "input has shape %s, expected (N, %lld, H, W)", s, in);
  else if (m->kind == CT_M_CONV2D)
    ct__error(CT_ESHAPE, "input has %lld channel%s (shape %s), expected %lld; pass an input (N, %lld, H, W), or build the "
              "layer with in_channels = %lld", got, got == 1 ? "" : "s", s, in, in, got);
  else if (m->kind == CT_M_BATCHNORM1D)
    ct__error(CT_ESHAPE, "input has shape %s, expected (N, %lld) or (N, %lld, L) (num_features = %lld)", s, (long long)m->out,
              (long long)m->out, (long long)m->out);
  else if (m->kind == CT_M_LAYERNORM) {
    char ns[160];
    ct__error(CT_ESHAPE, "input has shape %s, whose last dims are not normalized_shape %s", s,
              ct__shape_str(m->norm_ndim, m->norm_shape, ns, sizeof ns));
  } else
    ct__error(CT_ESHAPE, "input has shape %s, expected (N, %lld, *) (num_features = %lld)", s, (long long)m->out,
              (long long)m->out);
  return 0;
}

/* The forward of m, whose errors are those of the op that failed (or, for an input that does not
 * fit the layer's sizes, ct__module_input_fits's); ct_module_forward names itself and the module
 * in front of them, and a Sequential names the child. */
static ct_tensor *forward(ct_module *m, ct_tensor *x) {
  if (!ct__module_input_fits(m, x->ndim, x->shape)) return NULL;
  switch (m->kind) {
    case CT_M_LINEAR: return ct_linear(x, m->slot[0], m->n_slots > 1 ? m->slot[1] : NULL);
    case CT_M_CONV2D: return ct_conv2d(x, m->slot[0], m->n_slots > 1 ? m->slot[1] : NULL, &m->conv);
    case CT_M_BATCHNORM1D:
    case CT_M_BATCHNORM2D:
      if (m->training && count_batch(m) != CT_OK) return NULL;
      return ct_batch_norm(x, m->slot[2], m->slot[3], m->slot[0], m->slot[1], m->training, m->momentum, m->eps);
    case CT_M_RELU: return ct_relu(x);
    case CT_M_SIGMOID: return ct_sigmoid(x);
    case CT_M_TANH: return ct_tanh(x);
    case CT_M_SILU: return ct_silu(x);
    case CT_M_GELU: return m->approximate ? ct_gelu_tanh(x) : ct_gelu(x);
    case CT_M_LAYERNORM:
      return ct_layer_norm(x, m->norm_ndim, m->n_slots ? m->slot[0] : NULL, m->n_slots ? m->slot[1] : NULL, m->eps);
    case CT_M_EMBEDDING: return ct_embedding(m->slot[0], x, m->padding_idx >= 0 ? m->padding_idx : CT_NO_PADDING_IDX);
    case CT_M_IDENTITY: return ct__retain_tracked(x);
    case CT_M_MAXPOOL2D: return ct_max_pool2d(x, &m->pool);
    case CT_M_AVGPOOL2D: return ct_avg_pool2d(x, &m->pool);
    case CT_M_ADAPTIVEAVGPOOL2D: return ct_adaptive_avg_pool2d(x, m->out_size[0], m->out_size[1]);
    case CT_M_USER: {
      ct_tensor *y = m->user_forward(m, x);
      if (!y && ct_last_status() == CT_OK) ct__error(CT_EINVAL, "the forward function returned NULL without setting an error");
      return y;
    }
    case CT_M_FLATTEN: return ct_flatten(x, 1, -1);
    case CT_M_DROPOUT: return ct_dropout(x, m->p, m->training, NULL);
    case CT_M_SEQUENTIAL: {
      ct_tensor *h = ct__retain_tracked(x);
      for (int i = 0; i < m->n_children && h; i++) {
        ct_module *c = m->children[i], *after = i + 1 < m->n_children ? m->children[i + 1] : NULL;
        ct_module *then = i + 2 < m->n_children ? m->children[i + 2] : NULL;
        ct_tensor *next;
        int at = i; /* the fused runs below advance i */
        /* fused runs (same values and gradients; see ops.h): fewer passes over memory */
        if (!ct__module_input_fits(c, h->ndim, h->shape)) next = NULL;
        else if (c->kind == CT_M_CONV2D && after && after->kind == CT_M_RELU && then && then->kind == CT_M_MAXPOOL2D)
          next = ct_conv2d_relu_max_pool2d(h, c->slot[0], c->n_slots > 1 ? c->slot[1] : NULL, &c->conv, &then->pool), i += 2;
        else if (c->kind == CT_M_RELU && after && after->kind == CT_M_MAXPOOL2D)
          next = ct_relu_max_pool2d(h, &after->pool), i++;
        else next = forward(c, h);
        char d[96];
        if (!next) ct__error_prefix("child %d, %s", at, ct__module_desc(c, d, sizeof d));
        ct_tensor_free(h);
        h = next;
      }
      return h;
    }
    default: break;
  }
  return ct__error(CT_EUNSUPPORTED, "no forward for module kind %d", (int)m->kind), NULL;
}

ct_tensor *ct_module_forward(ct_module *m, ct_tensor *x) {
  if (!m || !x) return ct__null_arg("ct_module_forward", !m ? "m" : "x");
  char d[96];
  ct_tensor *y = forward(m, x);
  if (!y) ct__error_prefix("ct_module_forward (%s)", ct__module_desc(m, d, sizeof d));
  return y;
}
