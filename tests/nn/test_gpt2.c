/* tests/nn/test_gpt2.c: the GPT-2 of cuttle/gpt2.h on a small config: transformers' state_dict
 * names and shapes and its parameter count, its initialization, the forward's shapes and errors
 * (a sequence past n_positions, an id past the vocabulary), causality (a later token never changes
 * an earlier logit), training (a few AdamW steps overfit one sequence), and save_pretrained /
 * from_pretrained: the same logits back, and each malformed config.json or model.safetensors
 * refused with a message that names the file and the field. The comparison with transformers
 * itself is tests/io/test_interop_gpt2.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "io/gpt2_internal.h"

static ct_gpt2_config small(void) {
  ct_gpt2_config c;
  ct_gpt2_config_default(&c);
  c.vocab_size = 37, c.n_positions = 16, c.n_embd = 24, c.n_layer = 2, c.n_head = 3;
  c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0;
  return c;
}

static ct_tensor *ids(int64_t B, int64_t T, uint64_t seed) {
  ct_generator g = ct_generator_new(seed);
  return ct_assert_nonnull(ct_randint(2, (int64_t[]){B, T}, 0, 37, CT_I64, CT_DEVICE_CPU, &g));
}

static void test_state_dict_as_transformers(void **state) {
  (void)state;
  ct_gpt2_config c = small();
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  ct_named_tensor nt[64];
  int n = ct_module_named_tensors(m, 1, nt, 64);
  assert_int_equal(n, 2 + 2 * 12 + 2);
  assert_string_equal(nt[0].name, "transformer.wte.weight");
  assert_string_equal(nt[1].name, "transformer.wpe.weight");
  const char *block[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                           "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                           "mlp.c_proj.weight", "mlp.c_proj.bias"};
  int64_t E = 24, shapes[12][2] = {{E, 0}, {E, 0}, {E, 3 * E}, {3 * E, 0}, {E, E}, {E, 0}, {E, 0}, {E, 0}, {E, 4 * E}, {4 * E, 0},
                                   {4 * E, E}, {E, 0}};
  for (int l = 0; l < 2; l++)
    for (int k = 0; k < 12; k++) {
      char want[96];
      snprintf(want, sizeof want, "transformer.h.%d.%s", l, block[k]);
      const ct_named_tensor *t = &nt[2 + l * 12 + k];
      assert_string_equal(t->name, want);
      assert_int_equal(ct_tensor_shape(t->tensor)[0], shapes[k][0]);
      if (shapes[k][1]) assert_int_equal(ct_tensor_shape(t->tensor)[1], shapes[k][1]); /* Conv1D: (in, out) */
      else assert_int_equal(ct_tensor_ndim(t->tensor), 1);
    }
  assert_string_equal(nt[26].name, "transformer.ln_f.weight");
  /* parameters: wte + wpe + 2 blocks (12 E^2 + 13 E) + ln_f */
  assert_int_equal(ct_module_num_params(m), 37 * E + 16 * E + 2 * (12 * E * E + 13 * E) + 2 * E);
  /* init: std 0.02 for the embeddings and c_attn, 0.02 / sqrt(2 n_layer) for c_proj, zero biases */
  double *w = ct_test_values(nt[4].tensor), *p = ct_test_values(nt[6].tensor), sw = 0, sp = 0;
  for (int i = 0; i < E * 3 * E; i++) sw += w[i] * w[i];
  for (int i = 0; i < E * E; i++) sp += p[i] * p[i];
  assert_float_equal(sqrt(sw / (E * 3 * E)), 0.02, 0.002);
  assert_float_equal(sqrt(sp / (E * E)), 0.02 / 2, 0.0015);
  free(w), free(p);
  double *b = ct_test_values(nt[5].tensor);
  for (int i = 0; i < 3 * E; i++) assert_true(b[i] == 0);
  free(b);
  assert_int_equal(ct_gpt2_config_of(m)->n_layer, 2);
  ct_module_free(m);
}

/* The logits of position t depend on tokens 0..t only. */
static void test_forward_is_causal(void **state) {
  (void)state;
  ct_scope_begin();
  ct_gpt2_config c = small();
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  ct_tensor *a = ids(2, 10, 1);
  int64_t *v = malloc(sizeof(int64_t) * 20);
  ct_assert_ok(ct_to_host(a, v, sizeof(int64_t) * 20, CT_I64));
  v[7] = (v[7] + 5) % 37, v[17] = (v[17] + 9) % 37; /* change token 7 of each sequence */
  ct_tensor *b = ct_assert_nonnull(ct_from_host(v, 2, (int64_t[]){2, 10}, CT_I64, CT_DEVICE_CPU));
  ct_tensor *la = ct_assert_nonnull(ct_module_forward(m, a)), *lb = ct_assert_nonnull(ct_module_forward(m, b));
  assert_int_equal(ct_tensor_ndim(la), 3);
  assert_int_equal(ct_tensor_shape(la)[2], 37);
  double *x = ct_test_values(la), *y = ct_test_values(lb);
  for (int s = 0; s < 2; s++)
    for (int t = 0; t < 10; t++) {
      double d = 0;
      for (int k = 0; k < 37; k++) d = fmax(d, fabs(x[(s * 10 + t) * 37 + k] - y[(s * 10 + t) * 37 + k]));
      if (t < 7) assert_true(d == 0);
      else assert_true(d > 0);
    }
  free(x), free(y), free(v);
  /* errors: a sequence past n_positions, an id past the vocabulary */
  assert_null(ct_module_forward(m, ids(1, 17, 2)));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("n_positions = 16");
  int64_t bad[3] = {1, 37, 2};
  assert_null(ct_module_forward(m, ct_assert_nonnull(ct_from_host(bad, 2, (int64_t[]){1, 3}, CT_I64, CT_DEVICE_CPU))));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("index 37");
  ct_module_free(m);
  ct_scope_end();
}

/* Next-token cross-entropy of one sequence falls from about log(37) under AdamW. */
static void test_training_overfits_a_sequence(void **state) {
  (void)state;
  ct_gpt2_config c = small();
  ct_generator gen = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, &gen));
  ct_module_train(m, 1);
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = 1e-2}));
  ct_tensor *seq = ids(1, 13, 4);
  double first = 0, last = 0;
  for (int step = 0; step < 60; step++) {
    ct_scope_begin();
    ct_tensor *x = ct_narrow(seq, 1, 0, 12), *y = ct_narrow(seq, 1, 1, 12);
    ct_tensor *logits = ct_assert_nonnull(ct_module_forward(m, x));
    ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(ct_reshape(logits, 2, (int64_t[]){12, 37}), ct_reshape(y, 1, (int64_t[]){12}),
                                                         CT_REDUCTION_MEAN, 0));
    double l = ct_item(loss);
    if (step == 0) first = l;
    last = l;
    ct_optimizer_zero_grad(opt);
    ct_assert_ok(ct_backward(loss));
    ct_tensor_free(ct_assert_nonnull(ct_clip_grad_norm_(m, 1.0, 2)));
    ct_assert_ok(ct_optimizer_step(opt));
    ct_scope_end();
  }
  printf("# loss %.4f -> %.4f (log 37 = %.4f)\n", first, last, log(37.0));
  assert_float_equal(first, log(37.0), 0.3);
  assert_true(last < 0.5);
  ct_optimizer_free(opt);
  ct_tensor_free(seq);
  ct_module_free(m);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_save_and_load_pretrained(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char sub[4096], path[4200];
  snprintf(sub, sizeof sub, "%s/new/model", dir); /* created with its parent */
  ct_gpt2_config c = small();
  c.n_inner = 40, c.layer_norm_epsilon = 1e-6;
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_gpt2_save_pretrained(m, sub));
  ct_module *back = NULL;
  ct_assert_ok(ct_gpt2_from_pretrained(sub, CT_DEVICE_CPU, &back));
  assert_int_equal(ct_gpt2_config_of(back)->n_inner, 40);
  assert_float_equal(ct_gpt2_config_of(back)->layer_norm_epsilon, 1e-6, 0);
  ct_tensor *x = ids(2, 9, 5);
  ct_module_train(m, 0);
  ct_tensor *la = ct_assert_nonnull(ct_module_forward(m, x)), *lb = ct_assert_nonnull(ct_module_forward(back, x));
  double *a = ct_test_values(la), *b = ct_test_values(lb);
  for (int i = 0; i < 2 * 9 * 37; i++) assert_true(a[i] == b[i]);
  free(a), free(b);
  ct_tensor_free(la), ct_tensor_free(lb), ct_tensor_free(x);
  ct_module_free(back);
  /* the safetensors file named directly, config.json beside it */
  snprintf(path, sizeof path, "%s/model.safetensors", sub);
  ct_assert_ok(ct_gpt2_from_pretrained(path, CT_DEVICE_CPU, &back));
  ct_module_free(back);
  /* a config.json whose sizes disagree with the tensors */
  snprintf(path, sizeof path, "%s/config.json", sub);
  write_file(path, "{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 24, \"n_positions\": 32, \"vocab_size\": 37, \"n_inner\": 40}");
  assert_int_equal(ct_gpt2_from_pretrained(sub, CT_DEVICE_CPU, &back), CT_EFORMAT);
  assert_null(back);
  ct_assert_error_contains("transformer.wpe.weight");
  ct_assert_error_contains("(32, 24)");
  /* configs that are refused, each naming the field */
  const char *bad[][2] = {{"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 24, \"vocab_size\": 37}", "n_positions"},
                          {"{\"n_layer\": 2.5, \"n_head\": 3, \"n_embd\": 24, \"n_positions\": 16, \"vocab_size\": 37}", "n_layer"},
                          {"{\"n_layer\": 2, \"n_head\": 5, \"n_embd\": 24, \"n_positions\": 16, \"vocab_size\": 37}", "divisible"},
                          {"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 24, \"n_positions\": 16, \"vocab_size\": 37, "
                           "\"activation_function\": \"relu\"}", "activation_function \"relu\""},
                          {"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 24, \"n_positions\": 16, \"vocab_size\": 37, "
                           "\"reorder_and_upcast_attn\": true}", "reorder_and_upcast_attn"},
                          {"[1, 2]", "not a JSON object"},
                          {"{\"n_layer\": 2, ", "not a JSON object"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_file(path, bad[i][0]);
    assert_int_equal(ct_gpt2_from_pretrained(sub, CT_DEVICE_CPU, &back), CT_EFORMAT);
    ct_assert_error_contains("config.json");
    ct_assert_error_contains(bad[i][1]);
  }
  /* a missing directory */
  snprintf(path, sizeof path, "%s/none", dir);
  assert_int_equal(ct_gpt2_from_pretrained(path, CT_DEVICE_CPU, &back), CT_EIO);
  ct_assert_error_contains("none");
  ct_module_free(m);
  ct_test_rmdir(dir);
}

/* A safetensors file from another model is refused naming a key it lacks or one it should not have. */
static void test_foreign_file_refused(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4200];
  ct_gpt2_config c = small();
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_gpt2_save_pretrained(m, dir));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ct_module *mlp = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, NULL));
  ct_assert_ok(ct_checkpoint_save(path, mlp, NULL, NULL));
  ct_module *back = NULL;
  assert_int_equal(ct_gpt2_from_pretrained(dir, CT_DEVICE_CPU, &back), CT_EFORMAT);
  ct_assert_error_contains("has no tensor \"transformer.wte.weight\"");
  ct_module_free(mlp);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

static void test_config_errors(void **state) {
  (void)state;
  ct_gpt2_config c = small();
  c.n_head = 5;
  assert_null(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("divisible");
  c = small();
  snprintf(c.activation_function, sizeof c.activation_function, "swish");
  assert_int_equal(ct_gpt2_config_check(&c), CT_EINVAL);
  ct_assert_error_contains("swish");
  c = small();
  c.attn_pdrop = 1;
  assert_int_equal(ct_gpt2_config_check(&c), CT_EINVAL);
  ct_assert_error_contains("attn_pdrop");
  assert_int_equal(ct_gpt2_config_check(NULL), CT_EINVAL);
  ct_module *lin = ct_assert_nonnull(ct_linear_new(2, 2, 1, CT_DEVICE_CPU, NULL));
  assert_null(ct_gpt2_config_of(lin));
  assert_int_equal(ct_gpt2_save_pretrained(lin, "/tmp/none"), CT_EINVAL);
  ct_module_free(lin);
}

/* Decoding with the KV cache gives the full forward's logits: a prefill of 5 tokens, a chunk of 4,
 * then 3 single tokens, for 2 sequences; and its errors leave the cache as it was. */
static void test_kv_cache_equals_full_forward(void **state) {
  (void)state;
  ct_scope_begin();
  ct_gpt2_config c = small();
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  ct_module_train(m, 0);
  ct_tensor *x = ids(2, 12, 6);
  double *full = ct_test_values(ct_assert_nonnull(ct_module_forward(m, x)));
  ct_gpt2_cache *kc = ct_assert_nonnull(ct_gpt2_cache_new(m, 2));
  int64_t chunks[5][2] = {{0, 5}, {5, 4}, {9, 1}, {10, 1}, {11, 1}};
  for (int i = 0; i < 5; i++) {
    ct_tensor *part = ct_assert_nonnull(ct_contiguous(ct_assert_nonnull(ct_narrow(x, 1, chunks[i][0], chunks[i][1]))));
    ct_tensor *lg = ct_assert_nonnull(ct_gpt2_forward_cached(m, part, kc));
    assert_int_equal(ct_tensor_shape(lg)[1], chunks[i][1]);
    double *v = ct_test_values(lg);
    for (int b = 0; b < 2; b++)
      for (int64_t t = 0; t < chunks[i][1]; t++)
        for (int k = 0; k < 37; k++) {
          double want = full[(b * 12 + chunks[i][0] + t) * 37 + k], got = v[(b * chunks[i][1] + t) * 37 + k];
          if (fabs(got - want) > 1e-5) fail_msg("chunk %d, sequence %d, position %lld: %g vs %g", i, b, (long long)(chunks[i][0] + t), got, want);
        }
    free(v);
    assert_int_equal(ct_gpt2_cache_length(kc), chunks[i][0] + chunks[i][1]);
  }
  /* 12 + 5 > 16 positions: refused, the cache unchanged */
  assert_null(ct_gpt2_forward_cached(m, ids(2, 5, 7), kc));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("n_positions = 16");
  assert_null(ct_gpt2_forward_cached(m, ids(1, 1, 7), kc)); /* another batch size */
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  assert_int_equal(ct_gpt2_cache_length(kc), 12);
  ct_module *other = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, NULL));
  assert_null(ct_gpt2_forward_cached(other, ids(2, 1, 7), kc));
  ct_assert_error_contains("another model");
  assert_null(ct_gpt2_cache_new(m, 0));
  assert_int_equal(ct_gpt2_cache_length(NULL), -1);
  ct_gpt2_cache_free(kc);
  ct_module_free(other);
  ct_module_free(m);
  free(full);
  ct_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state_dict_as_transformers), cmocka_unit_test(test_forward_is_causal),
      cmocka_unit_test(test_training_overfits_a_sequence), cmocka_unit_test(test_save_and_load_pretrained),
      cmocka_unit_test(test_foreign_file_refused),       cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_kv_cache_equals_full_forward),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
