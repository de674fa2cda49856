#!/usr/bin/env python3
"""A full Fashion-MNIST epoch on 2 processes with and without zeus::DataLoader.

Runs examples/fashion_mnist under `zeus run --nproc-per-node 2 --omp-num-threads 1`, once with
zeus::DataLoader (profiling the 7 limits of a simulated V100 during the epoch) and once with
--plain-loop (a hand-written batching loop, same sampler and batches, no energy optimization),
interleaved for --reps repetitions. Prints the median wall time of the epoch (train + eval) and
the ratio. Usage: bench/loader_overhead/epoch_time.py [--build build/release] [--reps 2]
"""
import argparse
import re
import statistics
import subprocess
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("--build", default="build/release")
parser.add_argument("--reps", type=int, default=2)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

zeus = f"{args.build}/apps/zeus/zeus"
example = f"{args.build}/examples/fashion_mnist"
times = {"zeus::DataLoader": [], "plain loop": []}
for rep in range(args.reps):
    for mode in times:
        with tempfile.TemporaryDirectory() as log:
            cmd = [zeus, "run", "--nproc-per-node", "2", "--standalone", "--omp-num-threads", "1",
                   example, "--epochs", str(args.epochs), "--target-accuracy", "0.99",
                   "--device", "sim:v100", "--log-dir", log]
            if mode == "plain loop":
                cmd.append("--plain-loop")
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
        epochs = [float(s) for s in re.findall(r"epoch \d+/\d+: .*, ([0-9.]+) s", out)]
        if len(epochs) != args.epochs:
            raise SystemExit(f"{mode}: could not read the epoch times from:\n{out}")
        times[mode].append(sum(epochs) / len(epochs))
        print(f"rep {rep + 1} {mode}: {epochs} s per epoch", flush=True)
z = statistics.median(times["zeus::DataLoader"])
p = statistics.median(times["plain loop"])
print(f"median epoch: zeus::DataLoader {z:.1f} s, plain loop {p:.1f} s, ratio {z / p:.3f}")
