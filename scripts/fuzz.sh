#!/bin/sh
# Fuzz every parser: build each tests/fuzz/fuzz_*.c with clang's libFuzzer, ASan and UBSan, and run
# it for SECONDS seconds (default 60) starting from its seed corpus tests/fuzz/corpus/<name>/.
#   scripts/fuzz.sh [SECONDS] [NAME...]     e.g. scripts/fuzz.sh 300 fuzz_idx
# The library is built with clang into build-fuzz/ (CUDA off); inputs libFuzzer finds go to
# build-fuzz/corpus/<name>/ (the seed corpus in git is only read), crashes to build-fuzz/crashes/.
# Copy a crash into tests/fuzz/corpus/<name>/ once fixed: CTest replays that folder on every run.
set -eu
cd "$(dirname "$0")/.."
secs="${1:-60}"
[ $# -gt 0 ] && shift
cc="$(command -v clang || command -v clang-14 || true)"
if [ -z "$cc" ]; then
  echo "fuzz.sh: clang not found (apt-get install clang)" >&2
  exit 1
fi
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUTTLE_CUDA=OFF \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $san" -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null
mkdir -p build-fuzz/crashes
names="$*"
[ -n "$names" ] || names="$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)"
status=0
for name in $names; do
  echo "== $name: building"
  # CMake builds the target with the replay main (tests/CMakeLists.txt); relink it without that main
  # and with -fsanitize=fuzzer, reusing CMake's own link line so every library it needs comes along.
  cmake --build build-fuzz -j "$(nproc)" --target "$name" >/dev/null
  link="$(cat "build-fuzz/tests/CMakeFiles/$name.dir/link.txt")"
  link="$(printf '%s' "$link" | sed -e "s# CMakeFiles/$name.dir/fuzz/replay_main.c.o##" \
    -e "s# -o $name # -fsanitize=fuzzer -o $name-libfuzzer #")"
  (cd build-fuzz/tests && sh -c "$link")
  mkdir -p "build-fuzz/corpus/$name"
  echo "== $name: fuzzing for $secs s"
  if ! "build-fuzz/tests/$name-libfuzzer" -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/crashes/$name-" "build-fuzz/corpus/$name" "tests/fuzz/corpus/$name"; then
    echo "== $name: FAILED (see build-fuzz/crashes/)" >&2
    status=1
  fi
done
exit $status
