/* src/nn/multihead_attention.c: torch.nn.MultiheadAttention, written through the public API as the
 * ResNets are: a user module with torch's parameter names (in_proj_weight, in_proj_bias and the
 * child out_proj, a Linear), whose forward projects the inputs, splits the heads and calls
 * ct_scaled_dot_product_attention (so the CPU runs the fused kernels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

typedef struct {
  int64_t embed_dim, num_heads;
  double dropout;
  int batch_first, bias;
} mha_cfg;

/* x (N, L, E) -> (N, H, L, E / H) */
static ct_tensor *split_heads(ct_tensor *x, int64_t H) {
  const int64_t *s = ct_tensor_shape(x);
  ct_tensor *r = ct_reshape(x, 4, (int64_t[]){s[0], s[1], H, s[2] / H});
  ct_tensor *p = r ? ct_permute(r, (int[]){0, 2, 1, 3}) : NULL;
  ct_tensor_free(r);
  return p;
}

/* rows [i E, (i + 1) E) of the packed projection: q (i = 0), k (1) or v (2) */
static ct_tensor *project(ct_module *m, const mha_cfg *c, ct_tensor *x, int i, int64_t E) {
  ct_tensor *w = ct_narrow(ct_module_tensor(m, "in_proj_weight"), 0, i * E, E);
  ct_tensor *bias = c->bias ? ct_module_tensor(m, "in_proj_bias") : NULL;
  ct_tensor *b = bias ? ct_narrow(bias, 0, i * E, E) : NULL;
  ct_tensor *y = w && (!bias || b) ? ct_linear(x, w, b) : NULL;
  ct_tensor_free(w), ct_tensor_free(b);
  return y;
}

ct_tensor *ct_multihead_attention_forward(ct_module *m, ct_tensor *query, ct_tensor *key, ct_tensor *value, ct_tensor *attn_mask,
                                          int is_causal) {
  const char *op = "ct_multihead_attention_forward";
  if (!m || !query || !key || !value) return ct__null_arg(op, !m ? "m" : !query ? "query" : !key ? "key" : "value");
  const mha_cfg *c = ct_module_ctx(m);
  if (!c || strcmp(ct_module_type(m), "MultiheadAttention") != 0)
    CT_FAIL_NULL(CT_EINVAL, "%s: m is a %s, not a module made by ct_multihead_attention_new", op, ct_module_type(m));
  int64_t E = c->embed_dim, H = c->num_heads;
  ct_tensor *in[3] = {query, key, value};
  char s[160];
  for (int i = 0; i < 3; i++)
    if (ct_tensor_ndim(in[i]) != 3 || ct_tensor_shape(in[i])[2] != E)
      CT_FAIL_NULL(CT_ESHAPE, "%s: %s has shape %s, expected (%s, %lld) (embed_dim = %lld)", op, (const char *[]){"query", "key", "value"}[i],
                   ct_shape_str(in[i], s, sizeof s), c->batch_first ? "N, L" : "L, N", (long long)E, (long long)E);
  ct_scope_begin();
  ct_tensor *x[3];
  for (int i = 0; i < 3; i++) x[i] = c->batch_first ? in[i] : ct_transpose(in[i], 0, 1); /* (N, L, E) */
  ct_tensor *heads[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    ct_tensor *p = x[i] ? project(m, c, x[i], i, E) : NULL;
    heads[i] = p ? split_heads(p, H) : NULL;
  }
  /* torch's attn_mask: (L, S) or (N * H, L, S); a bool one is true where attention is NOT allowed
   * (the opposite of scaled_dot_product_attention's), a float one is added */
  ct_tensor *mask = NULL;
  int ok = heads[0] && heads[1] && heads[2];
  if (ok && attn_mask) {
    ct_tensor *m4 = attn_mask;
    if (ct_tensor_ndim(attn_mask) == 3) {
      const int64_t *ms = ct_tensor_shape(attn_mask);
      m4 = ct_reshape(attn_mask, 4, (int64_t[]){ms[0] / H, H, ms[1], ms[2]});
    }
    if (m4 && ct_tensor_dtype(attn_mask) == CT_BOOL) {
      ct_tensor *f = ct_scalar(0, CT_BOOL, ct_tensor_device(attn_mask));
      mask = f ? ct_eq(m4, f) : NULL;
    } else {
      mask = m4;
    }
    ok = mask != NULL;
  }
  double p = ct_module_is_training(m) ? c->dropout : 0;
  ct_tensor *a = ok ? ct_scaled_dot_product_attention(heads[0], heads[1], heads[2], mask, p, is_causal, 0) : NULL; /* (N, H, L, hd) */
  ct_tensor *t = a ? ct_permute(a, (int[]){0, 2, 1, 3}) : NULL;
  const int64_t *as = a ? ct_tensor_shape(a) : NULL;
  ct_tensor *merged = t ? ct_reshape(t, 3, (int64_t[]){as[0], as[2], E}) : NULL;
  ct_module *out_proj = merged ? ct_module_child(m, "out_proj") : NULL;
  ct_tensor *y = out_proj ? ct_module_forward(out_proj, merged) : NULL;
  ct_tensor *r = y && !c->batch_first ? ct_transpose(y, 0, 1) : y;
  if (r) r = ct_scope_keep(r);
  ct_scope_end();
  if (!r && !strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
  return r;
}

static ct_tensor *mha_forward(ct_module *m, ct_tensor *x) { return ct_multihead_attention_forward(m, x, x, x, NULL, 0); }

ct_module *ct_multihead_attention_new(int64_t embed_dim, int64_t num_heads, double dropout, int bias, int batch_first,
                                      ct_device dev, ct_generator *gen) {
  const char *op = "ct_multihead_attention_new";
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads)
    CT_FAIL_NULL(CT_EINVAL, "%s: embed_dim (%lld) must be divisible by num_heads (%lld), both >= 1", op, (long long)embed_dim,
                 (long long)num_heads);
  if (!(dropout >= 0 && dropout < 1)) CT_FAIL_NULL(CT_EINVAL, "%s: dropout must be in [0, 1), got %g", op, dropout);
  if ((bias != 0 && bias != 1) || (batch_first != 0 && batch_first != 1))
    CT_FAIL_NULL(CT_EINVAL, "%s: bias and batch_first must be 0 or 1, got %d and %d", op, bias, batch_first);
  if (!ct__check_new(op, 2, (int64_t[]){3 * embed_dim, embed_dim}, CT_F32, dev)) return NULL;
  mha_cfg *c = malloc(sizeof *c);
  if (!c) CT_FAIL_NULL(CT_ENOMEM, "%s: out of memory", op);
  *c = (mha_cfg){embed_dim, num_heads, dropout, batch_first, bias};
  ct_module *m = ct_module_new("MultiheadAttention", mha_forward, c, free);
  if (!m) return NULL;
  /* torch's _reset_parameters: xavier_uniform_ on in_proj_weight (bound sqrt(6 / (fan_in + fan_out))
   * with fan_in = E, fan_out = 3E), zero biases; out_proj keeps Linear's initialization */
  double bound = sqrt(6.0 / (double)(embed_dim + 3 * embed_dim));
  ct_tensor *w = ct_rand(2, (int64_t[]){3 * embed_dim, embed_dim}, -bound, bound, CT_F32, dev, gen);
  ct_status s = w ? ct_module_register_parameter(m, "in_proj_weight", w) : ct_last_status(); /* takes w */
  if (s == CT_OK && bias) {
    ct_tensor *b = ct_zeros(1, (int64_t[]){3 * embed_dim}, CT_F32, dev);
    s = b ? ct_module_register_parameter(m, "in_proj_bias", b) : ct_last_status();
  }
  if (s == CT_OK) {
    ct_module *o = ct_linear_new(embed_dim, embed_dim, bias, dev, gen);
    if (o && bias) {
      ct_no_grad_begin();
      s = ct_zero_(ct_module_tensor(o, "bias"));
      ct_no_grad_end();
    }
    if (s == CT_OK) s = ct_module_add_child(m, "out_proj", o);
    else ct_module_free(o);
  }
  if (s != CT_OK) return ct__error_prefix("%s", op), ct_module_free(m), NULL;
  return m;
}
