#!/bin/sh
# Configure and build cuttle into build/ (or $1), installing missing Debian packages first.
# Extra arguments go to cmake (e.g. -DCUTTLE_SANITIZE=ON).
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
dir="${1:-build}"
[ $# -gt 0 ] && shift
# CUDA AUTO unless the arguments say otherwise: ./scripts/train.sh may have configured the same
# folder without it, and the cache would keep that.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=AUTO "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
