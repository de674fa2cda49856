"""zeus_cpp.optimizer.batch_size: upstream Zeus 0.16's BatchSizeOptimizer client API over
zeus_cpp's monitor, against a real `zeus bso-server` (SQLite in the test's directory), on the
fake NVML. Each recurrence is a child process, as a recurring job's runs are."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import explain, python, run, zeus_cli
from zeus_cpp.optimizer.batch_size import JobSpec

RECURRENCE = r"""
import json, sys
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.batch_size import BatchSizeOptimizer, JobSpec, ZeusBSOTrainFailError

url, mode = sys.argv[1], sys.argv[2]
# beta_knob None: no early stop on cost (these epochs last microseconds: their costs are noise).
spec = JobSpec(job_id="cpp-1", job_id_prefix="cpp", batch_sizes=[16, 32, 64],
               default_batch_size=32, max_epochs=3, target_metric=0.5, beta_knob=None)
bso = BatchSizeOptimizer(ZeusMonitor(gpu_indices=[0, 1]), url, spec)
bs = bso.get_batch_size()
out = {"batch_size": bs, "trial": bso.trial_number, "gpus": bso.job_spec.number_of_gpus,
       "max_power": bso.job_spec.max_power, "model": bso.job_spec.gpu_model}
if mode == "exit":
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(0)
bso.on_train_begin()
epochs = 0
try:
    while not bso.training_finished:
        epochs += 1
        # 16 never reaches the target: it runs to max_epochs and fails.
        bso.on_evaluate(0.1 if bs == 16 else 0.6)
    out["ended"] = "converged"
except ZeusBSOTrainFailError as e:
    out["ended"] = e.message
out.update(epochs=epochs, energy=bso.consumed_energy, time=bso.running_time)
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture
def bso_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`zeus bso-server` on a free port with a SQLite file; yields its URL and the file."""
    db = tmp_path / "bso.db"
    server = subprocess.Popen([str(zeus_cli()), "bso-server", "--port", "0", "--database",
                               f"sqlite:///{db}"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert "http://127.0.0.1:" in line, line
        url = line.split("on ", 1)[1].split(" ", 1)[0]
        yield url, db
    finally:
        server.terminate()
        server.wait(timeout=30)


def recurrence(tmp_path: Path, url: str, mode: str = "train") -> dict:
    script = tmp_path / "recurrence.py"
    script.write_text(RECURRENCE)
    proc = run([python(), script, url, mode])
    assert proc.returncode == 0, explain(proc)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, explain(proc)
    return json.loads(lines[-1][len("RESULT "):])


def test_recurrences_get_batch_sizes_and_report_measured_energy(
        fake_nvml, bso_server, tmp_path: Path) -> None:
    url, db = bso_server
    runs = [recurrence(tmp_path, url) for _ in range(3)]
    assert [r["batch_size"] for r in runs] == [32, 16, 64], "the default, down, then up"
    assert [r["trial"] for r in runs] == [1, 2, 3]
    assert runs[0]["gpus"] == 2 and runs[0]["model"] == "NVIDIA A40"
    assert runs[0]["max_power"] == 600, "300 W max limit x 2 GPUs, as upstream computes it"
    assert runs[0]["ended"] == "converged" and runs[0]["epochs"] == 1
    assert runs[1]["epochs"] == 3
    assert "Train failed" in runs[1]["ended"] and "max_epoch(3)" in runs[1]["ended"]
    for r in runs:
        # The fake's counters grow at 150 W + 160 W: the windows' energy is theirs.
        assert r["energy"] == pytest.approx(310 * r["time"], rel=0.25, abs=0.5), r

    # A run that exits before reporting ends its trial (atexit), so it is not waited for.
    exited = recurrence(tmp_path, url, mode="exit")
    assert exited["trial"] == 4
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            'SELECT trial_number, status, converged FROM "Trial" WHERE job_id = ? '
            "ORDER BY trial_number", ("cpp-1",)).fetchall()
    assert rows == [(1, "Succeeded", 1), (2, "Succeeded", 0), (3, "Succeeded", 1),
                    (4, "Failed", None)]


ERRORS = r"""
import json, sys
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.batch_size import (
    BatchSizeOptimizer, JobSpec, ZeusBSOBadOperationError, ZeusBSOOperationOrderError,
    ZeusBSORuntimError)

url = sys.argv[1]
monitor = ZeusMonitor(gpu_indices=[0])
spec = JobSpec(job_id="err-1", job_id_prefix="err", batch_sizes=[8, 16], default_batch_size=8)
worker = BatchSizeOptimizer(monitor, url, spec, rank=1)
out = {}
for name, call in [("rank1", worker.get_batch_size), ("order", lambda: worker.on_evaluate(0.5))]:
    try:
        call()
    except (ZeusBSOBadOperationError, ZeusBSOOperationOrderError) as e:
        out[name] = type(e).__name__
other = JobSpec(job_id="err-1", job_id_prefix="err", batch_sizes=[8, 32], default_batch_size=8)
for name, target, s in [("mismatch", url, other), ("unreachable", "http://127.0.0.1:9", spec)]:
    try:
        BatchSizeOptimizer(monitor, target, s)
    except ZeusBSORuntimError as e:
        out[name] = e.message
print("RESULT " + json.dumps(out), flush=True)
"""


def test_client_errors_say_what_went_wrong(fake_nvml, bso_server, tmp_path: Path) -> None:
    url, _ = bso_server
    script = tmp_path / "errors.py"
    script.write_text(ERRORS)
    proc = run([python(), script, url])
    assert proc.returncode == 0, explain(proc)
    out = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert out["rank1"] == "ZeusBSOBadOperationError"
    assert out["order"] == "ZeusBSOOperationOrderError"
    assert "status code 409" in out["mismatch"] and "JobSpec doesn't match" in out["mismatch"]
    assert "cannot reach the batch-size server at http://127.0.0.1:9" in out["unreachable"]


def test_a_job_asks_for_the_lean_policy(fake_nvml, bso_server, tmp_path: Path) -> None:
    url, _ = bso_server
    script = tmp_path / "lean.py"
    script.write_text(r"""
import json, sys
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.batch_size import BatchSizeOptimizer, JobSpec
spec = JobSpec(job_id="lean-1", job_id_prefix="lean", batch_sizes=[8, 16],
               default_batch_size=16, policy="lean", lean="gamma=2")
bso = BatchSizeOptimizer(ZeusMonitor(gpu_indices=[0]), sys.argv[1], spec)
print("RESULT " + json.dumps({"policy": bso.job.policy, "lean": bso.job.lean}), flush=True)
""")
    proc = run([python(), script, url])
    assert proc.returncode == 0, explain(proc)
    out = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert out["policy"] == "lean"
    assert out["lean"].startswith("gamma=2,patience=1")


def test_job_spec_checks_as_upstream() -> None:
    spec = JobSpec(job_id_prefix="img", batch_sizes=[64, 16, 32], default_batch_size=32)
    assert spec.batch_sizes == [16, 32, 64]
    assert json.loads(spec.json())["job_id_prefix"] == "img"
    for bad, field in [({"default_batch_size": 12}, "default_batch_size"),
                       ({"eta_knob": 1.5}, "eta_knob"), ({"beta_knob": 0}, "beta_knob"),
                       ({"job_id": "other-1"}, "job_id"), ({"max_epochs": 0}, "max_epochs")]:
        args = {"job_id_prefix": "img", "batch_sizes": [16, 32], "default_batch_size": 16, **bad}
        with pytest.raises(ValueError, match=field):
            JobSpec(**args)
