"""Turns what scripts/gpu-check.sh collected in OUT into its report: OUT/gpu-check.json and a
text summary (printed, and written to OUT/gpu-check.txt). Standard library only: it runs under
the machine's torch interpreter, whatever else that has.
"""
import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Optional

BATCH = 64  # examples/fashion_mnist's default, and torch_step.py's


def zeus_epoch(path: Path) -> dict:
    result = json.loads(path.read_text())
    e = result["epochs"][0]
    steps = e["train_iterations"]
    return {
        "measure_only": result.get("measure_only", False),
        "power_limit_w": e["power_limit"],
        "steps": steps,
        "train_s": e["train_time"],
        "eval_s": e["eval_time"],
        "train_j": e["train_energy"],
        "eval_j": e["eval_energy"],
        "epoch_s": e["train_time"] + e["eval_time"],
        "epoch_j": e["train_energy"] + e["eval_energy"],
        "step_ms": 1e3 * e["train_time"] / steps,
        "samples_per_s": steps * BATCH / e["train_time"],
        "train_avg_w": e["train_energy"] / e["train_time"] if e["train_time"] > 0 else None,
    }


def mean_power_w(path: Path, column: int, scale: float, skip_header: bool) -> Optional[float]:
    """Mean of a power column of a CSV; None when the file holds no number there."""
    if not path.exists():
        return None
    values = []
    with path.open() as f:
        rows = csv.reader(f)
        if skip_header:
            next(rows, None)
        for row in rows:
            try:
                values.append(float(row[column]) * scale)
            except (IndexError, ValueError):
                continue
    return statistics.fmean(values) if values else None


def counter_vs_integral(text: str) -> Optional[dict]:
    m = re.search(
        r"energy counter ([0-9.]+) J vs the integral of its (\d+) power samples ([0-9.]+) J "
        r"\(([-+0-9.]+)%\)",
        text,
    )
    if not m:
        return None
    return {"counter_j": float(m[1]), "samples": int(m[2]), "integral_j": float(m[3]),
            "diff_pct": float(m[4])}


def gtest_counts(path: Path) -> dict:
    text = path.read_text() if path.exists() else ""
    counts = {}
    for key in ("PASSED", "SKIPPED", "FAILED"):
        m = re.search(rf"\[\s+{key}\s+\] (\d+) test", text)
        counts[key.lower()] = int(m[1]) if m else 0
    return counts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    args = parser.parse_args()
    out: Path = args.out

    zeus = [zeus_epoch(out / f"zeus_log_{r}" / "gpucheck+bs64.train.json") for r in (1, 2)]
    torch = [json.loads((out / f"torch_train_{r}.json").read_text()) for r in (1, 2)]
    # examples/python/train.py: zeus_cpp.ZeusDataLoader in the machine's PyTorch.
    python_epoch = zeus_epoch(out / "py_log" / "gpucheck+bs64.train.json")
    monitor_text = (out / "monitor.txt").read_text()
    energy = counter_vs_integral(monitor_text)
    zeus_w = mean_power_w(out / "monitor.csv", 1, 1e-3, skip_header=True)
    smi_draw = mean_power_w(out / "nvidia-smi.csv", 1, 1.0, skip_header=False)
    smi_instant = mean_power_w(out / "nvidia-smi.csv", 2, 1.0, skip_header=False)
    smi_w = smi_instant if smi_instant is not None else smi_draw
    zeus_step = statistics.median(z["step_ms"] for z in zeus)
    torch_step = statistics.median(t["step_ms"] for t in torch)
    build = dict(line.split("=") for line in (out / "build.txt").read_text().split())
    report = {
        "mode": args.mode,
        "build_s": int(build["build_s"]),
        "tests": {"gpu_test": gtest_counts(out / "gpu_test.txt"),
                  "torch_test": gtest_counts(out / "torch_test.txt")},
        "zeus_epochs": zeus,
        "python_epoch": python_epoch,
        "torch_epochs": torch,
        "energy_counter_vs_integral": energy,
        "power_w": {"zeus_nvml_mean": zeus_w, "nvidia_smi_mean": smi_w,
                    "nvidia_smi_draw_mean": smi_draw, "nvidia_smi_instant_mean": smi_instant,
                    "diff_pct": None if zeus_w is None or not smi_w else 100 * (zeus_w - smi_w) / smi_w},
        "step_ms": {"zeus_median": zeus_step, "torch_median": torch_step,
                    "torch_over_zeus": torch_step / zeus_step},
    }
    (out / "gpu-check.json").write_text(json.dumps(report, indent=2) + "\n")

    lines = [f"gpu-check ({args.mode}): built in {report['build_s']} s; "
             f"gpu_test {report['tests']['gpu_test']}, torch_test {report['tests']['torch_test']}"]
    for r, z in enumerate(zeus, 1):
        lines.append(
            f"zeus-cpp epoch {r}: {z['steps']} steps, {z['samples_per_s']:.0f} samples/s, "
            f"{z['step_ms']:.3f} ms/step; epoch {z['epoch_s']:.2f} s, {z['epoch_j']:.1f} J "
            f"(train {z['train_s']:.2f} s {z['train_j']:.1f} J = {z['train_avg_w'] or 0:.1f} W, "
            f"eval {z['eval_s']:.2f} s {z['eval_j']:.1f} J) at {z['power_limit_w']} W, "
            f"measure-only {z['measure_only']}")
    p = python_epoch
    lines.append(
        f"zeus_cpp (Python) epoch: {p['steps']} steps, {p['samples_per_s']:.0f} samples/s, "
        f"{p['step_ms']:.3f} ms/step; epoch {p['epoch_s']:.2f} s, {p['epoch_j']:.1f} J "
        f"(train {p['train_s']:.2f} s {p['train_j']:.1f} J = {p['train_avg_w'] or 0:.1f} W), "
        f"measure-only {p['measure_only']}")
    for r, t in enumerate(torch, 1):
        lines.append(f"PyTorch {t['torch']} epoch {r}: {t['steps']} steps, "
                     f"{t['samples_per_s']:.0f} samples/s, {t['step_ms']:.3f} ms/step")
    lines.append(f"step time (median of 2): zeus-cpp {zeus_step:.3f} ms, PyTorch {torch_step:.3f} ms, "
                 f"PyTorch / zeus-cpp = {torch_step / zeus_step:.2f}")
    if energy:
        lines.append(f"NVML energy counter {energy['counter_j']:.1f} J vs the integral of "
                     f"{energy['samples']} power samples {energy['integral_j']:.1f} J "
                     f"({energy['diff_pct']:+.2f}%)")
    else:
        lines.append("NVML energy counter vs integral: not reported (" +
                     monitor_text.strip().splitlines()[-1] + ")")
    if zeus_w is not None and smi_w:
        lines.append(f"power over the same 6 s: NVML via zeus-cpp {zeus_w:.1f} W, nvidia-smi "
                     f"{smi_w:.1f} W ({report['power_w']['diff_pct']:+.2f}%)")
    else:
        lines.append("power vs nvidia-smi: skipped (no nvidia-smi on this machine)"
                     if args.mode == "cpu" else "power vs nvidia-smi: no samples")
    text = "\n".join(lines) + "\n"
    (out / "gpu-check.txt").write_text(text)
    sys.stdout.write(text)
    failed = report["tests"]["gpu_test"]["failed"] + report["tests"]["torch_test"]["failed"]
    measured_only = all(z["measure_only"] for z in zeus) and python_epoch["measure_only"]
    return 1 if failed or not measured_only else 0


if __name__ == "__main__":
    sys.exit(main())
