#!/usr/bin/env python3
"""What counting the waits at the gradient sync costs a training step (Note [sampled pace],
src/zeus/job/planned_limits.h): bench/ddp_vs_pytorch's zeus-cpp rank (the Fashion-MNIST CNN,
GradientSync over Gloo, 2 processes of 1 thread) with and without --count-waits, side by side,
alternating in each repetition so that the machine's drift hits both alike. On the CPU the
armed path reads the clock twice a step; on CUDA it also synchronizes the compute stream twice
a step, which is why jobs arm it only while profiling and over each pace check's sample.

Usage: bench/per_gpu_plan/armed_cost.py [--reps 5] [--iters 300] [--worker PATH]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "ddp_vs_pytorch"))
from run import launch  # noqa: E402  (torchrun's environment for each rank)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--worker", default=os.path.join(ROOT, "build/ci/bench/zeus_ddp_worker"))
    args = parser.parse_args()
    common = [args.worker, "--iters", str(args.iters), "--warmup", str(args.warmup),
              "--threads", "1"]
    rates = {"off": [], "armed": []}
    for _ in range(args.reps):
        for name, extra in (("off", []), ("armed", ["--count-waits"])):
            rates[name].append(launch(common + extra, 2)["samples_per_s"])
    off, armed = statistics.median(rates["off"]), statistics.median(rates["armed"])
    print(f"| waits counted | median samples/s ({args.reps} reps x {args.iters} steps) |")
    print("|---|---|")
    print(f"| no (a job's steps outside profiling and the pace samples) | {off:.1f} |")
    print(f"| yes (profiling, the pace samples) | {armed:.1f} |")
    print(f"armed / off step time: {off / armed:.4f}")


if __name__ == "__main__":
    main()
