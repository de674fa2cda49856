"""ZeusDataLoader in one process: the job, its files, its modes and every bad input of the
spec. Simulated GPUs run in this process; jobs on the fake NVML run in a child."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler, SequentialSampler, TensorDataset

import zeus_cpp
from conftest import WORKER, FakeNvml, explain, python, records, run, running_zeusd, zeus_cli
from zeus_cpp import ZeusCostThresholdExceededException, ZeusDataLoader

ZEUS_KEYS = {"energy", "time", "cost", "num_epochs", "reached"}


def dataset(n: int = 64) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).reshape(n, 1), torch.zeros(n))


def train_loop(train: ZeusDataLoader, evaluation: ZeusDataLoader,
               metrics: list[float]) -> list[int]:
    seen = []
    for epoch in train.epochs():
        seen.append(epoch)
        steps = sum(1 for _ in train)
        assert steps == len(train)
        for _ in evaluation:
            pass
        train.report_metric(metrics[min(epoch, len(metrics) - 1)], higher_is_better=True)
    return seen


def test_profiles_every_limit_and_writes_zeus_files(job_env: Path) -> None:
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=2, shuffle=True)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    assert isinstance(train, torch.utils.data.DataLoader)
    assert train_loop(train, evaluation, [0.1]) == [0, 1]
    profile = json.loads((job_env / "bs2.power.json").read_text())
    # Zeus's profile keys, 7 limits of a V100 (250..100 W in 25 W steps).
    assert {"batch_size", "optimal_pl", "train_power", "train_throughput", "eval_power",
            "eval_throughput"} <= profile.keys()
    assert len(profile["train_power"]) == 7
    result = json.loads((job_env / "zeus+bs2.train.json").read_text())
    assert ZEUS_KEYS <= result.keys()
    assert result == train.result
    assert result["num_epochs"] == 2 and not result["reached"]
    assert result["stop_reason"] == "max_epochs"
    assert result["profiled"] and result["optimal_pl"] == train.optimal_power_limit_w
    assert result["energy"] > 0 and result["time"] > 0
    assert sorted(p.name for p in job_env.glob("bs2+e*+gpu0.power.log")) == [
        "bs2+e0+gpu0.power.log", "bs2+e1+gpu0.power.log"]
    assert not (job_env / "power-limits.journal").exists()


def test_zeus_report_reads_what_the_python_job_wrote(job_env: Path, tmp_path: Path) -> None:
    cli = zeus_cli()
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    train_loop(train, evaluation, [0.1])
    proc = run([cli, "report", job_env, "--format", "json", "--out", tmp_path / "report.html"])
    assert proc.returncode == 0, explain(proc)
    assert (tmp_path / "report.html").stat().st_size > 0
    assert "2" in proc.stdout and "zeus" in proc.stdout, proc.stdout


def test_stops_at_the_target_metric(job_env: Path) -> None:
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=10)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    assert train_loop(train, evaluation, [0.5, 0.995]) == [0, 1]
    assert train.result["reached"] and train.result["num_epochs"] == 2
    assert train.result["stop_reason"] == "target_reached"


def test_lower_is_better_metrics(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_TARGET_METRIC", "0.2")
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=10)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    seen = []
    for epoch in train.epochs():
        seen.append(epoch)
        for _ in train:
            pass
        for _ in evaluation:
            pass
        train.report_metric(1.0 - 0.3 * epoch, higher_is_better=False)  # a loss: 1.0, 0.7, ...
    assert seen == [0, 1, 2, 3] and train.result["reached"]


def test_cost_threshold_raises_after_writing_the_result(job_env: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # An epoch of 32 steps on a simulated V100 costs about 7000 (eta 0.5): the third would pass.
    monkeypatch.setenv("ZEUS_COST_THRESH", "15000")
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=10)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    with pytest.raises(ZeusCostThresholdExceededException) as caught:
        train_loop(train, evaluation, [0.1])
    e = caught.value
    assert isinstance(e, zeus_cpp.ZeusError)
    assert e.cost_thresh == 15000 and e.next_cost >= 15000 > e.cost
    result = json.loads((job_env / "zeus+bs2.train.json").read_text())
    assert result["stop_reason"] == "cost_threshold" and not result["reached"]
    assert e.energy_consumed == pytest.approx(result["energy"])
    assert e.time_consumed == pytest.approx(result["time"])


def test_observer_mode_profiles_but_stays_at_the_maximum(job_env: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_USE_OPTIMAL_PL", "false")
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=2)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    train_loop(train, evaluation, [0.1])
    r = train.result
    assert r["observer_mode"] and r["optimal_pl"] is not None
    assert r["epochs"][-1]["power_limit"] == r["max_pl"] == 250


def test_global_batch_size_names_the_files(job_env: Path) -> None:
    proc = run([python(), WORKER, "--out", job_env.parent / "out", "--spawn", "2", "--dp",
                "--epochs", "3", "--batch-size", "3", "--samples", "96"])
    assert proc.returncode == 0, explain(proc)
    assert (job_env / "bs6.power.json").exists() and (job_env / "zeus+bs6.train.json").exists()
    assert {r["global_batch_size"] for r in records(job_env.parent / "out").values()} == {6}


# ---- modes on the fake NVML (a child process: NVML is loaded once per process) --------------


def test_measure_only_sets_no_limit_and_measures_every_epoch(fake_nvml,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             job_env: Path) -> None:
    monkeypatch.setenv("ZEUS_MEASURE_ONLY", "true")
    fake_nvml.fault(set_no_permission=True)
    out = job_env.parent / "out"
    proc = run([python(), WORKER, "--out", out, "--epochs", "2"])
    assert proc.returncode == 0, explain(proc)
    r = records(out)[0]["result"]
    assert r["measure_only"] and r["num_epochs"] == 2 and r["energy"] > 0
    assert fake_nvml.sets() == [] and fake_nvml.limits_w() == [280, 280]
    assert not (job_env / "bs4.power.json").exists()


def test_without_permission_the_error_names_measure_only(fake_nvml, job_env: Path) -> None:
    fake_nvml.fault(set_no_permission=True)
    proc = run([python(), WORKER, "--out", job_env.parent / "out", "--epochs", "1"])
    assert proc.returncode != 0
    assert "ZEUS_MEASURE_ONLY=true" in proc.stderr, explain(proc)
    assert fake_nvml.limits_w() == [280, 280]


def test_profiling_on_nvml_restores_the_original_limit(fake_nvml, job_env: Path) -> None:
    out = job_env.parent / "out"
    proc = run([python(), WORKER, "--out", out, "--epochs", "2"])
    assert proc.returncode == 0, explain(proc)
    set_limits = {s["limit_mw"] // 1000 for s in fake_nvml.sets() if s["gpu"] == 0}
    assert {100, 300, 280} <= set_limits  # profiled down to 100 W, back to what it found
    assert fake_nvml.limits_w()[0] == 280
    assert not (job_env / "power-limits.journal").exists()


def test_with_zeusd_sock_path_limits_are_set_by_the_daemon(job_env: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake NVML that, like the driver, lets only root set; the job's limits must all be set by
    # zeusd's process (the fake records who set each), and end where they were.
    nvml = FakeNvml(job_env.parent, 2, monkeypatch, permissive=False)
    with running_zeusd(tmp_path) as (daemon, sock):
        monkeypatch.setenv("ZEUSD_SOCK_PATH", str(sock))
        out = job_env.parent / "out"
        proc = run([python(), WORKER, "--out", out, "--epochs", "2"])
        assert proc.returncode == 0, explain(proc)
        assert f"power limits are set through zeusd at {sock}" in proc.stderr, explain(proc)
        sets = nvml.sets()
        assert {s["limit_mw"] // 1000 for s in sets if s["gpu"] == 0} >= {100, 300}
        assert {s["pid"] for s in sets} == {daemon.pid}, sets
        deadline = time.monotonic() + 10
        while nvml.limits_w() != [280, 280] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert nvml.limits_w() == [280, 280]


# ---- bad inputs ------------------------------------------------------------------------------


def test_distributed_must_be_none_or_dp(job_env: Path) -> None:
    with pytest.raises(TypeError, match="'ddp'"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1, distributed="ddp")


def test_dp_needs_a_process_group(job_env: Path) -> None:
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_torch"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1, distributed="dp")


@pytest.fixture
def group_of_one(job_env: Path):
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_dp_needs_a_distributed_sampler(group_of_one) -> None:
    with pytest.raises(ValueError, match="DistributedSampler"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1, distributed="dp",
                       sampler=SequentialSampler(dataset()))


def test_dp_sampler_must_match_the_group(group_of_one) -> None:
    sampler = DistributedSampler(dataset(), num_replicas=2, rank=1)
    with pytest.raises(ValueError, match="rank 1 of 2.*rank 0 of 1"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1, distributed="dp", sampler=sampler)


def test_dp_in_a_group_of_one_trains(group_of_one, job_env: Path) -> None:
    data = dataset()
    train = ZeusDataLoader(data, batch_size=2, max_epochs=1, distributed="dp",
                           sampler=DistributedSampler(data))
    evaluation = ZeusDataLoader(data, batch_size=8, distributed="dp",
                                sampler=DistributedSampler(data, shuffle=False))
    assert train_loop(train, evaluation, [0.1]) == [0]
    assert train.result["world_size"] == 1


def test_a_second_train_loader_is_refused(job_env: Path) -> None:
    first = ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    with pytest.raises(ValueError, match="second train loader"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    first.close()
    ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)  # after close(), a new job may start


def test_the_eval_loader_may_come_before_the_train_loader(job_env: Path) -> None:
    # The C++ loader's rule (Note [loader pairing]); before, Python refused this order.
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    assert train_loop(train, evaluation, [0.9]) == [0]
    epochs = train.result["epochs"]
    assert epochs[0]["eval_iterations"] == len(evaluation), "the eval loop was measured"


def test_epochs_needs_the_eval_loader(job_env: Path) -> None:
    # The pairing is per process: an earlier test's eval loader, held only by a reference cycle
    # the garbage collector has not reached yet, would count (seen once in a full run).
    gc.collect()
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    with pytest.raises(ValueError, match="eval loader is missing"):
        train.epochs()


def test_the_train_loader_is_iterated_inside_epochs(job_env: Path) -> None:
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    with pytest.raises(RuntimeError, match="outside epochs"):
        iter(train)
    with pytest.raises(ValueError, match="train loader"):
        evaluation.report_metric(0.5)
    assert len(list(evaluation)) == 8  # outside training the eval loader just loads


def test_the_target_metric_is_required(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEUS_TARGET_METRIC")
    with pytest.raises(zeus_cpp.ConfigError, match="ZEUS_TARGET_METRIC"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)


def test_the_batch_size_service_is_refused_with_what_to_do(job_env: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The PyTorch loader's batch size is fixed before its job: it cannot run at the service's.
    monkeypatch.setenv("ZEUS_BSO_SERVER_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("ZEUS_BSO_BATCH_SIZES", "2,4")
    with pytest.raises(zeus_cpp.ConfigError, match="BatchSizeOptimizer"):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)


@pytest.mark.parametrize("name,value,expected", [
    ("ZEUS_ETA_KNOB", "1.5", r"ZEUS_ETA_KNOB.*1\.5.*\[0, 1\]"),
    ("ZEUS_ETA_KNOB", "half", "ZEUS_ETA_KNOB='half' is not a number"),
    ("ZEUS_COST_THRESH", "-3", "ZEUS_COST_THRESH.*-3.*> 0"),
    ("ZEUS_PROFILE_PARAMS", "10", "ZEUS_PROFILE_PARAMS"),
    ("ZEUS_USE_OPTIMAL_PL", "maybe", "ZEUS_USE_OPTIMAL_PL='maybe'"),
    ("ZEUS_JOB_ID", "a/b", "ZEUS_JOB_ID"),
    ("ZEUS_DEVICE", "sim:h900", "h900"),
])
def test_bad_variables_name_the_variable_value_and_range(job_env: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          name: str, value: str,
                                                          expected: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=expected) as caught:
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    assert isinstance(caught.value, zeus_cpp.ZeusError)


def test_a_corrupt_profile_names_its_path(job_env: Path) -> None:
    job_env.mkdir(parents=True)
    profile = job_env / "bs2.power.json"
    profile.write_text("{not json")
    with pytest.raises(zeus_cpp.ZeusError, match=str(profile)):
        ZeusDataLoader(dataset(), batch_size=2, max_epochs=1)
    assert profile.read_text() == "{not json"  # nothing overwritten


@pytest.mark.parametrize("kwargs,error", [
    (dict(batch_size=0, max_epochs=1), ValueError),
    (dict(batch_size=2, max_epochs=0), ValueError),
    (dict(batch_size=2.5, max_epochs=1), ValueError),
])
def test_bad_arguments(job_env: Path, kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        ZeusDataLoader(dataset(), **kwargs)


def test_cuda_is_synchronized_at_measurement_timestamps_only(job_env: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Zeus's rule, with CUDA faked: torch.cuda.synchronize(device) before every timestamp that
    opens or closes a measurement (loops, profiling windows), never on the step path after."""
    calls: list[int] = []

    class Props:
        uuid = "58f9e3b1-0000-0000-0000-000000000000"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: Props())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=4)
    evaluation = ZeusDataLoader(dataset(), batch_size=8)
    per_epoch = []
    for epoch in train.epochs():
        before, first = len(calls), None
        for _ in train:
            first = len(calls) if first is None else first
        per_epoch.append((first - before, len(calls) - first))
        for _ in evaluation:
            pass
        train.report_metric(0.1)
    assert set(calls) == {0}
    assert train.result["profiled"]
    # Epoch 0 profiles (windows of 2 + 3 steps): the loop's start and the first limit (a limit is
    # set only once the device finished the work before it) before the first batch, then each
    # window's both ends and each further limit.
    assert per_epoch[0][0] == 2 and per_epoch[0][1] >= 2 * 5
    # The last epoch runs at the optimal limit: the loop's start and end only.
    assert per_epoch[-1] == (1, 1)


def test_loader_worker_processes(job_env: Path) -> None:
    """num_workers and pin_memory go to DataLoader unchanged; the job only sees the batches."""
    train = ZeusDataLoader(dataset(), batch_size=2, max_epochs=2, num_workers=2,
                           persistent_workers=True)
    evaluation = ZeusDataLoader(dataset(), batch_size=8, num_workers=1)
    assert train.num_workers == 2
    assert train_loop(train, evaluation, [0.1]) == [0, 1]
    assert [e["train_iterations"] for e in train.result["epochs"]] == [32, 32]
