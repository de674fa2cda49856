#!/usr/bin/env bash
# The GPU check: one prepared call on the GPU machine (docs/gpu.md), also runnable on a CPU
# machine (--cpu-only; CI runs it so that it does not rot). The steps, their limits and what
# comes back are in scripts/gpu_check/check.py; `--help` lists the options. In short: a
# preflight, the `cuda` build against the machine's torch with the carried Debian libraries
# (.gpu-carry, scripts/gpu-carry.sh), the GPU tests, Fashion-MNIST on cuda:0 in measure-only
# mode against the same CNN in PyTorch, NVML against nvidia-smi over the same training window,
# the Python package, and the card's settings before and after (never changed). Every step has
# its own time limit and the check goes on after a failure; the whole ends within 8 minutes on
# the GPU machine. OUT (or --out) receives gpu-check.json, gpu-check.txt and
# gpu-check-logs.tar.gz, nothing else. Exit 0 when every step passed.
#
#   scripts/gpu-check.sh [--cpu-only] [--python PY] [--out DIR] [--deadline S] [--steps A,B]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Any Python >= 3.9 runs the check itself (standard library only); on the GPU machine that is
# the image's python3, the one with torch.
python=$(command -v python3 || true)
[[ -n "$python" ]] || { echo "gpu-check: no python3 on PATH" >&2; exit 2; }
PYTHONPATH="$root/scripts${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m gpu_check "$@"
