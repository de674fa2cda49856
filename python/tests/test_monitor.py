"""zeus_cpp.monitor.ZeusMonitor: named, nestable windows, on simulated GPUs in this process and
on the fake NVML's energy counters in a child."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import zeus_cpp
from conftest import explain, python, run
from zeus_cpp.monitor import Measurement, ZeusMonitor


def test_nested_windows_on_simulated_gpus(job_env: Path) -> None:
    monitor = ZeusMonitor(device="sim:v100")
    assert monitor.gpu_indices == [0]
    monitor.begin_window("outer")
    time.sleep(0.2)
    monitor.begin_window("inner")
    time.sleep(0.2)
    inner = monitor.end_window("inner")
    outer = monitor.end_window("outer")
    assert isinstance(inner, Measurement)
    assert 0.15 < inner.time < outer.time
    assert 0 < inner.gpu_energy[0] < outer.gpu_energy[0]
    assert outer.total_energy == pytest.approx(sum(outer.gpu_energy.values()))
    # A busy simulated V100 draws between its idle and maximum power.
    assert 30 < outer.gpu_energy[0] / outer.time <= 300


def test_window_names_are_checked(job_env: Path) -> None:
    monitor = ZeusMonitor(device="sim:v100")
    monitor.begin_window("a")
    with pytest.raises(zeus_cpp.ConfigError, match="a"):
        monitor.begin_window("a")
    with pytest.raises(zeus_cpp.ConfigError, match="b"):
        monitor.end_window("b")
    assert monitor.end_window("a", cancel=True).gpu_energy == {0: 0.0}  # as upstream


def test_the_device_comes_from_zeus_device(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_DEVICE", "sim:nope")
    with pytest.raises(zeus_cpp.ConfigError, match="nope"):
        ZeusMonitor()


COUNTERS = r"""
import json, sys, time
from zeus_cpp.monitor import ZeusMonitor
every, second = ZeusMonitor(), ZeusMonitor(gpu_indices=[1])
every.begin_window("w"); second.begin_window("w")
time.sleep(0.5)
a, b = every.end_window("w"), second.end_window("w")
print(json.dumps(dict(time=a.time, every={str(k): v for k, v in a.gpu_energy.items()},
                      second={str(k): v for k, v in b.gpu_energy.items()})))
"""


def test_energy_counters_of_the_fake_nvml(fake_nvml, tmp_path: Path) -> None:
    script = tmp_path / "counters.py"
    script.write_text(COUNTERS)
    proc = run([python(), script])
    assert proc.returncode == 0, explain(proc)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(r["every"]) == {"0", "1"} and set(r["second"]) == {"1"}
    # The fake GPUs draw 150 and 160 W; their counters grow at that rate.
    assert r["every"]["0"] / r["time"] == pytest.approx(150, rel=0.2)
    assert r["every"]["1"] / r["time"] == pytest.approx(160, rel=0.2)
    assert fake_nvml.sets() == []  # a monitor never changes a limit


WITHOUT_TORCH = """
import json, sys, time
sys.modules["torch"] = None  # as where torch is not installed: importing it raises
from zeus_cpp.monitor import ZeusMonitor
m = ZeusMonitor(gpu_indices=[0])
m.begin_window("w")
time.sleep(0.2)
r = m.end_window("w")
print(json.dumps({"time": r.time, "gpu0": r.gpu_energy[0]}))
"""


def test_a_window_in_a_process_without_torch(fake_nvml, tmp_path: Path) -> None:
    """The pip wheel's users monitor processes that have no torch (the wheels' bare-root test):
    no torch imported means no CUDA work queued by it, so there is nothing to synchronize."""
    script = tmp_path / "without_torch.py"
    script.write_text(WITHOUT_TORCH)
    proc = run([python(), script])
    assert proc.returncode == 0, explain(proc)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["time"] >= 0.15 and r["gpu0"] > 0
