#!/usr/bin/env bash
# run.sh OUT [--steps a,b,...] [--list] [--rebuild]: the GPU kit's job (issue 17), made by
# scripts/gpu_kit.sh. It runs on a GPU node with no network and no package manager, in at most
# 8 minutes, every step under its own time limit, and writes at most 8 files into OUT:
#   summary.txt   one line per step: PASS/FAIL/SKIP, the step, its seconds, the reason
#   failures.txt  the last lines of each failed step's log
#   machine.txt   nvidia-smi, the driver, /etc/os-release, the toolkit, PyTorch, the CPU
#   ldd.txt       ldd of each program, with the library path the kit used
#   logs.tar.gz   every step's log and every benchmark's CSV
# Without a GPU (CI) the GPU steps report SKIP "no GPU" and the others must pass; the format of
# summary.txt is the same. --steps runs only the named steps (after a fix: the failed ones); the
# unpacked kit and any rebuild are kept in $CUTTLE_KIT_WORK (default /tmp/cuttle-kit) for reruns.
# scripts/gpu.sh runs this same job on a GPU machine that has Debian and a network.
set -u
KIT=$(cd "$(dirname "$0")" && pwd)
OUT=""; STEPS=""; LIST=0; REBUILD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=",$2,"; shift 2 ;;
    --list) LIST=1; shift ;;
    --rebuild) REBUILD=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) OUT=$1; shift ;;
  esac
done
[ -n "$OUT" ] || [ $LIST = 1 ] || { echo "usage: run.sh OUT [--steps a,b,...] [--list] [--rebuild]" >&2; exit 2; }
WORK=${CUTTLE_KIT_WORK:-/tmp/cuttle-kit}
T0=$(date +%s)
[ -n "$OUT" ] && mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
# The whole job's budget in seconds (default 480: the 8 minutes a node's job may take). A step
# gets what is left of it at most, and one that would start with less than 10 s left is recorded
# as SKIP "out of time", so the results are always written; rerun those with --steps.
BUDGET=${CUTTLE_KIT_BUDGET_S:-480}
DEADLINE=$((T0 + BUDGET - 15))

# ---------------------------------------------------------------- the unpacked kit
mkdir -p "$WORK"
stamp=$(stat -c '%s %Y' "$KIT/payload.tar.xz" 2>/dev/null)
if [ "$(cat "$WORK/.stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$WORK/kit" && mkdir -p "$WORK/kit"
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$KIT/payload.tar.xz" | tar -C "$WORK/kit" -xf -
  else # python's lzma where the node has no xz
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$KIT/payload.tar.xz" "$WORK/kit"
  fi || { echo "run.sh: cannot unpack $KIT/payload.tar.xz" >&2; exit 1; }
  echo "$stamp" >"$WORK/.stamp"
fi
K=$WORK/kit
BIN=$K/bin
DATA=$KIT/data
REF=$K/ref

# ---------------------------------------------------------------- the node's CUDA libraries
# The toolkit's lib64, the driver's folder, and the NVIDIA wheels of the PyTorch venv (found by
# asking python3 where torch is). PyTorch itself runs with the node's environment (py()), never
# with the kit's libraries first on its path.
PY=${CUTTLE_PYTHON:-python3}
for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer; do [ -d "$d" ] && PATH="$PATH:$d"; done
export PATH
cuda_dirs=""
add_dir() { [ -d "$1" ] && case ":$cuda_dirs:" in *":$1:"*) ;; *) cuda_dirs="${cuda_dirs:+$cuda_dirs:}$1" ;; esac; }
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do add_dir "$d"; done
TORCH_SITE=$(env -u LD_LIBRARY_PATH "$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
if [ -n "$TORCH_SITE" ]; then
  for d in "$TORCH_SITE"/nvidia/*/lib "$TORCH_SITE"/nvidia/cu*/lib; do add_dir "$d"; done
fi
LIBPATH="$K/lib${cuda_dirs:+:$cuda_dirs}"
# once the node has rebuilt the programs (rebuild, below; kept in $WORK for reruns), they replace
# the carried ones
use_build() {
  [ -f "$WORK/build/.used" ] || return 0
  BIN=$WORK/build/bin
  LIBPATH="$WORK/build/lib:$K/lib${cuda_dirs:+:$cuda_dirs}"
  export BIN LIBPATH
}
use_build
export CUTTLE_DATA_DIR="$DATA" CUTTLE_SOURCE_DIR="$K/src" CUTTLE_BINARY_DIR="$WORK/bin-dir"
export CUTTLE_INTEROP_OPTIONAL=1
mkdir -p "$CUTTLE_BINARY_DIR"
ct() { LD_LIBRARY_PATH="$LIBPATH" "$@"; }    # a kit program, with the kit's libraries
py() { env -u LD_LIBRARY_PATH "$PY" "$@"; }  # PyTorch, with the node's
# a python that bench programs start (they inherit the kit's path): the node's environment first
PYWRAP=$WORK/python.sh
printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec %s "$@"\n' "$(command -v "$PY" || echo python3)" >"$PYWRAP"
chmod +x "$PYWRAP"

# A GPU is there when the driver lists one, whether or not cuttle sees it (then its steps fail,
# saying why, instead of skipping).
HAVE_GPU=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU 0' && HAVE_GPU=1
ct "$BIN/cuttle" devices 2>/dev/null | grep -q '^cuda:0' && HAVE_GPU=1
NOGPU_REASON="no GPU"
[ "$(cat "$REF/built_with_cuda" 2>/dev/null)" = OFF ] && NOGPU_REASON="no GPU (kit built without CUDA: no nvcc on the build machine)"

# ---------------------------------------------------------------- steps
LOGS=$WORK/logs
[ -n "$STEPS" ] || rm -rf "$LOGS"
mkdir -p "$LOGS"
SUMMARY=$WORK/summary.txt
[ -n "$STEPS" ] || : >"$SUMMARY"
touch "$SUMMARY"
FAILED=0
ALL_STEPS=""

selected() { ALL_STEPS="$ALL_STEPS $1"; [ $LIST = 1 ] && return 1; [ -z "$STEPS" ] || case "$STEPS" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
record() { # record STATUS NAME SECONDS REASON
  printf '%-4s %-24s %6ss  %s\n' "$1" "$2" "$3" "$4" | tee -a "$SUMMARY"
  [ -n "$OUT" ] && cp "$SUMMARY" "$OUT/summary.txt" 2>/dev/null
  [ "$1" = FAIL ] && FAILED=$((FAILED + 1))
  return 0
}
# why a log failed: the first line that says so
fail_reason() {
  # a cmocka program: the names of its failed tests and the first mismatch it printed
  names=$(grep -E '^\[  FAILED  \] [A-Za-z_]' "$1" 2>/dev/null | awk '{ print $4 }' | sort -u | tr '\n' ' ')
  if [ -n "$names" ]; then
    why=$(grep -m1 -E 'not close|!=|case .* failed|Failure' "$1" | cut -c1-90)
    echo "failed: ${names}(${why})" | cut -c1-160
    return
  fi
  r=$(grep -m1 -E 'FAIL:|error|Error|ERROR|Assertion|assert|not found|Segmentation|Aborted' "$1" 2>/dev/null | cut -c1-140)
  [ -n "$r" ] || r=$(grep -v '^\s*$' "$1" 2>/dev/null | tail -n1 | cut -c1-140)
  echo "$r"
}
# step NAME LIMIT_S GPU|ANY CMD...: run CMD under `timeout`, its output in $LOGS/NAME.log
step() {
  name=$1 limit=$2 need=$3; shift 3
  selected "$name" || return 0
  if [ "$need" = GPU ] && [ $HAVE_GPU = 0 ]; then record SKIP "$name" 0 "$NOGPU_REASON"; return 0; fi
  left=$((DEADLINE - $(date +%s)))
  if [ $left -lt 10 ]; then record SKIP "$name" 0 "out of time (the job's budget is ${BUDGET}s: rerun with --steps)"; return 0; fi
  [ "$limit" -gt $left ] && limit=$left
  s=$(date +%s.%N)
  # timeout runs a program, so a shell function runs in a child bash (the functions and variables
  # are exported below); timeout signals the child's whole process group
  CUTTLE_KIT_STEP=$name timeout -k 10 "$limit" bash -c '"$@"' step "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  secs=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc = 0 ]; then
    r=$(grep -m1 '^RESULT: ' "$LOGS/$name.log" | cut -c9-150)
    record PASS "$name" "$secs" "${r:-ok}"
  elif [ $rc = 77 ]; then
    r=$(grep -m1 -iE 'skip' "$LOGS/$name.log" | cut -c1-140)
    record SKIP "$name" "$secs" "${r:-skipped (exit 77)}"
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    record FAIL "$name" "$secs" "timed out after ${limit}s"
  else
    record FAIL "$name" "$secs" "rc=$rc: $(fail_reason "$LOGS/$name.log")"
  fi
}

# ---- 0. the machine, and whether the carried programs load here (else: rebuild from the sources)
machine() {
  { echo "== date"; date -u; echo "== kit"; cat "$REF/commit" "$REF/build_machine" 2>/dev/null
    echo "== nvidia-smi"; nvidia-smi 2>&1; nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,compute_cap --format=csv 2>&1
    echo "== /etc/os-release"; cat /etc/os-release 2>&1
    echo "== nvcc"; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1
    echo "== compute-sanitizer"; compute-sanitizer --version 2>&1 | head -n 3
    echo "== python"; py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))' 2>&1
    echo "== CUDA library folders"; echo "$cuda_dirs" | tr ':' '\n'
    echo "== cpu"; nproc; grep -m1 'model name' /proc/cpuinfo; free -g 2>/dev/null | head -n 2
    echo "== uname"; uname -a
  } >"$WORK/machine.txt" 2>&1
  cp "$WORK/machine.txt" "$LOGS/machine.txt"
  [ -n "$OUT" ] && cp "$WORK/machine.txt" "$OUT/machine.txt"
  echo "RESULT: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)"
}
# Every library a program loads must resolve to the kit, the CUDA folders, or the C runtime.
ldd_check() {
  : >"$WORK/ldd.txt"
  echo "LD_LIBRARY_PATH=$LIBPATH" >>"$WORK/ldd.txt"
  bad=0
  for f in "$BIN"/* "$K"/bin-opencl/* "$K"/lib/libcuttle.so.*.*; do
    [ -f "$f" ] || continue
    deps=$(ct ldd "$f" 2>&1)
    printf '== %s\n%s\n' "$f" "$deps" >>"$WORK/ldd.txt"
    if echo "$deps" | grep -q 'not found'; then echo "$f: $(echo "$deps" | grep 'not found' | tr -s ' \t' ' ')"; bad=1; fi
    # outside the kit and the CUDA folders only the C runtime (libc, libm, libstdc++, ...) may resolve
    echo "$deps" | awk '/=> \// { print $1, $3 }' | while read -r lib path; do
      case "$path" in "$K"/*|"$WORK"/build/*) continue ;; esac
      ok=0
      for d in $(echo "$cuda_dirs" | tr ':' ' '); do case "$path" in "$d"/*) ok=1 ;; esac; done
      ct_kit_node_lib "$lib" && ok=1
      [ $ok = 1 ] || echo "$f: $lib resolves outside the kit: $path" >>"$WORK/ldd_outside.txt"
    done
  done
  [ -n "$OUT" ] && cp "$WORK/ldd.txt" "$OUT/ldd.txt"
  if [ -s "$WORK/ldd_outside.txt" ]; then cat "$WORK/ldd_outside.txt"; rm -f "$WORK/ldd_outside.txt"; return 1; fi
  [ $bad = 0 ] || return 1
  ct "$BIN/cuttle" --help >/dev/null || return 1
  echo "RESULT: every program resolves its libraries to the kit, the CUDA folders or the C runtime"
}
# The fallback: build on the node from the carried sources and Debian headers, sm_90 only.
rebuild() {
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cudnn_lib=$(ls "$TORCH_SITE"/nvidia/cudnn/lib/libcudnn.so.9 /usr/local/cuda/lib64/libcudnn.so* 2>/dev/null | head -n1)
  cudnn_inc=$(dirname "$(ls "$TORCH_SITE"/nvidia/cudnn/include/cudnn.h /usr/local/cuda/include/cudnn.h 2>/dev/null | head -n1)")
  nccl_lib=$(ls "$TORCH_SITE"/nvidia/nccl/lib/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so* 2>/dev/null | head -n1)
  nccl_inc=$(dirname "$(ls "$TORCH_SITE"/nvidia/nccl/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null | head -n1)")
  gen=""; command -v ninja >/dev/null && gen="-G Ninja"
  cmake -S "$K/src" -B "$WORK/build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCUTTLE_CUDA=ON -DCUTTLE_CUDA_ARCHS=90 -DCUTTLE_OPENCL=OFF -DCUTTLE_MPI=OFF -DBUILD_TESTING=ON \
    -DOPENBLAS_INCLUDE="$K/dev/include" -DOPENBLAS_LIB="$K/lib/libopenblas.so" \
    -DCJSON_INCLUDE="$K/dev/include" -DCJSON_LIB="$K/lib/libcjson.so" -DCUTTLE_CJSON_INCLUDE="$K/dev/include/cjson" -DCUTTLE_CJSON_LIB="$K/lib/libcjson.so" \
    -DCMOCKA_INCLUDE="$K/dev/include" -DCMOCKA_LIB="$K/lib/libcmocka.so" \
    -DZLIB_INCLUDE_DIR="$K/dev/include" -DZLIB_LIBRARY="$K/lib/libz.so" \
    -DDLPACK_INCLUDE="$K/dev/include" -DPROTOBUF_C_INCLUDE="$K/dev/include" -DPROTOBUF_C_LIB="$K/lib/libprotobuf-c.so" \
    -DXXHASH_INCLUDE="$K/dev/include" -DPCRE2_INCLUDE="$K/dev/include" -DPCRE2_LIB="$K/lib/libpcre2-8.so" \
    -DCUTTLE_TENSORBOARD_PB_DIR="$K/dev/pb" \
    ${cudnn_lib:+-DCUDNN_LIB=$cudnn_lib} ${cudnn_inc:+-DCUDNN_INCLUDE=$cudnn_inc} \
    ${nccl_lib:+-DNCCL_LIB=$nccl_lib} ${nccl_inc:+-DNCCL_INCLUDE=$nccl_inc} || return 1
  progs=$(ls "$K/bin" | grep -v '^cuttle$' | tr '\n' ' ')
  cmake --build "$WORK/build" -j "$(nproc)" --target cuttle_cli cuttle_shared $progs || return 1
  mkdir -p "$WORK/build/bin" "$WORK/build/lib"
  cp "$WORK/build/cuttle" "$WORK/build/bin/"
  for p in $progs; do cp "$WORK/build/tests/$p" "$WORK/build/bin/"; done
  cp -P "$WORK/build"/libcuttle.so* "$WORK/build/lib/"
  touch "$WORK/build/.used"
  echo "RESULT: rebuilt on the node from the kit's sources (sm_90)"
}

. "$KIT/node_libs.sh"
export KIT K BIN DATA REF PY LIBPATH cuda_dirs TORCH_SITE PYWRAP LOGS WORK OUT
export -f ct py fail_reason machine ldd_check rebuild ct_kit_node_lib
step machine 30 ANY machine
if [ $REBUILD = 1 ]; then
  step rebuild 300 ANY rebuild
  use_build
fi
step ldd 60 ANY ldd_check
if [ $LIST = 0 ] && grep -q '^FAIL ldd ' "$SUMMARY" && [ $REBUILD = 0 ]; then
  # the carried programs do not load here: build them on the node, then check again
  STEPS_SAVED=$STEPS; STEPS=""
  step rebuild 300 ANY rebuild
  use_build
  step ldd_rebuilt 60 ANY ldd_check
  STEPS=$STEPS_SAVED
fi

# ---- 1. the devices, and the monitor with the real NVML
smi_check() {
  ct "$BIN/cuttle" smi || return 1
  ct "$BIN/cuttle" smi --json >"$LOGS/smi.json" || return 1
  cat "$LOGS/smi.json"
  py -c 'import json, sys; d = json.load(open(sys.argv[1])); g = d["gpus"]; assert d["driver"]["found"], d["driver"]; assert g, "no GPU in the JSON"; print("RESULT: driver", d["driver"]["version"], "-", len(g), "GPU(s):", g[0].get("name"))' "$LOGS/smi.json"
}
export -f smi_check
devices() {
  ct "$BIN/cuttle" devices || return 1
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
    ct "$BIN/cuttle" devices | grep -q '^cuda:0' || { echo "the driver lists a GPU and cuttle does not"; return 1; }
    echo "RESULT: $(ct "$BIN/cuttle" devices | grep -A2 '^cuda:0' | tr -s ' \n' ' ' | cut -c1-120)"
  fi
}
export -f devices
step devices 30 ANY devices
step smi 30 GPU smi_check

# ---- 2. the GPU tests (each skips by itself without a GPU; then the step is SKIP "no GPU")
gpu_test() { # gpu_test NAME LIMIT
  [ -x "$BIN/$1" ] || { selected "$1" && record FAIL "$1" 0 "not in the kit"; return 0; }
  step "$1" "$2" GPU ct "$BIN/$1"
}
gpu_test test_ops_cuda 150
# the op table again on cuDNN's legacy path (CUTTLE_CUDNN_GRAPH=0): the fallback for problems
# the graph API has no plan for (conv_plan.cu) stays proven
legacy_ops() { [ -x "$BIN/test_ops_cuda" ] || { echo "not in the kit"; return 1; }; CUTTLE_CUDNN_GRAPH=0 ct "$BIN/test_ops_cuda"; }
export -f legacy_ops
step test_ops_cuda_cudnn_legacy 150 GPU legacy_ops
gpu_test test_cuda_backend 60
gpu_test test_cuda_api 90
gpu_test test_cuda_graph 90
# the captured cnn step again on cuDNN's legacy API: when the graph API's plans cannot be captured,
# this says whether the legacy calls can
legacy_graph() { [ -x "$BIN/test_cuda_graph" ] || { echo "not in the kit"; return 1; }; CUTTLE_CUDNN_GRAPH=0 ct "$BIN/test_cuda_graph"; }
export -f legacy_graph
step test_cuda_graph_cudnn_legacy 60 GPU legacy_graph
gpu_test test_loader 90
gpu_test test_checkpoint 60
gpu_test test_autocast 90
gpu_test test_api_errors 60
gpu_test test_tensor 60
gpu_test test_cuda_coverage 120
gpu_test test_dlpack 60
gpu_test test_dispatch 30

# ---- 4. the main job on cuda:0, against the CPU's same-seed runs made when the kit was built
. "$K/src/tools/gpu_kit/train_cases.sh"
train_check() { # train_check CASE [DEVICE CLI LOG]: default cuda:0, the kit's CLI, train_CASE
  c=$1 dev=${2:-cuda:0} cli=${3:-$BIN/cuttle} log=${4:-train_$1}
  # shellcheck disable=SC2046
  # shellcheck disable=SC2086
  ct "$cli" train $(ct_train_case_args "$c") $TRAIN_EXTRA --device "$dev" --data-dir "$DATA" --no-progress \
    --metrics "$LOGS/$log.jsonl" || return 1
  acc=$(tail -n1 "$LOGS/$log.jsonl" | sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p')
  ips=$(tail -n1 "$LOGS/$log.jsonl" | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
  [ -f "$REF/$c.jsonl" ] || { echo "RESULT: test_acc $acc, $ips images/s; no CPU reference in the kit (built with --refs mlp)"; return 0; }
  ref=$(tail -n1 "$REF/$c.jsonl" | sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p')
  awk -v a="$acc" -v r="$ref" -v ips="$ips" 'BEGIN {
    d = (a - r) * 100; if (d < 0) d = -d
    printf "RESULT: test_acc %.2f%% (cpu %.2f%%, |diff| %.2f points, limit 0.5), %.0f images/s\n", a * 100, r * 100, d, ips
    exit d <= 0.5 ? 0 : 1 }' || return 1
  case "$c" in *_f16) grep -q 'scale' "$LOGS/$log.jsonl" || { echo "no GradScaler state in the metrics"; return 1; } ;; esac
}
export -f ct_train_cases ct_train_case_model ct_train_case_args train_check
for c in $(ct_train_cases); do step "train_$c" 120 GPU train_check "$c"; done
eval_check() { # the CPU's checkpoint on cuda:0: exactly the CPU's correct count
  out=$(ct "$BIN/cuttle" eval --checkpoint "$REF/mlp.safetensors" --model mlp --device cuda:0 --data-dir "$DATA") || return 1
  echo "$out"
  got=$(echo "$out" | sed -n 's/.*; \([0-9]*\) correct.*/\1/p')
  want=$(sed -n 's/.*; \([0-9]*\) correct.*/\1/p' "$REF/mlp.eval")
  [ -n "$got" ] && [ "$got" = "$want" ] || { echo "cuda:0 counted $got correct, the CPU $want"; return 1; }
  echo "RESULT: $got of 10000 correct on cuda:0, as on the CPU"
}
export -f eval_check
step eval_cpu_checkpoint 60 GPU eval_check
# the cnn again on cuDNN's legacy API (CUTTLE_CUDNN_GRAPH=0), with its algorithm cache and
# without it (cuDNN's heuristics asked on every call): the three in one run, against train_cnn's
# images/s on the graph API's kept plans
legacy() { mkdir -p "$LOGS/cudnn_legacy"; LOGS="$LOGS/cudnn_legacy" CUTTLE_CUDNN_GRAPH=0 train_check cnn; }
nocache() { mkdir -p "$LOGS/algo_cache_off"; LOGS="$LOGS/algo_cache_off" CUTTLE_CUDNN_GRAPH=0 CUTTLE_CUDNN_ALGO_CACHE=0 train_check cnn; }
export -f legacy nocache
step train_cnn_cudnn_legacy 120 GPU legacy
step train_cnn_algo_cache_off 120 GPU nocache
# --cuda-graph (tools/cuttle/graph_step.h): the step captured once in a CUDA graph and replayed,
# against the CPU's same-seed accuracy as the eager runs; the result adds the run's replay count
graph_train() {
  ct "$BIN/cuttle" train --help 2>&1 | grep -q -- '--cuda-graph' || { echo "skip: the kit's CLI has no --cuda-graph"; return 77; }
  mkdir -p "$LOGS/cuda_graph"
  out=$(LOGS="$LOGS/cuda_graph" TRAIN_EXTRA=--cuda-graph train_check "$1" 2>&1); rc=$?
  echo "$out" | grep -v '^RESULT: '
  g=$(echo "$out" | grep -m1 '^cuda graph on ' | sed 's/ (rehearsed.*//')
  [ $rc = 0 ] && echo "$g" | grep -q ' replays' || { echo "$out" | grep '^RESULT: ' | sed 's/^RESULT: /the run: /'; return 1; }
  echo "$(echo "$out" | grep -m1 '^RESULT: '); $g"
}
export -f graph_train
step train_cnn_graph 120 GPU graph_train cnn
step train_mlp_graph 90 GPU graph_train mlp

# ---- 5. NCCL: DDP's bucket path through a one-rank communicator, no mpirun
gpu_test test_nccl_one_rank 60

# ---- 6. compute-sanitizer memcheck over the op table and the device-API tests
memcheck() { # memcheck TEST
  command -v compute-sanitizer >/dev/null || { echo "skip: compute-sanitizer not on the PATH"; return 77; }
  CUTTLE_CUDA_NO_CACHE=1 ct compute-sanitizer --tool memcheck --error-exitcode 99 "$BIN/$1"
  rc=$?
  if [ $rc != 0 ] && grep -q 'Device not supported' "$LOGS/memcheck_$1.log"; then echo "skip: compute-sanitizer: Device not supported"; return 77; fi
  [ $rc = 0 ] && echo "RESULT: $(grep -m1 'ERROR SUMMARY' "$LOGS/memcheck_$1.log" 2>/dev/null || echo 'no errors')"
  return $rc
}
export -f memcheck
step memcheck_test_ops_cuda 90 GPU memcheck test_ops_cuda
step memcheck_test_cuda_api 60 GPU memcheck test_cuda_api

# ---- 7. benchmarks, PyTorch beside cuttle in the same run; CSVs into the archive
# the CSV is named after the step (CUTTLE_KIT_STEP, set by step), so that the several train steps keep one each
bench() { name=$1; shift; ct "$BIN/cuttle" bench "$name" --device cuda:0 --csv "$LOGS/${CUTTLE_KIT_STEP:-bench_$name}.csv" "$@"; }
has_opt() { ct "$BIN/cuttle" bench "$1" --help 2>&1 | grep -q -- "$2"; }
export -f bench has_opt
# bench_peer NAME ARGS...: the benchmark with its PyTorch peer (the script in the kit's py/), where
# the carried CLI has one; PyTorch runs with the node's environment (PYWRAP). Decided when the
# step runs, and passed as words of their own (paths may hold spaces).
bench_peer() {
  name=$1; shift
  if has_opt "$name" '--pytorch'; then
    bench "$name" "$@" --pytorch --python "$PYWRAP" --script "$K/py/pytorch_$(echo "$name" | tr - _).py"
  else
    bench "$name" "$@"
  fi
}
gemm_bench() {
  if has_opt gemm '--dtype'; then bench_peer gemm --dtype all --sizes 256,1024,2048,4096,8192; else bench_peer gemm; fi
}
export -f bench_peer gemm_bench
step bench_gemm 160 GPU gemm_bench
ovh_args=""; has_opt overhead '--pytorch' && ovh_args="--pytorch --python $PYWRAP --script $K/py/pytorch_overhead.py"
step bench_overhead 60 GPU bench overhead $ovh_args
train_bench() {
  extra=""; has_opt train '--pytorch-compile' && extra="--pytorch-compile"
  bench train --model "$1" --epochs 1 --no-progress --data-dir "$DATA" --pytorch --python "$PYWRAP" --script "$K/py/pytorch_recipe.py" $extra
}
export -f train_bench
step bench_train_mlp 100 GPU train_bench mlp
step bench_train_cnn 120 GPU train_bench cnn
# both recipes with cuttle's step in a CUDA graph, PyTorch eager beside it again (same run), and
# PyTorch's own CUDA graph of the step (torch.cuda.graph) where the CLI has --pytorch-graph
graph_bench() {
  has_opt train '--cuda-graph' || { echo "skip: the kit's CLI has no --cuda-graph"; return 77; }
  extra=""; has_opt train '--pytorch-graph' && extra="--pytorch-graph"
  bench train --model all --epochs 1 --no-progress --data-dir "$DATA" --cuda-graph --pytorch --python "$PYWRAP" \
    --script "$K/py/pytorch_recipe.py" $extra
}
export -f graph_bench
step bench_train_graph 150 GPU graph_bench
# torchvision's resnet18 in float32, and resnet50 in float16 autocast with a GradScaler (the teaching
# text's mixed-precision exercise, here on Fashion-MNIST), against PyTorch eager doing the same in
# the same run (bench train --amp: torch.autocast and torch.amp.GradScaler); a few hundred steps,
# so that both sides fit the limit. The H100 gave resnet18 13340 images/s (with --augment) and the
# resnet50 exercise 1991 (CIFAR-format images) with no PyTorch figure beside them.
resnet_bench() {
  has_opt train '--amp' || { echo "skip: the kit's CLI has no bench train --amp"; return 77; }
  model=$1; shift
  bench train --model "$model" --epochs 1 --max-steps 200 --test-limit 2000 --no-progress --data-dir "$DATA" \
    --pytorch --python "$PYWRAP" --script "$K/py/pytorch_recipe.py" "$@"
}
export -f resnet_bench
step bench_train_resnet18 120 GPU resnet_bench resnet18
step bench_train_resnet50_f16 150 GPU resnet_bench resnet50 --amp f16

# ---- where the cnn's step goes on the GPU (it ran at 0.45x PyTorch eager on 2026-11-26): cuttle's
# kernel profiler (--profile host, then sync), the synchronizations of 30 steps (sync-debug), then Nsight Compute's per-kernel summary of 120
# kernel launches (about 2 steps) after 400 (about 8 steps) of warm-up (--clock-control none, as the node's METHOD.md asks): ncu
# replays each kernel 10 times, about 0.26 s a launch on the H100, so 400 launches outran the step's limit on 2026-11-27
has_opt_train() { ct "$BIN/cuttle" train --help 2>&1 | grep -q -- "$1"; }
profile_cnn() {
  # cuttle's kernel profiler first (seconds): the host's time in each kernel call (launch cost), then
  # each call waited for (its execution), beside the wall time per step
  for m in host sync; do
    trace=(); [ $m = host ] && has_opt_train '--profile-trace' && trace=(--profile-trace "$LOGS/profile_trace.json")
    # CUTTLE_CUDNN_GRAPH=log: a line per convolution problem, whether cuDNN's graph API gave it a plan
    CUTTLE_CUDNN_GRAPH=log ct "$BIN/cuttle" train --model cnn --device cuda:0 --data-dir "$DATA" --no-progress --max-steps 60 \
      --profile $m "${trace[@]}" >"$LOGS/profile_$m.log" 2>&1 || { tail -n 20 "$LOGS/profile_$m.log"; return 1; }
    grep -A 25 '^profile (' "$LOGS/profile_$m.log"
  done
  grep 'cuDNN graph' "$LOGS/profile_host.log"
  plans="graph plans $(grep -c 'cuDNN graph plan ' "$LOGS/profile_host.log"), none $(grep -c 'cuDNN graph no plan' "$LOGS/profile_host.log");"
  # PyTorch's cnn under torch.profiler on the same GPU, the same steps (bench/pytorch_recipe.py --profile)
  py "$K/py/pytorch_recipe.py" --model cnn --device cuda:0 --epochs 1 --max-steps 60 --test-limit 1000 \
    --data-dir "$DATA" --profile >"$LOGS/profile_torch_metrics.jsonl" 2>"$LOGS/profile_torch.log" ||
    echo "the PyTorch profile failed (profile_torch.log)"
  grep -A 25 '^profile (torch' "$LOGS/profile_torch.log"
  torch_ms=$(sed -n 's/^profile (torch.profiler.*first, \([0-9.]*\) ms per step.*/\1/p' "$LOGS/profile_torch.log" | head -n1)
  prof=$(for m in host sync; do
    grep -m1 '^profile (' "$LOGS/profile_$m.log" |
      sed -n 's/.*): [0-9]* steps after the first, \([0-9.]*\) ms per step of wall time, \([0-9.]*\) ms of kernel.*/'$m': \1 ms\/step, kernels \2 ms/p'
  done | tr '\n' ';')
  prof="$plans $prof torch.profiler: ${torch_ms:-?} ms/step;"
  CUTTLE_SYNC_DEBUG=1 ct "$BIN/cuttle" train --model cnn --device cuda:0 --data-dir "$DATA" --no-progress --max-steps 30 --save "$WORK/profile.safetensors" \
    >"$LOGS/profile_syncs.log" 2>&1 || return 1
  echo "synchronizations in 30 steps: $(grep -c 'synchronized the host' "$LOGS/profile_syncs.log")"
  grep 'synchronized the host' "$LOGS/profile_syncs.log" | sed 's/([^)]*)//g' | sort | uniq -c | sort -rn | head -n 10
  command -v ncu >/dev/null || { echo "RESULT: $prof $(grep -c 'synchronized the host' "$LOGS/profile_syncs.log") syncs in 30 steps; no ncu"; return 0; }
  ct ncu --clock-control none --print-summary per-kernel --launch-skip 400 --launch-count 120 \
    "$BIN/cuttle" train --model cnn --device cuda:0 --data-dir "$DATA" --no-progress --max-steps 40 --save "$WORK/profile.safetensors" >"$LOGS/profile_ncu.log" 2>&1
  tail -n 60 "$LOGS/profile_ncu.log"
  echo "RESULT: $prof $(grep -c 'synchronized the host' "$LOGS/profile_syncs.log") syncs in 30 steps; ncu in profile_ncu.log"
}
export -f profile_cnn has_opt_train
step profile_cnn 180 GPU profile_cnn

# ---- where resnet50's step goes under --amp f16 (the H100 ran the exercise, on random 32x32x3
# CIFAR-format images, at 1991 images/s: about 64 ms a step of 128, far more than its arithmetic;
# here on Fashion-MNIST's 28x28x1, a near problem): cuttle's kernel profiler (host time
# per call, calls per step), the synchronizations of 20 steps, and PyTorch's same step under
# torch.profiler on the same GPU
profile_resnet50() {
  has_opt train '--amp' || { echo "skip: the kit's CLI has no bench train --amp (nor this step's PyTorch peer)"; return 77; }
  CUTTLE_CUDNN_GRAPH=log ct "$BIN/cuttle" train --model resnet50 --amp f16 --device cuda:0 --data-dir "$DATA" --no-progress \
    --max-steps 30 --save "$WORK/profile50.safetensors" --profile host >"$LOGS/profile_resnet50_host.log" 2>&1 ||
    { tail -n 20 "$LOGS/profile_resnet50_host.log"; return 1; }
  grep -A 40 '^profile (' "$LOGS/profile_resnet50_host.log"
  host=$(grep -m1 '^profile (' "$LOGS/profile_resnet50_host.log" |
    sed -n 's/.*): \([0-9]*\) steps after the first, \([0-9.]*\) ms per step of wall time, \([0-9.]*\) ms of kernel.*/\2 ms\/step, kernels \3 ms, in \1 steps/p')
  calls=$(sed -n 's/^total: \([0-9]*\) calls.*/\1/p' "$LOGS/profile_resnet50_host.log" | head -n1)
  plans="graph plans $(grep -c 'cuDNN graph plan ' "$LOGS/profile_resnet50_host.log"), none $(grep -c 'cuDNN graph no plan' "$LOGS/profile_resnet50_host.log")"
  CUTTLE_SYNC_DEBUG=1 ct "$BIN/cuttle" train --model resnet50 --amp f16 --device cuda:0 --data-dir "$DATA" --no-progress \
    --max-steps 20 --save "$WORK/profile50.safetensors" >"$LOGS/profile_resnet50_syncs.log" 2>&1 || return 1
  grep 'synchronized the host' "$LOGS/profile_resnet50_syncs.log" | sed 's/([^)]*)//g' | sort | uniq -c | sort -rn | head -n 10
  py "$K/py/pytorch_recipe.py" --model resnet50 --amp f16 --device cuda:0 --epochs 1 --max-steps 30 --test-limit 1000 \
    --data-dir "$DATA" --profile >"$LOGS/profile_resnet50_torch_metrics.jsonl" 2>"$LOGS/profile_resnet50_torch.log" ||
    echo "the PyTorch profile failed (profile_resnet50_torch.log)"
  grep -A 25 '^profile (torch' "$LOGS/profile_resnet50_torch.log"
  torch_ms=$(sed -n 's/^profile (torch.profiler.*first, \([0-9.]*\) ms per step.*/\1/p' "$LOGS/profile_resnet50_torch.log" | head -n1)
  echo "RESULT: resnet50 f16: ${host:-?} (${calls:-?} calls), $plans, $(grep -c 'synchronized the host' "$LOGS/profile_resnet50_syncs.log") syncs in 20 steps; torch.profiler ${torch_ms:-?} ms/step"
}
export -f profile_resnet50
step profile_resnet50_f16 150 GPU profile_resnet50

# ---- a program written against the API, built with the node's compiler against libcuttle.so
consumer() {
  cc=$(command -v cc || command -v gcc) || { echo "no C compiler"; return 1; }
  $cc -O2 -I"$K/include" "$K/src/examples/devices.c" -L"$K/lib" -Wl,-rpath-link,"$K/lib" -lcuttle -o "$WORK/consumer_devices" || return 1
  ct "$WORK/consumer_devices" || return 1
  echo "RESULT: examples/devices.c built with $($cc --version | head -n1) against the kit's libcuttle.so and ran"
}
export -f consumer
step consumer 60 ANY consumer

# ---- the exercises already measured on the H100 (docs/perf-history.md): after the new checks
step bench_matmul_sweep 90 GPU bench_peer matmul-sweep
step bench_norms 60 GPU bench_peer norms
step bench_bandwidth 90 GPU bench_peer bandwidth

# ---- 8. OpenCL on the same GPU: the kit's OpenCL build (bin-opencl) through the kit's ICD loader
# and CLBlast, with the NVIDIA driver's ICD alone in a private vendors folder (OCL_ICD_VENDORS), so
# that another ICD on the node (the H200 node had PoCL's) is never loaded. A driver that has
# libnvidia-opencl.so.1 but no .icd file (containers often mount the library alone) is named by
# its path.
nvidia_opencl_lib() { # the NVIDIA OpenCL library of this node's driver, or exit 1
  f=$(grep -ls nvidia /etc/OpenCL/vendors/*.icd 2>/dev/null | head -n1)
  [ -n "$f" ] && { head -n1 "$f"; return 0; }
  l=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1 / { print $NF; exit }')
  [ -n "$l" ] && { echo "$l"; return 0; }
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 $(echo "$cuda_dirs" | tr ':' ' '); do
    [ -e "$d/libnvidia-opencl.so.1" ] && { echo "$d/libnvidia-opencl.so.1"; return 0; }
  done
  return 1
}
opencl_on() { # opencl_on ICD_LIBRARY: cuttle's OpenCL op table and one mlp epoch (and on a GPU one cnn epoch) through that ICD alone
  [ -x "$K/bin-opencl/cuttle" ] || { echo "the kit has no OpenCL programs (bin-opencl/)"; return 1; }
  v=$WORK/opencl-vendors
  rm -rf "$v" && mkdir -p "$v" && echo "$1" >"$v/only.icd"
  export OCL_ICD_VENDORS="$v"
  ct "$K/bin-opencl/cuttle" devices >"$LOGS/opencl_devices.txt" 2>&1
  cat "$LOGS/opencl_devices.txt"
  grep -q '^opencl:0' "$LOGS/opencl_devices.txt" || { echo "error: cuttle lists no opencl:0 through $1"; return 1; }
  ct "$K/bin-opencl/test_opencl_ops" || return 1
  # the mlp everywhere; the cnn (cuttle's own OpenCL convolution kernels) on a GPU only: on PoCL's
  # CPU device (CI's rehearsal) an epoch of it takes minutes
  models=mlp
  grep -q 'GPU device' "$LOGS/opencl_devices.txt" && models="mlp cnn"
  summary=""
  for m in $models; do
    train_check $m opencl:0 "$K/bin-opencl/cuttle" opencl_$m >"$LOGS/opencl_$m.txt" 2>&1
    rc=$?
    sed "s/^RESULT: /$m: /" "$LOGS/opencl_$m.txt"
    [ $rc = 0 ] || return 1
    acc=$(tail -n1 "$LOGS/opencl_$m.jsonl" | sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p')
    ips=$(tail -n1 "$LOGS/opencl_$m.jsonl" | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
    summary="$summary; $(awk -v m=$m -v a="$acc" -v i="$ips" 'BEGIN { printf "%s %.2f%% %.0f img/s", m, a * 100, i }')"
  done
  name=$(grep -m1 '^opencl:0' "$LOGS/opencl_devices.txt" | cut -c10- | cut -c1-40 | sed 's/ *$//')
  echo "RESULT: $name: op table passed$summary (within 0.5 points of the CPU)"
}
opencl() {
  lib=$(nvidia_opencl_lib) || {
    echo "skip: no NVIDIA OpenCL ICD on this node (ICDs: $(ls /etc/OpenCL/vendors/ 2>/dev/null | tr '\n' ' '); no libnvidia-opencl.so.1)"
    return 77
  }
  opencl_on "$lib"
}
export -f nvidia_opencl_lib opencl_on opencl
step opencl 200 GPU opencl
# CI rehearses that step on PoCL (scripts/gpu_kit_check.sh names PoCL's ICD file here): the same
# carried loader, CLBlast and programs, the same checks, in the loader's environment of the node.
if [ -n "${CUTTLE_KIT_OPENCL_ICD:-}" ]; then
  step opencl_rehearsal 400 ANY opencl_on "$(head -n1 "$CUTTLE_KIT_OPENCL_ICD")"
fi

# ---- 9. issue 19 on the GPU: torchvision's resnet18 on Fashion-MNIST with --augment against the
# CPU's run of the same command, and resnet50 under f16 autocast on CIFAR-10 (the README's command) on
# CIFAR-10-format files written here (no CIFAR on the node: random pixels, so its accuracy means
# nothing; the step proves the command runs on cuda:0 and measures it).
# The CPU reached 92.07% after these 20 epochs (the cosine over 20) and issue 19's 93% only after
# 60 (93.28%, docs/perf-history.md "resnet18 on Fashion-MNIST to its accuracy"), 2.6 hours there: too long
# to make in the kit, so the reference is that recorded run, and cuda:0 passes within 1 point of it
# (cuDNN's convolutions round differently, and one run's spread is about that much).
resnet18_fmnist() {
  local ref=0.9207 # the CPU's 20-epoch accuracy
  ct "$BIN/cuttle" train --model resnet18 --augment --epochs 20 --batch-size 128 --seed 0 --device cuda:0 \
    --data-dir "$DATA" --no-progress --metrics "$LOGS/resnet18_fmnist.jsonl" || return 1
  acc=$(tail -n1 "$LOGS/resnet18_fmnist.jsonl" | sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p')
  ips=$(tail -n1 "$LOGS/resnet18_fmnist.jsonl" | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
  awk -v a="$acc" -v ips="$ips" -v ref="$ref" 'BEGIN {
    printf "RESULT: resnet18 --augment, 20 epochs: test_acc %.2f%% (cpu %.2f%%, pass within 1 point; 93%% takes 60 epochs), %.0f images/s\n",
      a * 100, ref * 100, ips; exit a >= ref - 0.01 ? 0 : 1 }'
}
exercise() {
  d="$WORK/cifar-10-batches-bin"; mkdir -p "$d"
  "$PYWRAP" - "$d" <<'PYEOF' || return 1
import os, random, sys
random.seed(0)
for name, n in [("data_batch_%d.bin" % i, 1000) for i in range(1, 6)] + [("test_batch.bin", 1000)]:
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        for _ in range(n):
            f.write(bytes([random.randrange(10)]) + os.urandom(3072))
PYEOF
  ct "$BIN/cuttle" train --model resnet50 --data "cifar10:$d" --optimizer adam --lr 3e-4 --amp f16 --epochs 10 \
    --device cuda:0 --no-progress --metrics "$LOGS/exercise.jsonl" || return 1
  ips=$(tail -n1 "$LOGS/exercise.jsonl" | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
  echo "RESULT: resnet50 cifar10 (5000 random images) adam 3e-4 --amp f16, 10 epochs on cuda:0: $ips images/s in the last epoch"
}
export -f resnet18_fmnist exercise
step train_resnet18_fmnist 240 GPU resnet18_fmnist
step exercise_resnet50_f16 120 GPU exercise

[ $LIST = 1 ] && { echo "steps:$ALL_STEPS"; exit 0; }

# ---------------------------------------------------------------- results
{ for f in "$LOGS"/*.log; do
    n=$(basename "$f" .log)
    grep -q "^FAIL $n " "$SUMMARY" || continue
    echo "===== $n (last 40 lines)"; tail -n 40 "$f"
  done; } >"$WORK/failures.txt"
cp "$SUMMARY" "$LOGS/summary.txt"
total=$(( $(date +%s) - T0 ))
echo "total ${total}s, $FAILED failed" | tee -a "$LOGS/summary.txt"
if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  cp "$LOGS/summary.txt" "$OUT/summary.txt"
  cp "$WORK/failures.txt" "$OUT/failures.txt"
  cp "$WORK/ldd.txt" "$OUT/ldd.txt" 2>/dev/null
  cp "$WORK/machine.txt" "$OUT/machine.txt" 2>/dev/null
  tar -C "$LOGS" -czf "$OUT/logs.tar.gz" .
fi
[ $FAILED = 0 ]
