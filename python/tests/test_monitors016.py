"""Zeus 0.16's other monitors: TemperatureMonitor (one C++ thread), PowerStreamingClient
against zeus-cpp's zeusd, get_cpus() over RAPL, and the CLIs ``python -m zeus_cpp.monitor``
and ``python -m zeus_cpp.show_env``."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import explain, python, run


@pytest.fixture
def nvml(fake_nvml, monkeypatch: pytest.MonkeyPatch):
    """The fake NVML's two A40s, opened afresh by this test."""
    from zeus_cpp import device as zdevice

    monkeypatch.setattr(zdevice, "_by_locator", {})
    return fake_nvml


def wait_for(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def set_fake(nvml, index: int, **fields: object) -> None:
    state = nvml.state()
    state["gpus"][index].update(fields)
    nvml._write(state)


def test_temperature_monitor_keeps_the_changes(nvml) -> None:
    from zeus_cpp.monitor.temperature import TemperatureMonitor

    set_fake(nvml, 0, temperature_c=45)
    set_fake(nvml, 1, temperature_c=50)
    monitor = TemperatureMonitor(update_period=0.02)
    try:
        assert monitor.get_temperature() == {0: 45, 1: 50}
        time.sleep(0.1)  # unchanged readings are not kept
        assert [c for _, c in monitor.get_temperature_timeline(0)[0]] == [45]
        set_fake(nvml, 0, temperature_c=61)
        wait_for(lambda: monitor.get_temperature()[0] == 61)
        timeline = monitor.get_temperature_timeline(gpu_index=0)[0]
        assert [c for _, c in timeline] == [45, 61]
        changed_at = timeline[1][0]
        # At a time between the two samples, the value in force is the first.
        assert monitor.get_temperature(time=changed_at - 0.001) == {0: 45, 1: 50}
        assert monitor.get_temperature_timeline(start_time=changed_at)[0] == [timeline[1]]
    finally:
        monitor.stop()
    with pytest.raises(ValueError, match="gpu_indices"):
        TemperatureMonitor(gpu_indices=[])


def test_power_streaming_client_reads_zeusds_streams(nvml, job_env: Path, tmp_path: Path) -> None:
    from conftest import running_zeusd
    from zeus_cpp.monitor.power_streaming import PowerStreamingClient, ZeusdUdsConfig

    with running_zeusd(tmp_path) as (_, sock):
        client = PowerStreamingClient([ZeusdUdsConfig(str(sock), gpu_indices=[0, 1],
                                                      cpu_indices=[])])
        try:
            key = str(sock)
            # The fake's instant field reads the power it holds (+1 W).
            wait_for(lambda: client.get_power()[key].gpu_power_w.keys() == {0, 1})
            assert client.get_power()[key].gpu_power_w[1] == pytest.approx(160, abs=2)
            set_fake(nvml, 1, power_mw=210_000)
            for readings in client:  # a snapshot per event
                if readings[key].gpu_power_w[1] == pytest.approx(210, abs=2):
                    break
            assert abs(client.get_power()[key].timestamp_s - time.time()) < 5
        finally:
            client.stop()
        with pytest.raises(ValueError, match=r"\[7\]"):
            PowerStreamingClient([ZeusdUdsConfig(str(sock), gpu_indices=[7], cpu_indices=[])])
    with pytest.raises(ConnectionError, match="cannot reach zeusd"):
        PowerStreamingClient([ZeusdUdsConfig(str(sock), cpu_indices=[])])


def test_get_cpus_reads_rapl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_cpp.device import cpu as zcpu

    root = tmp_path / "powercap"
    pkg = root / "intel-rapl:0"
    (pkg / "intel-rapl:0:0").mkdir(parents=True)
    (pkg / "name").write_text("package-0\n")
    (pkg / "energy_uj").write_text("5000000\n")
    (pkg / "max_energy_range_uj").write_text("262143328850\n")
    (pkg / "intel-rapl:0:0" / "name").write_text("dram\n")
    (pkg / "intel-rapl:0:0" / "energy_uj").write_text("2000\n")
    (pkg / "intel-rapl:0:0" / "max_energy_range_uj").write_text("65712999613\n")
    monkeypatch.setenv("ZEUS_RAPL_ROOT", str(root))
    monkeypatch.setattr(zcpu, "_cpus", None)
    cpus = zcpu.get_cpus()
    assert len(cpus) == 1
    assert cpus.supports_get_dram_energy_consumption(0)
    before = cpus.get_total_energy_consumption(0)
    (pkg / "energy_uj").write_text("5003000\n")
    (pkg / "intel-rapl:0:0" / "energy_uj").write_text("2500\n")
    used = cpus.get_total_energy_consumption(0) - before
    assert (used.cpu_mj, used.dram_mj) == (3.0, 0.5)


def test_the_monitor_cli_prints_power_and_the_energy(job_env: Path) -> None:
    proc = run([python(), "-m", "zeus_cpp.monitor", "power", "--device", "sim:v100",
                "--duration", "1", "--update-period", "0.25"])
    assert proc.returncode == 0, explain(proc)
    watts = [float(w) for w in re.findall(r"'GPU0': ([0-9.]+)", proc.stdout)]
    assert len(watts) >= 2 and all(30 < w <= 250 for w in watts)
    seconds = float(re.search(r"Total time \(s\): ([0-9.]+)", proc.stdout).group(1))
    joules = float(re.search(r"Total energy \(J\): \{'GPU0': ([0-9.]+)", proc.stdout).group(1))
    assert joules == pytest.approx(watts[-1] * seconds, rel=0.2)
    proc = run([python(), "-m", "zeus_cpp.monitor", "energy", "--device", "sim:v100",
                "--duration", "0.5"])
    assert proc.returncode == 0, explain(proc)
    assert "Measurement(time=" in proc.stdout and "gpu_energy={0:" in proc.stdout
    proc = run([python(), "-m", "zeus_cpp.monitor", "power", "--duration", "-1"])
    assert proc.returncode == 2 and "--duration" in proc.stderr


def test_show_env_reports_the_gpus_and_masks_tokens(job_env: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUSD_TOKEN", "s3cret-token")
    proc = run([python(), "-m", "zeus_cpp.show_env"])
    assert proc.returncode == 0, explain(proc)
    assert "zeus_cpp: " in proc.stdout
    assert "GPU 0: Tesla V100" in proc.stdout and "limits 100-250 W" in proc.stdout
    assert "ZEUSD_TOKEN=<set>" in proc.stdout and "s3cret-token" not in proc.stdout
