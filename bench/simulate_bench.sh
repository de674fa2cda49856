#!/usr/bin/env bash
# Side by side, in one run: `zeus simulate` (all 6 workloads x 4 GPUs x 10 seeds, one call per
# policy) against Zeus's Python simulator (zeus-ml 0.4.0 from PyPI, in bench/.venv), each side
# with its own job construction, recurrence count and Default baseline.
#   bench/simulate_bench.sh [build dir, default build/release] [seeds, default 1..10]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
seeds=${2:-1..10}
if [[ ! -x bench/.venv/bin/python ]]; then
  python3 -m venv bench/.venv
  # zeus-ml 0.4.0 pins pandas 1.4.2 (no Python 3.11 wheel); 1.5.3 is the closest that installs.
  bench/.venv/bin/pip install -q "numpy<2" "pandas==1.5.3" scikit-learn
  bench/.venv/bin/pip install -q --no-deps zeus-ml==0.4.0
fi
ours=$(mktemp)
lean=$(mktemp)
trap 'rm -f "$ours" "$lean"' EXIT
start=$(date +%s.%N)
"$build/apps/zeus/zeus" simulate --format csv --seeds "$seeds" >"$ours"
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "zeus simulate (C++): $(($(wc -l <"$ours") - 1)) simulations in ${took} s (whole process)"
"$build/apps/zeus/zeus" simulate --format csv --seeds "$seeds" --policy lean >"$lean"
bench/.venv/bin/python bench/zeus_peer_simulate.py data/zeus-traces "$ours" "$lean"
