#!/bin/sh
# The GPU job on a GPU machine that has Debian and a network (an NVIDIA GPU, CUDA 13 in
# /usr/local/cuda, PyTorch for the peer benchmarks): the same job as the GPU kit's, so there is one
# list of GPU checks. It makes the kit (scripts/gpu_kit.sh, which installs what is missing) and
# runs it: OUT (default build-gpukit/out) gets summary.txt, failures.txt, machine.txt, ldd.txt and
# logs.tar.gz. Arguments after OUT go to run.sh (--steps a,b,... to rerun some).
set -eu
cd "$(dirname "$0")/.."
out="${1:-build-gpukit/out}"
[ $# -gt 0 ] && shift
./scripts/gpu_kit.sh build-gpukit
exec bash build-gpukit/run.sh "$out" "$@"
