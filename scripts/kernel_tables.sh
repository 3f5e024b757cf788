#!/bin/sh
# scripts/kernel_tables.sh SOURCE_DIR: the kernel table's rules (src/core/backend.h, docs/design.md),
# checked on the sources (CTest runs it):
#   1. the matrix src/backend/kernels_by_backend.def has one row per kernel of src/core/kernels.def,
#      in its order (the CUDA table is C++, where designated initializers keep declaration order),
#      with a Y or N for each backend; each backend's table (cpu/memory.c, cuda/backend.cu,
#      opencl/backend.c) is generated from it;
#   2. no file reads a kernel from a table but CT_KERNEL_CALL and ct__has_kernel (core/backend.h,
#      core/dispatch.c), so no kernel is ever called through NULL.
set -u
src=$(cd "${1:-$(dirname "$0")/..}" && pwd) || exit 1
fail=0
kernels=$(sed -n 's/^CT_KERNEL(\([a-z0-9_]*\),.*/\1/p' "$src/src/core/kernels.def")
[ -n "$kernels" ] || { echo "no CT_KERNEL line in src/core/kernels.def"; exit 1; }
matrix="$src/src/backend/kernels_by_backend.def"
rows=$(sed -n 's/^CT_HAS(\([a-z0-9_]*\),.*/\1/p' "$matrix")
if [ "$(echo $rows)" != "$(echo $kernels)" ]; then
  echo "src/backend/kernels_by_backend.def does not list the kernels of src/core/kernels.def in their order:"
  echo "  kernels.def: $(echo $kernels)"
  echo "  matrix:      $(echo $rows)"
  fail=1
fi
bad=$(grep '^CT_HAS(' "$matrix" | grep -vE '^CT_HAS\([a-z0-9_]+, +[YN], [YN], [YN]\)$')
[ -z "$bad" ] || { echo "rows of the matrix without a Y or N per backend (cpu, cuda, opencl):"; echo "$bad"; fail=1; }
for table in src/backend/cpu/memory.c src/backend/cuda/backend.cu src/backend/opencl/backend.c; do
  grep -q '#include "backend/kernels_by_backend.def"' "$src/$table" || { echo "$table: its table is not generated from the matrix"; fail=1; }
done
bad=$(grep -rnE '(->|\.)kernels\.[a-z]' "$src/src" "$src/tools" "$src/bench" "$src/tests" --include=*.c --include=*.h --include=*.cu --include=*.cuh |
      grep -vE "^$src/src/core/(backend\.h|dispatch\.c):")
if [ -n "$bad" ]; then
  echo "a kernel read from a table other than through CT_KERNEL_CALL or ct__has_kernel:"
  echo "$bad"
  fail=1
fi
[ $fail -eq 0 ] && echo "kernel tables: $(echo $kernels | wc -w) kernels, one matrix row each, every call through CT_KERNEL_CALL"
exit $fail
