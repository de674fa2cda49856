"""Fixtures of the zeus_cpp suite: a clean job environment (simulated GPUs unless a test says
otherwise), the fake NVML library and zeus-cpp's CLI from the CMake build (make test builds
both; ZEUS_BUILD_DIR names another build), and helpers that run jobs in child processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "workers" / "job.py"
EXAMPLE = REPO / "examples" / "python" / "train.py"
BUILD = Path(os.environ.get("ZEUS_BUILD_DIR", REPO / "build" / "ci")).resolve()
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")

# What a launcher or an earlier job may have left in the environment of the suite.
_LAUNCHER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "TORCHELASTIC_", "ZEUS_", "ZEUSD_",
                      "FAKE_NVML_", "FAKE_AMDSMI_")
_LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "ROLE_RANK", "CUDA_VISIBLE_DEVICES",
                   "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def zeus_cli() -> Path:
    path = Path(os.environ.get("ZEUS_CLI", BUILD / "apps" / "zeus" / "zeus"))
    if not path.exists():
        pytest.skip(f"zeus CLI not built at {path} (cmake --build --preset ci, or set ZEUS_CLI)")
    return path


def zeusd_binary() -> Path:
    path = Path(os.environ.get("ZEUSD", BUILD / "apps" / "zeusd" / "zeusd"))
    if not path.exists():
        pytest.skip(f"zeusd not built at {path} (cmake --build --preset ci, or set ZEUSD)")
    return path


@contextlib.contextmanager
def running_zeusd(directory: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """zeus-cpp's zeusd serving gpu-control on a socket under `directory` (root only: skips
    otherwise); yields the daemon and its socket, and stops it."""
    if os.geteuid() != 0:
        pytest.skip("zeusd needs root to serve gpu-control (CI runs the suite as root)")
    sock = directory / "zeusd" / "zeusd.sock"
    daemon = subprocess.Popen([str(zeusd_binary()), "serve", "--socket-path", str(sock),
                               "--state-dir", str(directory / "zeusd-state")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 15
        while not sock.exists() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if not sock.exists():
            daemon.kill()
            pytest.fail(f"zeusd did not start: {daemon.communicate()[0]}")
        yield daemon, sock
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def fake_nvml_library() -> Path:
    path = Path(os.environ.get("ZEUS_FAKE_NVML", BUILD / "tests" / "fakes" / "full" /
                               "libnvidia-ml.so.1"))
    if not path.exists():
        pytest.skip(f"fake NVML not built at {path} (cmake --build --preset ci)")
    return path


@pytest.fixture
def job_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment for one job on simulated V100s; returns its log directory."""
    trace_dir = os.environ.get("ZEUS_TRACE_DIR")
    for name in list(os.environ):
        if name in _LAUNCHER_NAMES or name.startswith(_LAUNCHER_PREFIXES):
            monkeypatch.delenv(name)
    if trace_dir:
        monkeypatch.setenv("ZEUS_TRACE_DIR", trace_dir)
    log_dir = tmp_path / "zeus_log"
    monkeypatch.setenv("ZEUS_LOG_DIR", str(log_dir))
    monkeypatch.setenv("ZEUS_DEVICE", "sim:v100")
    monkeypatch.setenv("ZEUS_PROFILE_PARAMS", "2,3")
    monkeypatch.setenv("ZEUS_TARGET_METRIC", "0.99")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield log_dir
    from zeus_cpp import _loader

    _loader._close_jobs()


class FakeNvml:
    """A machine of fake A40s (300 W max, 100 W min) behind the fake NVML library."""

    def __init__(self, directory: Path, gpus: int, monkeypatch: pytest.MonkeyPatch,
                 permissive: bool = True) -> None:
        self.path = directory / "nvml-state.json"
        state = {
            "gpus": [
                {"name": "NVIDIA A40", "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
                 "power_mw": 150_000 + 10_000 * i, "energy_mj": 1_000_000,
                 "limit_mw": 280_000, "min_limit_mw": 100_000, "max_limit_mw": 300_000,
                 "default_limit_mw": 300_000, "instant_power": True, "energy_counter": True,
                 "mig_uuids": []}
                for i in range(gpus)
            ],
            "faults": {},
            "permissive": permissive,
            "limit_history": [],
        }
        self._write(state)
        monkeypatch.setenv("ZEUS_NVML_LIBRARY", str(fake_nvml_library()))
        monkeypatch.setenv("FAKE_NVML_STATE", str(self.path))
        monkeypatch.setenv("ZEUS_DEVICE", "nvml")

    def state(self) -> dict:
        return json.loads(self.path.read_text())

    def limits_w(self) -> list[float]:
        return [g["limit_mw"] / 1000 for g in self.state()["gpus"]]

    def sets(self) -> list[dict]:
        return self.state()["limit_history"]

    def fault(self, **faults: object) -> None:
        state = self.state()
        state["faults"].update(faults)
        self._write(state)

    def _write(self, state: dict) -> None:
        # Whole files only: the fake library re-reads a changed file at its next call.
        tmp = self.path.with_suffix(".tmp-test")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.path)


@pytest.fixture
def fake_nvml(job_env: Path, monkeypatch: pytest.MonkeyPatch):
    """Two fake GPUs at 280 W; the job's device is NVML (the fake)."""
    return FakeNvml(job_env.parent, 2, monkeypatch)


def run(cmd: list[str], timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Runs a child with the test's environment; its output is kept for the failure message."""
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          **kwargs)


def python() -> str:
    return sys.executable


def records(out: Path) -> dict[int, dict]:
    """What each rank of a workers/job.py run wrote, by rank."""
    found = {}
    for path in sorted(out.glob("rank*.json")):
        record = json.loads(path.read_text())
        found[record["rank"]] = record
    return found


def explain(proc: subprocess.CompletedProcess) -> str:
    return (f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
            f"--- stderr\n{proc.stderr[-6000:]}")
