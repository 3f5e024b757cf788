#!/bin/sh
# tests/dist/dist_faults.sh: faults end the job, they never hang it (issue 10).
# Usage: dist_faults.sh MPIEXEC WORKER MODE (tests/CMakeLists.txt runs it for each MODE of
# tests/dist/dist_fault_worker.c). Runs 3 ranks with a 3 s timeout, rank 1 failing as MODE says, and
# checks that the job ends within the timeout plus a margin, and, for a stuck rank, that ranks 0 and
# 2 each report the collective that timed out and name rank 1 as the one that never arrived, that a
# later collective fails at once, and that ct_dist_finalize refuses. A large blocking all-reduce
# (sleep-allreduce) cannot return: there the survivors' watchdog names rank 1 and ends the job with
# MPI_Abort, and the first survivor to get there must have said so. Prints the timings measured.
set -u
MPIEXEC=$1 WORKER=$2 MODE=$3
TIMEOUT=3 MARGIN=12
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$(date +%s.%N)
# the outer bound keeps a hang from hanging CTest: a job still running at 60 s fails the test
timeout -k 5 60 "$MPIEXEC" --allow-run-as-root --oversubscribe --mca btl tcp,self \
  -x LSAN_OPTIONS -x ASAN_OPTIONS -x UBSAN_OPTIONS -x OMP_NUM_THREADS -n 3 "$WORKER" "$MODE" >"$out" 2>&1
rc=$?
t1=$(date +%s.%N)
cat "$out"
fail=0
calc() { awk "BEGIN { print $1 }"; }
holds() { awk "BEGIN { exit !($1) }"; }
check() { # check CONDITION-DESCRIPTION EXIT-STATUS-OF-TEST
  if [ "$2" -ne 0 ]; then echo "dist_faults $MODE: FAILED: $1"; fail=1; fi
}
total=$(calc "$t1 - $t0")
victim=$(sed -n 's/^VICTIM at \([0-9.]*\):.*/\1/p' "$out" | head -n 1)
[ -n "$victim" ]; check "rank 1 did not report going away" $?
after=$(if [ -n "$victim" ]; then calc "$t1 - $victim"; else echo 999; fi)
echo "dist_faults $MODE: mpirun exit status $rc; the job took $total s in all, and ended $after s after rank 1 went away (timeout $TIMEOUT s)"
# a failure (mpirun passes on the abort's code, or 128 + the signal of a killed rank), not success,
# and not the outer timeout (which would have taken 60 s)
[ "$rc" -ne 0 ] && holds "$total < 55"; check "mpirun's exit status $rc after $total s: expected a failure, before the outer timeout" $?
holds "$after < $TIMEOUT + $MARGIN"; check "the job ended $after s after the fault, over $TIMEOUT + $MARGIN s" $?
if [ "$MODE" = sleep-allreduce ]; then
  line=$(grep "^cuttle: ct_dist_all_reduce_sum: all-reduce (collective #[0-9]*) timed out after $TIMEOUT s on rank [02]: rank 1 of 3 never arrived (dead or stuck); ending the job" "$out")
  [ -n "$line" ]; check "no survivor's watchdog named rank 1 and the collective" $?
  grep -q "^FAULT rank" "$out" && check "a survivor's blocking all-reduce returned instead of ending the job" 1
elif [ "$MODE" != kill ]; then
  for r in 0 2; do
    line=$(grep "^FAULT rank $r:" "$out")
    echo "$line" | grep -q "timed out after $TIMEOUT s on rank $r: rank 1 of 3 never arrived (dead or stuck)"
    check "rank $r did not report rank 1 missing: $line" $?
    echo "$line" | grep -q "(collective #[0-9]*)"; check "rank $r did not number the collective" $?
    if [ "$MODE" = sleep-startup ]; then
      echo "$line" | grep -q "ct_ddp_new: start-up check"; check "rank $r did not name ct_ddp_new's check" $?
    else
      echo "$line" | grep -q "ct_ddp_sync_grads: all-reduce of bucket [0-9]"; check "rank $r did not name the bucket" $?
    fi
    secs=$(echo "$line" | sed -n 's/.* after \([0-9.]*\) s:.*/\1/p')
    [ -n "$secs" ] && holds "$secs >= $TIMEOUT && $secs < $TIMEOUT + 2"
    check "rank $r waited ${secs:-?} s, expected the timeout $TIMEOUT s (+ 2)" $?
    later=$(grep "^LATER rank $r:" "$out")
    echo "$later" | grep -q "status -10 after 0.0[0-9]* s: .*unusable since"; check "rank $r's later collective: $later" $?
    grep "^FINALIZE rank $r:" "$out" | grep -q "status -10"; check "rank $r's ct_dist_finalize did not refuse" $?
  done
else
  # A killed rank: mpirun usually ends the others itself; if they get there first, they name rank 1
  # or report MPI's error. Either way they are gone within the bound (checked above).
  grep "^FAULT rank" "$out" | grep -v "status -10" && check "a survivor's step did not fail" 1
fi
exit $fail
