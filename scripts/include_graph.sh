#!/bin/sh
# scripts/include_graph.sh: fails when the core imports a layer above it (docs/design.md, "The
# layers"), or when the files of one folder call each other in a circle. Three checks, because a
# hand-written declaration imports as surely as an #include:
#   1. no src/core/*.c or *.h includes "ops/", "autograd/", "nn/", "optim/", "data/", "io/", "dist/",
#      "monitor/", "tools/" or "backend/" (the contract, core/backend.h, is core's own: no exception);
#   2. given a build folder, no symbol a core object uses is defined by an object of those layers;
#      the one exception is the registry (core/device.c) naming a backend's vtable, ct__<name>_backend;
#   3. given a build folder, the files of each folder of src/ (core, ops, nn, backend/opencl, ...)
#      are layered: draw an arrow from file a to file b of the same folder when a's object uses a
#      symbol b's object defines; no arrows may close a circle (a strongly connected component of
#      two files or more, found by Tarjan's algorithm). A circle is reported with its arrows and the
#      symbols on each, so that it can be opened by moving a function down or splitting a file.
#      Check 3 first runs itself on a listing with a planted circle, and fails if it misses it.
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

# The circles among the files of one folder, from lines "D symbol object" (object defines symbol)
# and "U symbol object" (object uses it), objects named "folder/file.c.o". Prints, for each circle,
# "folder: file file ..." and then its arrows "  a.c -> b.c: symbol ..."; nothing when there is none.
cycles() {
  awk '
    function folder(o) { sub(/\/[^\/]*$/, "", o); return o }
    function file(o) { sub(/^.*\//, "", o); sub(/\.o$/, "", o); return o }
    function node(o) { if (!(o in id)) { id[o] = ++nodes; name[nodes] = o } return id[o] }
    # Tarjan: idx/low per node, a stack of the open ones; a node whose low is its own index closes a
    # component. Recursion depth is at most the number of files in one folder.
    function strong(v,   i, w) {
      idx[v] = low[v] = ++counter
      stack[++sp] = v
      on[v] = 1
      for (i = 1; i <= deg[v]; i++) {
        w = adj[v, i]
        if (!(w in idx)) {
          strong(w)
          if (low[w] < low[v]) low[v] = low[w]
        } else if (on[w] && idx[w] < low[v]) low[v] = idx[w]
      }
      if (low[v] == idx[v]) {
        ++comps
        size[comps] = 0
        do {
          w = stack[sp--]
          on[w] = 0
          comp[w] = comps
          size[comps]++
        } while (w != v)
      }
    }
    $1 == "D" { def[$2] = $3; next }
    $1 == "U" { use[++n] = $2; from[n] = $3 }
    END {
      for (i = 1; i <= n; i++) {
        a = from[i]
        b = def[use[i]]
        if (b == "" || b == a || folder(a) != folder(b)) continue
        k = a SUBSEP b
        if (k in syms) { syms[k] = syms[k] " " use[i]; continue }
        syms[k] = use[i]
        edge[++edges] = k
        va = node(a)
        adj[va, ++deg[va]] = node(b)
      }
      for (v = 1; v <= nodes; v++)
        if (!(v in idx)) strong(v)
      for (c = 1; c <= comps; c++) {
        if (size[c] < 2) continue
        line = ""
        for (v = 1; v <= nodes; v++)
          if (comp[v] == c) line = line (line == "" ? folder(name[v]) ": " : " ") file(name[v])
        print line
        for (e = 1; e <= edges; e++) {
          split(edge[e], p, SUBSEP)
          if (comp[id[p[1]]] == c && comp[id[p[2]]] == c) print "  " file(p[1]) " -> " file(p[2]) ": " syms[edge[e]]
        }
      }
    }'
}

# The check of the check: a planted circle core/a -> core/b -> core/c -> core/a (with an arrow out
# of it, one into another folder and a file calling itself, none of which is a circle) must come
# out as that circle and nothing else.
planted=$( (printf 'D %s\n' 'fa core/a.c.o' 'fb core/b.c.o' 'fc core/c.c.o' 'fd core/d.c.o' 'fo ops/o.c.o'
             printf 'U %s\n' 'fb core/a.c.o' 'fc core/b.c.o' 'fd core/b.c.o' 'fa core/c.c.o' 'fo core/d.c.o' \
               'fa ops/o.c.o' 'fd core/d.c.o') | cycles)
want='core: a.c b.c c.c
  a.c -> b.c: fb
  b.c -> c.c: fc
  c.c -> a.c: fa'
if [ "$planted" != "$want" ]; then
  echo "the circle check is broken: on a planted circle it printed"
  echo "$planted"
  echo "instead of"
  echo "$want"
  fail=1
fi

if [ -n "$build" ]; then
  objs="$build/CMakeFiles/cuttle.dir/src"
  if [ ! -f "$objs/core/tensor.c.o" ]; then
    echo "no core objects under $objs (build the cuttle target first)"
    exit 1
  fi
  # Every defined symbol with its object ("core/tensor.c.o", "ops/shape.c.o", ...), and every
  # undefined symbol of every object. Objects of sources that no longer exist (a file moved or
  # removed) stay in a build folder; they are not in the library and are skipped.
  syms=$(cd "$objs" && find . -name '*.o' | sed 's|^\./||' | sort | while read -r o; do
      [ -f "$src/src/${o%.o}" ] || continue
      nm "$o" | awk -v f="$o" '{ if (NF == 3 && $2 ~ /^[TDBRC]$/) print "D", $3, f; else if (NF == 2 && $1 == "U") print "U", $2, f }'
    done)
  # A use by a core object that resolves into a forbidden layer is reported.
  bad=$(printf '%s\n' "$syms" | awk -v upper="^($upper)/" '
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
  circles=$(printf '%s\n' "$syms" | cycles)
  if [ -n "$circles" ]; then
    echo "files of one folder call each other in a circle (layer them: move a function down, or split a file):"
    echo "$circles"
    fail=1
  fi
fi

[ $fail -eq 0 ] && echo "core is the ground floor: no include or symbol of an upper layer${build:+; no folder's files call each other in a circle}"
exit $fail
