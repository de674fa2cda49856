"""zeus_cpp.metric (Zeus 0.16's metric classes) and the optimizer's job state, pushed to a real
Pushgateway (Debian's prometheus-pushgateway 1.5, started on a free loopback port)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from zeus_cpp import device as zdevice

GATEWAY = "/usr/bin/prometheus-pushgateway"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture
def gateway() -> Iterator[str]:
    """A Pushgateway's URL (host:port, as upstream users pass it)."""
    if shutil.which(GATEWAY) is None:
        pytest.skip(f"{GATEWAY} is not installed (scripts/install-deps.sh installs it)")
    for _ in range(3):
        port = _free_port()
        proc = subprocess.Popen([GATEWAY, f"--web.listen-address=127.0.0.1:{port}",
                                 "--persistence.file=", "--log.level=warn"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _get(f"http://127.0.0.1:{port}/-/ready")[0] != 200:
            time.sleep(0.05)
        if _get(f"http://127.0.0.1:{port}/-/ready")[0] == 200:
            try:
                yield f"127.0.0.1:{port}"
            finally:
                proc.terminate()
                proc.wait(10)
            return
        proc.kill()
        proc.wait()
    pytest.skip("prometheus-pushgateway did not become ready (three tries)")


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the series `name` whose labels include `labels`, or None."""
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def eventually(gateway: str, name: str, timeout: float = 10, **labels: str) -> tuple[float, str]:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _get(f"http://{gateway}/metrics")[1]
        found = value(text, name, **labels)
        if found is not None:
            return found, text
        time.sleep(0.05)
    raise AssertionError(f"{name}{labels} never appeared:\n{text[-3000:]}")


@pytest.fixture
def gpus(fake_nvml, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(zdevice, "_by_locator", {})
    return fake_nvml


def test_energy_histogram_pushes_upstreams_names_and_buckets(gpus, gateway: str) -> None:
    from zeus_cpp.metric import EnergyHistogram

    h = EnergyHistogram(cpu_indices=[], gpu_indices=[0, 1], pushgateway_url=gateway,
                        job="hist", gpu_bucket_range=[1.0, 100000.0])
    h.begin_window("step")
    time.sleep(0.3)
    h.end_window("step")
    count, text = eventually(gateway, "energy_monitor_gpu_energy_joules_count", job="hist",
                             window="step", index="1")
    assert count == 1.0
    total = value(text, "energy_monitor_gpu_energy_joules_sum", job="hist", window="step",
                  index="1")
    assert total is not None and total > 1.0  # 280 W for 0.3 s
    assert value(text, "energy_monitor_gpu_energy_joules_bucket", job="hist", window="step",
                 index="0", le="1") == 0.0  # sent "1.0" as prometheus_client; Go reformats
    assert value(text, "energy_monitor_gpu_energy_joules_bucket", job="hist", window="step",
                 index="0", le="100000") == 1.0
    assert value(text, "energy_monitor_gpu_energy_joules_bucket", job="hist", window="step",
                 index="0", le="+Inf") == 1.0
    assert "# TYPE energy_monitor_gpu_energy_joules histogram" in text


def test_empty_buckets_are_refused_as_upstream(gpus, gateway: str) -> None:
    from zeus_cpp.metric import EnergyHistogram

    with pytest.raises(ValueError, match="GPU bucket range cannot be empty"):
        EnergyHistogram([], [0], gateway, "j", gpu_bucket_range=[])


def test_cumulative_counter_grows_while_its_window_is_open(gpus, gateway: str) -> None:
    from zeus_cpp.metric import EnergyCumulativeCounter

    c = EnergyCumulativeCounter(cpu_indices=[], gpu_indices=[0], update_period=0.2,
                                pushgateway_url=gateway, job="counter")
    c.begin_window("train")
    with pytest.raises(ValueError, match="already running"):
        c.begin_window("train")
    first, _ = eventually(gateway, "energy_monitor_gpu_energy_joules_total", job="counter",
                          window="train", index="0")
    time.sleep(0.6)
    later, _ = eventually(gateway, "energy_monitor_gpu_energy_joules_total", job="counter",
                          window="train", index="0")
    assert later > first > 0
    c.end_window("train")
    with pytest.raises(ValueError, match="No active monitoring process found for 'train'"):
        c.end_window("train")


def test_power_gauge_sets_each_gpus_power(gpus, gateway: str) -> None:
    from zeus_cpp.metric import PowerGauge

    g = PowerGauge(gpu_indices=[0, 1], update_period=0.2, pushgateway_url=gateway, job="power")
    g.begin_window("run")
    with pytest.raises(ValueError, match="PowerGauge metric 'run' already exists"):
        g.begin_window("run")
    watts, _ = eventually(gateway, "power_monitor_gpu_power_watts", job="power", window="run",
                          index="1")
    # The fake's power; its instant field reads 1 W above.
    assert watts == gpus.state()["gpus"][1]["power_mw"] / 1000 + 1
    g.end_window("run")


def test_the_optimizer_pushes_the_jobs_state(job_env: Path, gateway: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import Done, GlobalPowerLimitOptimizer

    monkeypatch.setenv("ZEUS_DEVICE", "sim:v100:cifar100:1024")
    monkeypatch.setenv("ZEUS_PUSHGATEWAY_URL", f"http://{gateway}")
    monkeypatch.setenv("ZEUS_JOB_ID", "plo job")
    monkeypatch.setattr(zdevice, "_by_locator", {})
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), warmup_steps=1,
                                    profile_steps=2)
    for epoch in range(2):
        plo.on_epoch_begin()
        for _ in range(40):
            plo.on_step_begin()
            plo.on_step_end()
        plo.on_epoch_end()
        epochs, text = eventually(gateway, "zeus_job_epoch", job="plo job")
        deadline = time.monotonic() + 10
        while epochs != epoch + 1 and time.monotonic() < deadline:
            epochs, text = eventually(gateway, "zeus_job_epoch", job="plo job")
        assert epochs == epoch + 1
    assert isinstance(plo.state, Done)
    assert value(text, "zeus_job_phase", job="plo job", phase="optimal") == 1.0
    assert value(text, "zeus_job_optimal_power_limit_watts", job="plo job") == \
        plo.state.optimal_power_limit / 1000
    assert value(text, "zeus_job_power_limit_watts", job="plo job") == \
        plo.current_power_limit / 1000
    assert value(text, "zeus_job_energy_joules", job="plo job") > 0
    plo._job_push.close()
    finished, _ = eventually(gateway, "zeus_job_finished", job="plo job")
    deadline = time.monotonic() + 10
    while finished != 1.0 and time.monotonic() < deadline:
        finished, _ = eventually(gateway, "zeus_job_finished", job="plo job")
    assert finished == 1.0


def test_the_pytorch_loader_pushes_the_jobs_state(job_env: Path, gateway: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from torch.utils.data import TensorDataset

    from zeus_cpp import ZeusDataLoader

    monkeypatch.setenv("ZEUS_PUSHGATEWAY_URL", f"http://{gateway}")
    monkeypatch.setenv("ZEUS_JOB_ID", "loader-job")
    data = TensorDataset(torch.arange(64, dtype=torch.float32).reshape(64, 1), torch.zeros(64))
    train = ZeusDataLoader(data, batch_size=2, max_epochs=2)
    evaluation = ZeusDataLoader(data, batch_size=8)
    for _ in train.epochs():
        for _ in train:
            pass
        for _ in evaluation:
            pass
        train.report_metric(0.1, higher_is_better=True)
    # The end of the job flushed its last state before epochs() returned.
    text = _get(f"http://{gateway}/metrics")[1]
    assert value(text, "zeus_job_finished", job="loader-job") == 1.0, text[-2000:]
    assert value(text, "zeus_job_epoch", job="loader-job") == 2.0
    assert value(text, "zeus_job_energy_joules", job="loader-job") == \
        pytest.approx(train.result["energy"], rel=1e-6)
    assert value(text, "zeus_job_phase", job="loader-job", phase="optimal") == 1.0
