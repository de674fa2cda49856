"""Runs Zeus's own Python simulator (zeus-ml 0.4.0, from PyPI) on the GPUs, workloads and seeds
that `zeus simulate --format csv` printed, each job built as Zeus's own driver builds it
(examples/research_reproducibility/zeus_nsdi23/run_single.py), and compares.

    bench/.venv/bin/python bench/zeus_peer_simulate.py TRACE_DIR OURS.csv [OURS_LEAN.csv]

Zeus's side owes nothing to ours: its job is Job(dataset, network, optimizer, target, max
epochs, b0) with b0 the paper's, capped here at the largest batch size the GPU's traces have
(Zeus itself refuses a b0 missing from the trace); its recurrence count is its driver's
2 x |B| x |P| over the job's rows; its baseline is its own Simulator run with a batch-size
optimizer that always answers b0 and a power-limit optimizer that always answers the batch
size's maximum limit, without early stopping (beta = inf), over as many recurrences. Prints the
recurrence counts side by side (they must match), each side's mean cumulative energy saving
against its own baseline, and the wall time of Zeus's simulations (CSV loading excluded).
"""
import contextlib
import csv
import io
import sys
import time
import warnings
from collections import defaultdict

import numpy as np
import pandas as pd
from zeus.job import Job
from zeus.policy import (BatchSizeOptimizer, JITPowerLimitOptimizer, PowerLimitOptimizer,
                         PruningGTSBatchSizeOptimizer)
from zeus.simulate import Simulator

JOBS = {  # the paper's jobs, as in spec-optimizer.md: network, optimizer, target, epochs, b0
    "cifar100": ("shufflenetv2", "adadelta", 0.6, 100, 1024),
    "imagenet": ("resnet50", "adadelta", 0.65, 100, 256),
    "librispeech": ("deepspeech2", "adamw", 40.0, 16, 192),
    "movielens-1m": ("ncf", "adam", 0.41, 100, 1024),
    "sentiment140": ("bert_base_uncased", "adamw", 0.84, 10, 128),
    "squad": ("bert_base_uncased", "adamw", 84.0, 6, 32),
}


class FixedBatchSize(BatchSizeOptimizer):
    """The Default baseline's batch size: always b0."""

    name = "Default b0"

    def register_job(self, job, batch_sizes):
        self.b0 = job.default_bs

    def predict(self, job):
        return self.b0

    def observe(self, job, batch_size, cost, converged=None):
        pass


class MaxPowerLimit(PowerLimitOptimizer):
    """The Default baseline's power limit: the batch size's maximum."""

    name = "Default max limit"

    def __init__(self, job_df):
        self.max_pl = job_df.groupby("batch_size").power_limit.max().to_dict()

    def predict(self, job, batch_size):
        return self.max_pl[batch_size]

    def observe(self, job, batch_size, power_limit, cost):
        pass


def read_ours(path):
    cells = defaultdict(dict)
    for r in csv.DictReader(open(path)):
        cells[(r["gpu"], r["workload"])][int(r["seed"])] = r
    return cells


def main() -> None:
    warnings.simplefilter("ignore", FutureWarning)  # pandas 1.5 on zeus-ml 0.4.0's groupby
    trace_dir, ours_path = sys.argv[1], sys.argv[2]
    ours = read_ours(ours_path)
    lean = read_ours(sys.argv[3]) if len(sys.argv) > 3 else None
    train = pd.read_csv(f"{trace_dir}/summary_train.csv")
    power = {g: pd.read_csv(f"{trace_dir}/summary_power_{g}.csv") for g, _ in ours}
    elapsed = 0.0
    simulations = 0
    rows = []
    for (gpu, workload), by_seed in sorted(ours.items()):
        network, optimizer, target, max_epochs, paper_b0 = JOBS[workload]
        probe = Job(workload, network, optimizer, target, max_epochs, paper_b0)
        job_df = probe.filter_df(train.merge(power[gpu], how="inner"))
        b0 = max(b for b in job_df.batch_size.unique() if b <= paper_b0)
        job = Job(workload, network, optimizer, target, max_epochs, int(b0))
        recurrences = 2 * len(job_df.batch_size.unique()) * len(job_df.power_limit.unique())
        saved = []
        for seed in sorted(by_seed):
            start = time.perf_counter()
            # Zeus prints "cannot run even one epoch" even when not verbose.
            with contextlib.redirect_stdout(io.StringIO()):
                history = Simulator(train, power[gpu],
                                    PruningGTSBatchSizeOptimizer(seed=seed, verbose=False),
                                    JITPowerLimitOptimizer(verbose=False), seed=seed,
                                    verbose=False).simulate_one_job(job, recurrences, 2.0, 0.5)
                baseline = Simulator(train, power[gpu], FixedBatchSize(), MaxPowerLimit(job_df),
                                     seed=seed, verbose=False).simulate_one_job(
                                         job, recurrences, np.inf, 0.5)
            elapsed += time.perf_counter() - start
            simulations += 2
            saved.append(1 - sum(h.energy for h in history) / sum(h.energy for h in baseline))
        first = next(iter(by_seed.values()))
        mean = lambda cells, key: sum(float(r[key]) for r in cells.values()) / len(cells)
        rows.append((gpu, workload, recurrences, int(first["recurrences"]), int(b0),
                     int(first["default_batch_size"]), sum(saved) / len(saved),
                     mean(by_seed, "energy_savings"),
                     mean(lean[(gpu, workload)], "energy_savings") if lean else None))
    print(f"zeus-ml 0.4.0: {simulations} simulations (Zeus and its baseline) in {elapsed:.1f} s")
    print("| gpu | workload | recurrences (zeus-ml / ours) | b0 | zeus-ml | zeus-cpp zeus | "
          "difference (pp) |" + (" zeus-cpp lean |" if lean else ""))
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if lean else ""))
    mismatched = 0
    for gpu, workload, r_py, r_ours, b0_py, b0_ours, py, cpp, cpp_lean in rows:
        mismatched += r_py != r_ours or b0_py != b0_ours
        print(f"| {gpu} | {workload} | {r_py} / {r_ours} | {b0_py}"
              f"{'' if b0_py == b0_ours else f' (ours {b0_ours})'} | {100 * py:.1f}% | "
              f"{100 * cpp:.1f}% | {100 * (cpp - py):+.1f} |"
              + (f" {100 * cpp_lean:.1f}% |" if lean else ""))
    diffs = [100 * (cpp - py) for *_, py, cpp, _ in rows]
    print(f"mean zeus-ml {100 * sum(r[6] for r in rows) / len(rows):.2f}%, zeus-cpp "
          f"{100 * sum(r[7] for r in rows) / len(rows):.2f}%"
          + (f", zeus-cpp lean {100 * sum(r[8] for r in rows) / len(rows):.2f}%" if lean else "")
          + f"; mean |difference| {sum(map(abs, diffs)) / len(diffs):.2f} pp, largest "
          f"{max(diffs, key=abs):+.2f} pp; jobs built differently: {mismatched}")


if __name__ == "__main__":
    main()
