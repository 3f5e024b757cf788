/* cuttle/gpt2.h: GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask
 * Learners") as Hugging Face's transformers builds it (GPT2LMHeadModel), with its names, its
 * configuration and its files, so that a directory written by save_pretrained loads here and one
 * written here loads with GPT2LMHeadModel.from_pretrained. */
#ifndef CUTTLE_GPT2_H
#define CUTTLE_GPT2_H

#include "cuttle/export.h"

#include "cuttle/nn.h"
#include "cuttle/status.h"
#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* transformers.GPT2Config's fields that shape the model (config.json's names). */
typedef struct {
  int64_t vocab_size;          /* tokens; 50257 for GPT-2's BPE, 256 for a byte model */
  int64_t n_positions;         /* the longest sequence (the position table's rows) */
  int64_t n_embd;              /* the width E */
  int64_t n_layer;             /* blocks */
  int64_t n_head;              /* heads; E % n_head == 0 */
  int64_t n_inner;             /* the MLP's hidden width; 0 for 4 E (config.json's null) */
  double layer_norm_epsilon;   /* 1e-5 */
  double initializer_range;    /* the std of the normal initialization, 0.02 */
  double resid_pdrop, embd_pdrop, attn_pdrop; /* dropout probabilities, 0.1 each */
  char activation_function[24]; /* "gelu_new" (GPT-2's tanh form), "gelu_pytorch_tanh" (the same), "gelu" (erf) */
} ct_gpt2_config;

/* Fill *c with GPT2Config()'s defaults: GPT-2 small, 124M parameters (12 layers, 12 heads, 768
 * wide, 1024 positions, 50257 tokens). Nothing for a NULL c. */
CT_API void ct_gpt2_config_default(ct_gpt2_config *c);

/* CT_OK, or CT_EINVAL naming the field: sizes outside [1, 2^31], n_embd not divisible by n_head,
 * n_inner < 0, layer_norm_epsilon <= 0, initializer_range < 0, a dropout outside [0, 1), or an
 * activation_function other than the three above. */
CT_API ct_status ct_gpt2_config_check(const ct_gpt2_config *c);

/* A new GPT2LMHeadModel on dev, initialized as transformers' GPT2PreTrainedModel._init_weights:
 * Conv1D weights and both embeddings normal(0, initializer_range), biases 0, LayerNorms (1, 0), and
 * each block's two c_proj weights normal(0, initializer_range / sqrt(2 n_layer)) (GPT-2's scaled
 * residual initialization). gen NULL: the default generator. Its state_dict is GPT2LMHeadModel's
 * without the tied lm_head.weight: transformer.wte.weight (V, E), transformer.wpe.weight (P, E),
 * transformer.h.{i}.ln_1.{weight,bias}, .attn.c_attn.{weight (E, 3E), bias}, .attn.c_proj.{weight
 * (E, E), bias}, .ln_2, .mlp.c_fc.{weight (E, inner), bias}, .mlp.c_proj.{weight (inner, E),
 * bias}, transformer.ln_f.{weight,bias}. ct_module_forward(m, ids): ids (B, T) int64 token ids,
 * T <= n_positions -> logits (B, T, V) of the parameters' dtype: token and position embeddings,
 * n_layer pre-LN blocks (causal self-attention through ct_scaled_dot_product_attention, an MLP
 * with GELU), a last LayerNorm and the lm_head tied to wte (logits = h wte^T). Dropout runs in
 * training mode (ct_module_train). The caller frees m. Errors (NULL): those of
 * ct_gpt2_config_check, CT_EDEVICE, CT_ENOMEM; the forward's: CT_ESHAPE for ids that are not 2-D
 * or longer than n_positions, CT_EINVAL for an id outside [0, vocab_size), naming it. */
CT_API ct_module *ct_gpt2_new(const ct_gpt2_config *c, ct_device dev, ct_generator *gen);

/* The configuration of a model made by ct_gpt2_new or loaded by ct_gpt2_from_pretrained (owned by
 * m). NULL with CT_EINVAL for another module. */
CT_API const ct_gpt2_config *ct_gpt2_config_of(ct_module *m);

/* Load a GPT-2 from a directory in Hugging Face's layout: DIR/config.json (GPT2Config's JSON) and
 * DIR/model.safetensors, as GPT2LMHeadModel.save_pretrained writes them (keys "transformer.*", the
 * tied lm_head.weight absent or equal) or as the hub's original GPT-2 has them (GPT2Model's keys
 * without "transformer.", with attn.bias / attn.masked_bias mask buffers, which are ignored). path
 * may also name the safetensors file itself, with config.json beside it. Conv1D weights are (in,
 * out), as stored; the tensors are converted to the model's float32 (a float16 or bfloat16 file too). *out
 * receives the model on dev, in eval mode; the caller frees it. Errors: CT_EINVAL for a NULL
 * argument; CT_EIO naming the file that cannot be read; CT_EFORMAT naming the file and the field
 * for a config.json that is not JSON, lacks n_layer, n_head, n_embd, n_positions or vocab_size
 * (or has one of the wrong type), names an activation_function other than the three above or asks
 * for scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn; CT_EFORMAT naming the key for a
 * tensor missing from the file, one whose shape disagrees with the config, or a key the model does
 * not have; the safetensors parser's errors; CT_ENOMEM. */
CT_API ct_status ct_gpt2_from_pretrained(const char *path, ct_device dev, ct_module **out);

/* Write m (a GPT-2 of ct_gpt2_new or ct_gpt2_from_pretrained) in save_pretrained's layout: the
 * directory dir (created, with its parents, if missing), dir/config.json (GPT2Config's fields,
 * "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2") and dir/model.safetensors (the
 * state_dict with "transformer." keys, the tied lm_head.weight left out, metadata {"format":
 * "pt"}), each written whole or not at all, so GPT2LMHeadModel.from_pretrained(dir) loads it.
 * Errors: CT_EINVAL for a NULL argument or an m that is not a GPT-2; CT_EIO naming the path that
 * cannot be created or written; CT_ENOMEM. */
CT_API ct_status ct_gpt2_save_pretrained(ct_module *m, const char *dir);

/* A KV cache for decoding (the keys and values of past positions, so each new token costs one
 * position's work instead of a forward over the whole sequence), as transformers' past_key_values:
 * for each layer, keys and values (batch, n_head, n_positions, head_dim) of m's parameters' dtype on
 * their device, empty (length 0). It belongs to m (ct_gpt2_forward_cached refuses another model);
 * the caller frees it, before m. Errors (NULL): CT_EINVAL for a NULL m, an m that is not a GPT-2,
 * or batch < 1; CT_ENOMEM. */
typedef struct ct_gpt2_cache ct_gpt2_cache;
CT_API ct_gpt2_cache *ct_gpt2_cache_new(ct_module *m, int64_t batch);
CT_API void ct_gpt2_cache_free(ct_gpt2_cache *cache); /* nothing for NULL */
/* The positions the cache holds; -1 with CT_EINVAL for NULL. */
CT_API int64_t ct_gpt2_cache_length(const ct_gpt2_cache *cache);
/* The logits (batch, t, vocab_size) of t new tokens ids (batch, t) int64 at positions len .. len +
 * t - 1 after the cache's len, each attending to every earlier position and itself, as
 * ct_module_forward over the whole sequence would give them (the same values to rounding); their
 * keys and values are appended (len grows by t). Runs without grad and without dropout (eval).
 * t may be the whole prompt (prefill), then 1 per generated token. Errors (NULL, the cache
 * unchanged): CT_EINVAL for a NULL argument or a cache of another model; CT_ESHAPE for ids not
 * (batch, t >= 1) or len + t > n_positions; the embedding's CT_EINVAL for an id past the
 * vocabulary. */
CT_API ct_tensor *ct_gpt2_forward_cached(ct_module *m, ct_tensor *ids, ct_gpt2_cache *cache);

#ifdef __cplusplus
}
#endif
#endif
