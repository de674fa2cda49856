#!/usr/bin/env bash
# zeus simulate --carbon/--price over the day-long traces in this folder: the 24 paper jobs back
# to back from each trace's first hour, Zeus's fixed limit against the rule that follows the
# signal, at three references S_max (Chase's 750, the trace's maximum, the trace's mean), plus the
# maximum limit (the Default) for context; each with the rule on the next interval's mean (a
# perfect forecast, the default) and on the value now (--no-forecast).
# Usage: bench/grid/run.sh [build dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
zeus="${1:-build/ci}/apps/zeus/zeus"
for trace in caiso_spring_day denmark_windy_day poland_day; do
  for ref in 750 max mean; do
    for now in "" --no-forecast; do
      echo "== carbon ${trace} S_max=${ref} ${now:-forecast}"
      "$zeus" simulate --carbon "$here/$trace.csv" --max-signal "$ref" $now | tail -2
    done
  done
done
for ref in max mean; do
  for now in "" --no-forecast; do
    echo "== price caiso_price_day S_max=${ref} ${now:-forecast}"
    "$zeus" simulate --price "$here/caiso_price_day.csv" --max-signal "$ref" $now | tail -2
  done
done
