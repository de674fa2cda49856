#!/usr/bin/env bash
# zeus simulate --carbon/--price over the day-long traces in this folder: the 24 paper jobs back
# to back from each trace's first hour, Zeus's fixed limit against the rule that follows the
# signal, at the default reference (grid: the signal's mean over the day before each choice) and
# at fixed ones (Chase's 750, the trace's maximum), plus the maximum limit (the Default) and the
# offline bound (the whole day known, no job longer than Zeus's) for context; each with the rule
# on the next interval's mean (a perfect forecast, the default) and on the value now
# (--no-forecast).
# Usage: bench/grid/run.sh [build dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
zeus="${1:-build/ci}/apps/zeus/zeus"
for trace in caiso_spring_day denmark_windy_day poland_day flat_day; do
  for ref in grid chase max; do
    for now in "" --no-forecast; do
      echo "== carbon ${trace} S_max=${ref} ${now:-forecast}"
      "$zeus" simulate --carbon "$here/$trace.csv" --max-signal "$ref" $now | tail -3
    done
  done
done
for ref in grid max; do
  for now in "" --no-forecast; do
    echo "== price caiso_price_day S_max=${ref} ${now:-forecast}"
    "$zeus" simulate --price "$here/caiso_price_day.csv" --max-signal "$ref" $now | tail -3
  done
done
