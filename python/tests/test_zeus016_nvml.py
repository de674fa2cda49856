"""Zeus 0.16's API on the fake NVML, in child processes: get_gpus(), the monitors' energy
(counter, integral, fallback), and the optimizer's limits: persistence mode, measure-only, and
the watchdog that puts the limits back after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import explain, python, run

PRELUDE = r"""
import json, logging, os, sys, time
logging.basicConfig(level=logging.INFO)
def out(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
"""


def result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, explain(proc)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, explain(proc)
    return json.loads(lines[-1][len("RESULT "):])


def run_script(tmp_path: Path, body: str, timeout: float = 120) -> dict:
    script = tmp_path / "script.py"
    script.write_text(PRELUDE + body)
    return result(run([python(), script], timeout=timeout))


def set_gpu(fake, index: int, **values: object) -> None:
    state = fake.state()
    state["gpus"][index].update(values)
    fake._write(state)


def test_get_gpus_has_upstreams_methods(fake_nvml, tmp_path: Path) -> None:
    r = run_script(tmp_path, r"""
from zeus_cpp.device import get_gpus
g = get_gpus()
g.set_power_management_limit(1, 200_000)
g.set_persistence_mode(0, True)
g.set_gpu_locked_clocks(0, 900, 1400)
g.reset_gpu_locked_clocks(0)
g.set_memory_locked_clocks(1, 5000, 5001)
out(n=len(g), name=g.get_name(0), limit=g.get_power_management_limit(1),
    constraints=list(g.get_power_management_limit_constraints(0)),
    default=g.get_default_power_management_limit(0), persistence=g.get_persistence_mode(0),
    energy=g.get_total_energy_consumption(0), power=g.get_instant_power_usage(1),
    counter=g.supports_get_total_energy_consumption(0))
""")
    assert r == {"n": 2, "name": "NVIDIA A40", "limit": 200_000, "constraints": [100_000, 300_000],
                 "default": 300_000, "persistence": True, "energy": r["energy"],
                 "power": 161_000, "counter": True}  # the fake's instant field: +1 W
    assert r["energy"] >= 1_000_000
    state = fake_nvml.state()
    assert state["gpus"][0]["gpu_locked_clocks"] is None  # set, then reset
    assert state["gpus"][1]["mem_locked_clocks"] == [5000, 5001]


def test_power_monitor_integrates_a_constant_power(fake_nvml, tmp_path: Path) -> None:
    # Upstream drops unchanged readings and gives a constant 150 W nothing to integrate (0 J).
    r = run_script(tmp_path, r"""
from zeus_cpp.monitor import PowerMonitor, PowerDomain
pm = PowerMonitor(gpu_indices=[0], update_period=0.05)
t0 = time.time()
time.sleep(1.7)
t1 = t0 + 1.5
tl = pm.get_power_timeline(PowerDomain.DEVICE_INSTANT, start_time=t0, end_time=t1)
out(energy=pm.get_energy(t0, t1)[0], samples=len(tl[0]), first=tl[0][0][1],
    power=pm.get_power()[0], all=list(pm.get_all_power_timelines()))
pm.stop()
""")
    # The fake's instant power field reads 151 W.
    assert r["energy"] == pytest.approx(151 * 1.5, rel=0.05)
    assert r["samples"] >= 20 and r["first"] == 151.0 and r["power"] == 151.0
    assert r["all"] == ["device_instant"]


def test_counter_and_integral_agree_and_a_gpu_without_counter_falls_back(
        fake_nvml, tmp_path: Path) -> None:
    set_gpu(fake_nvml, 1, energy_counter=False)
    r = run_script(tmp_path, r"""
from zeus_cpp.monitor import PowerMonitor, ZeusMonitor
zm = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
pm = PowerMonitor(gpu_indices=[0], update_period=0.02)
time.sleep(0.2)
zm.begin_window("w")
t0 = time.time()
time.sleep(1.0)
m = zm.end_window("w")
t1 = time.time()
out(counter=m.gpu_energy[0], integral=pm.get_energy(t0, t1)[0], fallback=m.gpu_energy[1],
    time=m.time, cpu=m.cpu_energy, total=m.total_energy)
""")
    # The fake's counter grows at its 150 W, its instant field says 151 W: one energy, two ways.
    assert r["counter"] == pytest.approx(r["integral"], rel=0.05)
    assert r["fallback"] / r["time"] == pytest.approx(160, rel=0.1)
    assert r["cpu"] is None
    assert r["total"] == pytest.approx(r["counter"] + r["fallback"])


def test_window_errors_name_the_window_and_the_log_is_upstreams_csv(fake_nvml,
                                                                    tmp_path: Path) -> None:
    log = tmp_path / "windows.csv"
    r = run_script(tmp_path, rf"""
from zeus_cpp.monitor import ZeusMonitor
zm = ZeusMonitor(log_file={str(log)!r}, cpu_indices=[])
zm.begin_window("step")
errors = []
try:
    zm.begin_window("step")
except ValueError as e:
    errors.append(str(e))
try:
    zm.end_window("nope")
except ValueError as e:
    errors.append(str(e))
zm.begin_window("step", restart=True)
time.sleep(0.2)
zm.end_window("step")
zm.begin_window("other"); zm.end_window("other", cancel=True)
out(errors=errors)
""")
    assert "'step'" in r["errors"][0] and "already open" in r["errors"][0]
    assert "'nope'" in r["errors"][1] and "never begun" in r["errors"][1]
    rows = log.read_text().splitlines()
    assert rows[0] == "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy"
    assert len(rows) == 2 and rows[1].split(",")[1] == "step"  # a cancelled window: no row


OPTIMIZER = r"""
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, Done
plo = GlobalPowerLimitOptimizer(ZeusMonitor(cpu_indices=[]), wait_steps=0, warmup_steps=0,
                                profile_steps=1, pl_step=100)
"""


def test_persistence_mode_is_set_only_where_it_is_off(fake_nvml, tmp_path: Path) -> None:
    set_gpu(fake_nvml, 1, persistence_mode=True)
    r = run_script(tmp_path, OPTIMIZER + r"""
for _ in range(10):
    plo.on_step_begin(); time.sleep(0.01)
out(done=isinstance(plo.state, Done), watchdog=plo.watchdog_pid)
plo.close()
""")
    assert r["done"] and r["watchdog"]
    history = fake_nvml.state().get("settings_history", [])
    assert [(h["gpu"], h["setting"], h["value"]) for h in history
            if h["setting"] == "persistence_mode"] == [(0, "persistence_mode", 1)]
    assert fake_nvml.limits_w() == [280, 280]  # closed: back to the limits before it
    limits = {s["limit_mw"] for s in fake_nvml.sets()}
    assert {300_000, 200_000, 100_000} <= limits  # it profiled every limit


def test_measure_only_changes_no_setting(fake_nvml, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_MEASURE_ONLY", "true")
    r = run_script(tmp_path, OPTIMIZER + r"""
for _ in range(10):
    plo.on_step_begin()
out(done=isinstance(plo.state, Done), watchdog=plo.watchdog_pid)
""")
    assert r == {"done": True, "watchdog": None}
    assert fake_nvml.sets() == []
    assert fake_nvml.state().get("settings_history", []) == []


def test_sigkill_of_the_training_process_restores_the_limits(fake_nvml, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    script = tmp_path / "victim.py"
    script.write_text(PRELUDE + OPTIMIZER + r"""
plo.on_step_begin()   # 300 W, profiling
plo.on_step_begin()   # 200 W
print("LIMITED", plo.watchdog_pid, flush=True)
time.sleep(600)
""")
    proc = subprocess.Popen([python(), str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while not line.startswith("LIMITED") and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert line.startswith("LIMITED"), proc.stderr.read()
        watchdog = int(line.split()[1])
        assert fake_nvml.limits_w() == [200, 200]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20  # generous; bench/ measures the latency
        while fake_nvml.limits_w() != [280, 280] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_nvml.limits_w() == [280, 280]
        # The watchdog exits once done, and leaves no journal.
        while _alive(watchdog) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(watchdog)
        assert list((tmp_path / "run" / "zeus-cpp").glob("*.journal")) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def fake_rapl(root: Path) -> None:
    """Two packages; package 0 has a DRAM zone (powercap's layout)."""
    for rel, name, energy in (("intel-rapl:0", "package-0", 1_000_000),
                              ("intel-rapl:0/intel-rapl:0:1", "dram", 200_000),
                              ("intel-rapl:1", "package-1", 0)):
        zone = root / rel
        zone.mkdir(parents=True, exist_ok=True)
        (zone / "name").write_text(name + "\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        (zone / "energy_uj").write_text(f"{energy}\n")


def test_cpu_and_dram_windows_over_rapl(fake_nvml, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "powercap"
    fake_rapl(root)
    monkeypatch.setenv("ZEUS_RAPL_ROOT", str(root))
    r = run_script(tmp_path, rf"""
from pathlib import Path
from zeus_cpp.monitor import ZeusMonitor
root = Path({str(root)!r})
every, first = ZeusMonitor(gpu_indices=[0]), ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
every.begin_window("w"); first.begin_window("w")
(root / "intel-rapl:0/energy_uj").write_text("3500000\n")                # +2.5 J
(root / "intel-rapl:0/intel-rapl:0:1/energy_uj").write_text("700000\n")  # +0.5 J
(root / "intel-rapl:1/energy_uj").write_text("1000000\n")                # +1 J
a, b = every.end_window("w"), first.end_window("w")
bad = None
try:
    ZeusMonitor(cpu_indices=[5])
except ValueError as e:
    bad = str(e)
out(cpu=a.cpu_energy, dram=a.dram_energy, cpu0=b.cpu_energy, dram0=b.dram_energy, bad=bad)
""")
    assert r["cpu"] == {"0": pytest.approx(2.5), "1": pytest.approx(1.0)}
    assert r["dram"] == {"0": pytest.approx(0.5)}  # package 1 has no DRAM zone
    assert r["cpu0"] == {"0": pytest.approx(2.5)} and r["dram0"] == {"0": pytest.approx(0.5)}
    assert "cpu_indices [5]" in r["bad"]


RANK = PRELUDE + r"""
import torch.distributed as dist
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, Done
dist.init_process_group("gloo")
rank = dist.get_rank()
plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[rank], cpu_indices=[]), wait_steps=0,
                                warmup_steps=1, profile_steps=3, pl_step=100)
# Alone, rank 0 would avoid 300 W and rank 1 would avoid 100 W; together (time: the slowest
# rank's) only 200 W is fast for both.
slow = {0: 300_000, 1: 100_000}[rank]
for _ in range(40):
    plo.on_step_begin()
    time.sleep(0.08 if plo.current_power_limit == slow else 0.01)
dist.barrier()
from zeus_cpp.device import get_gpus
g = get_gpus()
out(rank=rank, done=isinstance(plo.state, Done), optimal=plo.state.optimal_power_limit,
    limits=[g.get_power_management_limit(i) for i in range(len(g))],
    profile=[[m.power_limit, m.energy, m.time] for m in plo.measurements])
dist.barrier()
"""


def test_two_ranks_over_gloo_agree_on_one_limit(fake_nvml, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([python(), str(script)], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append(result(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    a, b = results
    assert a["done"] and b["done"]
    assert a["optimal"] == b["optimal"] == 200_000
    assert a["profile"] == b["profile"]  # energy summed, time the max: one profile
    assert a["limits"] == b["limits"] == [200_000, 200_000]  # both GPUs at it
    assert fake_nvml.limits_w() == [280, 280]  # and back when the ranks ended


def test_with_zeusd_the_daemon_sets_the_limits_and_no_watchdog_starts(
        job_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import FakeNvml, running_zeusd

    # A fake that, like the driver, lets only root set: every setting is the daemon's.
    nvml = FakeNvml(job_env.parent, 2, monkeypatch, permissive=False)
    with running_zeusd(tmp_path) as (daemon, sock):
        monkeypatch.setenv("ZEUSD_SOCK_PATH", str(sock))
        r = run_script(tmp_path, OPTIMIZER + r"""
for _ in range(10):
    plo.on_step_begin()
out(done=isinstance(plo.state, Done), watchdog=plo.watchdog_pid)
plo.close()
""")
        assert r == {"done": True, "watchdog": None}  # the daemon's lease is the mechanism
        state = nvml.state()
        assert {s["pid"] for s in state["limit_history"]} == {daemon.pid}
        assert {(h["setting"], h["pid"]) for h in state.get("settings_history", [])} == {
            ("persistence_mode", daemon.pid)}
        assert nvml.limits_w() == [280, 280]


def test_the_optimizer_settles_a_journal_this_host_left_as_another_node(
        fake_nvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that made this host its node 1 died with GPU 0 at 210 W (its journal
    power-limits.node1.journal says 280 W); the optimizer puts that back before it takes the
    GPUs, so the limits it restores when closed are 280 W, not the dead run's 210 W."""
    journals = tmp_path / "journals"
    journals.mkdir(mode=0o700)
    monkeypatch.setenv("ZEUS_JOURNAL_DIR", str(journals))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = journals / "power-limits.node1.journal"
    dead.write_text(json.dumps({
        "format": "zeus-power-limits-journal", "version": 1, "locator": "nvml",
        "host": socket.gethostname(), "pid": gone.pid, "boot_id": "",
        "gpus": [{"index": 0, "uuid": fake_nvml.state()["gpus"][0]["uuid"],
                  "limit_mw": 280_000}]}))
    set_gpu(fake_nvml, 0, limit_mw=210_000)
    r = run_script(tmp_path, OPTIMIZER + r"""
for _ in range(10):
    plo.on_step_begin(); time.sleep(0.01)
out(done=isinstance(plo.state, Done))
plo.close()
""")
    assert r["done"]
    assert not dead.exists()
    assert fake_nvml.sets()[0]["limit_mw"] == 280_000  # the settling came first
    assert fake_nvml.limits_w() == [280, 280]
