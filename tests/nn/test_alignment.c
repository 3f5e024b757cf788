/* tests/nn/test_alignment.c: the tensor-core alignment check (ct_module_check_alignment) and the
 * shape-mismatch messages of module forward: the rule per dtype, the issues listed for Linear and
 * Conv2d sizes and the batch size, the input shape carried through conv, pool and flatten, shape
 * mismatches named with both shapes (the same words as ct_module_forward's), the first mismatch
 * kept, and the cap/count protocol. */
#include <stdio.h>
#include <string.h>
#include "testutil.h"

static ct_module *lin(int64_t in, int64_t out) { return ct_linear_new(in, out, 1, CT_DEVICE_CPU, NULL); }

static ct_module *seq_of_linears(int n, const int64_t *widths) {
  ct_module *c[16];
  for (int i = 0; i + 1 < n; i++) c[i] = lin(widths[i], widths[i + 1]);
  return ct_assert_nonnull(ct_sequential_new(n - 1, c));
}

/* Runs the check with room for 16 issues; returns its status and fills out and *n. */
static ct_status run(ct_module *m, int ndim, const int64_t *shape, ct_dtype dt, ct_alignment_issue *out, int *n) {
  ct_clear_error();
  return ct_module_check_alignment(m, ndim, shape, dt, out, 16, n);
}

static void expect_issue(const ct_alignment_issue *is, const char *layer, const char *module, const char *what, int64_t value,
                         int multiple, int64_t padded) {
  assert_string_equal(is->layer, layer);
  assert_string_equal(is->module, module);
  assert_string_equal(is->what, what);
  assert_int_equal(is->value, value);
  assert_int_equal(is->multiple, multiple);
  assert_int_equal(is->padded, padded);
}

static void test_multiples(void **state) {
  (void)state;
  assert_int_equal(ct_alignment_multiple(CT_F16), 8);
  assert_int_equal(ct_alignment_multiple(CT_BF16), 8);
  assert_int_equal(ct_alignment_multiple(CT_U8), 16);
  const ct_dtype none[] = {CT_F32, CT_F64, CT_I32, CT_I64, CT_BOOL};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) assert_int_equal(ct_alignment_multiple(none[i]), 0);
  ct_clear_error();
  assert_int_equal(ct_alignment_multiple((ct_dtype)99), -1);
  assert_int_equal(ct_last_status(), CT_EDTYPE);
}

/* The notes' Case 1 with its first layer fixed: every size that breaks the rule, in layer order,
 * with the next multiple as the fix; the batch (128) and the widths 64..8 pass. */
static void test_linear_issues(void **state) {
  (void)state;
  ct_module *m = seq_of_linears(7, (int64_t[]){15, 64, 32, 16, 8, 4, 5});
  ct_alignment_issue is[16];
  int n = -1;
  ct_assert_ok(run(m, 2, (int64_t[]){128, 15}, CT_F16, is, &n));
  assert_int_equal(n, 4);
  expect_issue(&is[0], "0", "Linear(15, 64)", "in_features", 15, 8, 16);
  expect_issue(&is[1], "4", "Linear(8, 4)", "out_features", 4, 8, 8);
  expect_issue(&is[2], "5", "Linear(4, 5)", "in_features", 4, 8, 8);
  expect_issue(&is[3], "5", "Linear(4, 5)", "out_features", 5, 8, 8);
  assert_string_equal(is[0].message, "Linear(15, 64) [layer 0]: in_features 15 is not a multiple of 8 for float16: pad to 16");
  /* bfloat16 has the same rule and names itself */
  ct_assert_ok(run(m, 2, (int64_t[]){128, 15}, CT_BF16, is, &n));
  assert_int_equal(n, 4);
  assert_non_null(strstr(is[3].message, "out_features 5 is not a multiple of 8 for bfloat16: pad to 8"));
  /* 8-bit (CT_U8): multiples of 16, so 8 and 32..16 are judged again */
  ct_assert_ok(run(m, 2, (int64_t[]){128, 15}, CT_U8, is, &n));
  assert_int_equal(n, 6); /* in 15; Linear(16, 8) out 8; Linear(8, 4) in 8, out 4; Linear(4, 5) in 4, out 5 */
  expect_issue(&is[1], "3", "Linear(16, 8)", "out_features", 8, 16, 16);
  /* float32 and float64: no rule */
  ct_assert_ok(run(m, 2, (int64_t[]){128, 15}, CT_F32, is, &n));
  assert_int_equal(n, 0);
  ct_assert_ok(run(m, 2, (int64_t[]){128, 15}, CT_F64, is, &n));
  assert_int_equal(n, 0);
  ct_module_free(m);
}

/* The batch size: once, at the first Linear, whatever the number of Linears; for an input of
 * more than 2 dims, the rows are the product of the leading sizes. */
static void test_batch_once(void **state) {
  (void)state;
  ct_module *m = seq_of_linears(4, (int64_t[]){16, 64, 32, 16});
  ct_alignment_issue is[16];
  int n = -1;
  ct_assert_ok(run(m, 2, (int64_t[]){59, 16}, CT_F16, is, &n));
  assert_int_equal(n, 1);
  expect_issue(&is[0], "0", "Linear(16, 64)", "batch size", 59, 8, 64);
  assert_non_null(strstr(is[0].message, "Linear(16, 64) [layer 0]: batch size 59 is not a multiple of 8 for float16: pad to 64"));
  ct_assert_ok(run(m, 3, (int64_t[]){4, 6, 16}, CT_F16, is, &n)); /* 24 rows */
  assert_int_equal(n, 0);
  ct_assert_ok(run(m, 3, (int64_t[]){3, 5, 16}, CT_F16, is, &n)); /* 15 rows */
  assert_int_equal(n, 1);
  expect_issue(&is[0], "0", "Linear(16, 64)", "batch size", 15, 8, 16);
  ct_module_free(m);
  /* a single Linear: its path is "" and the message has no [layer] */
  m = lin(12, 8);
  ct_assert_ok(run(m, 2, (int64_t[]){8, 12}, CT_F16, is, &n));
  assert_int_equal(n, 1);
  expect_issue(&is[0], "", "Linear(12, 8)", "in_features", 12, 8, 16);
  assert_string_equal(is[0].message, "Linear(12, 8): in_features 12 is not a multiple of 8 for float16: pad to 16");
  ct_module_free(m);
}

/* The input shape carried through Conv2d, MaxPool2d and Flatten: the reference "cnn" fed 28x28
 * reaches Linear(3136, 128) with 3136 features, fed 32x32 with 4096 (a mismatch). */
static void test_conv_propagation(void **state) {
  (void)state;
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CT_DEVICE_CPU, NULL));
  ct_alignment_issue is[16];
  int n = -1;
  ct_assert_ok(run(m, 4, (int64_t[]){64, 1, 28, 28}, CT_F16, is, &n));
  assert_int_equal(n, 2);
  expect_issue(&is[0], "0", "Conv2d(1, 32, kernel_size=3, padding=1)", "in_channels", 1, 8, 8);
  expect_issue(&is[1], "9", "Linear(128, 10)", "out_features", 10, 8, 16);
  assert_int_equal(run(m, 4, (int64_t[]){64, 1, 32, 32}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("ct_module_check_alignment: layer 7, Linear(3136, 128): input has 4096 features (shape (64, 4096)), "
                           "expected 3136");
  assert_int_equal(n, 2); /* still listed */
  /* the batch, at the first Conv2d, after its own sizes */
  ct_assert_ok(run(m, 4, (int64_t[]){20, 1, 28, 28}, CT_F16, is, &n));
  assert_int_equal(n, 3);
  expect_issue(&is[1], "0", "Conv2d(1, 32, kernel_size=3, padding=1)", "batch size", 20, 8, 24);
  ct_module_free(m);
  /* the "mlp": the batch at its first Linear, which comes after Flatten */
  m = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, NULL));
  ct_assert_ok(run(m, 4, (int64_t[]){30, 1, 28, 28}, CT_F16, is, &n));
  assert_int_equal(n, 2);
  expect_issue(&is[0], "1", "Linear(784, 256)", "batch size", 30, 8, 32);
  expect_issue(&is[1], "5", "Linear(128, 10)", "out_features", 10, 8, 16);
  ct_module_free(m);
}

/* A pooling layer's ceil_mode and dilation are carried as the op sizes its output: the walk's
 * features at the Linear are the forward's. */
static void test_pool_options_propagation(void **state) {
  (void)state;
  static const struct {
    ct_pool2d_opts pool;
    int64_t hw, features; /* input side, features after the pool (one channel) */
  } cases[] = {
      {{.kernel = {2, 2}, .ceil_mode = 1}, 5, 9},     /* floor would give 2 x 2 */
      {{.kernel = {2, 2}, .dilation = {2, 2}}, 6, 4}, /* without dilation 3 x 3 */
      {{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = 1}, 6, 16}, /* floor: 3 x 3 */
      {{.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = 1}, 5, 9}, /* the 4th window dropped */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ct_module *m = ct_assert_nonnull(ct_sequential_new(
        3, (ct_module *[]){ct_max_pool2d_new(&cases[i].pool), ct_flatten_new(),
                           ct_linear_new(cases[i].features, 8, 1, CT_DEVICE_CPU, NULL)}));
    int64_t in[4] = {8, 1, cases[i].hw, cases[i].hw};
    int n = -1;
    ct_alignment_issue is[4];
    ct_assert_ok(run(m, 4, in, CT_F16, is, &n));
    /* and the forward agrees: the Linear takes what the pool gives */
    ct_tensor *x = ct_assert_nonnull(ct_randn(4, in, 0, 1, CT_F32, CT_DEVICE_CPU, NULL));
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    assert_int_equal(ct_tensor_shape(y)[1], 8);
    ct_tensor_free(y), ct_tensor_free(x);
    ct_module_free(m);
  }
}

/* Nested Sequentials are named by path, as in state_dict names. */
static void test_nested_paths(void **state) {
  (void)state;
  ct_module *inner = ct_sequential_new(2, (ct_module *[]){ct_relu_new(), lin(16, 5)});
  ct_module *m = ct_assert_nonnull(ct_sequential_new(2, (ct_module *[]){lin(16, 16), inner}));
  ct_alignment_issue is[16];
  int n = -1;
  ct_assert_ok(run(m, 2, (int64_t[]){8, 16}, CT_F16, is, &n));
  assert_int_equal(n, 1);
  expect_issue(&is[0], "1.1", "Linear(16, 5)", "out_features", 5, 8, 8);
  ct_module_free(m);
}

/* A mismatch: CT_ESHAPE naming the layer and both shapes, in the words of ct_module_forward; the
 * first one is kept when there are several; the issues are listed anyway. */
static void test_mismatch(void **state) {
  (void)state;
  ct_module *m = seq_of_linears(7, (int64_t[]){128, 64, 32, 16, 8, 4, 5});
  ct_alignment_issue is[16];
  int n = -1;
  assert_int_equal(run(m, 2, (int64_t[]){128, 15}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("ct_module_check_alignment: layer 0, Linear(128, 64): input has 15 features (shape (128, 15)), "
                           "expected 128; pass an input (*, 128), or build Linear(15, 64)");
  assert_int_equal(n, 3);
  expect_issue(&is[0], "4", "Linear(8, 4)", "out_features", 4, 8, 8);
  /* float32 has no rule, and the shapes are still checked */
  assert_int_equal(run(m, 2, (int64_t[]){128, 15}, CT_F32, is, &n), CT_ESHAPE);
  assert_int_equal(n, 0);
  /* forward says the same */
  ct_tensor *x = ct_assert_nonnull(ct_zeros(2, (int64_t[]){128, 15}, CT_F32, CT_DEVICE_CPU));
  ct_clear_error();
  assert_null(ct_module_forward(m, x));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("ct_module_forward (Sequential): child 0, Linear(128, 64): input has 15 features (shape (128, 15)), "
                           "expected 128");
  ct_tensor_free(x);
  ct_module_free(m);

  /* two mismatches: layer 0 is named, not layer 1 */
  m = ct_assert_nonnull(ct_sequential_new(2, (ct_module *[]){lin(128, 64), lin(32, 8)}));
  assert_int_equal(run(m, 2, (int64_t[]){8, 15}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Linear(128, 64): input has 15 features");
  assert_null(strstr(ct_last_error(), "layer 1"));
  /* fed right, the second mismatch shows: Linear(32, 8) gets 64 features */
  assert_int_equal(run(m, 2, (int64_t[]){8, 128}, CT_F16, NULL, NULL), CT_EINVAL); /* out NULL, cap 16 */
  ct_clear_error();
  assert_int_equal(ct_module_check_alignment(m, 2, (int64_t[]){8, 128}, CT_F16, NULL, 0, NULL), CT_ESHAPE);
  ct_assert_error_contains("layer 1, Linear(32, 8): input has 64 features (shape (8, 64)), expected 32");
  /* a scalar input */
  assert_int_equal(run(m, 0, NULL, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Linear(128, 64): input is a scalar (shape ()), expected (*, 128)");
  ct_module_free(m);
}

/* Conv2d, BatchNorm2d and MaxPool2d inputs that do not fit, checked and run. */
static void test_conv_mismatch(void **state) {
  (void)state;
  ct_module *m = ct_assert_nonnull(ct_sequential_new(
      3, (ct_module *[]){ct_conv2d_new(3, 16, 3, NULL, 1, CT_DEVICE_CPU, NULL), ct_batchnorm2d_new(16, 0, 0, CT_DEVICE_CPU),
                         ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}})}));
  ct_alignment_issue is[16];
  int n = -1;
  assert_int_equal(run(m, 4, (int64_t[]){8, 4, 10, 10}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Conv2d(3, 16, kernel_size=3): input has 4 channels (shape (8, 4, 10, 10)), expected 3");
  assert_int_equal(n, 1);
  expect_issue(&is[0], "0", "Conv2d(3, 16, kernel_size=3)", "in_channels", 3, 8, 8);
  ct_tensor *x = ct_assert_nonnull(ct_zeros(4, (int64_t[]){8, 4, 10, 10}, CT_F32, CT_DEVICE_CPU));
  ct_clear_error();
  assert_null(ct_module_forward(m, x));
  ct_assert_error_contains("ct_module_forward (Sequential): child 0, Conv2d(3, 16, kernel_size=3): input has 4 channels "
                           "(shape (8, 4, 10, 10)), expected 3");
  ct_tensor_free(x);
  assert_int_equal(run(m, 3, (int64_t[]){3, 10, 10}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Conv2d(3, 16, kernel_size=3): input has shape (3, 10, 10), expected (N, 3, H, W)");
  assert_int_equal(run(m, 4, (int64_t[]){8, 3, 2, 10}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Conv2d(3, 16, kernel_size=3): input (H, W) of shape (8, 3, 2, 10) is smaller than the");
  /* 3x3 leaves 1x8; the 2x2 pool does not fit 1 row */
  assert_int_equal(run(m, 4, (int64_t[]){8, 3, 3, 10}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 2, MaxPool2d(kernel_size=2): input (H, W) of shape (8, 16, 1, 8) is smaller than the pooling window");
  ct_assert_ok(run(m, 4, (int64_t[]){8, 3, 4, 10}, CT_F16, is, &n));
  ct_module_free(m);

  /* BatchNorm2d fed the wrong channels */
  m = ct_assert_nonnull(ct_sequential_new(1, (ct_module *[]){ct_batchnorm2d_new(16, 0, 0, CT_DEVICE_CPU)}));
  assert_int_equal(run(m, 4, (int64_t[]){8, 12, 4, 4}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, BatchNorm2d(16): input has shape (8, 12, 4, 4), expected (N, 16, *)");
  ct_module_free(m);
  /* a pool fed 2 dims, a flatten fed 1 */
  m = ct_assert_nonnull(ct_sequential_new(1, (ct_module *[]){ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}})}));
  assert_int_equal(run(m, 2, (int64_t[]){8, 12}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, MaxPool2d(kernel_size=2): input has shape (8, 12), expected (N, C, H, W)");
  ct_module_free(m);
  m = ct_assert_nonnull(ct_sequential_new(2, (ct_module *[]){ct_flatten_new(), lin(4, 8)}));
  assert_int_equal(run(m, 1, (int64_t[]){8}, CT_F16, is, &n), CT_ESHAPE);
  ct_assert_error_contains("layer 0, Flatten(): input has shape (8,), expected at least 2 dims");
  ct_module_free(m);
}

/* A bare Linear's forward names it with its sizes. */
static void test_forward_message(void **state) {
  (void)state;
  ct_module *m = lin(3, 2);
  ct_tensor *x = ct_assert_nonnull(ct_zeros(2, (int64_t[]){5, 1}, CT_F32, CT_DEVICE_CPU));
  ct_clear_error();
  assert_null(ct_module_forward(m, x));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("ct_module_forward (Linear(3, 2)): input has 1 feature (shape (5, 1)), expected 3");
  ct_tensor_free(x);
  ct_module_free(m);
}

/* At most cap issues are written; *count has them all. */
static void test_cap_and_count(void **state) {
  (void)state;
  ct_module *m = seq_of_linears(3, (int64_t[]){3, 5, 7}); /* 4 issues */
  ct_alignment_issue is[3];
  memset(is, 0x5a, sizeof is);
  int n = -1;
  ct_assert_ok(ct_module_check_alignment(m, 2, (int64_t[]){8, 3}, CT_F16, is, 2, &n));
  assert_int_equal(n, 4);
  expect_issue(&is[1], "0", "Linear(3, 5)", "out_features", 5, 8, 8);
  const unsigned char *tail = (const unsigned char *)&is[2];
  for (size_t i = 0; i < sizeof is[2]; i++) assert_int_equal(tail[i], 0x5a);
  ct_assert_ok(ct_module_check_alignment(m, 2, (int64_t[]){8, 3}, CT_F16, NULL, 0, &n));
  assert_int_equal(n, 4);
  ct_assert_ok(ct_module_check_alignment(m, 2, (int64_t[]){8, 3}, CT_F16, NULL, 0, NULL));
  ct_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_multiples),        cmocka_unit_test(test_linear_issues), cmocka_unit_test(test_batch_once),
      cmocka_unit_test(test_conv_propagation), cmocka_unit_test(test_nested_paths),  cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_conv_mismatch),    cmocka_unit_test(test_forward_message), cmocka_unit_test(test_cap_and_count),
      cmocka_unit_test(test_pool_options_propagation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
