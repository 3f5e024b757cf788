#!/bin/sh
# The GPU job, for a machine with an NVIDIA GPU (Debian-ish, CUDA 13 in /usr/local/cuda, cmake,
# ninja, compute-sanitizer, PyTorch for the peer benchmarks). In order:
#   1. build cuttle with the CUDA backend into build-gpu/ (Ninja, Release, CUTTLE_CUDA=ON);
#   2. run the whole CTest suite (GPU tests run here instead of skipping);
#   3. run the op tests again under `compute-sanitizer --tool memcheck` with CUTTLE_CUDA_NO_CACHE=1,
#      so every tensor is its own cudaMalloc and out-of-bounds accesses are caught;
#   4. run the GPU benchmarks (`cuttle bench`: gemm, overhead, matmul-sweep, norms, bandwidth,
#      train with the PyTorch peer when torch sees the GPU), tables in $logs/bench_*.log, CSVs in
#      $logs/bench_*.csv; BENCH_QUICK=1 runs their --quick configurations.
# Logs go to $OUT when it is set (else build-gpu/logs/). Exits non-zero when a step fails, after
# running the remaining ones.
set -u
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
logs="${OUT:-build-gpu/logs}"
mkdir -p "$logs"
status=0
step() { # step NAME CMD...: run CMD, log to $logs/NAME.log, remember a failure
  name="$1"; shift
  echo "== $name: $*"
  if "$@" >"$logs/$name.log" 2>&1; then echo "   ok ($logs/$name.log)"; else
    rc=$?; echo "   FAILED rc=$rc, last lines of $logs/$name.log:"; tail -n 30 "$logs/$name.log"; status=1; fi
}

{ nvidia-smi; nvcc --version; } >"$logs/machine.log" 2>&1 || true
gen=""; command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
step configure cmake -S . -B build-gpu $gen -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=ON
step build cmake --build build-gpu -j "$(nproc)"
[ $status -ne 0 ] && { echo "build failed; see $logs"; exit 1; }

step ctest sh -c "cd build-gpu && ctest --output-on-failure -j 4"
step ctest_gpu_verbose sh -c "cd build-gpu && ctest --output-on-failure -V -R 'cuda|gpu'"

if command -v compute-sanitizer >/dev/null 2>&1; then
  for t in build-gpu/tests/test_cuda_* build-gpu/tests/test_ops* build-gpu/tests/test_*op*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    step "memcheck_$n" env CUTTLE_CUDA_NO_CACHE=1 compute-sanitizer --tool memcheck --error-exitcode 99 \
      --leak-check full "$t"
  done
else
  echo "compute-sanitizer not found: memcheck skipped" | tee "$logs/memcheck_skipped.log"
fi

cli=build-gpu/cuttle
quick=""; [ "${BENCH_QUICK:-0}" = 1 ] && quick="--quick"
pytorch=""
if /usr/bin/python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  pytorch="--pytorch"
else
  echo "PyTorch with CUDA not importable by /usr/bin/python3: bench train runs without --pytorch" | tee "$logs/bench_no_pytorch.log"
fi
step bench_gemm "$cli" bench gemm --device cuda:0 --csv "$logs/bench_gemm.csv" $quick
step bench_overhead "$cli" bench overhead --device cuda:0 --csv "$logs/bench_overhead.csv" $quick
step bench_matmul_sweep "$cli" bench matmul-sweep --device cuda:0 --csv "$logs/bench_matmul_sweep.csv" $quick
step bench_norms "$cli" bench norms --device cuda:0 --csv "$logs/bench_norms.csv" $quick
step bench_bandwidth "$cli" bench bandwidth --device cuda:0 --csv "$logs/bench_bandwidth.csv" $quick
step bench_train "$cli" bench train --device cuda:0 --no-progress $pytorch --csv "$logs/bench_train.csv" $quick
exit $status
