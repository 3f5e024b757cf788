#!/bin/sh
# bench/ab.sh N BIN_A BIN_B [...]: an A/B comparison of cuttle builds, for the before/after figures
# of docs/perf-history.md. Runs `BIN bench train $AB_ARGS` N times for each binary, alternating A, B, A,
# B... so that the machine's slow and fast phases fall on both, and prints each binary's mean
# images/s and runs. AB_ARGS defaults to the cnn recipe, `--model cnn --limit 19200 --threads 2`
# (150 steps of Adam, batch 128); for resnet18 docs/perf-history.md uses
#   AB_ARGS="--model resnet18 --device cpu --threads 2 --max-steps 30 --test-limit 200"
# Copy a build's cuttle aside (cp build/cuttle /tmp/cuttle_before) before changing the code.
set -u
n="${1:?usage: bench/ab.sh N BIN_A BIN_B [...]}"; shift
args="${AB_ARGS:---model cnn --limit 19200 --threads 2}"
model=$(echo "$args" | sed -n 's/.*--model \([^ ]*\).*/\1/p')
i=0
while [ "$i" -lt "$n" ]; do
  for bin in "$@"; do
    # shellcheck disable=SC2086 # AB_ARGS is a list of options
    r=$("$bin" bench train $args --no-progress 2>/dev/null | awk -v m="$model" '$1 == m && $2 ~ /^[0-9]+$/ {print $3}')
    echo "$bin ${r:-failed}"
  done
  i=$((i + 1))
done | awk '{ s[$1] += $2; c[$1]++; runs[$1] = runs[$1] " " $2 }
            END { for (b in s) printf "%s: mean %.0f images/s over %d runs:%s\n", b, s[b] / c[b], c[b], runs[b] }'
