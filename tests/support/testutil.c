/* tests/support/testutil.c: helpers shared by the tests (see testutil.h). */
#define _GNU_SOURCE
#include "testutil.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void ct__assert_ok(int s, const char *expr, const char *file, int line) {
  if (s != 0) {
    fprintf(stderr, "%s:%d: %s returned %d: %s\n", file, line, expr, s, ct_last_error());
    fail();
  }
}

void *ct__assert_nonnull(void *p, const char *expr, const char *file, int line) {
  if (!p) {
    fprintf(stderr, "%s:%d: %s returned NULL: %s\n", file, line, expr, ct_last_error());
    fail();
  }
  return p;
}

void ct_assert_error_contains(const char *needle) {
  const char *msg = ct_last_error();
  if (!strstr(msg, needle)) {
    fprintf(stderr, "expected the error to contain \"%s\", got \"%s\"\n", needle, msg);
    fail();
  }
}

const char *ct_test_data_dir(void) {
  const char *d = getenv("CUTTLE_DATA_DIR");
  if (!d) d = "/usr/share/datasets/fashion-mnist";
  char path[4096];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", d);
  if (access(path, R_OK) != 0) {
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", d);
    if (access(path, R_OK) != 0) return NULL;
  }
  return d;
}

char *ct_test_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char *dir = NULL;
  if (asprintf(&dir, "%s/cuttle-test-XXXXXX", base ? base : "/tmp") < 0) return NULL;
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

void ct_test_rmdir(char *dir) {
  if (!dir) return;
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  free(dir);
}

double *ct_test_values(ct_tensor *t) {
  int64_t n = ct_tensor_numel(t);
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  ct_assert_ok(ct_to_host(t, v, (size_t)n * sizeof(double), CT_F64));
  return v;
}

void ct_assert_close(ct_tensor *a, ct_tensor *b, double atol, double rtol) {
  ct_assert_nonnull(a);
  ct_assert_nonnull(b);
  char sa[128], sb[128];
  int same = ct_tensor_ndim(a) == ct_tensor_ndim(b);
  for (int d = 0; same && d < ct_tensor_ndim(a); d++) same = ct_tensor_shape(a)[d] == ct_tensor_shape(b)[d];
  if (!same) {
    fprintf(stderr, "shapes differ: %s vs %s\n", ct_shape_str(a, sa, sizeof sa), ct_shape_str(b, sb, sizeof sb));
    fail();
  }
  double *va = ct_test_values(a), *vb = ct_test_values(b);
  int64_t n = ct_tensor_numel(a), worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < n; i++) {
    double diff = fabs(va[i] - vb[i]), tol = atol + rtol * fabs(vb[i]);
    int bad = !(diff <= tol) && !(isnan(va[i]) && isnan(vb[i])) && !(va[i] == vb[i]);
    if (bad && (worst < 0 || diff - tol > worst_excess)) worst = i, worst_excess = diff - tol;
  }
  if (worst >= 0)
    fprintf(stderr, "not close at flat index %lld: %.10g vs %.10g (atol %g, rtol %g)\n", (long long)worst, va[worst],
            vb[worst], atol, rtol);
  free(va);
  free(vb);
  if (worst >= 0) fail();
}

void ct_assert_same_values(ct_tensor *a, ct_tensor *b, const char *what) {
  ct_assert_nonnull(a);
  ct_assert_nonnull(b);
  if (ct_tensor_dtype(a) != ct_tensor_dtype(b) || ct_tensor_numel(a) != ct_tensor_numel(b))
    fail_msg("%s: %s of %lld values against %s of %lld", what, ct_dtype_name(ct_tensor_dtype(a)),
             (long long)ct_tensor_numel(a), ct_dtype_name(ct_tensor_dtype(b)), (long long)ct_tensor_numel(b));
  double *va = ct_test_values(a), *vb = ct_test_values(b);
  int64_t n = ct_tensor_numel(a), bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (memcmp(&va[i], &vb[i], sizeof va[i]) != 0 && !(isnan(va[i]) && isnan(vb[i]))) bad = i;
  double x = bad >= 0 ? va[bad] : 0, y = bad >= 0 ? vb[bad] : 0;
  free(va);
  free(vb);
  if (bad >= 0)
    fail_msg("%s in %s, element %lld of %lld: %.17g against %.17g", what, ct_dtype_name(ct_tensor_dtype(a)), (long long)bad,
             (long long)n, x, y);
}

const char *ct_test_python(void) {
  const char *p = getenv("CUTTLE_PYTHON");
  return p && *p ? p : "python3";
}

int ct_test_require_python(const char *modules) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", ct_test_python(), modules);
  if (system(cmd) == 0) return 0;
  const char *optional = getenv("CUTTLE_INTEROP_OPTIONAL");
  int skip = optional && strcmp(optional, "1") == 0;
  printf("%s: %s cannot import %s. Run scripts/python_env.sh BUILD_DIR (scripts/test.sh does), or point "
         "CUTTLE_PYTHON (the CMake cache variable) at an interpreter that can%s\n",
         skip ? "SKIP" : "FAIL", ct_test_python(), modules,
         skip ? "; skipped because CUTTLE_INTEROP_OPTIONAL=1" : ", or set CUTTLE_INTEROP_OPTIONAL=1 to skip instead");
  return skip ? CT_TEST_SKIP : 1;
}

int ct_test_require_opencl(int need) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  int n = ct_device_count(CT_OPENCL);
  if (n >= need) return 1;
  fprintf(stderr, "need %d OpenCL device%s (PoCL with POCL_DEVICES=\"pthread pthread\"), found %d; scripts/deps.sh installs "
                  "pocl-opencl-icd. This test must not skip.\n", need, need == 1 ? "" : "s", n);
  return 0;
}

/* LeakSanitizer's defaults in the test binaries, for runs outside CTest (whose ENVIRONMENT sets
 * the same in LSAN_OPTIONS; tests/CMakeLists.txt says why): no dynamic TLS ranges recorded from
 * __tls_get_addr, whose size guess crashes the leak check's tracer on PoCL's threads
 * (tests/core/test_lsan_dynamic_tls.c). ASAN_OPTIONS and LSAN_OPTIONS override it. */
#if defined(__SANITIZE_ADDRESS__)
__attribute__((visibility("default"), used)) const char *__lsan_default_options(void) {
  return "intercept_tls_get_addr=0";
}
#endif

int ct_test_run(char *out, size_t n, const char *fmt, ...) {
  char cmd[16384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  out[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t k = fread(out, 1, n - 1, p);
  out[k] = 0;
  int st = pclose(p);
  int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  fprintf(stderr, "[%d] %s\n", rc, cmd);
  return rc;
}
