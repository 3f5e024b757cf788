#!/bin/sh
# scripts/gpu_kit.sh DIR [--refs all|mlp|FOLDER]: make the GPU kit, a self-contained folder DIR (at most
# 56 MiB) that DIR/run.sh OUT runs on an air-gapped GPU node: no network, no package manager, a
# CUDA 13 toolkit and a PyTorch venv whose NVIDIA wheels hold cuBLAS, cuDNN and NCCL (issue 17).
#
# DIR holds:
#   run.sh              the job (tools/gpu_kit/run.sh): summary.txt + machine facts + one archive
#   README.md           what the kit is, how to run it, how to build a program against it
#   payload.tar.xz      bin/ (the CLI and the GPU test programs, built for sm_90 + PTX),
#                       bin-opencl/ (the CLI and the OpenCL op table, built with OpenCL, no CUDA),
#                       lib/ (libcuttle.so and the non-CUDA libraries they load, from Debian:
#                       OpenBLAS, cJSON, ..., the OpenCL ICD loader and CLBlast),
#                       include/ (the public headers), dev/ (the Debian headers a rebuild needs),
#                       src/ (the source tree, for the fallback build on the node), py/ (peers),
#                       ref/ (the CPU's reference results and checkpoints, same seeds)
#   data/               the Fashion-MNIST IDX files (already gzip-compressed)
# --refs mlp makes only the mlp's CPU references (CI: seconds, not minutes); the cnn's GPU runs
# then compare with nothing and say so. --refs FOLDER takes them from an earlier kit's ref/ (made by
# the same CPU code: the references do not depend on the CUDA backend).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
[ $# -ge 1 ] || { echo "usage: scripts/gpu_kit.sh DIR [--refs all|mlp]" >&2; exit 2; }
dir=$1; shift
refs=all
while [ $# -gt 0 ]; do
  case "$1" in
    --refs) refs=$2; shift 2 ;;
    *) echo "gpu_kit.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
./scripts/deps.sh xz-utils ninja-build
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
build=${CUTTLE_KIT_BUILD:-$root/build-kit}
data=${CUTTLE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
limit_mib=56

# 1. The build: CUDA for sm_90 (+ PTX) wherever nvcc is, no OpenCL or MPI (the node has neither).
cuda=OFF
{ command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } && cuda=ON
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=$cuda -DCUTTLE_CUDA_ARCHS=90 \
  -DCUTTLE_OPENCL=OFF -DCUTTLE_MPI=OFF -DBUILD_TESTING=ON >/dev/null
# The GPU programs: the tests with CUDA cases, in the order run.sh runs them.
tests="test_ops_cuda test_cuda_backend test_cuda_api test_cuda_graph test_cuda_coverage test_loader test_checkpoint test_autocast
test_api_errors test_tensor test_dlpack test_dispatch test_nccl_one_rank"
present=""
for t in $tests; do
  ls tests/*/"$t".c >/dev/null 2>&1 && present="$present $t"
done
cmake --build "$build" -j "$(nproc)" --target cuttle_cli cuttle_shared example_devices $present
# The OpenCL programs, for the node's NVIDIA OpenCL driver where it has one (run.sh's opencl step,
# issue 17 section 2.8): a build of their own without CUDA, so that no CUDA program loads an ICD
# loader; the ldd pass below carries Debian's ICD loader (ocl-icd's libOpenCL.so.1) and CLBlast.
build_cl=$build-opencl
cmake -S . -B "$build_cl" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUTTLE_CUDA=OFF -DCUTTLE_OPENCL=ON \
  -DCUTTLE_MPI=OFF -DBUILD_TESTING=ON >/dev/null
cmake --build "$build_cl" -j "$(nproc)" --target cuttle_cli test_opencl_ops

# 2. The staging tree, packed into payload.tar.xz.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/bin-opencl" "$stage/lib" "$stage/include" "$stage/dev/include" "$stage/py" "$stage/ref"
cp "$build/cuttle" "$stage/bin/"
for t in $present; do cp "$build/tests/$t" "$stage/bin/"; done
cp "$build_cl/cuttle" "$build_cl/tests/test_opencl_ops" "$stage/bin-opencl/"
cp -P "$build"/libcuttle.so* "$stage/lib/"
cp -r include/cuttle.h include/cuttle "$stage/include/"
cp bench/pytorch_*.py "$stage/py/"
cp tools/gpu_kit/check_train.py "$stage/py/" 2>/dev/null || true

# The libraries the programs load, as ldd resolves them here, except the node's own
# (tools/gpu_kit/node_libs.sh: the C runtime, CUDA and the driver).
. "$root/tools/gpu_kit/node_libs.sh"
for f in "$stage"/bin/* "$stage"/bin-opencl/* "$stage"/lib/libcuttle.so.*.*; do
  ldd "$f" 2>/dev/null | awk '/=> \// { print $1, $3 }'
done | sort -u | while read -r name path; do
  case "$name" in libcuttle.so*) continue ;; esac
  ct_kit_node_lib "$name" && continue
  cp -L "$path" "$stage/lib/$name"
done
# The headers and link names a rebuild on the node needs (the fallback of run.sh), from Debian's
# -dev packages as installed here.
oblas_inc=$(dirname "$(ls /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h 2>/dev/null || ls /usr/include/x86_64-linux-gnu/openblas*/cblas.h | head -n1)")
cp "$oblas_inc"/*.h "$stage/dev/include/"
cp -r /usr/include/cjson "$stage/dev/include/"
cp /usr/include/cmocka.h /usr/include/zlib.h /usr/include/zconf.h "$stage/dev/include/"
cp -r /usr/include/dlpack /usr/include/protobuf-c "$stage/dev/include/"
# xxHash is header only (src/io/safetensors.c compiles it in: XXH_INLINE_ALL); xxhash.h is all of it
cp /usr/include/xxhash.h "$stage/dev/include/"
# PCRE2, the BPE tokenizer's pre-tokenization (src/data/bpe.c); its library comes with the ldd pass
cp /usr/include/pcre2.h "$stage/dev/include/"
# the TensorBoard messages as protoc-c made them here (the node has no protoc-c)
mkdir -p "$stage/dev/pb"
cp "$build"/generated/io/tensorboard.pb-c.c "$build"/generated/io/tensorboard.pb-c.h "$stage/dev/pb/"
for l in libopenblas.so.0 libcjson.so.1 libcmocka.so.0 libz.so.1 libprotobuf-c.so.1 libpcre2-8.so.0; do
  [ -f "$stage/lib/$l" ] && ln -sf "$l" "$stage/lib/${l%.so.*}.so"
done
# The sources, for that rebuild.
# The work tree as it is (tracked files and new ones git does not ignore), so a kit made before a
# commit rebuilds the same code.
mkdir -p "$stage/src"
git ls-files -z --cached --others --exclude-standard | tar -C "$root" --null -T - -cf - | tar -C "$stage/src" -xf -

# 3. The CPU's reference results for the seeds run.sh uses on the GPU (tools/gpu_kit/train_cases).
. "$root/tools/gpu_kit/train_cases.sh"
[ -d "$refs" ] && cp "$refs"/* "$stage/ref/"
for c in $(ct_train_cases); do
  [ -d "$refs" ] && break
  model=$(ct_train_case_model "$c")
  [ "$refs" = mlp ] && [ "$model" != mlp ] && continue
  ct_train_case_has_cpu_ref "$c" || continue
  echo "gpu_kit: CPU reference $c"
  # shellcheck disable=SC2046
  "$build/cuttle" train $(ct_train_case_args "$c") --device cpu --data-dir "$data" --no-progress \
    --metrics "$stage/ref/$c.jsonl" --save "$stage/ref/$c.safetensors" >"$stage/ref/$c.log" 2>&1
  "$build/cuttle" eval --checkpoint "$stage/ref/$c.safetensors" --model "$model" --device cpu --data-dir "$data" \
    >"$stage/ref/$c.eval" 2>&1
  # Only the float32 mlp's checkpoint is evaluated on the GPU; the others are not carried.
  [ "$c" = mlp ] || rm -f "$stage/ref/$c.safetensors"
done
git -C "$root" rev-parse HEAD >"$stage/ref/commit" 2>/dev/null || echo unknown >"$stage/ref/commit"
echo "$cuda" >"$stage/ref/built_with_cuda"
uname -a >"$stage/ref/build_machine"

# 4. The kit.
rm -rf "$dir/payload.tar.xz" "$dir/data" "$dir/run.sh" "$dir/node_libs.sh" "$dir/README.md"
# One xz stream with a dictionary as large as the tree: the test programs each link the same
# CUDA kernels statically, and a window that spans them all stores those bytes once (27 MB -> 12 MB
# with every program; single-threaded, because xz's threads would split the window).
tar -C "$stage" -cf - . | xz -T1 --lzma2=preset=6,dict=192MiB >"$dir/payload.tar.xz"
mkdir -p "$dir/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [ -f "$data/$f.gz" ]; then cp "$data/$f.gz" "$dir/data/"; else gzip -9 -c "$data/$f" >"$dir/data/$f.gz"; fi
done
cp tools/gpu_kit/run.sh "$dir/run.sh"
cp tools/gpu_kit/node_libs.sh "$dir/node_libs.sh"
cp tools/gpu_kit/README.md "$dir/README.md"
chmod +x "$dir/run.sh"
size=$(du -sk "$dir" | cut -f1)
echo "gpu_kit: $dir is $((size / 1024)) MiB (limit $limit_mib MiB), CUDA $cuda"
if [ "$size" -gt $((limit_mib * 1024)) ]; then
  echo "gpu_kit: $dir is over $limit_mib MiB" >&2
  exit 1
fi
