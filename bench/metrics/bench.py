"""The node exporter's scrape cost and the job push's training overhead, side by side in one run.

Scrape: `zeus monitor --serve` over the fake NVML with 8 GPUs, scraped N times back to back on
one keep-alive connection: latency per scrape, and the server's CPU time per scrape (its
/proc/<pid>/stat CPU over the scrapes, less its idle sampling over the same time measured just
before), against what one reading of the 8 GPUs costs the sampler (its own
zeus_exporter_sample_duration_seconds: the cost a scrape would have if it read NVML itself).

Push: zeus_cpp's ZeusDataLoader on a simulated V100, E epochs of S steps, with and without
ZEUS_PUSHGATEWAY_URL (a real Pushgateway, Debian's), runs alternated; the difference per epoch,
and as a share of an epoch of S steps of 10 ms.

    ZEUS_BUILD_DIR=build/ci .venv-py/bin/python bench/metrics/bench.py
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ZEUS_BUILD_DIR", REPO / "build" / "ci")).resolve()
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def wait_http(host: str, port: int, path: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection(host, port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"nothing answered http://{host}:{port}{path}")


def fake_nvml(directory: Path, gpus: int) -> dict[str, str]:
    state = {"gpus": [{"name": "NVIDIA A40", "uuid": f"GPU-{i:08d}", "power_mw": 150_000 + i,
                       "energy_mj": 1_000_000, "limit_mw": 300_000, "min_limit_mw": 100_000,
                       "max_limit_mw": 300_000, "default_limit_mw": 300_000,
                       "temperature_c": 60, "sm_clock_mhz": 1410, "mem_clock_mhz": 7251,
                       "throttle_power_ns": 0, "throttle_thermal_ns": 0}
                      for i in range(gpus)],
             "permissive": True, "faults": {}}
    path = directory / "nvml.json"
    path.write_text(json.dumps(state))
    return {"FAKE_NVML_STATE": str(path),
            "ZEUS_NVML_LIBRARY": str(BUILD / "tests" / "fakes" / "full" / "libnvidia-ml.so.1")}


def bench_scrape(scrapes: int, idle_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, **fake_nvml(Path(tmp), 8))
        port = free_port()
        proc = subprocess.Popen([str(BUILD / "apps" / "zeus" / "zeus"), "monitor", "--serve",
                                 f"127.0.0.1:{port}", "--interval", "1s", "--duration", "600s"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_http("127.0.0.1", port, "/metrics")
            time.sleep(1)
            c0, t0 = cpu_s(proc.pid), time.monotonic()
            time.sleep(idle_s)
            idle_rate = (cpu_s(proc.pid) - c0) / (time.monotonic() - t0)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            latencies = []
            size = 0
            c0, t0 = cpu_s(proc.pid), time.monotonic()
            body = ""
            for _ in range(scrapes):
                s = time.perf_counter()
                conn.request("GET", "/metrics")
                r = conn.getresponse()
                body = r.read().decode()
                latencies.append(time.perf_counter() - s)
                size = len(body)
            wall = time.monotonic() - t0
            busy = cpu_s(proc.pid) - c0 - idle_rate * wall
            sample_s = next(float(line.split()[-1]) for line in body.splitlines()
                            if line.startswith("zeus_exporter_sample_duration_seconds{"))
        finally:
            proc.terminate()
            proc.wait(10)
    latencies.sort()
    return {"scrapes": scrapes, "bytes": size,
            "latency_p50_us": latencies[len(latencies) // 2] * 1e6,
            "latency_p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
            "server_cpu_per_scrape_us": busy / scrapes * 1e6,
            "idle_cpu_share": idle_rate,
            "one_read_of_8_gpus_us": sample_s * 1e6}


def loader_run(epochs: int, steps: int, push_url: str | None) -> float:
    """Wall time of one training loop, in a child (a fresh job each time)."""
    code = f"""
import os, sys, time, torch
from torch.utils.data import TensorDataset
from zeus_cpp import ZeusDataLoader
data = TensorDataset(torch.zeros({steps}, 1), torch.zeros({steps}))
train = ZeusDataLoader(data, batch_size=1, max_epochs={epochs})
evaluation = ZeusDataLoader(TensorDataset(torch.zeros(1, 1), torch.zeros(1)), batch_size=1)
t = time.perf_counter()
for _ in train.epochs():
    for _ in train:
        pass
    for _ in evaluation:
        pass
    train.report_metric(0.1, higher_is_better=True)
print(time.perf_counter() - t)
"""
    with tempfile.TemporaryDirectory() as log:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUS_")}
        env.update({"ZEUS_DEVICE": "sim:v100", "ZEUS_LOG_DIR": log, "ZEUS_TARGET_METRIC": "0.99",
                    "ZEUS_PROFILE_PARAMS": "2,3", "ZEUS_JOB_ID": "bench", "OMP_NUM_THREADS": "1"})
        if push_url:
            env["ZEUS_PUSHGATEWAY_URL"] = push_url
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])


def bench_push(epochs: int, steps: int, reps: int) -> dict:
    port = free_port()
    gw = subprocess.Popen(["/usr/bin/prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}",
                           "--persistence.file=", "--log.level=warn"])
    try:
        wait_http("127.0.0.1", port, "/-/ready")
        off, on = [], []
        for _ in range(reps):  # alternated, so drift hits both
            off.append(loader_run(epochs, steps, None))
            on.append(loader_run(epochs, steps, f"http://127.0.0.1:{port}"))
    finally:
        gw.terminate()
        gw.wait(10)
    d_epoch = (statistics.median(on) - statistics.median(off)) / epochs
    return {"epochs": epochs, "steps_per_epoch": steps, "reps": reps,
            "loop_without_push_s": statistics.median(off), "loop_with_push_s": statistics.median(on),
            "extra_per_epoch_us": d_epoch * 1e6,
            "share_of_10ms_steps": d_epoch / (steps * 0.010)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scrapes", type=int, default=2000)
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    print(json.dumps({"scrape": bench_scrape(a.scrapes, a.idle_s),
                      "push": bench_push(a.epochs, a.steps, a.reps)}, indent=2))


if __name__ == "__main__":
    main()
