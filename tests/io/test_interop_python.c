/* tests/io/test_interop_python.c: interop with the reference safetensors implementation.
 *
 * The interpreter is $CUTTLE_PYTHON, the build folder's venv that scripts/python_env.sh makes (with
 * safetensors from PyPI and Debian's numpy). Where it cannot import safetensors and numpy the test
 * fails and says how to fix it (or, with CUTTLE_INTEROP_OPTIONAL=1, is skipped). tests/io/interop.py writes a file with safetensors.numpy.save_file that cuttle must
 * read, and checks with safetensors.numpy.load_file a file that cuttle wrote. Both sides compute the
 * expected values from the same formula. bfloat16 is left out (numpy has no such dtype); the
 * hand-computed bytes in test_safetensors.c cover it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char script[4096];

#define NT 7
static const char *const names[NT] = {"f64", "f32", "f16", "i64", "i32", "u8", "bool"};
static const ct_dtype dtypes[NT] = {CT_F64, CT_F32, CT_F16, CT_I64, CT_I32, CT_U8, CT_BOOL};

/* The formula of values() in interop.py, element i of 24. */
static double expected_value(ct_dtype dt, int i) {
  if (dt == CT_BOOL) return i % 3 == 1;
  if (ct_dtype_is_floating(dt)) return (i - 11.5) * 0.25;
  if (dt == CT_U8) return (i * 11) % 256;
  return (double)(i - 12) * 1000003;
}

static int run_py(const char *mode, const char *path) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", ct_test_python(), script, mode, path);
  return system(cmd);
}

static void test_python_writes_cuttle_reads(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/py.safetensors", dir);
  assert_int_equal(run_py("write", path), 0);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_int_equal(ct_safetensors_count(f), NT + 2);
  for (int k = 0; k < NT; k++) {
    ct_tensor *t = ct_assert_nonnull(ct_safetensors_get(f, names[k], CT_DEVICE_CPU));
    assert_int_equal(ct_tensor_dtype(t), dtypes[k]);
    assert_int_equal(ct_tensor_ndim(t), 3);
    assert_int_equal(ct_tensor_shape(t)[0], 2);
    assert_int_equal(ct_tensor_shape(t)[1], 3);
    assert_int_equal(ct_tensor_shape(t)[2], 4);
    double *v = ct_test_values(t);
    for (int i = 0; i < 24; i++)
      if (v[i] != expected_value(dtypes[k], i)) {
        fprintf(stderr, "%s[%d] = %g, want %g\n", names[k], i, v[i], expected_value(dtypes[k], i));
        fail();
      }
    free(v);
    ct_tensor_free(t);
  }
  ct_tensor *s = ct_assert_nonnull(ct_safetensors_get(f, "scalar", CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_ndim(s), 0);
  assert_true(ct_item(s) == 2.5);
  ct_tensor_free(s);
  ct_tensor *e = ct_assert_nonnull(ct_safetensors_get(f, "empty", CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_numel(e), 0);
  assert_int_equal(ct_tensor_shape(e)[1], 5);
  ct_tensor_free(e);
  assert_string_equal(ct_safetensors_metadata(f, "written_by"), "interop.py");
  assert_string_equal(ct_safetensors_metadata(f, "note"), "\xc3\xbcnicode");
  ct_safetensors_close(f);
  ct_test_rmdir(dir);
}

static void test_cuttle_writes_python_reads(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/ct.safetensors", dir);
  const char *all_names[NT + 2];
  ct_tensor *ts[NT + 2];
  int64_t shape[3] = {2, 3, 4};
  for (int k = 0; k < NT; k++) {
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = expected_value(dtypes[k], i);
    ct_tensor *d = ct_assert_nonnull(ct_from_host(v, 3, shape, CT_F64, CT_DEVICE_CPU));
    ts[k] = ct_assert_nonnull(ct_cast(d, dtypes[k]));
    ct_tensor_free(d);
    all_names[k] = names[k];
  }
  ts[NT] = ct_assert_nonnull(ct_scalar(2.5, CT_F32, CT_DEVICE_CPU));
  int64_t eshape[2] = {0, 5};
  ts[NT + 1] = ct_assert_nonnull(ct_zeros(2, eshape, CT_F32, CT_DEVICE_CPU));
  all_names[NT] = "scalar";
  all_names[NT + 1] = "empty";
  ct_metadata_kv meta[2] = {{"written_by", "interop.py"}, {"note", "\xc3\xbcnicode"}};
  ct_assert_ok(ct_safetensors_save(path, NT + 2, all_names, ts, 2, meta));
  assert_int_equal(run_py("check", path), 0);
  for (int k = 0; k < NT + 2; k++) ct_tensor_free(ts[k]);
  ct_test_rmdir(dir);
}

int main(void) {
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/interop.py", src ? src : ".");
  int rc = ct_test_require_python("safetensors.numpy, numpy");
  if (rc != 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_python_writes_cuttle_reads),
      cmocka_unit_test(test_cuttle_writes_python_reads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
