"""AMD GPUs through zeus_cpp over the fake libamd_smi, held to AMD's own `amdsmi` package and
upstream Zeus 0.16's AMD GPU class: the same fake read through all three gives the same power,
energy, limits and range, so the fake's layouts are AMD's and zeus-cpp reads them as AMD does."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import BUILD, REPO

UPSTREAM_PYTHON = REPO / ".venv-zeus016" / "bin" / "python"

# Read by AMD's package (ctypes over ROCM_PATH/lib/libamd_smi.so) and upstream Zeus's AMDGPUs.
_UPSTREAM_READER = """
import json, amdsmi
amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
by_hip = {amdsmi.amdsmi_get_gpu_enumeration_info(h)["hip_id"]: h
          for h in amdsmi.amdsmi_get_processor_handles()}
raw = []
for hip in sorted(by_hip):
    h = by_hip[hip]
    caps = amdsmi.amdsmi_get_power_cap_info(h)
    e = amdsmi.amdsmi_get_energy_count(h)
    raw.append({"power_w": amdsmi.amdsmi_get_power_info(h)["current_socket_power"],
                "cap_uw": caps["power_cap"], "min_uw": caps["min_power_cap"],
                "max_uw": caps["max_power_cap"],
                "energy_uj": e["energy_accumulator"] * e["counter_resolution"],
                "pids": [p["pid"] for p in amdsmi.amdsmi_get_gpu_process_list(h)],
                "name": amdsmi.amdsmi_get_gpu_asic_info(h)["market_name"]})
from zeus.device.gpu.amd import AMDGPUs
gpus = AMDGPUs()
zeus = [{"power_mw": g.get_instant_power_usage(), "limit_mw": g.get_power_management_limit(),
         "range_mw": list(g.get_power_management_limit_constraints()), "name": g.get_name(),
         "energy_mj": g.get_total_energy_consumption()
         if g.supports_get_total_energy_consumption() else None}
        for g in gpus.gpus]
print(json.dumps({"amdsmi": raw, "zeus": zeus}))
"""


class FakeAmd:
    """Fake MI300Xs behind the fake libamd_smi; HIP's order reverses AMD SMI's."""

    def __init__(self, directory: Path, gpus: int, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rocm = BUILD / "tests" / "fakes" / "amdsmi"
        if not (self.rocm / "lib" / "libamd_smi.so.26").exists():
            pytest.skip(f"fake libamd_smi not built under {self.rocm} (cmake --build --preset ci)")
        self.path = directory / "amdsmi-state.json"
        state = {
            "lib_version": {"major": 26, "minor": 1, "release": 0},
            "gpus": [
                {"name": "AMD Instinct MI300X", "uuid": f"GPU-amd000000000000{i}",
                 "bdf": f"0000:{0x0c + 16 * i:02x}:00.0", "hip_id": gpus - 1 - i,
                 "power_w": 300 + 10 * i, "energy_uj": 5e10 * (i + 1),
                 "energy_resolution_uj": 15.3 if i % 2 == 0 else 1.0,
                 "cap_uw": 700_000_000 - 50_000_000 * i,
                 "min_cap_uw": 200_000_000, "max_cap_uw": 750_000_000,
                 "default_cap_uw": 750_000_000, "temperature_c": 40 + i,
                 "processes": [4000 + 10 * i, 4001 + 10 * i]}
                for i in range(gpus)
            ],
            "faults": {}, "permissive": True, "limit_history": [],
        }
        self.path.write_text(json.dumps(state))
        monkeypatch.setenv("ZEUS_AMDSMI_LIBRARY", str(self.rocm / "lib" / "libamd_smi.so.26"))
        monkeypatch.setenv("FAKE_AMDSMI_STATE", str(self.path))
        monkeypatch.setenv("ZEUS_DEVICE", "amdsmi")
        for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            monkeypatch.delenv(name, raising=False)

    def state(self) -> dict:
        return json.loads(self.path.read_text())


@pytest.fixture
def fake_amd(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAmd]:
    yield FakeAmd(job_env.parent, 3, monkeypatch)
    from zeus_cpp import device

    device._by_locator.pop("amdsmi", None)  # get_gpus()'s object would outlive this machine


def test_get_gpus_gives_amd_gpus_in_upstreams_units(fake_amd: FakeAmd) -> None:
    from zeus_cpp.device import get_gpus

    gpus = get_gpus()  # ZEUS_DEVICE=amdsmi
    assert len(gpus) == 3
    # HIP's order: HIP GPU 0 is AMD SMI's last handle (320 W, cap 600 W).
    assert gpus.get_name(0) == "AMD Instinct MI300X"
    assert gpus.get_uuid(0) == "GPU-amd0000000000002"
    assert gpus.get_instant_power_usage(0) == 320_000
    assert gpus.get_power_management_limit(0) == 600_000
    assert gpus.get_power_management_limit_constraints(0) == (200_000, 750_000)
    gpus.set_power_management_limit(0, 500_000)
    assert fake_amd.state()["gpus"][2]["cap_uw"] == 500_000_000
    gpus.reset_power_management_limit(0)
    assert fake_amd.state()["gpus"][2]["cap_uw"] == 750_000_000
    assert gpus.supports_get_total_energy_consumption(0)
    first = gpus.get_total_energy_consumption(0)
    time.sleep(0.2)
    assert gpus.get_total_energy_consumption(0) - first >= 320 * 0.2 * 1000 * 0.9


def test_same_readings_as_amds_package_and_upstream_zeus(fake_amd: FakeAmd) -> None:
    if not UPSTREAM_PYTHON.exists():
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"{UPSTREAM_PYTHON} is missing: scripts/install-zeus016.sh installs it")
        pytest.skip(f"{UPSTREAM_PYTHON} is missing: run scripts/install-zeus016.sh")
    env = dict(os.environ, ROCM_PATH=str(fake_amd.rocm))
    proc = subprocess.run([str(UPSTREAM_PYTHON), "-c", _UPSTREAM_READER], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])

    from zeus_cpp.device import GPUs

    ours = GPUs("amdsmi")  # not get_gpus(): its one object per locator outlives the fixture
    assert len(seen["amdsmi"]) == len(seen["zeus"]) == len(ours) == 3
    for i, (raw, upstream) in enumerate(zip(seen["amdsmi"], seen["zeus"])):
        assert ours.get_name(i) == raw["name"] == upstream["name"]
        # The fake's process records in ABI 26's layout, as AMD's package reads them (zeus-cpp's
        # reading of the same records: device_test's ProcessesOnTheGpuFromItsProcessList).
        amd_index = 2 - i  # HIP's order reverses AMD SMI's here
        assert raw["pids"] == [4000 + 10 * amd_index, 4001 + 10 * amd_index]
        assert ours.get_instant_power_usage(i) == raw["power_w"] * 1000 == upstream["power_mw"]
        assert ours.get_power_management_limit(i) == raw["cap_uw"] // 1000 == upstream["limit_mw"]
        assert list(ours.get_power_management_limit_constraints(i)) == [
            raw["min_uw"] // 1000, raw["max_uw"] // 1000] == upstream["range_mw"]
        # The counters started at 5e10 uJ x (AMD SMI index + 1) and grow at the power: the
        # readings agree within the seconds between them, read by three processes.
        mine = ours.get_total_energy_consumption(i)
        assert upstream["energy_mj"] is not None
        for theirs in (raw["energy_uj"] / 1000, upstream["energy_mj"]):
            assert abs(mine - theirs) < 400 * 30 * 1000, (i, mine, theirs)


def test_monitor_and_power_limit_optimizer_on_amd_gpus(fake_amd: FakeAmd,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_cpp import device
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import Done, GlobalPowerLimitOptimizer

    monkeypatch.setattr(device, "_by_locator", {})
    # The optimizer's journal beside this machine, not in the user's: it is settled here.
    monkeypatch.setenv("ZEUS_JOURNAL_DIR", str(fake_amd.path.parent / "journals"))
    state = fake_amd.state()
    for g in state["gpus"]:
        g["min_cap_uw"] = 650_000_000  # five limits: 750 W down to 650 W
        g["cap_uw"] = 725_000_000
    fake_amd.path.write_text(json.dumps(state))
    monitor = ZeusMonitor(gpu_indices=[0, 1])
    monitor.begin_window("w")
    time.sleep(0.3)
    m = monitor.end_window("w")
    # HIP GPUs 0 and 1 are AMD SMI's 2 and 1: 320 W and 310 W, by their counters.
    assert m.gpu_energy[0] == pytest.approx(320 * m.time, rel=0.1)
    assert m.gpu_energy[1] == pytest.approx(310 * m.time, rel=0.1)

    plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2)
    plo.on_epoch_begin()
    for _ in range(20):
        plo.on_step_begin()
        time.sleep(0.005)
        plo.on_step_end()
    plo.on_epoch_end()
    assert isinstance(plo.state, Done)
    caps = {entry["cap_uw"] for entry in fake_amd.state()["limit_history"]}
    assert caps >= {650_000_000, 700_000_000, 750_000_000}, caps
    chosen_uw = plo.state.optimal_power_limit * 1000
    assert [g["cap_uw"] for g in fake_amd.state()["gpus"]][1:] == [chosen_uw, chosen_uw]
    plo.close()  # while the fake machine exists: the caps are put back as they were
    assert [g["cap_uw"] for g in fake_amd.state()["gpus"]] == [725_000_000] * 3
    assert not list((fake_amd.path.parent / "journals").glob("*.journal"))
