#!/usr/bin/env python3
"""Per-step overhead of zeus_cpp.ZeusDataLoader against a plain torch.utils.data.DataLoader on
the same data, measured side by side (modes interleaved in each repetition), and against Zeus's
own Python ZeusDataLoader (zeus-ml, from PyPI) where it can run.

One process, in-memory Fashion-MNIST-shaped data (float 1x28x28, batch 64). The step is a spin
of --step-ms on the CPU (a stand-in for a GPU step whose length the loader must not change);
"no step" times the loop alone. The Zeus job runs on a simulated V100 with its profile saved
beforehand, so no step falls in a profiling window, as on every run after a job's first; the
per-epoch power log and the epoch's bookkeeping are included.

  .venv-py/bin/python bench/python_loader/bench.py [--reps 5] [--steps 200] [--step-ms 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def dataset(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.rand(n, 1, 28, 28, generator=g),
                         torch.randint(0, 10, (n,), generator=g))


def time_plain(data: TensorDataset, batch: int, step_s: float) -> float:
    loader = DataLoader(data, batch_size=batch, shuffle=True)
    start = time.perf_counter()
    steps = 0
    for _ in loader:
        if step_s:
            spin(step_s)
        steps += 1
    return (time.perf_counter() - start) / steps


class ZeusRun:
    """One zeus_cpp job kept across repetitions: each call is one epoch (train loop only timed;
    its eval loop, one small batch, is outside the timing)."""

    def __init__(self, data: TensorDataset, batch: int, epochs: int) -> None:
        from zeus_cpp import ZeusDataLoader

        self.train = ZeusDataLoader(data, batch_size=batch, max_epochs=epochs, shuffle=True)
        self.eval = ZeusDataLoader(TensorDataset(data.tensors[0][:batch], data.tensors[1][:batch]),
                                   batch_size=batch)
        self.epochs = self.train.epochs()

    def epoch(self, step_s: float) -> float:
        next(self.epochs)
        start = time.perf_counter()
        steps = 0
        for _ in self.train:
            if step_s:
                spin(step_s)
            steps += 1
        per_step = (time.perf_counter() - start) / steps
        for _ in self.eval:
            pass
        self.train.report_metric(0.0)
        return per_step


def profile_once(data: TensorDataset, batch: int) -> None:
    """Saves bs{B}.power.json (a first job profiles every limit), as a previous run would."""
    run = ZeusRun(data, batch, epochs=40)
    while run.train.optimal_power_limit_w is None:
        run.epoch(0)
    run.train.close()


def zeus_ml_status() -> str:
    """Whether Zeus's own ZeusDataLoader (zeus-ml 0.4, `zeus.run`) can run here: it is tried."""
    try:
        from zeus.run import ZeusDataLoader as ZeusMlLoader  # zeus-ml 0.4
    except Exception as e:  # noqa: BLE001 - report whatever stops it
        return f"not importable here ({type(e).__name__}: {e})"
    try:
        ZeusMlLoader(dataset(64), batch_size=8, max_epochs=1)
    except Exception as e:  # noqa: BLE001
        # It calls nvmlInit and nvmlDeviceSetPersistenceMode at construction and then starts
        # its zeus_monitor binary: it needs a real GPU (and changes its settings).
        return f"its construction fails here: {type(e).__name__}: {e}"
    return "constructs here; not timed by this script"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=200, help="steps per epoch")
    p.add_argument("--step-ms", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    log_dir = tempfile.mkdtemp(prefix="zeus-py-bench-")
    os.environ.update(ZEUS_LOG_DIR=log_dir, ZEUS_DEVICE="sim:v100", ZEUS_TARGET_METRIC="2",
                      ZEUS_PROFILE_PARAMS="2,3")
    data = dataset(args.steps * args.batch)
    profile_once(data, args.batch)
    # 2 epochs per repetition (no step, then the step), all in one job.
    run = ZeusRun(data, args.batch, epochs=2 * args.reps + 1)
    results: dict[str, list[float]] = {k: [] for k in ("plain0", "zeus0", "plain", "zeus")}
    for _ in range(args.reps):
        results["plain0"].append(time_plain(data, args.batch, 0))
        results["zeus0"].append(run.epoch(0))
        results["plain"].append(time_plain(data, args.batch, args.step_ms / 1000))
        results["zeus"].append(run.epoch(args.step_ms / 1000))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"zeus_cpp over torch {torch.__version__}, {args.reps} reps x {args.steps} steps, "
          f"batch {args.batch}, medians")
    print(f"| loader | no step: us/step | {args.step_ms:g} ms step: ms/step | vs plain |")
    print("| --- | --- | --- | --- |")
    print(f"| torch DataLoader | {med['plain0'] * 1e6:.1f} | {med['plain'] * 1e3:.3f} | - |")
    overhead = (med["zeus"] - med["plain"]) / med["plain"] * 100
    print(f"| zeus_cpp.ZeusDataLoader | {med['zeus0'] * 1e6:.1f} | {med['zeus'] * 1e3:.3f} | "
          f"{overhead:+.2f}% |")
    print(f"zeus_cpp's own cost per step (no step): {(med['zeus0'] - med['plain0']) * 1e6:+.1f} us")
    print("per-rep ms/step with the step: plain", [round(x * 1e3, 3) for x in results["plain"]],
          "zeus", [round(x * 1e3, 3) for x in results["zeus"]])
    print(f"Zeus's own ZeusDataLoader: {zeus_ml_status()}")
    run.train.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
