#!/bin/sh
# scripts/include_graph.sh: fails when the core imports a layer above it (docs/design.md, "The
# layers"). Two checks, because a hand-written declaration imports as surely as an #include:
#   1. no src/core/*.c or *.h includes "ops/", "autograd/", "nn/", "optim/", "data/", "io/", "dist/",
#      "monitor/", "tools/" or "backend/" (the contract, core/backend.h, is core's own: no exception);
#   2. given a build folder, no symbol a core object uses is defined by an object of those layers;
#      the one exception is the registry (core/device.c) naming a backend's vtable, ct__<name>_backend.
# Usage: scripts/include_graph.sh [SOURCE_DIR [BUILD_DIR]]   (CTest passes both)
set -u
src=$(cd "${1:-$(dirname "$0")/..}" && pwd) || exit 1
build=${2:-}
fail=0

upper='ops|autograd|nn|optim|data|io|dist|monitor|tools|backend'
bad=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]($upper)/" "$src"/src/core/*.c "$src"/src/core/*.h)
if [ -n "$bad" ]; then
  echo "core includes an upper layer or a backend folder:"
  echo "$bad"
  fail=1
fi

if [ -n "$build" ]; then
  objs="$build/CMakeFiles/cuttle.dir/src"
  if [ ! -f "$objs/core/tensor.c.o" ]; then
    echo "no core objects under $objs (build the cuttle target first)"
    exit 1
  fi
  # Every defined symbol with its layer ("core", "ops", "backend/opencl", ...), then every
  # undefined symbol of a core object; a use that resolves into a forbidden layer is reported.
  # Objects of sources that no longer exist (a file moved or removed) stay in a build folder; they
  # are not in the library and are skipped.
  bad=$(cd "$objs" && find . -name '*.o' | sed 's|^\./||' | sort | while read -r o; do
      [ -f "$src/src/${o%.o}" ] || continue
      nm "$o" | awk -v f="$o" '{ if (NF == 3 && $2 ~ /^[TDBRC]$/) print "D", $3, f; else if (NF == 2 && $1 == "U") print "U", $2, f }'
    done | awk -v upper="^($upper)/" '
      $1 == "D" { def[$2] = $3; next }
      $1 == "U" && $3 ~ /^core\// { use[++n] = $2; from[n] = $3 }
      END {
        for (i = 1; i <= n; i++) {
          d = def[use[i]]
          if (d == "" || d !~ upper) continue
          if (from[i] == "core/device.c.o" && d ~ /^backend\// && use[i] ~ /^ct__[a-z]+_backend$/) continue
          printf "%s uses %s from %s\n", from[i], use[i], d
        }
      }')
  if [ -n "$bad" ]; then
    echo "core calls into an upper layer:"
    echo "$bad"
    fail=1
  fi
fi

[ $fail -eq 0 ] && echo "core is the ground floor: no include or symbol of an upper layer"
exit $fail
