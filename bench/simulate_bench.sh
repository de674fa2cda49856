#!/usr/bin/env bash
# Side by side, in one run: `zeus simulate` (all 6 workloads x 4 GPUs x 10 seeds, one call)
# against Zeus's Python simulator (zeus-ml 0.4.0 from PyPI, in bench/.venv) on the same jobs.
#   bench/simulate_bench.sh [build dir, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
if [[ ! -x bench/.venv/bin/python ]]; then
  python3 -m venv bench/.venv
  # zeus-ml 0.4.0 pins pandas 1.4.2 (no Python 3.11 wheel); 1.5.3 is the closest that installs.
  bench/.venv/bin/pip install -q "numpy<2" "pandas==1.5.3" scikit-learn
  bench/.venv/bin/pip install -q --no-deps zeus-ml==0.4.0
fi
out=$(mktemp)
start=$(date +%s.%N)
"$build/apps/zeus/zeus" simulate --format csv >"$out"
ours=$(echo "$(date +%s.%N) - $start" | bc)
echo "zeus simulate (C++): $(($(wc -l <"$out") - 1)) simulations in ${ours} s (whole process)"
bench/.venv/bin/python bench/zeus_peer_simulate.py "$out" data/zeus-traces
rm -f "$out"
