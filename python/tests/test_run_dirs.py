"""Issue #38's matrix, its Python cells: the PyTorch ``ZeusDataLoader`` and Zeus 0.16's
``GlobalPowerLimitOptimizer`` under ``zeus run`` (2 processes), on the fake NVML and on the
simulated GPU, each way of giving the log directory that applies to them. Each run must end with
every file of the run contract where it was asked for, nothing elsewhere (no stray ``zeus_log/``
in the working directory), no journal left and the limits back. The C++ cells are in
tests/run_dir_test.cpp."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FakeNvml, WORKER, explain, python, run, zeus_cli

GPLO_WORKER = Path(__file__).resolve().parent / "workers" / "gplo_job.py"

_TRAIN_RESULT = re.compile(r".+\+bs(\d+)\.train\.json")
_PROFILE = re.compile(r"bs(\d+)\.power\.json")
_POWER_LOG = re.compile(r"bs(\d+)\+e(\d+)\+gpu(\d+)\.power\.log")
_LAUNCHER_LOG = re.compile(r"attempt_\d+/\d+/std(out|err)\.log")


def _within(path: Path, directory: Path) -> bool:
    return path != directory and directory in path.parents


def problems(root: Path, program_files: dict[Path, re.Pattern | None],
             launcher_dir: Path | None = None) -> list[str]:
    """What is out of place under `root`. `program_files`: each directory where the run's files
    belong, with the names allowed there (None: any name, checked by the caller)."""
    found = []
    allowed_dirs = list(program_files) + ([launcher_dir] if launcher_dir else [])
    for path in sorted(root.rglob("*")):
        if path.is_dir():
            if path.name == ".journals":
                found.append(f"the runs' journal directory was left: {path}")
            elif not any(path == d or _within(d, path) or _within(path, d) for d in allowed_dirs):
                found.append(f"a directory where none was asked for: {path}")
            continue
        if path.name.endswith(".journal"):
            found.append(f"a journal was left: {path}")
        elif path.parent in program_files:
            pattern = program_files[path.parent]
            if pattern is not None and not pattern.fullmatch(path.name):
                found.append(f"a file of no kind in the log directory: {path}")
        elif launcher_dir and _within(path, launcher_dir):
            if not _LAUNCHER_LOG.fullmatch(str(path.relative_to(launcher_dir))):
                found.append(f"a file in the launcher's log directory that is not a rank's log: "
                             f"{path}")
        else:
            found.append(f"a file where none was asked for: {path}")
    return found


def contract_problems(log_dir: Path, world: int, simulated: bool) -> list[str]:
    """The loader's run contract in `log_dir`: one train result, its profile, a power log of
    every GPU in each epoch, the simulated GPUs' state when simulated."""
    if not log_dir.is_dir():
        return [f"the log directory {log_dir} was not made"]
    names = [p.name for p in log_dir.iterdir()]
    results = [m for n in names if (m := _TRAIN_RESULT.fullmatch(n))]
    if len(results) != 1:
        return [f"{len(results)} train results in {log_dir}: {names}"]
    bs = results[0].group(1)
    found = []
    if f"bs{bs}.power.json" not in names:
        found.append(f"no profile bs{bs}.power.json in {log_dir}: {names}")
    logs = {(m.group(2), int(m.group(3))) for n in names if (m := _POWER_LOG.fullmatch(n))
            and m.group(1) == bs}
    epochs = {e for e, _ in logs}
    if not epochs:
        found.append(f"no power log in {log_dir}: {names}")
    for epoch in epochs:
        for gpu in range(world):
            if (epoch, gpu) not in logs:
                found.append(f"no power log of GPU {gpu} in epoch {epoch} in {log_dir}")
    if simulated and not any(n.startswith(".sim-node") for n in names):
        found.append(f"no simulated GPUs' state in {log_dir}: {names}")
    return found


_LOADER_NAMES = re.compile(rf"{_TRAIN_RESULT.pattern}|{_PROFILE.pattern}|{_POWER_LOG.pattern}"
                           r"|\.sim-node.+")


def _ready(monkeypatch: pytest.MonkeyPatch, gpu: str, job_env: Path) -> FakeNvml | None:
    monkeypatch.setenv("ZEUS_PYTHON", python())
    monkeypatch.setenv("ZEUS_PROFILE_PARAMS", "1,2")
    monkeypatch.delenv("ZEUS_LOG_DIR")
    if gpu == "nvml":
        return FakeNvml(job_env.parent, 2, monkeypatch)
    return None


def _launcher(tmp_path: Path, way: str) -> tuple[Path, list[str], Path | None]:
    """The run's working directory (made), and with way "launcher" `zeus run --log-dir` relative
    to it: its flags and its directory."""
    work = tmp_path / "run"
    work.mkdir()
    if way != "launcher":
        return work, [], None
    return work, ["--log-dir", "launcher/exp1"], work / "launcher" / "exp1"


def _restored(nvml: FakeNvml | None, proc) -> None:
    if nvml is not None:
        assert min(s["limit_mw"] for s in nvml.sets()) < 280_000, "no limit was lowered"
        assert nvml.limits_w() == [280, 280], explain(proc)


@pytest.mark.parametrize("gpu", ["nvml", "sim"])
@pytest.mark.parametrize("way", ["default", "env", "launcher"])
def test_zeus_data_loader_under_zeus_run(job_env: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, way: str,
                                         gpu: str) -> None:
    nvml = _ready(monkeypatch, gpu, job_env)
    work, launcher, launcher_dir = _launcher(tmp_path, way)
    if way == "default":
        log_dir = work / "zeus_log"
    elif way == "env":
        log_dir = work / "from-env" / "exp1" / "deep"
        monkeypatch.setenv("ZEUS_LOG_DIR", "from-env/exp1/deep")
    else:  # zeus run --log-dir: its logs, and the job's ZEUS_LOG_DIR
        log_dir = launcher_dir
    out = tmp_path / "out"
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", *launcher, WORKER, "--out", out,
                "--dp", "--epochs", "1", "--samples", "256"], cwd=work)
    assert proc.returncode == 0, explain(proc)
    assert contract_problems(log_dir, 2, gpu == "sim") == [], explain(proc)
    pattern = None if way == "launcher" else _LOADER_NAMES
    assert problems(work, {log_dir: pattern}, launcher_dir) == [], explain(proc)
    _restored(nvml, proc)


@pytest.mark.parametrize("gpu", ["nvml", "sim"])
@pytest.mark.parametrize("way", ["relative", "absolute", "launcher"])
def test_global_power_limit_optimizer_under_zeus_run(job_env: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, way: str,
                                                     gpu: str) -> None:
    nvml = _ready(monkeypatch, gpu, job_env)
    if gpu == "sim":
        monkeypatch.setenv("ZEUS_DEVICE", "sim:v100:cifar100:1024")
        monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    work, launcher, launcher_dir = _launcher(tmp_path, way)
    if way == "relative":
        profile = work / "profiles" / "exp1" / "deep" / "plo.json"
        given = "profiles/exp1/deep/plo.json"
    elif way == "absolute":
        profile = tmp_path / "abs" / "exp1" / "plo.json"
        given = str(profile)
    else:  # zeus run --log-dir: its logs and the optimizers' journals
        profile = work / "profiles" / "plo.json"
        given = "profiles/plo.json"
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", *launcher, GPLO_WORKER,
                "--profile-path", given], cwd=work)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.count(": Done") == 2, explain(proc)
    # Both ranks profiled their own GPU; the profile file is one (the last writer's).
    assert profile.is_file(), explain(proc)
    allowed = {profile.parent: re.compile(r"plo\.json")}
    assert problems(work, allowed, launcher_dir) == [], explain(proc)
    if way == "absolute":
        assert problems(tmp_path / "abs", allowed) == [], explain(proc)
    _restored(nvml, proc)


@pytest.mark.parametrize("way", ["default", "launcher"])
def test_a_killed_optimizer_rank_gets_its_limits_back(job_env: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      way: str) -> None:
    """A rank SIGKILLed in the middle of profiling: its watchdog, or the launcher settling the
    journal in the directory it gave the workers, puts its limit back; nothing is left."""
    nvml = _ready(monkeypatch, "nvml", job_env)
    work, launcher, launcher_dir = _launcher(tmp_path, way)
    flag = tmp_path / "killed"
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", *launcher, GPLO_WORKER,
                "--kill-at", "8", "--killed-flag", flag], cwd=work)
    assert proc.returncode != 0 and flag.exists(), explain(proc)
    _restored(nvml, proc)
    assert problems(work, {}, launcher_dir) == [], explain(proc)
