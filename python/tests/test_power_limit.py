"""zeus_cpp.optimizer.power_limit: Zeus 0.16's GlobalPowerLimitOptimizer, its selectors and
profile file; in this process on simulated GPUs with a virtual clock, where the choice can be
checked against the trace."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

import zeus_cpp
from zeus_cpp import device as zdevice
from zeus_cpp.callback import Callback, CallbackSet
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import (
    Done,
    Energy,
    GlobalPowerLimitOptimizer,
    HFGlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Profiling,
    Ready,
    Time,
    Warmup,
    ZeusCost,
)

SIM = "sim:v100:cifar100:1024"

M = PowerLimitMeasurement


@pytest.fixture
def sim(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A simulated V100 training cifar100 at batch size 1024, on a virtual clock (fresh GPUs
    for each test)."""
    monkeypatch.setenv("ZEUS_DEVICE", SIM)
    monkeypatch.setattr(zdevice, "_by_locator", {})
    return job_env


def train(plo: GlobalPowerLimitOptimizer, epochs: int, steps: int) -> None:
    for _ in range(epochs):
        plo.on_epoch_begin()
        for _ in range(steps):
            plo.on_step_begin()
            plo.on_step_end()
        plo.on_epoch_end()


def trace_rows() -> dict[int, tuple[float, float]]:
    """cifar100 (shufflenetv2, adadelta) at 1024 on the V100: limit W -> (s/epoch, W)."""
    path = Path(os.environ["ZEUS_TRACE_DIR"]) / "summary_power_v100.csv"
    rows = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            if (r["dataset"], r["batch_size"], r["optimizer"]) == ("cifar100", "1024",
                                                                   "adadelta"):
                rows[int(r["power_limit"])] = (float(r["time_per_epoch"]),
                                               float(r["average_power"]))
    return rows


# Selectors ----------------------------------------------------------------------------------

def test_selectors_follow_upstreams_formulas() -> None:
    ms = [M(300, 100.0, 1.0), M(250, 80.0, 1.1), M(200, 80.0, 1.5), M(150, 90.0, 2.5)]
    assert Energy().select(ms) == 250  # a tie goes to the first in list order
    assert Time().select(ms) == 300
    # eta*E + (1-eta)*maxP*T with maxP = 300 W x world size.
    assert ZeusCost(1.0).select(ms) == 250
    assert ZeusCost(0.0).select(ms) == 300
    costs = {m.power_limit: 0.5 * m.energy + 0.5 * 600 * m.time for m in ms}
    assert ZeusCost(0.5, world_size=2).select(ms) == min(costs, key=costs.get)
    assert MaxSlowdownConstraint(1.5).select(ms) == 200
    assert MaxSlowdownConstraint(1.0).select(ms) == 300


def test_selectors_reject_bad_knobs_and_empty_profiles() -> None:
    with pytest.raises(ValueError, match="eta_knob"):
        ZeusCost(1.5)
    with pytest.raises(ValueError, match="world_size"):
        ZeusCost(0.5, world_size=0)
    with pytest.raises(ValueError, match="factor"):
        MaxSlowdownConstraint(0.9)
    for selector in (Energy(), Time(), ZeusCost(0.5), MaxSlowdownConstraint(1.1)):
        with pytest.raises(ValueError, match=type(selector).__name__):
            selector.select([])
    with pytest.raises(ValueError, match="energy"):
        M(300, 0.0, 1.0)


# The state machine on the trace --------------------------------------------------------------

def test_zeus_cost_picks_the_just_in_time_rules_limit_on_the_trace(sim: Path,
                                                                   tmp_path: Path) -> None:
    monitor = ZeusMonitor()
    profile = tmp_path / "profile.json"
    plo = GlobalPowerLimitOptimizer(monitor, ZeusCost(0.5), wait_steps=1, warmup_steps=2,
                                    profile_steps=5, pl_step=25, profile_path=profile)
    assert isinstance(plo.state, Ready)
    limits_w = [pl // 1000 for pl in plo.power_limits]
    steps_needed = 1 + len(limits_w) * 7 + 1
    train(plo, epochs=1, steps=steps_needed)
    assert isinstance(plo.state, Done)
    assert [m.power_limit for m in plo.measurements] == limits_w

    rows = trace_rows()
    assert set(limits_w) <= set(rows), "the profiled limits are the trace's measured ones"
    max_w = max(limits_w)
    # Zeus's JIT rule on the trace: per epoch, eta * energy + (1 - eta) * MAXPOWER * time.
    costs = {pl: 0.5 * rows[pl][1] * rows[pl][0] + 0.5 * max_w * rows[pl][0] for pl in limits_w}
    expected = min(costs, key=costs.get)
    assert plo.state.optimal_power_limit == expected * 1000
    assert monitor.gpus.get_power_management_limit(0) == expected * 1000

    # Each window measured 5 iterations of the trace at its limit.
    for m in plo.measurements:
        seconds, watts = rows[m.power_limit]
        assert m.time == pytest.approx(seconds / (50_000 / 1024) * 5, rel=0.05)
        assert m.energy / m.time == pytest.approx(watts, rel=0.02)

    # The profile is upstream's file, and a later run loads it instead of profiling.
    saved = json.loads(profile.read_text())
    assert [r["power_limit"] for r in saved["measurements"]] == limits_w
    assert set(saved["measurements"][0]) == {"power_limit", "energy", "time"}
    again = GlobalPowerLimitOptimizer(ZeusMonitor(), ZeusCost(0.5), profile_path=profile)
    assert again.state == Done(optimal_power_limit=expected * 1000)
    plo.close()
    again.close()


def test_max_slowdown_constraint_applies_its_formula_to_the_measured_profile(sim: Path) -> None:
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), MaxSlowdownConstraint(1.1), wait_steps=0,
                                    warmup_steps=1, profile_steps=3, pl_step=50)
    train(plo, epochs=1, steps=200)
    assert isinstance(plo.state, Done)
    top = max(plo.measurements, key=lambda m: m.power_limit)
    feasible = [m.power_limit for m in plo.measurements if m.time <= 1.1 * top.time]
    assert plo.state.optimal_power_limit == min(feasible) * 1000
    assert min(feasible) < top.power_limit  # the constraint let it go below the maximum
    plo.close()


def test_states_follow_upstreams_machine(sim: Path) -> None:
    monitor = ZeusMonitor()
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=2, warmup_steps=2, profile_steps=3)
    top = plo.power_limits[0]
    assert plo.state == Ready(next_power_limit=top, steps=3)
    plo.on_step_begin()
    plo.on_step_begin()
    assert isinstance(plo.state, Ready)
    plo.on_step_begin()
    assert plo.state == Warmup(current_power_limit=top, steps=2)
    plo.on_step_begin()
    plo.on_step_begin()
    assert plo.state == Profiling(current_power_limit=top, steps=3)
    assert monitor._monitor.is_open(f"__GlobalPowerLimitOptimizer_{top // 1000}")
    # An epoch ending mid-profile cancels the window and starts that limit over.
    plo.on_epoch_end()
    assert plo.state == Ready(next_power_limit=top, steps=1)
    assert not monitor._monitor.is_open(f"__GlobalPowerLimitOptimizer_{top // 1000}")
    assert plo.measurements == []
    plo.on_step_begin()
    assert plo.state == Warmup(current_power_limit=top, steps=2)
    plo.close()


def test_warmup_steps_zero_profiles_right_after_the_limit_is_set(sim: Path) -> None:
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), wait_steps=0, warmup_steps=0,
                                    profile_steps=2, pl_step=100)
    plo.on_step_begin()
    assert plo.state == Profiling(current_power_limit=plo.power_limits[0], steps=2)
    train(plo, epochs=1, steps=3 * len(plo.power_limits))
    assert isinstance(plo.state, Done)
    assert len(plo.measurements) == len(plo.power_limits)
    plo.close()


def test_bad_arguments_are_rejected(sim: Path) -> None:
    monitor = ZeusMonitor()
    for kwargs, name in (({"wait_steps": -1}, "wait_steps"), ({"warmup_steps": -1},
                                                              "warmup_steps"),
                         ({"profile_steps": 0}, "profile_steps"), ({"pl_step": 0}, "pl_step")):
        with pytest.raises(ValueError, match=name):
            GlobalPowerLimitOptimizer(monitor, **kwargs)


def test_a_corrupt_profile_is_named_and_left_alone(sim: Path, tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text('{"measurements": [{"power_limit": 300, "energy": -1, "time": 1}]}')
    before = profile.read_text()
    with pytest.raises(ValueError, match=str(profile)):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=profile)
    assert profile.read_text() == before


def test_measure_only_sets_nothing_and_profiles_nothing(sim: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_MEASURE_ONLY", "true")
    monitor = ZeusMonitor()
    before = monitor.gpus.get_power_management_limit(0)
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=0, profile_steps=1)
    train(plo, epochs=1, steps=50)
    assert plo.state == Done(optimal_power_limit=before)
    assert plo.measurements == []
    assert monitor.gpus.get_power_management_limit(0) == before
    monkeypatch.setenv("ZEUS_MEASURE_ONLY", "maybe")
    with pytest.raises(zeus_cpp.ConfigError, match="ZEUS_MEASURE_ONLY"):
        GlobalPowerLimitOptimizer(monitor)


def test_close_puts_the_limit_back_as_it_was(sim: Path) -> None:
    monitor = ZeusMonitor()
    gpus = monitor.gpus
    low, high = gpus.get_power_management_limit_constraints(0)
    gpus.set_power_management_limit(0, high - 50_000)  # a site's own limit, below the maximum
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=0, profile_steps=2)
    assert gpus.get_power_management_limit(0) == high
    train(plo, epochs=1, steps=10)
    plo.close()
    assert gpus.get_power_management_limit(0) == high - 50_000


# The rest of the 0.16 surface ----------------------------------------------------------------

def test_callback_set_calls_every_callback_in_order() -> None:
    calls: list[str] = []

    class Recorder(Callback):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_step_begin(self) -> None:
            calls.append(f"{self.name}.step")

        def on_evaluate(self, metric: float) -> None:
            calls.append(f"{self.name}.eval{metric}")

    both = CallbackSet([Recorder("a"), Recorder("b")])
    both.on_step_begin()
    both.on_evaluate(0.5)
    both.on_epoch_end()  # the base class's no-op
    assert calls == ["a.step", "b.step", "a.eval0.5", "b.eval0.5"]


def test_the_hf_callback_imports_without_transformers_and_says_what_it_needs(sim: Path) -> None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="transformers"):
            HFGlobalPowerLimitOptimizer(ZeusMonitor())
    else:
        pytest.skip("transformers is installed here (test_frameworks.py drives it)")


# Upstream's scripts, with only the imports changed ---------------------------------------------

def test_a_script_written_for_upstream_runs_with_only_its_imports_renamed(sim: Path,
                                                                          tmp_path: Path) -> None:
    import re

    from conftest import explain, python, run

    source = (Path(__file__).parent / "upstream" / "readme_example.py").read_text()
    renamed, count = re.subn(r"^from zeus\.", "from zeus_cpp.", source, flags=re.M)
    assert count == 4 and "zeus_cpp" not in source
    script = tmp_path / "example.py"
    script.write_text(renamed)
    proc = run([python(), script])
    assert proc.returncode == 0, explain(proc)
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["steps"] == 80 and r["state"] == "Done"
    assert len(r["profiled_w"]) >= 3
    assert r["limit_mw"] // 1000 in r["profiled_w"]
    # The second epoch runs at the chosen limit, on the simulated clock.
    assert all(e["time"] > 0 and e["energy"] > 0 for e in r["epochs"])
