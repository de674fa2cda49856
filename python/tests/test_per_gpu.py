"""PerGpuPowerLimitOptimizer over Gloo on simulated GPUs with a straggler: two ranks agree on
the per-GPU plan (the planner's over the traces, as `zeus simulate --dp` prints it), each sets
its own GPU's limit, and the GPUs spend less at the plan than at Zeus's one limit. On one
process it is GlobalPowerLimitOptimizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import zeus_cli

WORKER = Path(__file__).resolve().parent / "workers" / "per_gpu_job.py"
MIX = "v100,v100*1.2"
DEVICE = f"sim:{MIX}:cifar100:1024"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(plan: str, tmp_path: Path, *extra: str, device: str = DEVICE) -> dict:
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               ZEUS_DEVICE=device, ZEUS_JOURNAL_DIR=str(tmp_path / f"journals-{plan}"))
    procs = []
    for rank in (0, 1):
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), "--plan", plan, *extra],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    errs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-4000:]
        outs.append(out)
        errs.append(err)
    return dict(json.loads(outs[0].strip().splitlines()[-1]), stderr=errs[0])


def test_two_ranks_agree_on_the_plan_and_spend_less_than_one_limit(job_env: Path,
                                                                   tmp_path: Path) -> None:
    want = json.loads(subprocess.run(
        [str(zeus_cli()), "simulate", "--dp", MIX, "--workload", "cifar100", "--batch-size",
         "1024", "--format", "json"], check=True, capture_output=True, text=True).stdout)
    per_gpu = run_world("per_gpu", tmp_path)
    one = run_world("global", tmp_path)
    assert per_gpu["limits_mw"] == [int(w * 1000) for w in want["per_gpu"]["limits_w"]]
    assert per_gpu["limits_mw"][0] < per_gpu["limits_mw"][1]  # the fast GPU waits less
    assert per_gpu["own_limit_mw"] == per_gpu["limits_mw"][0]
    assert one["limits_mw"] is None
    assert one["single_mw"] == per_gpu["single_mw"]  # the profile's single choice is Zeus's
    # The same steps after profiling: less energy on every GPU together, less time, by the
    # model's ratios (the simulated GPUs follow the traces and the wait at the sync).
    ratio = sum(per_gpu["energy_j"]) / sum(one["energy_j"])
    assert ratio < 1
    assert ratio == pytest.approx(want["per_gpu"]["energy_j"] / want["global"]["energy_j"],
                                  rel=0.005)
    assert per_gpu["time_s"] / one["time_s"] == pytest.approx(
        want["per_gpu"]["time_s"] / want["global"]["time_s"], rel=0.005)


def test_the_plan_follows_a_gpu_that_slows_down_mid_run(job_env: Path, tmp_path: Path) -> None:
    """Two equal GPUs get Zeus's one limit; rank 1's GPU then becomes 30% slower (heat): within
    two pace checks (200 steps) the plan lowers rank 0's limit, and spends less than staying."""
    slow = ("--slow-rank", "1", "--slowdown", "1.3", "--after", "400")
    follow = run_world("per_gpu", tmp_path, *slow, device="sim:v100,v100:cifar100:1024")
    assert follow["first_limits_mw"][0] == follow["first_limits_mw"][1] == follow["single_mw"]
    assert len(follow["replans"]) == 1
    assert "GPU 1 now takes 1.30x its profiled step time" in follow["replans"][0]["reason"]
    assert follow["limits_mw"][0] < follow["limits_mw"][1]
    stay = run_world("per_gpu", tmp_path, *slow, "--no-follow",
                     device="sim:v100,v100:cifar100:1024")
    assert stay["limits_mw"] == stay["first_limits_mw"] == follow["first_limits_mw"]
    assert sum(follow["energy_j"]) < sum(stay["energy_j"])
    assert follow["time_s"] <= stay["time_s"] * 1.0001


def test_the_plan_follows_the_grid_on_every_rank(job_env: Path, tmp_path: Path) -> None:
    """CarbonAwarePerGpuPowerLimitOptimizer: two ranks with a straggler plan per GPU at a clean
    hour; the grid gets dirty and both make the plan again at the dirty knob, from the same
    profile, and set the same plan's limits."""
    trace = tmp_path / "ci.csv"
    rows = ["datetime,carbonIntensity"] + [
        f"2024-04-15T{h:02d}:00:00Z,{100 if h < 2 else 3000}" for h in range(12)]
    trace.write_text("\n".join(rows) + "\n")
    out = run_world("carbon_per_gpu", tmp_path, "--trace", str(trace), "--after", "400")
    signals = [c["signal"] for c in out["choices"]]
    assert signals == [100, 3000], out["choices"]
    clean = out["choices"][0]["power_limits_mw"]
    dirty = out["choices"][1]["power_limits_mw"]
    assert all(d <= c for d, c in zip(dirty, clean)) and dirty != clean  # energy weighs more
    assert out["limits_mw"] == dirty
    assert out["own_limits_mw"] == dirty  # every rank set its own GPU's limit of the one plan


def test_on_one_process_it_is_the_global_optimizer(job_env: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import (GlobalPowerLimitOptimizer,
                                                PerGpuPowerLimitOptimizer)

    monkeypatch.setenv("ZEUS_DEVICE", "sim:v100:cifar100:1024")
    chosen = []
    for cls in (GlobalPowerLimitOptimizer, PerGpuPowerLimitOptimizer):
        plo = cls(ZeusMonitor(gpu_indices=[0]), warmup_steps=1, profile_steps=2)
        while type(plo.state).__name__ != "Done":
            plo.on_step_begin()
            plo.on_step_end()
        chosen.append(plo.state.optimal_power_limit)
        assert getattr(plo, "optimal_power_limits", None) is None
        plo.close()
    assert chosen[0] == chosen[1]


def test_a_saved_profile_is_planned_per_gpu_from_its_gpus_curves(job_env: Path,
                                                                 tmp_path: Path) -> None:
    """Issue #52: the profile file keeps each GPU's curve under its UUID and host; a rerun on the
    same GPUs plans per GPU without profiling (it used to become the global optimizer), one on
    other GPUs profiles again, one from a file without curves runs Zeus's one limit, saying why."""
    profile = tmp_path / "profile.json"
    first = run_world("per_gpu", tmp_path, "--profile", str(profile))
    assert first["profiled"] and first["limits_mw"][0] < first["limits_mw"][1]
    doc = json.loads(profile.read_text())
    assert [c["uuid"] for c in doc["per_gpu"]] == ["SIM-v100-0", "SIM-v100-1"]
    assert "measurements" in doc  # upstream's key, for upstream's reader
    again = run_world("per_gpu", tmp_path, "--profile", str(profile))
    assert not again["profiled"]
    assert again["limits_mw"] == first["limits_mw"]
    assert again["own_limits_mw"] == first["limits_mw"]
    for c in doc["per_gpu"]:
        c["host"] = "another-node"
    profile.write_text(json.dumps(doc))
    other = run_world("per_gpu", tmp_path, "--profile", str(profile))
    assert other["profiled"] and "not of these GPUs" in other["stderr"]
    assert json.loads(profile.read_text())["per_gpu"][0]["host"] != "another-node"
    doc.pop("per_gpu")
    profile.write_text(json.dumps(doc))
    zeus_only = run_world("per_gpu", tmp_path, "--profile", str(profile))
    assert not zeus_only["profiled"] and zeus_only["limits_mw"] is None
    assert "it has no per-GPU curves" in zeus_only["stderr"]


def test_a_monitor_of_several_gpus_is_refused_before_any_limit_is_set(job_env: Path,
                                                                      fake_nvml) -> None:
    """The one-GPU-per-monitor check comes before the optimizer sets (or journals) anything."""
    import zeus_cpp.optimizer.power_limit as pl
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer.power_limit import PerGpuPowerLimitOptimizer

    limits_before = fake_nvml.limits_w()
    world = pl._world_size
    pl._world_size = lambda: 2  # as under torch.distributed with two ranks
    try:
        with pytest.raises(ValueError, match="own GPU"):
            PerGpuPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0, 1]))
    finally:
        pl._world_size = world
    assert fake_nvml.limits_w() == limits_before
    assert fake_nvml.sets() == []
