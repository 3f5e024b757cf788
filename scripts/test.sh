#!/bin/sh
# Build cuttle and run every test (CTest). GPU tests report themselves as skipped without a GPU.
# --sanitize builds into build-asan/ with AddressSanitizer, LeakSanitizer and UBSan instead.
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  ./scripts/build.sh build-asan -DCUTTLE_SANITIZE=ON -DCUTTLE_CUDA=OFF
  cd build-asan
  # Leak checking is on by default with ASan on Linux; the OpenMP runtime's own threads are exempt.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    OMP_NUM_THREADS=1 ctest --output-on-failure -j "$(nproc)" -E 'train_e2e'
else
  ./scripts/build.sh build
  cd build
  ctest --output-on-failure -j "$(nproc)"
fi
