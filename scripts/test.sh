#!/bin/sh
# Build cuttle and run every test (CTest). GPU tests report themselves as skipped without a GPU.
# --sanitize builds into build-asan/ with AddressSanitizer, LeakSanitizer and UBSan instead.
# The interop tests need PyTorch and safetensors: scripts/python_env.sh installs them into a virtual
# environment in the build folder (build/venv, build-asan/venv), which the tests run.
set -eu
cd "$(dirname "$0")/.."

# CTest, then every skipped test by name. CTest's summary names the tests that skipped as a whole
# (exit status 77); a cmocka case that skips inside a test that otherwise passes shows only in
# Testing/Temporary/LastTest.log, so those are listed from it. Returns CTest's status.
run_ctest() {
  rc=0
  ctest "$@" || rc=$?
  echo "Test cases skipped inside tests that ran (test: case):"
  if [ -f Testing/Temporary/LastTest.log ]; then
    awk '/^[0-9]+\/[0-9]+ Testing: / { t = $3 }
         /^\[  SKIPPED \] / && !/ test\(s\)/ { k = t ": " $4; if (!(k in seen)) { seen[k] = 1; n++; print "  " k } }
         END { if (!n) print "  none" }' Testing/Temporary/LastTest.log
  fi
  return $rc
}

if [ "${1:-}" = "--sanitize" ]; then
  ./scripts/build.sh build-asan -DCUTTLE_SANITIZE=ON -DCUTTLE_CUDA=OFF
  ./scripts/python_env.sh build-asan
  cd build-asan
  # Leak checking is on by default with ASan on Linux; the OpenMP runtime's own threads are exempt.
  # LeakSanitizer's own options (tests/lsan.supp, and intercept_tls_get_addr=0, without which its
  # tracer can crash at exit on the threads of PoCL and its LLVM) are in each test's environment,
  # tests/CMakeLists.txt.
  # Left out: the tests that train whole epochs through the CLI (train_e2e, test_cli_exercise,
  # test_cli_fmnist_png); the code they run is instrumented here by the smaller tests (test_loader,
  # test_imagefolder, test_cli_data, test_cli_amp, ...).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=1
  run_ctest --output-on-failure -j "$(nproc)" -E 'train_e2e|test_cli_exercise|test_cli_fmnist_png'
else
  ./scripts/build.sh build
  ./scripts/python_env.sh build
  cd build
  run_ctest --output-on-failure -j "$(nproc)"
fi
