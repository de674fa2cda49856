"""The proof that the GPU check changed nothing on the card: its settings read with nvidia-smi
before the first step and after the last one, compared field by field (GPU mode); on the fake
NVML (CPU mode) its record of every limit set, which must stay empty in measure-only mode.

  python -m gpu_check.limits --save BEFORE.csv                    # before
  python -m gpu_check.limits --save AFTER.csv --compare BEFORE.csv  # after: exit 1 if changed
  python -m gpu_check.limits --fake-state STATE.json              # CPU mode
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

# What the check must never change: power limit, persistence mode, compute mode, clocks.
kFields = ("index", "uuid", "name", "power.limit", "enforced.power.limit", "power.default_limit",
           "persistence_mode", "compute_mode", "clocks.applications.graphics",
           "clocks.applications.memory")


def read_settings() -> str:
    p = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(kFields)}", "--format=csv"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"nvidia-smi exited {p.returncode}: {(p.stdout + p.stderr).strip()}")
    return p.stdout


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--fake-state", type=Path)
    args = parser.parse_args(argv)
    if args.fake_state:
        history = json.loads(args.fake_state.read_text()).get("limit_history", [])
        if history:
            print(f"limits: the fake NVML recorded {len(history)} limit change(s) in measure-only "
                  f"mode: {history}")
            return 1
        print("limits: the fake NVML recorded no limit change")
        return 0
    settings = read_settings()
    print(settings, end="")
    if args.save:
        args.save.write_text(settings)
    if args.compare:
        before = args.compare.read_text()
        if before != settings:
            print(f"limits: the GPU's settings CHANGED during the check:\nbefore:\n{before}"
                  f"after:\n{settings}")
            return 1
        print("limits: unchanged (power limit, persistence, compute mode, application clocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
