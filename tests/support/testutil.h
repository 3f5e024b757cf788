/* tests/support/testutil.h: what every cmocka test of cuttle shares. */
#ifndef CUTTLE_TESTUTIL_H
#define CUTTLE_TESTUTIL_H

#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "cuttle.h"

/* The exit code CTest counts as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt). */
#define CT_TEST_SKIP 77

/* Fail the test with ct_last_error() when p is NULL / s is not CT_OK. */
#define ct_assert_ok(s) ct__assert_ok((s), #s, __FILE__, __LINE__)
#define ct_assert_nonnull(p) ct__assert_nonnull((p), #p, __FILE__, __LINE__)
void ct__assert_ok(int s, const char *expr, const char *file, int line);
void *ct__assert_nonnull(void *p, const char *expr, const char *file, int line);
/* Assert that ct_last_error() contains needle. */
void ct_assert_error_contains(const char *needle);

/* The Fashion-MNIST directory (CUTTLE_DATA_DIR), or NULL when its files are absent. */
const char *ct_test_data_dir(void);
/* A fresh directory under $TMPDIR for the test's files, removed by the caller (ct_test_rmdir). */
char *ct_test_tmpdir(void);
/* Run a shell command (printf-style), its stdout and stderr captured into out (n bytes, always
 * terminated; the rest is dropped); the command and its exit status are echoed to stderr for the
 * test log. Returns the exit status, or -1 when it could not run or ended by a signal. For the
 * tests that drive the cuttle binary as a user does (tests/cli). */
int ct_test_run(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ct_test_rmdir(char *dir);

/* a and b have the same shape (else the test fails, printing both) and every value of a and b
 * (copied to the host as f64) is within atol + rtol |b|; prints the worst. A test that means to
 * compare different shapes reshapes one of them first. */
void ct_assert_close(ct_tensor *a, ct_tensor *b, double atol, double rtol);
/* a and b have the same dtype and numel, and every value of a is b's bit for bit (compared as
 * their exact f64 copies, so +0 and -0 differ), a NaN matching any NaN: IEEE 754 leaves a NaN
 * result's sign and payload unspecified, and they vary with the instructions a build picked. Fails
 * naming what, the first differing element and both values. */
void ct_assert_same_values(ct_tensor *a, ct_tensor *b, const char *what);
/* A host copy of t as f64 (malloc'd, numel entries). */
double *ct_test_values(ct_tensor *t);

/* The Python interpreter of the interop tests: $CUTTLE_PYTHON (tests/CMakeLists.txt sets it to the
 * build folder's venv, which scripts/python_env.sh makes), else "python3". */
const char *ct_test_python(void);
/* 0 when ct_test_python() imports `modules` (a Python import list, "torch, safetensors"). Otherwise
 * prints why and how to fix it and returns the exit code for main: 1 (a failure), or CT_TEST_SKIP
 * when CUTTLE_INTEROP_OPTIONAL=1 says that a missing interpreter or module is acceptable here. */
int ct_test_require_python(const char *modules);

/* The OpenCL tests' start: asks PoCL for two devices (POCL_DEVICES="pthread pthread", unless the
 * environment says otherwise; it must be set before the first OpenCL call, as PoCL reads it once)
 * and returns 1 when at least need OpenCL devices exist. Otherwise it says why on stderr and
 * returns 0, and the test fails rather than skips: scripts/deps.sh installs PoCL wherever the tests
 * run, and only GPU-only tests may skip. */
int ct_test_require_opencl(int need);

/* In a cmocka test of a GPU case: skip it, saying why (no CUDA device visible, or cuttle built
 * without CUDA), when ct_device_count(CT_CUDA) is 0. */
#ifdef CUTTLE_WITH_CUDA
#define CT_TEST_BUILT_WITH_CUDA 1
#else
#define CT_TEST_BUILT_WITH_CUDA 0
#endif
#define CT_TEST_SKIP_WITHOUT_GPU()                                                                    \
  do {                                                                                                \
    if (ct_device_count(CT_CUDA) == 0) {                                                              \
      printf("# skipped %s: no CUDA device (%s)\n", __func__,                                         \
             CT_TEST_BUILT_WITH_CUDA ? "the CUDA backend is built but no GPU is visible" : "built without CUDA"); \
      skip();                                                                                         \
    }                                                                                                 \
  } while (0)

#endif
