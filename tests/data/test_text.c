/* tests/data/test_text.c: texts for language modelling (cuttle/text.h): nanoGPT's 90/10 split,
 * random windows whose targets are the inputs shifted by one, drawn the same for the same seed and
 * step (and differently for another), consecutive windows for eval, and the errors: a split
 * shorter than one window, an id outside the vocabulary, a missing file, windows past the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static ct_text *abc(int n) {
  char *s = malloc((size_t)n);
  for (int i = 0; i < n; i++) s[i] = (char)('a' + i % 26);
  ct_text *t = ct_assert_nonnull(ct_text_from_bytes(s, (size_t)n, "abc"));
  free(s);
  return t;
}

static void test_split_and_batches(void **state) {
  (void)state;
  ct_text *t = abc(1000);
  assert_int_equal(ct_text_length(t, CT_TEXT_ALL), 1000);
  assert_int_equal(ct_text_length(t, CT_TEXT_TRAIN), 900);
  assert_int_equal(ct_text_length(t, CT_TEXT_VAL), 100);
  assert_int_equal(ct_text_vocab_size(t), 256);
  ct_tensor *x, *y, *x2, *y2, *x3, *y3;
  ct_assert_ok(ct_text_batch(t, CT_TEXT_TRAIN, 8, 16, 42, 5, CT_DEVICE_CPU, &x, &y));
  ct_assert_ok(ct_text_batch(t, CT_TEXT_TRAIN, 8, 16, 42, 5, CT_DEVICE_CPU, &x2, &y2));
  ct_assert_ok(ct_text_batch(t, CT_TEXT_TRAIN, 8, 16, 42, 6, CT_DEVICE_CPU, &x3, &y3));
  assert_int_equal(ct_tensor_shape(x)[0], 8);
  assert_int_equal(ct_tensor_shape(x)[1], 16);
  assert_int_equal(ct_tensor_dtype(x), CT_I64);
  int64_t a[128], b[128], a2[128], a3[128];
  ct_assert_ok(ct_to_host(x, a, sizeof a, CT_I64));
  ct_assert_ok(ct_to_host(y, b, sizeof b, CT_I64));
  ct_assert_ok(ct_to_host(x2, a2, sizeof a2, CT_I64));
  ct_assert_ok(ct_to_host(x3, a3, sizeof a3, CT_I64));
  assert_memory_equal(a, a2, sizeof a); /* the same (seed, step): the same batch */
  assert_true(memcmp(a, a3, sizeof a) != 0);
  for (int r = 0; r < 8; r++)
    for (int k = 0; k < 16; k++) {
      assert_int_equal(b[r * 16 + k], 'a' + (a[r * 16 + k] - 'a' + 1) % 26); /* targets: the next byte */
      if (k) assert_int_equal(a[r * 16 + k], 'a' + (a[r * 16 + k - 1] - 'a' + 1) % 26); /* a contiguous window */
    }
  ct_tensor *all[] = {x, y, x2, y2, x3, y3};
  for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
  /* the validation split's windows lie in its last 10%: starting at 900 + r, with a[0] = 'a' + (900 + r) % 26 */
  ct_assert_ok(ct_text_batch(t, CT_TEXT_VAL, 64, 99, 1, 0, CT_DEVICE_CPU, &x, &y));
  int64_t v[64 * 99];
  ct_assert_ok(ct_to_host(x, v, sizeof v, CT_I64));
  for (int r = 0; r < 64; r++) assert_int_equal(v[r * 99], 'a' + 900 % 26); /* 100 tokens, windows of 100: only start 900 */
  ct_tensor_free(x), ct_tensor_free(y);
  ct_text_free(t);
}

static void test_windows(void **state) {
  (void)state;
  ct_text *t = abc(41);
  assert_int_equal(ct_text_num_windows(t, CT_TEXT_ALL, 10), 4); /* i = 0, 10, 20, 30: 30 + 11 <= 41 */
  assert_int_equal(ct_text_num_windows(t, CT_TEXT_ALL, 40), 1);
  assert_int_equal(ct_text_num_windows(t, CT_TEXT_ALL, 41), 0);
  ct_tensor *x, *y;
  ct_assert_ok(ct_text_windows(t, CT_TEXT_ALL, 10, 1, 3, CT_DEVICE_CPU, &x, &y));
  int64_t a[30], b[30];
  ct_assert_ok(ct_to_host(x, a, sizeof a, CT_I64));
  ct_assert_ok(ct_to_host(y, b, sizeof b, CT_I64));
  for (int k = 0; k < 3; k++) {
    assert_int_equal(a[k * 10], 'a' + (10 * (k + 1)) % 26);
    assert_int_equal(b[k * 10 + 9], 'a' + (10 * (k + 1) + 10) % 26);
  }
  ct_tensor_free(x), ct_tensor_free(y);
  assert_int_equal(ct_text_windows(t, CT_TEXT_ALL, 10, 2, 3, CT_DEVICE_CPU, &x, &y), CT_EINVAL);
  ct_assert_error_contains("windows 2 .. 4");
  assert_null(x);
  ct_text_free(t);
}

static void test_errors(void **state) {
  (void)state;
  ct_text *t = abc(20);
  ct_tensor *x, *y;
  assert_int_equal(ct_text_batch(t, CT_TEXT_TRAIN, 2, 18, 0, 0, CT_DEVICE_CPU, &x, &y), CT_ESHAPE);
  ct_assert_error_contains("abc's training split has 18 tokens, fewer than one window of 19");
  assert_null(x);
  assert_null(y);
  assert_int_equal(ct_text_batch(t, CT_TEXT_ALL, 0, 4, 0, 0, CT_DEVICE_CPU, &x, &y), CT_EINVAL);
  assert_int_equal(ct_text_batch(t, (ct_text_split)7, 1, 4, 0, 0, CT_DEVICE_CPU, &x, &y), CT_EINVAL);
  ct_text_free(t);
  int64_t ids[4] = {1, 2, 9, 3};
  assert_null(ct_text_from_ids(ids, 4, 9, "ids"));
  ct_assert_error_contains("id 9 at position 2");
  ct_text *u = ct_assert_nonnull(ct_text_from_ids(ids, 4, 10, "ids"));
  assert_int_equal(ct_text_vocab_size(u), 10);
  ct_text_free(u);
  assert_null(ct_text_from_file("/nonexistent/fortunes"));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("/nonexistent/fortunes");
  /* a file's bytes */
  char *dir = ct_assert_nonnull(ct_test_tmpdir()), path[4200];
  snprintf(path, sizeof path, "%s/t.txt", dir);
  FILE *f = fopen(path, "wb");
  fputs("hello, world\n", f);
  fclose(f);
  ct_text *h = ct_assert_nonnull(ct_text_from_file(path));
  assert_int_equal(ct_text_length(h, CT_TEXT_ALL), 13);
  ct_text_free(h);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_split_and_batches), cmocka_unit_test(test_windows),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
