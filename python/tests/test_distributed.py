"""Two ranks: the example under all four launch methods of the seed (torch.multiprocessing,
torch.distributed.launch's --local_rank, torchrun and zeus run, Slurm), the cost threshold on
every rank, limits restored when a rank raises or is killed, and ENOT's helpers."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (EXAMPLE, FASHION_MNIST, REPO, WORKER, explain, python, records, run,
                      zeus_cli)

# torch 1.13's elastic agent fails on Python 3.11 unless redirects are given as a map (.get on
# None); torch >= 2.0 needs nothing.
ELASTIC_FIX = ["--redirects", "7:1", "--tee", "7:1"]  # a map (for a rank 7 that never runs)
EXAMPLE_ARGS = ["--zeus", "--limit-train", "1024", "--limit-test", "256", "--epochs", "1",
                "--batch-size", "64"]


def torch_major() -> int:
    import torch

    return int(torch.__version__.split(".")[0])


def elastic_args() -> list[str]:
    return ELASTIC_FIX if torch_major() < 2 else []


def needs_fashion_mnist() -> None:
    if not (FASHION_MNIST / "train-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST is not at {FASHION_MNIST} (Debian's dataset-fashion-mnist)")


def check_example(proc: subprocess.CompletedProcess, log_dir: Path, launcher: str) -> None:
    assert proc.returncode == 0, explain(proc)
    # zeus run prefixes each worker's lines with "[rank] ".
    done = [line for line in proc.stdout.splitlines() if re.match(r"(\[\d+\] )?done:", line)]
    assert len(done) == 1, explain(proc)  # the master alone reports
    assert "rank 0 of 2" in done[0] and f"({launcher}," in done[0], done[0]
    result = json.loads((log_dir / "zeus+bs64.train.json").read_text())
    assert result["world_size"] == 2 and result["num_epochs"] == 1
    assert (log_dir / "bs64+e0+gpu0.power.log").exists()
    assert (log_dir / "bs64+e0+gpu1.power.log").exists()  # a simulated GPU per local rank


def test_example_with_torch_multiprocessing(job_env: Path) -> None:
    needs_fashion_mnist()
    proc = run([python(), EXAMPLE, "--multiprocessing-distributed", "--nproc", "2",
                *EXAMPLE_ARGS], cwd=job_env.parent)
    check_example(proc, job_env, "torchrun")  # the spawned workers state torchrun's variables


def test_example_with_torch_distributed_launch(job_env: Path) -> None:
    needs_fashion_mnist()
    proc = run([python(), "-m", "torch.distributed.launch", *elastic_args(), "--nproc_per_node",
                "2", EXAMPLE, *EXAMPLE_ARGS], cwd=job_env.parent)
    check_example(proc, job_env, "torchrun")


def test_example_with_torchrun(job_env: Path) -> None:
    needs_fashion_mnist()
    proc = run([python(), "-m", "torch.distributed.run", *elastic_args(), "--nproc_per_node",
                "2", EXAMPLE, *EXAMPLE_ARGS], cwd=job_env.parent)
    check_example(proc, job_env, "torchrun")


def test_example_with_zeus_run(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs_fashion_mnist()
    monkeypatch.setenv("ZEUS_PYTHON", python())
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", "--", EXAMPLE, *EXAMPLE_ARGS],
               cwd=job_env.parent)
    check_example(proc, job_env, "torchrun")


def test_legacy_local_rank_argument_alone(job_env: Path) -> None:
    """The old launcher's contract: RANK, WORLD_SIZE and the master in the environment, the
    local rank only as --local_rank (no LOCAL_RANK variable)."""
    out = job_env.parent / "out"
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    procs = []
    for rank in (0, 1):
        env["RANK"] = str(rank)
        procs.append(subprocess.Popen(
            [python(), WORKER, f"--local_rank={rank}", "--out", out, "--dp", "--epochs", "1"],
            env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-4000:]
    got = records(out)
    assert [got[r]["info"]["local_rank"] for r in (0, 1)] == [0, 1]
    assert {got[r]["info"]["launcher"] for r in (0, 1)} == {"legacy_local_rank"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- Slurm ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm():
    # munged runs as user munge: every directory above its socket must be searchable by all,
    # which pytest's private temporary directories are not.
    root = Path(tempfile.mkdtemp(prefix="zeus-py-slurm-"))
    os.chmod(root, 0o755)
    fixture = REPO / "tests" / "slurm" / "fixture.sh"
    started = run([fixture, "start", root / "slurm"], timeout=120)
    if started.returncode != 0:
        pytest.skip(f"a real Slurm cannot start here: {started.stderr.strip()[-500:]}")
    yield root / "slurm" / "slurm.conf"
    run([fixture, "stop", root / "slurm"], timeout=60)
    shutil.rmtree(root, ignore_errors=True)


def test_example_under_slurm_srun(slurm: Path, job_env: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    needs_fashion_mnist()
    monkeypatch.setenv("SLURM_CONF", str(slurm))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")  # the fixture's node names do not resolve
    proc = run(["srun", "-N1", "-n2", "--kill-on-bad-exit=1", python(), EXAMPLE, *EXAMPLE_ARGS],
               cwd=job_env.parent, timeout=180)
    check_example(proc, job_env, "slurm")


def test_example_sbatch_template(slurm: Path, job_env: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's launch method: sbatch script.sh, one task per (here simulated) GPU; the
    template's defaults overridden from sbatch's command line."""
    needs_fashion_mnist()
    monkeypatch.setenv("SLURM_CONF", str(slurm))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("ZEUS_PYTHON", python())
    out = tmp_path / "sbatch.out"
    proc = run(["sbatch", "--wait", "-N1", "--ntasks-per-node=2", "-o", out,
                REPO / "examples" / "python" / "train.sbatch", *EXAMPLE_ARGS[1:]],
               cwd=REPO, timeout=240)
    text = out.read_text() if out.exists() else ""
    assert proc.returncode == 0, explain(proc) + text
    assert "rank 0 of 2" in text and "(slurm," in text, text
    result = json.loads((job_env / "zeus+bs64.train.json").read_text())
    assert result["world_size"] == 2 and result["num_epochs"] == 1


# ---- the job across ranks -------------------------------------------------------------------


def test_cost_threshold_stops_every_rank_at_the_same_epoch(job_env: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_COST_THRESH", "15000")
    out = job_env.parent / "out"
    proc = run([python(), WORKER, "--out", out, "--spawn", "2", "--dp", "--epochs", "20",
                "--samples", "64"])
    assert proc.returncode == 0, explain(proc)
    got = records(out)
    assert sorted(got) == [0, 1]
    assert got[0]["outcome"] == got[1]["outcome"] == "cost_threshold"
    assert got[0]["epochs"] == got[1]["epochs"] and len(got[0]["epochs"]) >= 2
    assert got[0]["exception"]["next_cost"] == got[1]["exception"]["next_cost"] >= 15000
    result = json.loads((job_env / "zeus+bs8.train.json").read_text())
    assert result["stop_reason"] == "cost_threshold"
    assert result["num_epochs"] == len(got[0]["epochs"])


def test_ranks_agree_on_the_profile_and_the_result(job_env: Path) -> None:
    out = job_env.parent / "out"
    # 12 steps per rank and epoch: two windows of 2 + 3 steps, so 7 limits take 4 epochs.
    proc = run([python(), WORKER, "--out", out, "--spawn", "2", "--dp", "--epochs", "6",
                "--samples", "96", "--metrics", "0.1,0.2,0.3,0.995"])
    assert proc.returncode == 0, explain(proc)
    got = records(out)
    # The numbers every rank decides with are the master's (the device locator and the windows'
    # wall-clock stamps are each rank's own).
    decided = ("energy", "time", "cost", "num_epochs", "reached", "stop_reason", "optimal_pl",
               "epochs")
    assert [got[0]["result"][k] for k in decided] == [got[1]["result"][k] for k in decided]
    assert got[0]["optimal_pl"] == got[1]["optimal_pl"] is not None
    assert got[0]["epochs"] == [0, 1, 2, 3] and got[0]["result"]["reached"]
    assert [got[r]["info"]["is_master"] for r in (0, 1)] == [True, False]
    assert [got[r]["info"]["is_local_master"] for r in (0, 1)] == [True, False]


def wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_limits_are_restored_when_a_rank_raises(fake_nvml, job_env: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                failing_rank: int) -> None:
    monkeypatch.setenv("ZEUS_PYTHON", python())
    out = job_env.parent / "out"
    # Step 12 lies in the third profiling window (2 + 3 steps per limit): limits are lowered.
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", WORKER, "--out", out, "--dp",
                "--epochs", "3", "--raise-rank", str(failing_rank), "--raise-at", "12"])
    assert proc.returncode != 0
    assert "fails at step 12 on purpose" in proc.stderr, explain(proc)
    assert min(s["limit_mw"] for s in fake_nvml.sets()) < 280_000, "profiling lowered no limit"
    assert fake_nvml.limits_w() == [280, 280], explain(proc)
    assert not (job_env / "power-limits.journal").exists()


def test_limits_are_restored_when_a_lone_process_raises(fake_nvml, job_env: Path) -> None:
    """No launcher to clean up after it: the exception's frames keep the loader alive through
    the interpreter's exit, so the package restores the limits at exit."""
    proc = run([python(), WORKER, "--out", job_env.parent / "out", "--epochs", "3",
                "--raise-rank", "0", "--raise-at", "12"])
    assert proc.returncode == 1 and "fails at step 12 on purpose" in proc.stderr, explain(proc)
    assert min(s["limit_mw"] for s in fake_nvml.sets()) < 280_000
    assert fake_nvml.limits_w() == [280, 280], explain(proc)
    assert not (job_env / "power-limits.journal").exists()


@pytest.mark.parametrize("killed_rank", [0, 1])
def test_limits_are_restored_when_a_rank_is_killed(fake_nvml, job_env: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   killed_rank: int) -> None:
    monkeypatch.setenv("ZEUS_PYTHON", python())
    out = job_env.parent / "out"
    launcher = subprocess.Popen(
        [str(zeus_cli()), "run", "--nproc-per-node", "2", str(WORKER), "--out", str(out),
         "--dp", "--epochs", "3", "--hang-rank", str(killed_rank), "--hang-at", "12"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(out / f"hang{killed_rank}")
        assert min(s["limit_mw"] for s in fake_nvml.sets()) < 280_000
        os.kill(int((out / f"hang{killed_rank}").read_text()), signal.SIGKILL)
        _, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode != 0
    assert fake_nvml.limits_w() == [280, 280], err[-4000:]
    assert not (job_env / "power-limits.journal").exists(), err[-4000:]
    # The next job on the node starts from the original limit.
    proc = run([python(), WORKER, "--out", job_env.parent / "next", "--epochs", "1"])
    assert proc.returncode == 0, explain(proc)
    assert fake_nvml.limits_w() == [280, 280]


# ---- ENOT's helpers ---------------------------------------------------------------------------

HELPERS = r"""
import json, sys, torch
from zeus_cpp import distributed as zd
info = zd.init_torch()
assert zd.init_torch() is info  # idempotent
torch.manual_seed(100 + info.rank)  # every rank starts different
a = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
b = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
a[1].num_batches_tracked += info.rank + 5
before = [p.detach().clone() for p in b.parameters()]
zd.sync_model(a)
zd.sync_model(b, reduce_parameters=True, reduce_buffers=True)
out = dict(rank=info.rank, world=info.world_size, backend=info.backend, master=zd.is_master(),
           local_master=zd.is_local_master(), device=str(info.device),
           a=[p.tolist() for p in a.state_dict().values()],
           b=[p.tolist() for p in b.parameters()], before=[p.tolist() for p in before],
           tracked=int(b[1].num_batches_tracked))
open(sys.argv[1] + f"/helpers{info.rank}.json", "w").write(json.dumps(out))
"""


def test_init_torch_sync_model_and_the_masters(job_env: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "helpers.py"
    script.write_text(HELPERS)
    monkeypatch.setenv("ZEUS_PYTHON", python())
    proc = run([zeus_cli(), "run", "--nproc-per-node", "2", script, tmp_path])
    assert proc.returncode == 0, explain(proc)
    r = [json.loads((tmp_path / f"helpers{i}.json").read_text()) for i in (0, 1)]
    assert [x["master"] for x in r] == [True, False]
    assert [x["local_master"] for x in r] == [True, False]
    assert {x["backend"] for x in r} == {"gloo"} and {x["device"] for x in r} == {"cpu"}
    assert r[0]["a"] == r[1]["a"]  # broadcast from the master, buffers included
    assert r[0]["b"] == r[1]["b"]  # averaged
    import torch

    for p0, p1, got in zip(r[0]["before"], r[1]["before"], r[0]["b"]):
        assert torch.allclose((torch.tensor(p0) + torch.tensor(p1)) / 2, torch.tensor(got))
    assert r[0]["before"] != r[1]["before"]


def test_init_torch_in_a_single_process(job_env: Path, tmp_path: Path) -> None:
    script = tmp_path / "helpers.py"
    script.write_text(HELPERS)
    proc = run([python(), script, tmp_path])
    assert proc.returncode == 0, explain(proc)
    r = json.loads((tmp_path / "helpers0.json").read_text())
    assert r["world"] == 1 and r["master"] and r["local_master"]
