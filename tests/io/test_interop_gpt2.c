/* tests/io/test_interop_gpt2.c: GPT-2 shared with Hugging Face's transformers, both ways, on a small
 * config (vocab 101, 32 positions, 32 wide, 2 layers, 4 heads):
 *  - cuttle's model saved by ct_gpt2_save_pretrained loads with GPT2LMHeadModel.from_pretrained,
 *    whose logits of 8 sequences are within 1e-4 of cuttle's, and whose greedy
 *    generate(do_sample=False) continues a prompt with the same 12 tokens as cuttle's greedy loop;
 *  - a model transformers initialized and saved with save_pretrained, and the same weights in the
 *    hub's original layout (GPT2Model's keys with attn.bias / attn.masked_bias buffers), load with
 *    ct_gpt2_from_pretrained and give transformers' logits within 1e-4.
 * Each comparison prints its max difference. The transformers side is tests/io/gpt2_interop.py,
 * run by $CUTTLE_PYTHON (the build folder's venv: scripts/python_env.sh installs transformers). A
 * missing transformers is a failure, not a skip, unless CUTTLE_INTEROP_OPTIONAL=1. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char script[4096];

static int run_py(const char *mode, const char *dir) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", ct_test_python(), script, mode, dir);
  return system(cmd);
}

/* Greedy decoding without a cache: the forward over the whole sequence, the last position's
 * argmax appended, n times. ids holds the prompt's len tokens and room for n more. */
static void greedy(ct_module *m, int64_t *ids, int64_t len, int n) {
  for (int i = 0; i < n; i++, len++) {
    ct_scope_begin();
    ct_tensor *seq = ct_assert_nonnull(ct_from_host(ids, 2, (int64_t[]){1, len}, CT_I64, CT_DEVICE_CPU));
    ct_tensor *logits = ct_assert_nonnull(ct_module_forward(m, seq));
    ct_tensor *last = ct_assert_nonnull(ct_narrow(logits, 1, len - 1, 1)); /* (1, 1, V) */
    ids[len] = (int64_t)ct_item(ct_assert_nonnull(ct_argmax(last, 2, 0)));
    ct_scope_end();
  }
}

static void cuttle_to_transformers(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4200];
  ct_gpt2_config c;
  ct_gpt2_config_default(&c);
  c.vocab_size = 101, c.n_positions = 32, c.n_embd = 32, c.n_layer = 2, c.n_head = 4;
  c.initializer_range = 0.3; /* larger weights than 0.02's near-uniform logits: a generation that varies */
  ct_generator gen = ct_generator_new(9);
  ct_module *m = ct_assert_nonnull(ct_gpt2_new(&c, CT_DEVICE_CPU, &gen));
  ct_module_train(m, 0);
  snprintf(path, sizeof path, "%s/cuttle", dir);
  ct_assert_ok(ct_gpt2_save_pretrained(m, path));
  ct_scope_begin();
  ct_tensor *ids = ct_assert_nonnull(ct_randint(2, (int64_t[]){8, 20}, 0, 101, CT_I64, CT_DEVICE_CPU, &gen));
  ct_tensor *logits = ct_assert_nonnull(ct_module_forward(m, ids));
  int64_t seq[20]; /* the first sequence's 20 tokens, of which the prompt keeps 5; then 12 generated */
  ct_assert_ok(ct_to_host(ct_assert_nonnull(ct_narrow(ids, 0, 0, 1)), seq, sizeof seq, CT_I64));
  greedy(m, seq, 5, 12); /* the first sequence's 5 first tokens, then 12 */
  ct_tensor *p5 = ct_assert_nonnull(ct_from_host(seq, 2, (int64_t[]){1, 5}, CT_I64, CT_DEVICE_CPU));
  ct_tensor *gen12 = ct_assert_nonnull(ct_from_host(seq, 2, (int64_t[]){1, 17}, CT_I64, CT_DEVICE_CPU));
  snprintf(path, sizeof path, "%s/cuttle_logits.safetensors", dir);
  ct_assert_ok(ct_safetensors_save(path, 4, (const char *[]){"ids", "logits", "prompt", "generated"},
                                   (ct_tensor *[]){ids, logits, p5, gen12}, 0, NULL));
  ct_scope_end();
  assert_int_equal(run_py("check", dir), 0);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

static void transformers_to_cuttle(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4200];
  assert_int_equal(run_py("write", dir), 0);
  snprintf(path, sizeof path, "%s/hf_logits.safetensors", dir);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  ct_tensor *ids = ct_assert_nonnull(ct_safetensors_get(f, "ids", CT_DEVICE_CPU));
  ct_tensor *want = ct_assert_nonnull(ct_safetensors_get(f, "logits", CT_DEVICE_CPU));
  ct_safetensors_close(f);
  const char *layouts[2] = {"hf", "hub"};
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/%s", dir, layouts[k]);
    ct_module *m = NULL;
    ct_assert_ok(ct_gpt2_from_pretrained(path, CT_DEVICE_CPU, &m));
    ct_tensor *got = ct_assert_nonnull(ct_module_forward(m, ids));
    double *a = ct_test_values(got), *b = ct_test_values(want), d = 0;
    for (int64_t i = 0; i < ct_tensor_numel(want); i++) d = fmax(d, fabs(a[i] - b[i]));
    printf("# %s layout: gpt2 logits of 8 sequences, max |cuttle - transformers| = %.3g (tol 1e-4)\n", layouts[k], d);
    assert_true(d <= 1e-4);
    free(a), free(b);
    ct_tensor_free(got);
    ct_module_free(m);
  }
  ct_tensor_free(ids), ct_tensor_free(want);
  ct_test_rmdir(dir);
}

int main(void) {
  int rc = ct_test_require_python("torch, safetensors.torch, transformers");
  if (rc != 0) return rc;
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/gpt2_interop.py", src ? src : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(cuttle_to_transformers), cmocka_unit_test(transformers_to_cuttle)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
