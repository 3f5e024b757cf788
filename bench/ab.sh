#!/bin/sh
# bench/ab.sh N BIN_A BIN_B [...]: an A/B comparison of cuttle builds on the cnn recipe, for the
# before/after figures of docs/perf.md. Runs `BIN bench train --model cnn --limit 19200` (150 steps
# of Adam, batch 128, 2 threads) N times for each binary, alternating A, B, A, B... so that the
# machine's slow and fast phases fall on both, and prints each binary's mean images/s and runs.
# Copy a build's cuttle aside (cp build/cuttle /tmp/cuttle_before) before changing the code.
set -u
n="${1:?usage: bench/ab.sh N BIN_A BIN_B [...]}"; shift
i=0
while [ "$i" -lt "$n" ]; do
  for bin in "$@"; do
    r=$("$bin" bench train --model cnn --limit 19200 --no-progress --threads 2 2>/dev/null | awk '$1 == "cnn" {print $3}')
    echo "$bin ${r:-failed}"
  done
  i=$((i + 1))
done | awk '{ s[$1] += $2; c[$1]++; runs[$1] = runs[$1] " " $2 }
            END { for (b in s) printf "%s: mean %.0f images/s over %d runs:%s\n", b, s[b] / c[b], c[b], runs[b] }'
