#!/usr/bin/env python3
"""Chooses `--policy lean`'s knobs on some seeds and reports them on others, with `zeus simulate`.

    bench/lean_knobs.py [--zeus build/release/apps/zeus/zeus] [--tune 1..50] [--report 51..100]

Every knob combination of the grid is run on the tuning seeds (all 24 GPU x workload cells);
the one kept maximizes the mean energy-saving lead over `--policy zeus` plus half the mean
cost-saving lead, among those whose worst cell loses at most 0.5 pp (a margin under the -1 pp
goal). Only then are the report seeds run, once, for the chosen knobs: the table printed for
them is what bench/README.md quotes. Both lead columns are percentage points of the Default's
cumulative energy / cost (lean's saving minus zeus's, mean over the seeds of a cell).
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import subprocess

GRID = {
    "gamma": [0, 1.1, 1.25, 1.5, 2.0, 3.0],
    "patience": [1, 2, 3],
    "retry": [0, 1.1, 1.25, 1.5],
    "cap": [0, 1.0, 1.1, 1.25, 1.5],
    "spread": [0.1, 0.25, 0.5, 0.75, 1.0],
}


def savings(zeus: str, seeds: str, policy: str, lean: str = "") -> dict:
    cmd = [zeus, "simulate", "--format", "csv", "--seeds", seeds, "--policy", policy]
    if lean:
        cmd += ["--lean", lean]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cells: dict = {}
    for row in csv.DictReader(io.StringIO(out)):
        cell = cells.setdefault((row["gpu"], row["workload"]), [0.0, 0.0, 0])
        cell[0] += float(row["energy_savings"])
        cell[1] += float(row["cost_savings"])
        cell[2] += 1
    return {k: (e / n, c / n) for k, (e, c, n) in cells.items()}


def leads(zeus_cells: dict, lean_cells: dict) -> tuple[dict, dict]:
    energy = {k: 100 * (lean_cells[k][0] - zeus_cells[k][0]) for k in zeus_cells}
    cost = {k: 100 * (lean_cells[k][1] - zeus_cells[k][1]) for k in zeus_cells}
    return energy, cost


def summary(energy: dict, cost: dict) -> str:
    n = len(energy)
    return (f"mean energy lead {sum(energy.values()) / n:+.2f} pp, mean cost lead "
            f"{sum(cost.values()) / n:+.2f} pp, cells >= +2 pp: {sum(v >= 2 for v in energy.values())}"
            f" of {n}, worst cell {min(energy.values()):+.2f} pp")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--zeus", default="build/release/apps/zeus/zeus")
    parser.add_argument("--tune", default="1..50")
    parser.add_argument("--report", default="51..100")
    args = parser.parse_args()

    base = savings(args.zeus, args.tune, "zeus")
    best = None
    for values in itertools.product(*GRID.values()):
        knobs = ",".join(f"{k}={v}" for k, v in zip(GRID, values))
        energy, cost = leads(base, savings(args.zeus, args.tune, "lean", knobs))
        if min(energy.values()) < -0.5:
            continue
        score = sum(energy.values()) / len(energy) + 0.5 * sum(cost.values()) / len(cost)
        if best is None or score > best[0]:
            best = (score, knobs, energy, cost)
    assert best, "no knob combination kept every cell above -0.5 pp"
    _, knobs, energy, cost = best
    print(f"chosen on seeds {args.tune}: --lean {knobs}")
    print(f"  seeds {args.tune}: {summary(energy, cost)}")

    zeus_cells = savings(args.zeus, args.report, "zeus")
    lean_cells = savings(args.zeus, args.report, "lean", knobs)
    energy, cost = leads(zeus_cells, lean_cells)
    print(f"  seeds {args.report} (unseen): {summary(energy, cost)}")
    print("| gpu | workload | zeus energy saved | lean energy saved | lead (pp) | cost lead (pp) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k in sorted(energy):
        print(f"| {k[0]} | {k[1]} | {100 * zeus_cells[k][0]:.2f}% | {100 * lean_cells[k][0]:.2f}% "
              f"| {energy[k]:+.2f} | {cost[k]:+.2f} |")


if __name__ == "__main__":
    main()
