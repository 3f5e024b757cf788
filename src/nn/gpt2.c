/* src/nn/gpt2.c: GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel builds it, written
 * through the public API as the ResNets are: user modules with transformers' names, so that the
 * state_dict is GPT2LMHeadModel's ("transformer.h.0.attn.c_attn.weight", ...) and a directory
 * written by save_pretrained loads as it is (src/io/gpt2_pretrained.c):
 *   transformer: wte (V, E), wpe (P, E), drop, h.0 .. h.{L-1}, ln_f
 *   h.i: ln_1, attn (c_attn, c_proj), ln_2, mlp (c_fc, c_proj); pre-LN residual blocks
 *   the lm_head tied to wte (logits = h wte^T), as GPT2LMHeadModel ties it.
 * Conv1D is transformers' (pytorch_utils.Conv1D): a weight (in, out), y = x W + b. Attention is
 * causal through ct_scaled_dot_product_attention (the fused kernels where the backend has them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"
#include "cuttle/gpt2.h"

/* ---- Conv1D: weight (in, out), bias (out) */
static ct_tensor *conv1d_forward(ct_module *m, ct_tensor *x) {
  ct_tensor *w = ct_module_tensor(m, "weight"), *b = ct_module_tensor(m, "bias");
  ct_tensor *wt = w ? ct_transpose(w, 0, 1) : NULL; /* (out, in), strided: ct_linear's layout */
  ct_tensor *y = wt && b ? ct_linear(x, wt, b) : NULL;
  ct_tensor_free(wt);
  return y;
}

static ct_module *conv1d_new(int64_t in, int64_t out, double std, ct_device dev, ct_generator *gen) {
  ct_module *m = ct_module_new("Conv1D", conv1d_forward, NULL, NULL);
  ct_tensor *w = m ? ct_randn(2, (int64_t[]){in, out}, 0, std, CT_F32, dev, gen) : NULL;
  ct_status s = w ? ct_module_register_parameter(m, "weight", w) : ct_last_status();
  ct_tensor *b = s == CT_OK ? ct_zeros(1, (int64_t[]){out}, CT_F32, dev) : NULL;
  if (s == CT_OK) s = b ? ct_module_register_parameter(m, "bias", b) : ct_last_status();
  if (s != CT_OK) return ct_module_free(m), NULL;
  return m;
}

/* The settings each module's forward reads; one copy, shared by the modules (freed by the root). */
typedef struct {
  ct_gpt2_config c;
  int gelu_exact; /* activation_function "gelu" (erf); else the tanh form */
} gpt2_ctx;

static const gpt2_ctx *ctx_of(ct_module *m) { return ct_module_ctx(m); }

/* ---- attention: c_attn (E, 3E) gives q, k, v; causal SDPA over n_head heads; c_proj; dropout */
static ct_tensor *heads(ct_tensor *qkv, int i, int64_t E, int64_t H) {
  const int64_t *s = ct_tensor_shape(qkv);
  ct_tensor *n = ct_narrow(qkv, 2, i * E, E), *r = n ? ct_reshape(n, 4, (int64_t[]){s[0], s[1], H, E / H}) : NULL;
  ct_tensor *p = r ? ct_permute(r, (int[]){0, 2, 1, 3}) : NULL; /* (B, H, T, hd) */
  ct_tensor_free(n), ct_tensor_free(r);
  return p;
}

static ct_tensor *attn_forward(ct_module *m, ct_tensor *x) {
  const gpt2_ctx *g = ctx_of(m);
  int64_t E = g->c.n_embd, H = g->c.n_head, B = ct_tensor_shape(x)[0], T = ct_tensor_shape(x)[1];
  int train = ct_module_is_training(m);
  ct_scope_begin();
  ct_tensor *qkv = ct_module_forward(ct_module_child(m, "c_attn"), x);
  ct_tensor *q = qkv ? heads(qkv, 0, E, H) : NULL, *k = q ? heads(qkv, 1, E, H) : NULL, *v = k ? heads(qkv, 2, E, H) : NULL;
  ct_tensor *a = v ? ct_scaled_dot_product_attention(q, k, v, NULL, train ? g->c.attn_pdrop : 0, 1, 0) : NULL;
  ct_tensor *t = a ? ct_permute(a, (int[]){0, 2, 1, 3}) : NULL, *y = t ? ct_reshape(t, 3, (int64_t[]){B, T, E}) : NULL;
  ct_tensor *o = y ? ct_module_forward(ct_module_child(m, "c_proj"), y) : NULL;
  ct_tensor *r = o ? ct_dropout(o, g->c.resid_pdrop, train, NULL) : NULL;
  if (r) r = ct_scope_keep(r);
  ct_scope_end();
  return r;
}

static ct_tensor *mlp_forward(ct_module *m, ct_tensor *x) {
  const gpt2_ctx *g = ctx_of(m);
  ct_scope_begin();
  ct_tensor *h = ct_module_forward(ct_module_child(m, "c_fc"), x);
  ct_tensor *a = h ? (g->gelu_exact ? ct_gelu(h) : ct_gelu_tanh(h)) : NULL;
  ct_tensor *o = a ? ct_module_forward(ct_module_child(m, "c_proj"), a) : NULL;
  ct_tensor *r = o ? ct_dropout(o, g->c.resid_pdrop, ct_module_is_training(m), NULL) : NULL;
  if (r) r = ct_scope_keep(r);
  ct_scope_end();
  return r;
}

/* x + attn(ln_1(x)), then + mlp(ln_2(x)) */
static ct_tensor *block_forward(ct_module *m, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *a = ct_module_forward(ct_module_child(m, "attn"), ct_module_forward(ct_module_child(m, "ln_1"), x));
  ct_tensor *h = a ? ct_add(x, a) : NULL;
  ct_tensor *f = h ? ct_module_forward(ct_module_child(m, "mlp"), ct_module_forward(ct_module_child(m, "ln_2"), h)) : NULL;
  ct_tensor *r = f ? ct_add(h, f) : NULL;
  if (r) r = ct_scope_keep(r);
  ct_scope_end();
  return r;
}

/* idx (B, T) -> the last hidden states (B, T, E) */
static ct_tensor *transformer_forward(ct_module *m, ct_tensor *idx) {
  const gpt2_ctx *g = ctx_of(m);
  const char *op = "gpt2";
  char s[160];
  if (ct_tensor_ndim(idx) != 2)
    CT_FAIL_NULL(CT_ESHAPE, "%s: input ids must be (B, T) int64, got %s", op, ct_shape_str(idx, s, sizeof s));
  int64_t T = ct_tensor_shape(idx)[1];
  if (T > g->c.n_positions)
    CT_FAIL_NULL(CT_ESHAPE, "%s: a sequence of %lld tokens is longer than n_positions = %lld (crop it to the last %lld)", op,
                 (long long)T, (long long)g->c.n_positions, (long long)g->c.n_positions);
  ct_scope_begin();
  ct_tensor *tok = ct_module_forward(ct_module_child(m, "wte"), idx);
  ct_tensor *pos = tok ? ct_arange(0, (double)T, 1, CT_I64, ct_tensor_device(idx)) : NULL;
  ct_tensor *pe = pos ? ct_module_forward(ct_module_child(m, "wpe"), pos) : NULL; /* (T, E), broadcast over B */
  ct_tensor *x = pe ? ct_add(tok, pe) : NULL;
  x = x ? ct_dropout(x, g->c.embd_pdrop, ct_module_is_training(m), NULL) : NULL;
  ct_tensor *h = x ? ct_module_forward(ct_module_child(m, "h"), x) : NULL;
  ct_tensor *r = h ? ct_module_forward(ct_module_child(m, "ln_f"), h) : NULL;
  if (r) r = ct_scope_keep(r);
  ct_scope_end();
  return r;
}

/* logits = transformer(idx) wte^T: the lm_head tied to the token embedding */
static ct_tensor *lm_forward(ct_module *m, ct_tensor *idx) {
  ct_module *tr = ct_module_child(m, "transformer");
  ct_tensor *h = tr ? ct_module_forward(tr, idx) : NULL;
  ct_tensor *y = h ? ct_linear(h, ct_module_tensor(m, "transformer.wte.weight"), NULL) : NULL;
  ct_tensor_free(h);
  return y;
}

static ct_module *layer_norm(int64_t E, double eps, ct_device dev) { return ct_layernorm_new(1, &E, eps, 1, dev); }

static ct_module *block_new(const gpt2_ctx *g, ct_device dev, ct_generator *gen) {
  const ct_gpt2_config *c = &g->c;
  int64_t E = c->n_embd, inner = c->n_inner ? c->n_inner : 4 * E;
  double std = c->initializer_range, proj_std = std / sqrt(2.0 * (double)c->n_layer); /* GPT-2's scaled residual init */
  ct_module *b = ct_module_new("GPT2Block", block_forward, (void *)g, NULL);
  ct_module *attn = ct_module_new("GPT2Attention", attn_forward, (void *)g, NULL);
  ct_module *mlp = ct_module_new("GPT2MLP", mlp_forward, (void *)g, NULL);
  ct_status s = b && attn && mlp ? CT_OK : ct_last_status();
  if (s == CT_OK) s = ct_module_add_child(attn, "c_attn", conv1d_new(E, 3 * E, std, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(attn, "c_proj", conv1d_new(E, E, proj_std, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(mlp, "c_fc", conv1d_new(E, inner, std, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(mlp, "c_proj", conv1d_new(inner, E, proj_std, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(b, "ln_1", layer_norm(E, c->layer_norm_epsilon, dev));
  if (s == CT_OK) s = ct_module_add_child(b, "attn", attn), attn = NULL;
  if (s == CT_OK) s = ct_module_add_child(b, "ln_2", layer_norm(E, c->layer_norm_epsilon, dev));
  if (s == CT_OK) s = ct_module_add_child(b, "mlp", mlp), mlp = NULL;
  ct_module_free(attn), ct_module_free(mlp);
  if (s != CT_OK) return ct_module_free(b), NULL;
  return b;
}

void ct_gpt2_config_default(ct_gpt2_config *c) {
  if (!c) return;
  /* transformers.GPT2Config's defaults: GPT-2 small (124M) */
  *c = (ct_gpt2_config){.vocab_size = 50257, .n_positions = 1024, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_inner = 0,
                        .layer_norm_epsilon = 1e-5, .initializer_range = 0.02, .resid_pdrop = 0.1, .embd_pdrop = 0.1,
                        .attn_pdrop = 0.1};
  snprintf(c->activation_function, sizeof c->activation_function, "gelu_new");
}

ct_status ct_gpt2_config_check(const ct_gpt2_config *c) {
  const char *op = "ct_gpt2_config_check";
  if (!c) return ct__null_status(op, "config");
  int64_t f[5] = {c->vocab_size, c->n_positions, c->n_embd, c->n_layer, c->n_head};
  const char *names[5] = {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head"};
  for (int i = 0; i < 5; i++)
    if (f[i] < 1 || f[i] > ((int64_t)1 << 31))
      return ct__error(CT_EINVAL, "%s: %s must be in [1, 2^31], got %lld", op, names[i], (long long)f[i]);
  if (c->n_embd % c->n_head)
    return ct__error(CT_EINVAL, "%s: n_embd (%lld) must be divisible by n_head (%lld)", op, (long long)c->n_embd,
                     (long long)c->n_head);
  if (c->n_inner < 0) return ct__error(CT_EINVAL, "%s: n_inner must be >= 0 (0: 4 n_embd), got %lld", op, (long long)c->n_inner);
  if (!(c->layer_norm_epsilon > 0) || !(c->initializer_range >= 0))
    return ct__error(CT_EINVAL, "%s: layer_norm_epsilon must be > 0 and initializer_range >= 0, got %g and %g", op,
                     c->layer_norm_epsilon, c->initializer_range);
  double p[3] = {c->resid_pdrop, c->embd_pdrop, c->attn_pdrop};
  for (int i = 0; i < 3; i++)
    if (!(p[i] >= 0 && p[i] < 1))
      return ct__error(CT_EINVAL, "%s: %s must be in [0, 1), got %g", op, (const char *[]){"resid_pdrop", "embd_pdrop", "attn_pdrop"}[i],
                       p[i]);
  const char *a = c->activation_function;
  if (strcmp(a, "gelu_new") && strcmp(a, "gelu_pytorch_tanh") && strcmp(a, "gelu"))
    return ct__error(CT_EINVAL, "%s: activation_function \"%s\" is not supported (use \"gelu_new\", GPT-2's, "
                     "\"gelu_pytorch_tanh\" or \"gelu\")", op, a);
  return CT_OK;
}

ct_module *ct_gpt2_new(const ct_gpt2_config *c, ct_device dev, ct_generator *gen) {
  const char *op = "ct_gpt2_new";
  if (ct_gpt2_config_check(c) != CT_OK) return ct__error_prefix("%s", op), NULL;
  int64_t E = c->n_embd;
  if (!ct__check_new(op, 2, (int64_t[]){c->vocab_size, E}, CT_F32, dev)) return NULL;
  gpt2_ctx *g = malloc(sizeof *g);
  if (!g) CT_FAIL_NULL(CT_ENOMEM, "%s: out of memory", op);
  g->c = *c;
  g->gelu_exact = strcmp(c->activation_function, "gelu") == 0;
  ct_module *m = ct_module_new("GPT2LMHeadModel", lm_forward, g, free); /* the root owns the settings */
  ct_module *tr = m ? ct_module_new("GPT2Model", transformer_forward, g, NULL) : NULL;
  ct_status s = m && tr ? CT_OK : ct_last_status();
  double std = c->initializer_range;
  ct_module *emb[2] = {NULL, NULL};
  for (int i = 0; i < 2 && s == CT_OK; i++) {
    emb[i] = ct_embedding_new(i ? c->n_positions : c->vocab_size, E, CT_NO_PADDING_IDX, dev, gen);
    ct_tensor *w = emb[i] ? ct_module_tensor(emb[i], "weight") : NULL;
    ct_tensor *fresh = w ? ct_randn(2, ct_tensor_shape(w), 0, std, CT_F32, dev, gen) : NULL; /* normal(0, 0.02) */
    ct_no_grad_begin();
    s = fresh ? ct_copy_(w, fresh) : ct_last_status();
    ct_no_grad_end();
    ct_tensor_free(fresh);
    if (s == CT_OK) s = ct_module_add_child(tr, i ? "wpe" : "wte", emb[i]);
    else ct_module_free(emb[i]);
  }
  ct_module **blocks = s == CT_OK ? calloc((size_t)c->n_layer, sizeof *blocks) : NULL;
  if (s == CT_OK && !blocks) s = ct__error(CT_ENOMEM, "%s: out of memory", op);
  for (int64_t i = 0; i < c->n_layer && s == CT_OK; i++)
    if (!(blocks[i] = block_new(g, dev, gen))) s = ct_last_status();
  if (s == CT_OK) s = ct_module_add_child(tr, "h", ct_sequential_new((int)c->n_layer, blocks)); /* keys h.0, h.1, ... */
  else if (blocks)
    for (int64_t i = 0; i < c->n_layer; i++) ct_module_free(blocks[i]);
  free(blocks);
  if (s == CT_OK) s = ct_module_add_child(tr, "ln_f", layer_norm(E, c->layer_norm_epsilon, dev));
  if (s == CT_OK) s = ct_module_add_child(m, "transformer", tr), tr = NULL;
  ct_module_free(tr);
  if (s != CT_OK) { /* a failed ct_module_new freed g; else the root frees it */
    ct_module_free(m);
    if (!strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
    return NULL;
  }
  return m;
}

const ct_gpt2_config *ct_gpt2_config_of(ct_module *m) {
  if (!m) return ct__null_arg("ct_gpt2_config_of", "m");
  if (strcmp(ct_module_type(m), "GPT2LMHeadModel") != 0)
    CT_FAIL_NULL(CT_EINVAL, "ct_gpt2_config_of: m is a %s, not a model made by ct_gpt2_new", ct_module_type(m));
  return &((const gpt2_ctx *)ct_module_ctx(m))->c;
}

/* ---- incremental decoding with a KV cache */

struct ct_gpt2_cache {
  ct_module *m;
  int64_t batch, len;
  int64_t n_layer;
  ct_tensor **k, **v; /* per layer (B, H, n_positions, head_dim), of the parameters' dtype and device */
};

ct_gpt2_cache *ct_gpt2_cache_new(ct_module *m, int64_t batch) {
  const char *op = "ct_gpt2_cache_new";
  const ct_gpt2_config *c = m ? ct_gpt2_config_of(m) : NULL;
  if (!c) return m ? (ct__error_prefix("%s", op), NULL) : ct__null_arg(op, "m");
  if (batch < 1) CT_FAIL_NULL(CT_EINVAL, "%s: batch must be >= 1, got %lld", op, (long long)batch);
  ct_tensor *w = ct_module_tensor(m, "transformer.wte.weight");
  int64_t shape[4] = {batch, c->n_head, c->n_positions, c->n_embd / c->n_head};
  ct_gpt2_cache *kc = ct__calloc(1, sizeof *kc, "a KV cache");
  if (!kc) return NULL;
  kc->m = m, kc->batch = batch, kc->n_layer = c->n_layer;
  kc->k = ct__calloc((size_t)c->n_layer, sizeof *kc->k, "a KV cache");
  kc->v = kc->k ? ct__calloc((size_t)c->n_layer, sizeof *kc->v, "a KV cache") : NULL;
  int ok = kc->v != NULL;
  for (int64_t l = 0; ok && l < c->n_layer; l++) {
    kc->k[l] = ct_empty(4, shape, ct_tensor_dtype(w), ct_tensor_device(w));
    kc->v[l] = kc->k[l] ? ct_empty(4, shape, ct_tensor_dtype(w), ct_tensor_device(w)) : NULL;
    ok = kc->v[l] != NULL;
    if (kc->k[l]) ct__untrack(kc->k[l]); /* the cache owns them, whatever scope is open */
    if (kc->v[l]) ct__untrack(kc->v[l]);
  }
  if (!ok) return ct_gpt2_cache_free(kc), ct__error_prefix("%s", op), NULL;
  return kc;
}

void ct_gpt2_cache_free(ct_gpt2_cache *kc) {
  if (!kc) return;
  for (int64_t l = 0; l < kc->n_layer; l++) {
    if (kc->k) ct_tensor_free(kc->k[l]);
    if (kc->v) ct_tensor_free(kc->v[l]);
  }
  free(kc->k), free(kc->v), free(kc);
}

int64_t ct_gpt2_cache_length(const ct_gpt2_cache *kc) {
  if (!kc) return ct__null_status("ct_gpt2_cache_length", "cache"), -1;
  return kc->len;
}

/* One block on the new positions [len, len + t), their keys and values appended to layer l's cache. */
static ct_tensor *cached_block(ct_module *blk, const gpt2_ctx *g, ct_gpt2_cache *kc, int64_t l, ct_tensor *x) {
  int64_t E = g->c.n_embd, H = g->c.n_head, B = ct_tensor_shape(x)[0], t = ct_tensor_shape(x)[1], len = kc->len;
  ct_module *attn = ct_module_child(blk, "attn");
  ct_tensor *h = ct_module_forward(ct_module_child(blk, "ln_1"), x);
  ct_tensor *qkv = h ? ct_module_forward(ct_module_child(attn, "c_attn"), h) : NULL;
  ct_tensor *q = qkv ? heads(qkv, 0, E, H) : NULL, *k = q ? heads(qkv, 1, E, H) : NULL, *v = k ? heads(qkv, 2, E, H) : NULL;
  ct_tensor *kslot = v ? ct_narrow(kc->k[l], 2, len, t) : NULL, *vslot = kslot ? ct_narrow(kc->v[l], 2, len, t) : NULL;
  ct_status s = vslot ? ct_copy_(kslot, k) : ct_last_status();
  if (s == CT_OK) s = ct_copy_(vslot, v);
  ct_tensor *keys = s == CT_OK ? ct_narrow(kc->k[l], 2, 0, len + t) : NULL, *vals = keys ? ct_narrow(kc->v[l], 2, 0, len + t) : NULL;
  /* query i (position len + i) sees keys 0 .. len + i: is_causal's top-left diagonal when the cache
   * was empty, nothing to mask for one new token, else a mask with the diagonal moved by len */
  ct_tensor *mask = NULL;
  if (vals && len > 0 && t > 1) {
    ct_device dev = ct_tensor_device(x);
    ct_tensor *ri = ct_arange((double)len, (double)(len + t), 1, CT_I64, dev), *rj = ct_arange(0, (double)(len + t), 1, CT_I64, dev);
    ct_tensor *rows = ri ? ct_reshape(ri, 2, (int64_t[]){t, 1}) : NULL, *cols = rj ? ct_reshape(rj, 2, (int64_t[]){1, len + t}) : NULL;
    mask = rows && cols ? ct_ge(rows, cols) : NULL;
  }
  ct_tensor *a = vals && (mask || !(len > 0 && t > 1)) ? ct_scaled_dot_product_attention(q, keys, vals, mask, 0, len == 0, 0) : NULL;
  ct_tensor *p = a ? ct_permute(a, (int[]){0, 2, 1, 3}) : NULL, *y = p ? ct_reshape(p, 3, (int64_t[]){B, t, E}) : NULL;
  ct_tensor *o = y ? ct_module_forward(ct_module_child(attn, "c_proj"), y) : NULL;
  ct_tensor *x1 = o ? ct_add(x, o) : NULL;
  ct_tensor *f = x1 ? ct_module_forward(ct_module_child(blk, "mlp"), ct_module_forward(ct_module_child(blk, "ln_2"), x1)) : NULL;
  return f ? ct_add(x1, f) : NULL;
}

ct_tensor *ct_gpt2_forward_cached(ct_module *m, ct_tensor *ids, ct_gpt2_cache *kc) {
  const char *op = "ct_gpt2_forward_cached";
  if (!m || !ids || !kc) return ct__null_arg(op, !m ? "m" : !ids ? "ids" : "cache");
  if (kc->m != m) CT_FAIL_NULL(CT_EINVAL, "%s: the cache was made for another model", op);
  const gpt2_ctx *g = ctx_of(m);
  char s[160];
  if (ct_tensor_ndim(ids) != 2 || ct_tensor_shape(ids)[0] != kc->batch || ct_tensor_shape(ids)[1] < 1)
    CT_FAIL_NULL(CT_ESHAPE, "%s: ids must be (%lld, t >= 1) (the cache's batch), got %s", op, (long long)kc->batch,
                 ct_shape_str(ids, s, sizeof s));
  int64_t t = ct_tensor_shape(ids)[1];
  if (kc->len + t > g->c.n_positions)
    CT_FAIL_NULL(CT_ESHAPE, "%s: %lld cached and %lld new tokens exceed n_positions = %lld (start a new cache on the last "
                 "tokens)", op, (long long)kc->len, (long long)t, (long long)g->c.n_positions);
  ct_module *tr = ct_module_child(m, "transformer");
  ct_no_grad_begin();
  ct_scope_begin();
  ct_tensor *tok = ct_module_forward(ct_module_child(tr, "wte"), ids);
  ct_tensor *pos = tok ? ct_arange((double)kc->len, (double)(kc->len + t), 1, CT_I64, ct_tensor_device(ids)) : NULL;
  ct_tensor *pe = pos ? ct_module_forward(ct_module_child(tr, "wpe"), pos) : NULL;
  ct_tensor *x = pe ? ct_add(tok, pe) : NULL;
  ct_module *h = ct_module_child(tr, "h");
  for (int64_t l = 0; x && l < g->c.n_layer; l++) {
    char name[24];
    snprintf(name, sizeof name, "%lld", (long long)l);
    x = cached_block(ct_module_child(h, name), g, kc, l, x);
  }
  ct_tensor *hf = x ? ct_module_forward(ct_module_child(tr, "ln_f"), x) : NULL;
  ct_tensor *logits = hf ? ct_linear(hf, ct_module_tensor(m, "transformer.wte.weight"), NULL) : NULL;
  if (logits) logits = ct_scope_keep(logits), kc->len += t;
  ct_scope_end();
  ct_no_grad_end();
  if (!logits && !strstr(ct_last_error(), op)) ct__error_prefix("%s", op);
  return logits;
}
