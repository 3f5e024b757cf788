#!/bin/sh
# CI's check of the GPU kit (issue 17), on a machine without a GPU: make the kit (the CUDA part
# wherever nvcc is; gpu_kit.sh fails when it is over 56 MiB), run DIR/run.sh with only the kit's and
# the CUDA folders on the loader's path, and check its summary: every line in the format a GPU
# run writes, every GPU step SKIP "no GPU", every other step PASS, the opencl step's rehearsal on
# PoCL among them.
set -eu
cd "$(dirname "$0")/.."
dir=build-gpukit-ci
./scripts/gpu_kit.sh "$dir" --refs mlp
out=$(mktemp -d)
# The opencl step's rehearsal on PoCL (scripts/deps.sh installs it): the kit's ICD loader, CLBlast
# and OpenCL programs, through PoCL's ICD alone as the node would use the NVIDIA driver's.
icd=/etc/OpenCL/vendors/pocl.icd
[ -f "$icd" ] || { echo "gpu_kit_check: no $icd to rehearse the opencl step with" >&2; exit 1; }
# The whole budget of a node's job, so that the rehearsal, the last step, is never cut for time on
# a slow CI machine (the GPU steps before it skip at once).
CUTTLE_KIT_BUDGET_S=900 CUTTLE_KIT_WORK="$out/work" CUTTLE_KIT_OPENCL_ICD=$icd LD_LIBRARY_PATH= bash "$dir/run.sh" "$out/result" || true
sum="$out/result/summary.txt"
cat "$sum"
for f in summary.txt failures.txt machine.txt ldd.txt logs.tar.gz; do
  [ -f "$out/result/$f" ] || { echo "gpu_kit_check: run.sh wrote no $f" >&2; exit 1; }
done
[ "$(ls "$out/result" | wc -l)" -le 8 ] || { echo "gpu_kit_check: more than 8 files in OUT" >&2; exit 1; }
awk '
  /^total [0-9]+s, [0-9]+ failed$/ { next }
  !/^(PASS|FAIL|SKIP) [a-z0-9_]+ +[0-9.]+s  ./ { print "gpu_kit_check: bad summary line: " $0; bad = 1; next }
  $1 == "FAIL" { print "gpu_kit_check: failed: " $0; bad = 1 }
  $1 == "SKIP" && $0 !~ /  no GPU/ { print "gpu_kit_check: skipped for another reason than no GPU: " $0; bad = 1 }
  $1 == "PASS" { pass++ }
  END { if (pass < 4) { print "gpu_kit_check: fewer than 4 steps passed"; bad = 1 } exit bad }' "$sum"
grep -q '^PASS ldd ' "$sum"
grep -q '^PASS opencl_rehearsal ' "$sum" || {
  echo "gpu_kit_check: the opencl step's rehearsal on PoCL did not pass: $(grep ' opencl_rehearsal ' "$sum")" >&2
  exit 1
}
rm -rf "$out"
echo "gpu_kit_check: the kit passes its CPU side"
