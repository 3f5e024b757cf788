/* tests/core/test_dispatch.c: a kernel a backend lacks is an error, never a call through NULL
 * (core/backend.h, issue 18).
 *
 * 1. CT_KERNEL_CALL on a backend whose kernel table is empty (the CPU's device interface, no kernel)
 *    returns CT_EUNSUPPORTED with a message that names the op, the backend, the kernel, the dtype,
 *    the memory format and the device, for every kernel of core/kernels.def.
 * 2. The public ops on tensors of that backend fail the same way, with no crash: the ops reach their
 *    kernels only through the dispatch (scripts/kernel_tables.sh checks the sources for the rest).
 * 3. Every backend built lists the kernels it lacks, and ct__supports says no for each of them.
 * 4. ct__supports answers what the backends' tables say of the half dtypes. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "core/backend.h"

static ct_backend empty_backend; /* the CPU's device interface, an empty kernel table */

static void make_empty_backend(void) {
  empty_backend = ct__cpu_backend;
  empty_backend.name = "kernel-less";
  memset(&empty_backend.kernels, 0, sizeof empty_backend.kernels);
}

static ct_tensor *cpu_tensor(int64_t n) {
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)(i % 7) - 3.0f;
  return ct_assert_nonnull(ct_from_host(v, 1, &n, CT_F32, CT_DEVICE_CPU));
}

/* the message of the last error names the kernel, the backend, the dtype, the format and the device */
static void assert_missing(ct_status s, const char *kernel) {
  assert_int_equal(s, CT_EUNSUPPORTED);
  const char *m = ct_last_error();
  if (!strstr(m, kernel) || !strstr(m, "kernel-less") || !strstr(m, "float32") || !strstr(m, "contiguous") ||
      !strstr(m, "cpu") || !strstr(m, "test_op"))
    fail_msg("message for %s: %s", kernel, m);
  ct_clear_error();
}

static void test_every_kernel_through_the_dispatch(void **state) {
  (void)state;
  const ct_backend *be = &empty_backend;
  ct_tensor *t = cpu_tensor(8);
  ct_conv2d_opts co = {0};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  ct_adam_args aa = {0};
  ct_sgd_args sa = {0};
  /* the macro itself, on kernels of every shape of signature */
  assert_missing(CT_KERNEL_CALL(be, copy, "test_op", t, t, t), "copy");
  assert_missing(CT_KERNEL_CALL(be, unary, "test_op", t, CT_UNARY_NEG, t, t), "unary");
  assert_missing(CT_KERNEL_CALL(be, binary_backward, "test_op", t, CT_BINARY_ADD, 0, t, t, t, t), "binary_backward");
  assert_missing(CT_KERNEL_CALL(be, conv2d, "test_op", t, t, t, t, NULL, &co), "conv2d");
  assert_missing(CT_KERNEL_CALL(be, pool2d_nhwc_backward, "test_op", t, CT_POOL_MAX, t, t, t, &po), "pool2d_nhwc_backward");
  assert_missing(CT_KERNEL_CALL(be, random, "test_op", t, t, CT_DIST_UNIFORM, 0.0, 1.0, 1, 0), "random");
  assert_missing(CT_KERNEL_CALL(be, adam_step, "test_op", t, t, t, t, t, &aa), "adam_step");
  assert_missing(CT_KERNEL_CALL(be, sgd_step, "test_op", t, t, t, NULL, &sa), "sgd_step");
  /* and the error of every kernel of the list, each naming its kernel */
  for (int k = 0; k < CT_K_KERNEL_COUNT; k++) assert_missing(ct__kernel_missing(be, (ct_kernel_id)k, "test_op", t), ct__kernel_names[k]);
  for (int k = 0; k < CT_K_COUNT; k++) {
    assert_non_null(ct__kernel_names[k]);
    assert_false(ct__supports(be, (ct_kernel_id)k, CT_F32, CT_CONTIGUOUS_FORMAT));
    assert_false(ct__has_kernel(be, (ct_kernel_id)k));
  }
  ct_tensor_free(t);
}

/* t moved onto the kernel-less backend (its memory is the CPU's, which that backend allocates) */
static ct_tensor *on_empty(ct_tensor *t) {
  t->storage->backend = &empty_backend;
  return t;
}

static void test_ops_fail_cleanly(void **state) {
  (void)state;
  ct_tensor *a = on_empty(cpu_tensor(16)), *b = on_empty(cpu_tensor(16));
  int64_t s44[2] = {4, 4}, s4d[4] = {1, 1, 4, 4}, s1[1] = {2};
  ct_tensor *m = ct_assert_nonnull(ct_reshape(a, 2, s44));
  ct_tensor *img = ct_assert_nonnull(ct_reshape(a, 4, s4d));
  int64_t iv[2] = {0, 1};
  ct_tensor *idx = on_empty(ct_assert_nonnull(ct_from_host(iv, 1, s1, CT_I64, CT_DEVICE_CPU)));
  ct_tensor *idx2 = ct_assert_nonnull(ct_reshape(idx, 2, (int64_t[]){2, 1})); /* views need no kernel */
  ct_tensor *mt = ct_assert_nonnull(ct_transpose(m, 0, 1));
  ct_conv2d_opts co = {0};
  ct_pool2d_opts po = {.kernel = {2, 2}};
  ct_tensor *w = on_empty(ct_assert_nonnull(ct_zeros(4, (int64_t[]){1, 1, 2, 2}, CT_F32, CT_DEVICE_CPU)));
  /* each op must fail at once with CT_EUNSUPPORTED, its message naming the kernel it lacks */
#define MUST_FAIL(what, call)                                                                             \
  do {                                                                                                  \
    ct_tensor *out = (call);                                                                            \
    if (out) fail_msg("%s ran on a backend with no kernels", what);                                     \
    if (ct_last_status() != CT_EUNSUPPORTED || !strstr(ct_last_error(), "kernel-less"))                 \
      fail_msg("%s: status %d, message %s", what, ct_last_status(), ct_last_error());                   \
    printf("# %-24s %s\n", what, ct_last_error());                                                      \
    ct_clear_error();                                                                                   \
  } while (0)
  MUST_FAIL("add", ct_add(a, b));
  MUST_FAIL("mul_scalar", ct_mul_scalar(a, 2.0));
  MUST_FAIL("gt", ct_gt(a, b));
  MUST_FAIL("relu", ct_relu(a));
  MUST_FAIL("exp", ct_exp(a));
  MUST_FAIL("sum", ct_sum(a, 0, NULL, 0));
  MUST_FAIL("max", ct_max(a, 0, 0, NULL));
  MUST_FAIL("matmul", ct_matmul(m, m));
  MUST_FAIL("conv2d", ct_conv2d(img, w, NULL, &co));
  MUST_FAIL("max_pool2d", ct_max_pool2d(img, &po));
  MUST_FAIL("conv2d_relu_max_pool2d", ct_conv2d_relu_max_pool2d(img, w, NULL, &co, &po));
  MUST_FAIL("softmax", ct_softmax(m, 1));
  MUST_FAIL("index_select", ct_index_select(m, 0, idx));
  MUST_FAIL("gather", ct_gather(m, 0, idx2));
  MUST_FAIL("contiguous", ct_contiguous(mt));
#undef MUST_FAIL
  assert_int_equal(ct_fill_(a, 1.0), CT_EUNSUPPORTED);
  ct_clear_error();
  ct_tensor_free(w), ct_tensor_free(mt), ct_tensor_free(idx2), ct_tensor_free(idx);
  ct_tensor_free(img), ct_tensor_free(m), ct_tensor_free(b), ct_tensor_free(a);
}

static void test_backends_built(void **state) {
  (void)state;
  for (int kind = 0; kind < 3; kind++) {
    const ct_backend *be = ct__backend((ct_device_kind)kind);
    if (!be) continue;
    int lacks = 0;
    printf("# %s lacks:", be->name);
    for (int k = 0; k < CT_K_KERNEL_COUNT; k++)
      if (!ct__has_kernel(be, (ct_kernel_id)k)) {
        printf(" %s", ct__kernel_names[k]);
        assert_false(ct__supports(be, (ct_kernel_id)k, CT_F32, CT_CONTIGUOUS_FORMAT));
        lacks++;
      }
    printf("%s\n", lacks ? "" : " nothing");
    /* the kernels every front-end needs to work at all */
    assert_true(ct__has_kernel(be, CT_K_copy) && ct__has_kernel(be, CT_K_binary) && ct__has_kernel(be, CT_K_matmul));
    assert_true(ct__supports(be, CT_K_matmul, CT_F32, CT_CONTIGUOUS_FORMAT));
  }
  /* the CPU takes float16/bfloat16 matmul and the fused conv + relu + pool as they are, and fuses relu
   * into max pooling; its conv2d computes the halves in float32 through the front-end */
  const ct_backend *cpu = ct__backend(CT_CPU);
  assert_true(ct__supports(cpu, CT_K_matmul, CT_BF16, CT_CONTIGUOUS_FORMAT));
  assert_true(ct__supports(cpu, CT_K_conv2d_relu_pool2x2, CT_F16, CT_CONTIGUOUS_FORMAT));
  assert_false(ct__supports(cpu, CT_K_conv2d, CT_F16, CT_CONTIGUOUS_FORMAT));
  assert_true(ct__supports(cpu, CT_K_pool2d_max_relu, CT_F32, CT_CONTIGUOUS_FORMAT));
}

int main(void) {
  make_empty_backend();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kernel_through_the_dispatch),
      cmocka_unit_test(test_ops_fail_cleanly),
      cmocka_unit_test(test_backends_built),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
