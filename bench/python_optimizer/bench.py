"""zeus_cpp's Zeus 0.16 API side by side with upstream Zeus 0.16, in one run, on the same fake
NVML (8 fake A40s; upstream's pynvml loads the fake through LD_LIBRARY_PATH):

1. the optimizer's per-step cost outside profiling (on_step_begin + on_step_end, the profile
   loaded, so Done), against a plain loop, as a share of a 10 ms step;
2. PowerMonitor sampling 8 GPUs at 10 Hz: CPU per sample tick (upstream: one process per power
   domain) and the timeline's memory (RSS growth per sample kept), extrapolated to one hour;
3. SIGKILL of a process whose optimizer changed the limits -> limits back (zeus_cpp's watchdog;
   upstream restores only at atexit, which a SIGKILL skips).

    python3 bench/python_optimizer/bench.py [--quick]

Needs the CMake build (build/ci: the fake NVML), .venv-py (scripts/install-python.sh) and makes
.venv-bench-zeus016 (upstream, pinned in requirements.txt) when missing. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE_DIR = REPO / "build" / "ci" / "tests" / "fakes" / "full"
OURS = REPO / ".venv-py" / "bin" / "python"
UPSTREAM_VENV = REPO / ".venv-bench-zeus016"
UPSTREAM = UPSTREAM_VENV / "bin" / "python"
STEP_S = 0.010


def ensure_upstream() -> None:
    if UPSTREAM.exists():
        return
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", UPSTREAM_VENV],
                   check=True)
    subprocess.run([UPSTREAM, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", "-r", Path(__file__).parent / "requirements.txt"], check=True)


def write_state(path: Path, gpus: int, power_mw: int = 150_000) -> None:
    state = {"gpus": [{"name": "NVIDIA A40",
                       "uuid": f"GPU-00000000-0000-0000-0000-{i:012d}",
                       "power_mw": power_mw, "energy_mj": 1_000_000, "limit_mw": 280_000,
                       "min_limit_mw": 100_000, "max_limit_mw": 300_000,
                       "default_limit_mw": 300_000, "instant_power": True,
                       "energy_counter": True, "mig_uuids": []} for i in range(gpus)],
             "faults": {}, "permissive": True, "limit_history": [], "record_history": False}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def env_for(state: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "ZEUSD_"))}
    env.update(FAKE_NVML_STATE=str(state), ZEUS_NVML_LIBRARY=str(FAKE_DIR / "libnvidia-ml.so.1"),
               LD_LIBRARY_PATH=str(FAKE_DIR), ZEUS_DEVICE="nvml", XDG_RUNTIME_DIR=str(work),
               ZEUS_RAPL_ROOT=str(work / "no-rapl"), OMP_NUM_THREADS="1")
    return env


def child(python: Path, code: str, env: dict[str, str], timeout: float = 300) -> dict:
    proc = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{python} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][7:])


STEPS = r"""
import json, logging, time
logging.disable(logging.CRITICAL)
N = {n}
impl = "{impl}"
if impl != "plain":
    pkg = "zeus" if impl == "upstream" else "zeus_cpp"
    mon = __import__(pkg + ".monitor", fromlist=["ZeusMonitor"])
    opt = __import__(pkg + ".optimizer.power_limit", fromlist=["GlobalPowerLimitOptimizer"])
    plo = opt.GlobalPowerLimitOptimizer(mon.ZeusMonitor(gpu_indices=[0], cpu_indices=[]),
                                        profile_path="{profile}")
    assert type(plo.state).__name__ == "Done", plo.state
    begin, end = plo.on_step_begin, plo.on_step_end
else:
    begin = end = lambda: None
best = float("inf")
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(N):
        begin(); end()
    best = min(best, (time.perf_counter() - t0) / N)
print("RESULT " + json.dumps(dict(step_s=best)))
"""

SAMPLING = r"""
import json, logging, os, resource, time
logging.disable(logging.CRITICAL)
impl, seconds = "{impl}", {seconds}
def rss_kib(pid):
    with open(f"/proc/{{pid}}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
def cpu_s(pid):
    with open(f"/proc/{{pid}}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
def children():
    me = os.getpid()
    with open(f"/proc/{{me}}/task/{{me}}/children") as f:
        return [int(p) for p in f.read().split()]
pkg = "zeus" if impl == "upstream" else "zeus_cpp"
PowerMonitor = __import__(pkg + ".monitor", fromlist=["PowerMonitor"]).PowerMonitor
pm = PowerMonitor(gpu_indices=list(range(8)), update_period=0.1)
kids = children()
def kept():
    # Upstream moves samples from its processes' queues into its timeline when asked.
    if impl == "upstream":
        return sum(len(v) for v in pm.get_power_timeline("device_instant").values())
    return pm.sample_count * 8
def totals():
    return (cpu_s(os.getpid()) + sum(cpu_s(k) for k in kids),
            rss_kib(os.getpid()) + sum(rss_kib(k) for k in kids))
time.sleep(1.0)
n1 = kept(); c1, r1 = totals()
time.sleep(seconds)
n2 = kept(); c2, r2 = totals()
pm.stop()
print("RESULT " + json.dumps(dict(cpu_s=c2 - c1, processes=1 + len(kids), samples=n2 - n1,
                                   grown_kib=r2 - r1, rss_kib=r2)))
"""

VICTIM = r"""
import logging, time
logging.disable(logging.CRITICAL)
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer
plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0], cpu_indices=[]), wait_steps=0,
                                warmup_steps=0, profile_steps=1, pl_step=100)
plo.on_step_begin(); plo.on_step_begin()
print("LIMITED", flush=True)
time.sleep(600)
"""


def limit_mw(state: Path) -> int:
    return json.loads(state.read_text())["gpus"][0]["limit_mw"]


def kill_to_restore_s(state: Path, env: dict[str, str]) -> float:
    write_state(state, 1)
    proc = subprocess.Popen([str(OURS), "-c", VICTIM], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout.readline().startswith("LIMITED")
    assert limit_mw(state) == 200_000
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGKILL)
    while limit_mw(state) != 280_000:
        if time.perf_counter() - t0 > 30:
            raise RuntimeError("limits not restored within 30 s")
        time.sleep(0.001)
    elapsed = time.perf_counter() - t0
    proc.wait()
    return elapsed


def vary_power(state: Path, stop: threading.Event) -> None:
    """Changes the fake GPUs' power every 100 ms, so that upstream's timeline (which drops
    unchanged readings) holds what a real GPU's would."""
    watts = 150
    while not stop.wait(0.1):
        watts = 151 if watts == 150 else 150
        write_state(state, 8, watts * 1000)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    args = parser.parse_args()
    ensure_upstream()
    n, seconds, kills = (20_000, 5, 3) if args.quick else (200_000, 30, 10)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        state = work / "nvml.json"
        env = env_for(state, work)
        profile = work / "profile.json"
        profile.write_text(json.dumps({"measurements": [
            {"power_limit": 300, "energy": 1000.0, "time": 10.0},
            {"power_limit": 200, "energy": 800.0, "time": 11.0}]}))

        rows = []
        write_state(state, 8)
        plain = child(OURS, STEPS.format(n=n, impl="plain", profile=profile), env)["step_s"]
        for name, python in (("zeus_cpp", OURS), ("upstream zeus 0.16", UPSTREAM)):
            impl = "ours" if python == OURS else "upstream"
            step = child(python, STEPS.format(n=n, impl=impl, profile=profile), env)["step_s"]
            over = step - plain
            rows.append(f"| {name} | {step * 1e6:.2f} | {over * 1e6:.2f} | "
                        f"{over / STEP_S * 100:.4f}% |")
        print(f"## Optimizer step overhead outside profiling ({n} steps, best of 5)\n")
        print(f"Plain loop: {plain * 1e9:.0f} ns per step.\n")
        print("| optimizer | per step (µs) | over a plain loop (µs) | of a 10 ms step |")
        print("| --- | --- | --- | --- |")
        print("\n".join(rows))

        stop = threading.Event()
        writer = threading.Thread(target=vary_power, args=(state, stop), daemon=True)
        writer.start()
        rows = []
        try:
            for name, python in (("zeus_cpp", OURS), ("upstream zeus 0.16", UPSTREAM)):
                impl = "ours" if python == OURS else "upstream"
                r = child(python, SAMPLING.format(impl=impl, seconds=seconds), env)
                ticks = seconds / 0.1
                per_tick_us = r["cpu_s"] / ticks * 1e6
                per_sample_b = r["grown_kib"] * 1024 / max(r["samples"], 1)
                hour_mib = per_sample_b * 8 * 36_000 / 2**20
                rows.append(f"| {name} | {r['processes']} | {per_tick_us:.0f} | "
                            f"{r['samples']} | {r['rss_kib'] / 1024:.0f} | "
                            f"{per_sample_b:.0f} | {hour_mib:.1f} |")
        finally:
            stop.set()
            writer.join()
        print(f"\n## PowerMonitor: 8 GPUs at 10 Hz for {seconds} s\n")
        print("| monitor | processes | CPU per tick of 8 GPUs (µs) | samples kept | "
              "RSS, all processes (MiB) | bytes per sample kept | 1 h at 10 Hz x 8 GPUs (MiB) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        print("\n".join(rows))

        latencies = [kill_to_restore_s(state, env) for _ in range(kills)]
        print(f"\n## SIGKILL of the training process to limits restored ({kills} runs)\n")
        print(f"zeus_cpp (watchdog): median {statistics.median(latencies) * 1e3:.1f} ms, "
              f"max {max(latencies) * 1e3:.1f} ms. Upstream: never (its atexit does not run).")


if __name__ == "__main__":
    sys.exit(main())
