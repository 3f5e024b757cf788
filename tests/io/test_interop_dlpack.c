/* tests/io/test_interop_dlpack.c: DLPack between cuttle and NumPy / PyTorch, through Python's
 * ctypes: tests/io/dlpack_interop.py loads this build's libcuttle.so, wraps the struct ct_to_dlpack
 * returns in a "dltensor" capsule for numpy.from_dlpack and torch.from_dlpack, and hands the
 * structs of torch.utils.dlpack.to_dlpack and ndarray.__dlpack__ to ct_from_dlpack. It checks the
 * values, the strides (transposes, slices, channels_last), that both sides use one memory (the same
 * address, and writes seen both ways), lifetimes, an op and autograd on a PyTorch tensor imported
 * as a leaf, and a capsule no consumer took; the script's docstring has the list.
 *
 * The interpreter is $CUTTLE_PYTHON (the build folder's venv, scripts/python_env.sh); a missing torch
 * or numpy is a failure unless CUTTLE_INTEROP_OPTIONAL=1. In the sanitizer build libcuttle.so
 * carries ASan and UBSan, whose runtimes must be loaded first: the test preloads the ones this
 * process runs with (from /proc/self/maps) into Python, with leak detection off there (CPython
 * keeps its objects at exit on purpose). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char script[4096], lib[4096], preload[8192];

/* The sanitizer runtimes this process has loaded, as an LD_PRELOAD value ("" when none): ASan's
 * first, as it requires. */
static void find_sanitizer_runtimes(void) {
  const char *names[2] = {"libasan.so", "libubsan.so"};
  for (int k = 0; k < 2; k++) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
      char *path = strchr(line, '/');
      if (!path) continue;
      path[strcspn(path, "\n")] = '\0';
      if (strncmp(strrchr(path, '/') + 1, names[k], strlen(names[k])) || strstr(preload, path)) continue;
      size_t n = strlen(preload);
      snprintf(preload + n, sizeof preload - n, "%s%s", n ? ":" : "", path);
    }
    if (f) fclose(f);
  }
}

static void test_numpy_and_torch(void **state) {
  (void)state;
  char cmd[20000];
  if (preload[0])
    snprintf(cmd, sizeof cmd, "LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 '%s' '%s' '%s'", preload, ct_test_python(), script,
             lib);
  else
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", ct_test_python(), script, lib);
  fprintf(stderr, "%s\n", cmd);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const char *src = getenv("CUTTLE_SOURCE_DIR"), *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(script, sizeof script, "%s/tests/io/dlpack_interop.py", src ? src : ".");
  snprintf(lib, sizeof lib, "%s/libcuttle.so", bin ? bin : ".");
  if (access(lib, R_OK) != 0) {
    fprintf(stderr, "%s is missing: build the cuttle_shared target (cmake --build builds it)\n", lib);
    return 1;
  }
  find_sanitizer_runtimes();
  int rc = ct_test_require_python("numpy, torch");
  if (rc != 0) return rc;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_numpy_and_torch)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
