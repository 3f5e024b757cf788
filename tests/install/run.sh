#!/bin/sh
# tests/install/run.sh: cuttle as a user gets it. Installs the build folder into a temporary prefix
# (cmake --install), copies tests/install/consumer out of the source tree, builds it against the
# prefix with pkg-config and with find_package(cuttle CONFIG), both linking libcuttle.so, and a
# third time statically from libcuttle.a and cuttle.pc's Libs.private, and runs all three: each
# trains one step, saves a checkpoint and prints ct_version() and the loss. Also checks that the
# prefix holds the public headers only, the versioned shared library and the static one.
# Usage: run.sh SOURCE_DIR BUILD_DIR C_COMPILER SANITIZE(ON|OFF)   (CTest passes all four)
# With SANITIZE=ON the installed libcuttle.so carries ASan and UBSan (it needs libasan loaded
# first), so the consumer is compiled and linked with the same -fsanitize flags.
set -eu
src=$1 build=$2 cc=$3 sanitize=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuttle-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
flags=""
case "$sanitize" in ON | on | 1 | TRUE | true | YES | yes) flags="-fsanitize=address,undefined -fno-omit-frame-pointer" ;; esac

step() { echo "== $*"; }
fail() { echo "FAIL: $*"; exit 1; }

step "cmake --install into $tmp/prefix"
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
p=$tmp/prefix
for f in bin/cuttle include/cuttle.h include/cuttle/version.h include/cuttle/export.h lib/libcuttle.a \
         lib/libcuttle.so lib/libcuttle.so.0 lib/pkgconfig/cuttle.pc lib/cmake/cuttle/cuttleConfig.cmake \
         lib/cmake/cuttle/cuttleConfigVersion.cmake share/doc/cuttle/README.md; do
  [ -e "$p/$f" ] || fail "$f is not installed"
done
[ -L "$p/lib/libcuttle.so" ] && [ -L "$p/lib/libcuttle.so.0" ] || fail "libcuttle.so and libcuttle.so.0 must be links"
# Nothing internal is installed: the headers are exactly include/cuttle.h and include/cuttle/*.h.
extra=$(cd "$p/include" && find . -type f | grep -v -e '^\./cuttle\.h$' -e '^\./cuttle/[a-z0-9_]*\.h$' || true)
[ -z "$extra" ] || fail "installed headers outside the public API: $extra"
"$p/bin/cuttle" --help > /dev/null 2>&1 || fail "the installed cuttle --help"

# libcuttle.so exports exactly the functions the headers declare with CT_API (no ct__ internal, no
# other symbol), and every file-scope ct_ function declaration of the headers carries CT_API.
nm -D --defined-only "$p/lib/libcuttle.so" | awk 'NF == 3 { print $3 }' | sort > "$tmp/exported"
grep -h '^CT_API' "$p/include/cuttle/"*.h | sed 's/(.*//' | grep -o 'ct_[a-z0-9_]*$' | sort -u > "$tmp/declared"
grep -n ' ct__' "$tmp/exported" && fail "libcuttle.so exports ct__ internals"
diff "$tmp/declared" "$tmp/exported" || fail "the exported functions differ from those declared CT_API (< declared, > exported)"
unmarked=$(grep -nE '^[a-z][a-z0-9_ ]*[ *]ct_[a-z0-9_]+ *\(' "$p/include/cuttle/"*.h | grep -v ':typedef ' || true)
[ -z "$unmarked" ] || fail "public functions declared without CT_API: $unmarked"
echo "libcuttle.so exports $(wc -l < "$tmp/exported") functions, all declared CT_API; no ct__ symbol"

cp -r "$src/tests/install/consumer" "$tmp/consumer"
export LD_LIBRARY_PATH="$p/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "pkg-config: $cc \$(pkg-config --cflags --libs cuttle)"
export PKG_CONFIG_PATH="$p/lib/pkgconfig"
pc=$(pkg-config --cflags --libs cuttle) || fail "pkg-config --cflags --libs cuttle"
echo "pkg-config gives: $pc"
# shellcheck disable=SC2086 # the flags are words
"$cc" $flags -o "$tmp/consumer_pc" "$tmp/consumer/main.c" $pc -lm || fail "building with pkg-config"
"$tmp/consumer_pc" "$tmp/pc.safetensors" || fail "the pkg-config consumer"
[ -s "$tmp/pc.safetensors" ] || fail "no checkpoint from the pkg-config consumer"

step "static: pkg-config --static --libs cuttle, with libcuttle.a in place of -lcuttle"
pcs=$(pkg-config --static --libs cuttle | sed 's/-lcuttle/-Wl,-Bstatic -lcuttle -Wl,-Bdynamic/') || fail "pkg-config --static"
# shellcheck disable=SC2086
"$cc" $flags -o "$tmp/consumer_static" "$tmp/consumer/main.c" $(pkg-config --cflags cuttle) $pcs -lm || fail "building with libcuttle.a"
readelf -d "$tmp/consumer_static" | grep -q 'NEEDED.*libcuttle' && fail "the static consumer still needs libcuttle.so"
"$tmp/consumer_static" "$tmp/static.safetensors" || fail "the static consumer"

step "find_package(cuttle CONFIG) with CMAKE_PREFIX_PATH=$p"
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "configuring the consumer"; }
cmake --build "$tmp/consumer/build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building the consumer"; }
"$tmp/consumer/build/consumer" "$tmp/cmake.safetensors" || fail "the find_package consumer"
[ -s "$tmp/cmake.safetensors" ] || fail "no checkpoint from the find_package consumer"
# The consumer links the shared library (the static one would carry no SONAME dependency).
readelf -d "$tmp/consumer/build/consumer" | grep -q 'NEEDED.*libcuttle\.so\.0' || fail "the find_package consumer does not link libcuttle.so.0"
readelf -d "$tmp/consumer_pc" | grep -q 'NEEDED.*libcuttle\.so\.0' || fail "the pkg-config consumer does not link libcuttle.so.0"
echo "install test passed"
