#!/bin/sh
# Build what the main job needs, the library and the CLI (no tests, no fuzzers, no examples:
# ./scripts/test.sh builds those), and run `cuttle train` with its defaults (arguments are passed
# on). The CUDA backend is built only where nvcc and a GPU driver are both present: compiling it
# takes minutes, and without a driver it could not run. The run is kept in runs/<...>/ (its path is
# printed at the start and the end).
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
cuda=OFF
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  # the driver: its kernel module, or its library where the module is loaded on first use
  if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ] ||
    /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then cuda=AUTO; fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=$cuda >/dev/null
cmake --build build -j "$(nproc)" --target cuttle_cli
exec ./build/cuttle train "$@"
