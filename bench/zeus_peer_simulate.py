"""Runs Zeus's own Python simulator (zeus-ml 0.4.0, from PyPI) on the jobs and seeds that
`zeus simulate --format csv` printed, for a side-by-side comparison of speed and results.

    bench/.venv/bin/python bench/zeus_peer_simulate.py OURS.csv TRACE_DIR

Reads our CSV for each (gpu, workload, seed): the recurrence count and the default batch size,
so both simulators get the same job; prints Zeus's cumulative energy and the savings against
our Default baseline, and the wall time of its simulations alone (CSV loading excluded).
"""
import csv
import sys
import time
import warnings
from collections import defaultdict

import pandas as pd
from zeus.job import Job
from zeus.policy import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
from zeus.simulate import Simulator

JOBS = {  # as in spec-optimizer.md
    "cifar100": ("shufflenetv2", "adadelta", 0.6, 100),
    "imagenet": ("resnet50", "adadelta", 0.65, 100),
    "librispeech": ("deepspeech2", "adamw", 40.0, 16),
    "movielens-1m": ("ncf", "adam", 0.41, 100),
    "sentiment140": ("bert_base_uncased", "adamw", 0.84, 10),
    "squad": ("bert_base_uncased", "adamw", 84.0, 6),
}


def main() -> None:
    warnings.simplefilter("ignore", FutureWarning)  # pandas 1.5 on zeus-ml 0.4.0's groupby
    ours_path, trace_dir = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(ours_path)))
    train = pd.read_csv(f"{trace_dir}/summary_train.csv")
    power = {g: pd.read_csv(f"{trace_dir}/summary_power_{g}.csv") for g in {r["gpu"] for r in rows}}
    savings = defaultdict(list)
    elapsed = 0.0
    for r in rows:
        network, optimizer, target, max_epochs = JOBS[r["workload"]]
        job = Job(r["workload"], network, optimizer, target, max_epochs, int(r["default_batch_size"]))
        seed = int(r["seed"])
        start = time.perf_counter()
        sim = Simulator(train, power[r["gpu"]],
                        PruningGTSBatchSizeOptimizer(seed=seed, verbose=False),
                        JITPowerLimitOptimizer(verbose=False), seed=seed, verbose=False)
        history = sim.simulate_one_job(job, int(r["recurrences"]), 2.0, 0.5)
        elapsed += time.perf_counter() - start
        energy = sum(h.energy for h in history)
        savings[(r["gpu"], r["workload"])].append(1 - energy / float(r["baseline_energy_j"]))
    print(f"zeus-ml 0.4.0: {len(rows)} simulations in {elapsed:.2f} s")
    print("gpu,workload,zeus_py_energy_savings_mean")
    for (gpu, workload), values in sorted(savings.items()):
        print(f"{gpu},{workload},{sum(values) / len(values):.4f}")


if __name__ == "__main__":
    main()
