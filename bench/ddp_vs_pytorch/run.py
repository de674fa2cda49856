#!/usr/bin/env python3
"""bench/ddp_vs_pytorch: zeus-cpp's GradientSync against PyTorch's Python DistributedDataParallel
on the same CNN, data, sampler and hyper-parameters (2 processes, 1 intra-op thread each, Gloo on
127.0.0.1), side by side in one run. Every configuration is started the same way (torchrun's
environment variables, set here), and each repetition runs all configurations back to back so
that drift in the machine's load hits them alike. Prints a Markdown table of median samples/s.

Usage: bench/ddp_vs_pytorch/run.py [--reps 3] [--iters 200] [--warmup 20]
       [--worker build/release/bench/zeus_ddp_worker] [--pypi-python bench/.venv/bin/python]
       [--debian-python /usr/bin/python3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from bench_util import free_port  # noqa: E402


def launch(cmd, world, extra_env=None):
    """Starts `world` ranks of `cmd` with torchrun's variables; returns rank 0's JSON line."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", **(extra_env or {}))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    try:
        outputs = [p.communicate(timeout=900)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        sys.exit(f"{' '.join(cmd)} did not finish within 900 s; killed")
    for rank, p in enumerate(procs):
        if p.returncode != 0:
            sys.exit(f"rank {rank} of {' '.join(cmd)} exited with {p.returncode}")
    return json.loads(outputs[0].strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--worker", default=os.path.join(ROOT, "build/release/bench/zeus_ddp_worker"))
    parser.add_argument("--pypi-python", default=os.path.join(ROOT, "bench/.venv/bin/python"))
    parser.add_argument("--debian-python", default="/usr/bin/python3")
    parser.add_argument("--only", help="comma-separated subset of the configuration names")
    args = parser.parse_args()

    common = ["--iters", str(args.iters), "--warmup", str(args.warmup), "--batch-size", "64",
              "--threads", "1"]
    peer = os.path.join(HERE, "ddp_peer.py")
    configs = {
        "zeus-cpp GradientSync": ([args.worker, "--sync", "gradsync"] + common, None),
        # InitOptions::tune_malloc = false (zeus/common/malloc_tuning.h): glibc's dynamic
        # mmap threshold, the default before issue #21.
        "zeus-cpp GradientSync, glibc's default malloc":
            ([args.worker, "--sync", "gradsync", "--glibc-malloc"] + common, None),
        "zeus-cpp flat all-reduce after backward": ([args.worker, "--sync", "flat"] + common, None),
        "zeus-cpp no synchronization (upper bound)":
            ([args.worker, "--sync", "none"] + common, None),
        "PyTorch DDP (PyPI)": ([args.pypi_python, peer] + common, None),
        "PyTorch DDP (Debian python3-torch 1.13)": ([args.debian_python, peer] + common, None),
    }
    if args.only:
        keep = args.only.split(",")
        configs = {k: v for k, v in configs.items() if any(s in k for s in keep)}
    for name, (cmd, _) in configs.items():
        if not os.path.exists(cmd[0]):
            sys.exit(f"{name}: {cmd[0]} not found (build with `cmake --preset release "
                     f"-DZEUS_BUILD_BENCH=ON` / create bench/.venv, see bench/README.md)")

    results = {name: [] for name in configs}
    faults = {name: [] for name in configs}
    versions = {}
    for rep in range(args.reps):
        for name, (cmd, env) in configs.items():
            out = launch(cmd, args.world, env)
            results[name].append(out["samples_per_s"])
            faults[name].append(out["minor_faults_per_iter"])
            versions[name] = out["side"]
            print(f"rep {rep + 1}/{args.reps} {name}: {out['samples_per_s']:.1f} samples/s "
                  f"(loss {out['mean_loss']:.4f}, "
                  f"{out['minor_faults_per_iter']:.0f} minor faults/iter on rank 0)",
                  file=sys.stderr, flush=True)

    median = {name: statistics.median(v) for name, v in results.items()}
    base = median.get("zeus-cpp GradientSync")
    print(f"\n{args.world} processes x 1 thread, batch 64/rank, {args.iters} iterations after "
          f"{args.warmup} warm-up, {args.reps} repetitions, {time.strftime('%Y-%m-%d')}\n")
    print("| configuration | runtime | median samples/s | all runs | minor faults/iter (rank 0) "
          "| GradientSync / this |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, values in results.items():
        ratio = f"{base / median[name]:.2f}" if base else "-"
        runs = ", ".join(f"{v:.0f}" for v in values)
        flts = ", ".join(f"{v:.0f}" for v in faults[name])
        print(f"| {name} | {versions[name]} | {median[name]:.1f} | {runs} | {flts} | {ratio} |")


if __name__ == "__main__":
    main()
