"""Turns what scripts/gpu-check.sh collected in its work folder into the report: WORK/gpu-check.json
and a text summary (WORK/gpu-check.txt, printed unless --quiet). It tolerates missing pieces: a
step that failed, timed out or was skipped leaves its part of the report empty, and the report
says which step it was waiting for. Standard library only: it runs under whatever Python the
machine has. Exit 1 only when a zeus-cpp epoch was not measure-only (the check must never have
set a limit); the check's own exit code says whether every step passed.
"""
import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

BATCH = 64  # examples/fashion_mnist's default, and torch_step.py's
TRAIN_RESULT = "gpucheck+bs64.train.json"  # job id gpucheck, global batch size 64

# Which step writes each piece of the report.
SOURCES = {
    "preflight": "preflight", "build_s": "build", "gpu_test": "gpu_test",
    "torch_test": "torch_test", "zeus_epoch_1": "zeus_train_1", "zeus_epoch_2": "zeus_train_2",
    "torch_epoch_1": "torch_train_1", "torch_epoch_2": "torch_train_2",
    "python_epoch": "python_train", "energy_counter_vs_integral": "zeus_train_1",
    "power_w": "zeus_train_1", "window": "zeus_train_1", "limits": "limits_after",
}


def zeus_epoch(path: Path) -> dict:
    result = json.loads(path.read_text())
    e = result["epochs"][0]
    steps = e["train_iterations"]
    return {
        "measure_only": result.get("measure_only", False),
        "epochs_run": len(result["epochs"]),
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


def counter_vs_integral(text: str) -> dict:
    m = re.search(
        r"energy counter ([0-9.]+) J vs the integral of its (\d+) power samples ([0-9.]+) J "
        r"\(([-+0-9.]+)%\)",
        text,
    )
    if not m:
        last = text.strip().splitlines()[-1] if text.strip() else "no output"
        raise ValueError(f"zeus monitor reported no counter vs integral ({last})")
    return {"counter_j": float(m[1]), "samples": int(m[2]), "integral_j": float(m[3]),
            "diff_pct": float(m[4])}


def gtest_counts(path: Path) -> dict:
    text = path.read_text()
    counts = {}
    for key in ("PASSED", "SKIPPED", "FAILED"):
        m = re.search(rf"\[\s+{key}\s+\] (\d+) test", text)
        counts[key.lower()] = int(m[1]) if m else 0
    if not any(counts.values()):
        raise ValueError(f"{path.name} has no GoogleTest summary")
    counts["failed_tests"] = re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)
    return counts


def passed_elapsed_s(steps: dict, name: str) -> float:
    if steps[name]["status"] != "passed":
        raise ValueError(f"{name} {steps[name]['status']}")
    return round(steps[name]["elapsed_s"], 1)


def power(work: Path) -> dict:
    zeus_w = mean_power_w(work / "monitor.csv", 1, 1e-3, skip_header=True)
    if zeus_w is None:
        raise FileNotFoundError("monitor.csv has no samples")
    draw = mean_power_w(work / "nvidia-smi.csv", 1, 1.0, skip_header=False)
    instant = mean_power_w(work / "nvidia-smi.csv", 2, 1.0, skip_header=False)
    smi = instant if instant is not None else draw
    return {"zeus_nvml_mean": zeus_w, "nvidia_smi_mean": smi, "nvidia_smi_draw_mean": draw,
            "nvidia_smi_instant_mean": instant,
            "diff_pct": None if not smi else 100 * (zeus_w - smi) / smi}


def limits(work: Path, mode: str) -> dict:
    if mode == "cpu":
        return {"fake_nvml_history": json.loads((work / "fake-nvml.json").read_text())["limit_history"]}
    before = (work / "limit-before.csv").read_text()
    after = (work / "limit-after.csv").read_text()
    return {"before": before, "after": after, "unchanged": before == after}


class Report:
    def __init__(self, work: Path, mode: str):
        self.work = work
        self.mode = mode
        self.data: Dict[str, object] = {"mode": mode}
        self.missing: Dict[str, str] = {}
        steps = self.read_json("steps.json") or {"steps": []}
        self.steps = {s["name"]: s for s in steps["steps"]}
        self.data["steps"] = steps["steps"]
        self.data["elapsed_s"] = steps.get("elapsed_s")
        self.data["check"] = self.read_json("check.json")

    def read_json(self, name: str):
        try:
            return json.loads((self.work / name).read_text())
        except (OSError, ValueError):
            return None

    def piece(self, name: str, make: Callable[[], object]) -> None:
        try:
            self.data[name] = make()
        except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as e:
            self.data[name] = None
            step = SOURCES.get(name)
            s = self.steps.get(step)
            if s and s["status"] == "not_selected":
                return  # absent by request (--steps), not missing
            state = (f"step {step} {s['status'].replace('_', ' ')}"
                     + (f" ({s['reason']})" if s.get("reason") else "")) if s else f"step {step} did not run"
            self.missing[name] = f"{state}: {type(e).__name__}: {e}"

    def build(self) -> dict:
        w = self.work
        self.piece("preflight", lambda: json.loads((w / "preflight.json").read_text()))
        self.piece("build_s", lambda: passed_elapsed_s(self.steps, "build"))
        self.piece("gpu_test", lambda: gtest_counts(w / "logs" / "gpu_test.log"))
        self.piece("torch_test", lambda: gtest_counts(w / "logs" / "torch_test.log"))
        for r in (1, 2):
            self.piece(f"zeus_epoch_{r}", lambda r=r: zeus_epoch(w / f"zeus_log_{r}" / TRAIN_RESULT))
            self.piece(f"torch_epoch_{r}", lambda r=r: json.loads((w / f"torch_train_{r}.json").read_text()))
        self.piece("python_epoch", lambda: zeus_epoch(w / "py_log" / TRAIN_RESULT))
        self.piece("window", lambda: json.loads((w / "window.json").read_text()))
        self.piece("energy_counter_vs_integral",
                   lambda: counter_vs_integral((w / "monitor.txt").read_text()))
        self.piece("power_w", lambda: power(w))
        self.piece("limits", lambda: limits(w, self.mode))
        zeus = [self.data[f"zeus_epoch_{r}"] for r in (1, 2) if self.data[f"zeus_epoch_{r}"]]
        torch = [self.data[f"torch_epoch_{r}"] for r in (1, 2) if self.data[f"torch_epoch_{r}"]]
        if zeus and torch:
            z = statistics.median(e["step_ms"] for e in zeus)
            t = statistics.median(e["step_ms"] for e in torch)
            self.data["step_ms"] = {"zeus_median": z, "torch_median": t, "torch_over_zeus": t / z,
                                    "runs": [len(zeus), len(torch)]}
        else:
            self.data["step_ms"] = None
            if any(self.steps.get(n, {}).get("status") != "not_selected"
                   for n in ("zeus_train_1", "torch_train_1")):
                self.missing["step_ms"] = "needs a zeus-cpp and a PyTorch epoch"
        failed = [s for s in self.data["steps"] if s["status"] in ("failed", "timed_out")]
        skipped = [s for s in self.data["steps"] if s["status"] == "skipped"]
        self.data["failed_steps"] = [s["name"] for s in failed]
        self.data["skipped_steps"] = [s["name"] for s in skipped]
        self.data["passed"] = bool(self.data["steps"]) and not failed and not skipped
        self.data["missing"] = self.missing
        epochs = zeus + ([self.data["python_epoch"]] if self.data["python_epoch"] else [])
        self.data["never_set_a_limit"] = all(e["measure_only"] for e in epochs)
        return self.data

    def text(self) -> str:
        d = self.data
        status = "PASSED" if d["passed"] else "FAILED"
        lines = [f"gpu-check ({self.mode}): {status} in {d['elapsed_s'] or 0:.0f} s"]
        for s in d["steps"]:
            took = f"{s['elapsed_s']:.1f} s" if s["status"] not in ("skipped", "not_selected") else ""
            why = f"  [{s['reason']}]" if s.get("reason") else ""
            lines.append(f"  {s['name']:<14} {s['status']:<12} {took:>9}{why}")
        pre = d.get("preflight") or {}
        facts = pre.get("facts") or {}
        if facts:
            torch = facts.get("torch") or {}
            lines.append(f"machine: {facts.get('cpus')} CPUs, {facts.get('cxx', {}).get('version')}, "
                         f"cmake {facts.get('cmake')}, nvcc {(facts.get('nvcc') or {}).get('version')}, "
                         f"Python {(facts.get('python') or {}).get('version')}, torch "
                         f"{torch.get('version')} (CUDA {torch.get('cuda')}, {torch.get('nccl_pin')})")
            if facts.get("gpus"):
                lines.append(f"GPU: {'; '.join(facts['gpus'])}; {facts.get('nvidia_smi', '')}")
        for m in pre.get("missing", []) + pre.get("python_missing", []):
            lines.append(f"preflight missing: {m}")
        for name in ("gpu_test", "torch_test"):
            t = d.get(name)
            if t:
                lines.append(f"{name}: {t['passed']} passed, {t['skipped']} skipped, {t['failed']} failed"
                             + (f" ({', '.join(t['failed_tests'])})" if t["failed_tests"] else ""))
        for r in (1, 2):
            z = d.get(f"zeus_epoch_{r}")
            if z:
                lines.append(
                    f"zeus-cpp run {r}, epoch 1: {z['steps']} steps, {z['samples_per_s']:.0f} samples/s, "
                    f"{z['step_ms']:.3f} ms/step; epoch {z['epoch_s']:.2f} s, {z['epoch_j']:.1f} J "
                    f"(train {z['train_s']:.2f} s {z['train_j']:.1f} J = {z['train_avg_w'] or 0:.1f} W, "
                    f"eval {z['eval_s']:.2f} s {z['eval_j']:.1f} J) at {z['power_limit_w']} W, "
                    f"measure-only {z['measure_only']}")
        p = d.get("python_epoch")
        if p:
            lines.append(
                f"zeus_cpp (Python) epoch: {p['steps']} steps, {p['samples_per_s']:.0f} samples/s, "
                f"{p['step_ms']:.3f} ms/step; epoch {p['epoch_s']:.2f} s, {p['epoch_j']:.1f} J "
                f"(train {p['train_s']:.2f} s {p['train_j']:.1f} J = {p['train_avg_w'] or 0:.1f} W), "
                f"measure-only {p['measure_only']}")
        for r in (1, 2):
            t = d.get(f"torch_epoch_{r}")
            if t:
                lines.append(f"PyTorch {t['torch']} epoch {r}: {t['steps']} steps, "
                             f"{t['samples_per_s']:.0f} samples/s, {t['step_ms']:.3f} ms/step")
        s = d.get("step_ms")
        if s:
            lines.append(f"step time (median of {s['runs'][0]} and {s['runs'][1]}): zeus-cpp "
                         f"{s['zeus_median']:.3f} ms, PyTorch {s['torch_median']:.3f} ms, "
                         f"PyTorch / zeus-cpp = {s['torch_over_zeus']:.2f}")
        win = d.get("window")
        e = d.get("energy_counter_vs_integral")
        if e:
            span = f" over {win['window_s']:.1f} s of training" if win and win.get("window_s") else ""
            lines.append(f"NVML energy counter {e['counter_j']:.1f} J vs the integral of "
                         f"{e['samples']} power samples {e['integral_j']:.1f} J "
                         f"({e['diff_pct']:+.2f}%){span}")
        pw = d.get("power_w")
        if pw and pw.get("nvidia_smi_mean"):
            lines.append(f"power over the same window: NVML via zeus-cpp {pw['zeus_nvml_mean']:.1f} W, "
                         f"nvidia-smi {pw['nvidia_smi_mean']:.1f} W ({pw['diff_pct']:+.2f}%)")
        elif pw:
            lines.append(f"power over the window: NVML via zeus-cpp {pw['zeus_nvml_mean']:.1f} W; "
                         f"nvidia-smi: " + ("none on a CPU machine" if self.mode == "cpu" else "no samples"))
        lim = d.get("limits")
        if lim is not None:
            if self.mode == "cpu":
                lines.append(f"limits: the fake NVML recorded {len(lim['fake_nvml_history'])} change(s)")
            else:
                lines.append("limits: " + ("unchanged" if lim["unchanged"] else "CHANGED") +
                             f"; before: {lim['before'].strip().splitlines()[-1]}")
        if not d["never_set_a_limit"]:
            lines.append("A ZEUS-CPP EPOCH WAS NOT MEASURE-ONLY")
        for name, why in self.missing.items():
            lines.append(f"missing {name}: {why}")
        return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    report = Report(args.work, args.mode)
    data = report.build()
    text = report.text()
    for name, content in (("gpu-check.json", json.dumps(data, indent=2) + "\n"), ("gpu-check.txt", text)):
        tmp = args.work / f".{name}.tmp"
        tmp.write_text(content)
        tmp.replace(args.work / name)
    if not args.quiet:
        sys.stdout.write(text)
    return 0 if data["never_set_a_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
