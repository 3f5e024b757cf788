/* tests/io/test_interop_sequence.c: the sequence models' ops against PyTorch itself. For each case
 * cuttle computes outputs and gradients in float64 from inputs drawn here, writes inputs, results
 * and options to a safetensors file, and tests/io/sequence_interop.py (run by $CUTTLE_PYTHON, the
 * build folder's venv with torch) recomputes them with torch.nn.functional and torch.nn, printing
 * each tensor's max |cuttle - torch| and failing above 1e-9 (relative):
 *  - scaled_dot_product_attention (the CPU's fused kernels): plain, causal with Tq < Tk, a bool
 *    mask, an additive mask broadcast over the batch with a scale; output and grads of q, k, v;
 *  - embedding with padding_idx: output and the weight's gradient;
 *  - cross_entropy with class weights, ignore_index and label smoothing, each reduction: loss and
 *    the logits' gradient;
 *  - nn.MultiheadAttention (batch_first, causal and not): cuttle's state_dict loaded strictly into
 *    torch's module, whose output (need_weights=False) must equal cuttle's.
 * A missing torch is a failure, not a skip, unless CUTTLE_INTEROP_OPTIONAL=1. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static char script[4096];

/* Write the n named tensors and the options (metadata) to DIR/case.safetensors and run the peer. */
static void check_with_torch(const char *name, int n, const char *const *names, ct_tensor *const *ts, int nmeta,
                             const ct_metadata_kv *meta) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096], cmd[9000];
  snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
  ct_assert_ok(ct_safetensors_save(path, n, names, ts, nmeta, meta));
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", ct_test_python(), script, path);
  int rc = system(cmd);
  ct_test_rmdir(dir);
  if (rc != 0) fail_msg("%s: sequence_interop.py reported a difference or failed (exit %d)", name, rc);
}

static ct_tensor *leaf(int ndim, const int64_t *shape, ct_generator *g) {
  ct_tensor *t = ct_assert_nonnull(ct_randn(ndim, shape, 0, 1, CT_F64, CT_DEVICE_CPU, g));
  ct_assert_ok(ct_requires_grad_(t, 1));
  return t;
}

static void sdpa_case(const char *name, int mask_kind, int causal, double scale) {
  ct_scope_begin();
  ct_generator g = ct_generator_new(21);
  int64_t B = 2, H = 3, Tq = 70, Tk = 90, D = 16, Dv = 8;
  ct_tensor *q = leaf(4, (int64_t[]){B, H, Tq, D}, &g), *k = leaf(4, (int64_t[]){B, H, Tk, D}, &g), *v = leaf(4, (int64_t[]){B, H, Tk, Dv}, &g);
  ct_tensor *mask = NULL;
  if (mask_kind == 1) { /* bool: about 70% of the keys, key 0 always */
    ct_tensor *u = ct_assert_nonnull(ct_rand(2, (int64_t[]){Tq, Tk}, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
    ct_tensor *col = ct_assert_nonnull(ct_arange(0, (double)Tk, 1, CT_F64, CT_DEVICE_CPU));
    ct_tensor *w = ct_assert_nonnull(ct_add(u, ct_assert_nonnull(ct_mul_scalar(ct_assert_nonnull(ct_eq(col, ct_assert_nonnull(ct_scalar(0, CT_F64, CT_DEVICE_CPU)))), 1.0))));
    mask = ct_assert_nonnull(ct_gt(w, ct_assert_nonnull(ct_scalar(0.3, CT_F64, CT_DEVICE_CPU))));
  } else if (mask_kind == 2) {
    mask = ct_assert_nonnull(ct_randn(4, (int64_t[]){1, H, Tq, Tk}, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
  }
  ct_tensor *r = ct_assert_nonnull(ct_randn(4, (int64_t[]){B, H, Tq, Dv}, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
  ct_tensor *out = ct_assert_nonnull(ct_scaled_dot_product_attention(q, k, v, mask, 0, causal, scale));
  assert_string_equal(ct_grad_fn_name(out), "scaled_dot_product_attention"); /* the fused kernels */
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(out, r)), 0, NULL, 0))));
  const char *names[9] = {"q", "k", "v", "r", "out", "grad_q", "grad_k", "grad_v", "mask"};
  ct_tensor *ts[9] = {q, k, v, r, out, ct_grad(q), ct_grad(k), ct_grad(v), mask};
  char sc[32];
  snprintf(sc, sizeof sc, "%.17g", scale);
  ct_metadata_kv meta[3] = {{"case", "sdpa"}, {"is_causal", causal ? "1" : "0"}, {"scale", sc}};
  check_with_torch(name, mask ? 9 : 8, names, ts, 3, meta);
  ct_scope_end();
}

static void test_sdpa(void **state) {
  (void)state;
  sdpa_case("sdpa_plain", 0, 0, 0);
  sdpa_case("sdpa_causal", 0, 1, 0);
  sdpa_case("sdpa_bool_mask", 1, 0, 0);
  sdpa_case("sdpa_float_mask_scale", 2, 0, 0.3);
}

static void test_embedding(void **state) {
  (void)state;
  ct_scope_begin();
  ct_generator g = ct_generator_new(5);
  ct_tensor *w = leaf(2, (int64_t[]){11, 5}, &g);
  ct_tensor *idx = ct_assert_nonnull(ct_randint(2, (int64_t[]){6, 7}, 0, 11, CT_I64, CT_DEVICE_CPU, &g));
  ct_tensor *y = ct_assert_nonnull(ct_embedding(w, idx, 2));
  ct_tensor *r = ct_assert_nonnull(ct_randn(3, (int64_t[]){6, 7, 5}, 0, 1, CT_F64, CT_DEVICE_CPU, &g));
  ct_assert_ok(ct_backward(ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(y, r)), 0, NULL, 0))));
  const char *names[5] = {"weight", "indices", "r", "out", "grad_weight"};
  ct_tensor *ts[5] = {w, idx, r, y, ct_grad(w)};
  ct_metadata_kv meta[2] = {{"case", "embedding"}, {"padding_idx", "2"}};
  check_with_torch("embedding", 5, names, ts, 2, meta);
  ct_scope_end();
}

static void test_cross_entropy(void **state) {
  (void)state;
  const char *reductions[3] = {"mean", "sum", "none"};
  for (int red = 0; red < 3; red++) {
    ct_scope_begin();
    ct_generator g = ct_generator_new(8);
    ct_tensor *logits = leaf(2, (int64_t[]){12, 5}, &g);
    /* torch's default ignore_index -100, then class 1 as ignore_index (where -100 is no target) */
    int64_t tv[2][12] = {{0, 3, -100, 4, 1, 1, 2, -100, 0, 3, 2, 4}, {0, 3, 2, 4, 1, 1, 2, 0, 0, 3, 2, 4}};
    ct_tensor *w = ct_assert_nonnull(ct_rand(1, (int64_t[]){5}, 0.5, 2, CT_F64, CT_DEVICE_CPU, &g));
    for (int ig = 0; ig < 2; ig++) {
      int64_t ignore = ig ? 1 : -100;
      ct_tensor *target = ct_assert_nonnull(ct_from_host(tv[ig], 1, (int64_t[]){12}, CT_I64, CT_DEVICE_CPU));
      ct_tensor *lg = ct_assert_nonnull(ct_detach(logits));
      ct_assert_ok(ct_requires_grad_(lg, 1));
      ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy_ex(lg, target, w, ignore, (ct_reduction)red, 0.1));
      ct_tensor *l = red == 2 ? ct_assert_nonnull(ct_sum(ct_assert_nonnull(ct_mul(loss, ct_assert_nonnull(ct_arange(1, 13, 1, CT_F64, CT_DEVICE_CPU)))), 0, NULL, 0)) : loss;
      ct_assert_ok(ct_backward(l));
      const char *names[5] = {"logits", "target", "weight", "loss", "grad_logits"};
      ct_tensor *ts[5] = {lg, target, w, loss, ct_grad(lg)};
      char name[64], igs[16];
      snprintf(name, sizeof name, "cross_entropy_%s_%d", reductions[red], ig);
      snprintf(igs, sizeof igs, "%lld", (long long)ignore);
      ct_metadata_kv meta[5] = {{"case", "cross_entropy"}, {"reduction", reductions[red]}, {"ignore_index", igs},
                                {"label_smoothing", "0.1"}, {"grad_weights", "arange"}};
      check_with_torch(name, 5, names, ts, 5, meta);
    }
    ct_scope_end();
  }
}

static void test_multihead_attention(void **state) {
  (void)state;
  for (int causal = 0; causal < 2; causal++) {
    ct_scope_begin();
    ct_generator g = ct_generator_new(13);
    ct_module *m = ct_assert_nonnull(ct_multihead_attention_new(12, 3, 0.0, 1, 1, CT_DEVICE_CPU, &g));
    ct_named_tensor nt[8];
    int n = ct_module_named_tensors(m, 1, nt, 8);
    assert_int_equal(n, 4);
    const char *want[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    const char *names[8];
    ct_tensor *ts[8];
    for (int i = 0; i < n; i++) {
      assert_string_equal(nt[i].name, want[i]);
      names[i] = nt[i].name;
      ts[i] = ct_assert_nonnull(ct_cast(nt[i].tensor, CT_F64)); /* torch runs in float64 on the same values */
    }
    ct_tensor *x = ct_assert_nonnull(ct_randn(3, (int64_t[]){2, 7, 12}, 0, 1, CT_F32, CT_DEVICE_CPU, &g));
    ct_tensor *y = ct_assert_nonnull(ct_multihead_attention_forward(m, x, x, x, NULL, causal));
    names[4] = "x", ts[4] = ct_assert_nonnull(ct_cast(x, CT_F64));
    names[5] = "out", ts[5] = ct_assert_nonnull(ct_cast(y, CT_F64));
    ct_metadata_kv meta[4] = {{"case", "multihead_attention"}, {"num_heads", "3"}, {"is_causal", causal ? "1" : "0"}, {"tol", "1e-5"}};
    check_with_torch(causal ? "mha_causal" : "mha", 6, names, ts, 4, meta);
    ct_module_free(m);
    ct_scope_end();
  }
}

int main(void) {
  int rc = ct_test_require_python("numpy, torch, safetensors.torch");
  if (rc != 0) return rc;
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/sequence_interop.py", src ? src : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_sdpa), cmocka_unit_test(test_embedding),
                                     cmocka_unit_test(test_cross_entropy), cmocka_unit_test(test_multihead_attention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
