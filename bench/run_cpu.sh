#!/bin/sh
# The CPU benchmark run for docs/perf.md: builds cuttle (Release, no CUDA) into build-bench/ when
# build-bench/cuttle is missing, then runs, with CSVs into bench/results/ (not in git):
#   cuttle bench gemm, overhead, matmul-sweep (CPU), norms (CPU), train for mlp and cnn, each with
#   --pytorch (PyTorch's figures beside cuttle's, from the same run) where PYTHON imports torch.
# EPOCHS (default 1) sets the training epochs, THREADS (default: online cores) the threads of both
# cuttle and PyTorch, QUICK=1 passes --quick everywhere (a smoke test, not a measurement).
# MODELS (default "mlp cnn") names the train recipes (resnet18 etc. too), MAX_STEPS=N ends each
# epoch of them after N steps (--max-steps; default: whole epochs).
# PyTorch comes from Debian's python3-torch, installed with apt-get when /usr/bin/python3 cannot
# import torch; PYTHON=/path/to/python picks another interpreter (a venv with PyTorch 2.x and
# torchvision, which the resnets need), used as it is: nothing is installed for it.
# Run from anywhere; exits non-zero when a benchmark failed, after running the rest.
set -u
cd "$(dirname "$0")/.."
epochs="${EPOCHS:-1}"
threads="${THREADS:-$(nproc)}"
quick=""; [ "${QUICK:-0}" = 1 ] && quick="--quick"
models="${MODELS:-mlp cnn}"
steps=""; [ -n "${MAX_STEPS:-}" ] && steps="--max-steps $MAX_STEPS"
python="${PYTHON:-/usr/bin/python3}"
out=bench/results
cli=build-bench/cuttle
mkdir -p "$out"
status=0

if [ ! -x "$cli" ]; then
  cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=OFF && cmake --build build-bench -j "$(nproc)" --target cuttle_cli || exit 1
fi
if [ -z "${PYTHON:-}" ] && ! /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
  echo "== installing python3-torch (PyTorch for the peer comparison)"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y python3-torch || {
    echo "cannot install python3-torch: the benchmarks run without --pytorch"; }
fi
pytorch=""; "$python" -c "import torch" >/dev/null 2>&1 && pytorch="--pytorch --python $python"
[ -n "$pytorch" ] || echo "$python cannot import torch: the benchmarks run without --pytorch"

run() { # run NAME ARGS...: cuttle bench ARGS, the table to the terminal and $out/NAME.txt
  name="$1"; shift
  echo "== cuttle bench $*"
  "$cli" bench "$@" --csv "$out/$name.csv" >"$out/$name.txt"
  rc=$?
  cat "$out/$name.txt"
  [ $rc -eq 0 ] || { echo "   FAILED (rc=$rc): cuttle bench $*"; status=1; }
}

{ uname -a; lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)'
  [ -n "$pytorch" ] && "$python" -c "import torch; print('torch', torch.__version__)"; } >"$out/machine.txt"
run gemm_cpu gemm --device cpu $pytorch $quick
run overhead_cpu overhead --device cpu $pytorch $quick
run matmul_sweep_cpu matmul-sweep --device cpu $pytorch $quick
run norms_cpu norms --device cpu $pytorch $quick
for m in $models; do
  run "train_${m}_cpu" train --model "$m" --device cpu --epochs "$epochs" --threads "$threads" --no-progress $pytorch $steps $quick
done
echo "results in $out/ (machine: $out/machine.txt)"
exit $status
