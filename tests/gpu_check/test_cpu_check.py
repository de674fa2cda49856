"""scripts/gpu-check.sh --cpu-only, run whole: what the GPU machine would return, a step that
hangs, and a file missing from the carry. Minutes each (the cuda build against the GPU
machine's torch, in .venv-gpu-check); `make test-gpu-check` runs them (ZEUS_GPU_CHECK_RUN=1).
"""
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import ROOT
from gpu_check import deliver, isolation

pytestmark = pytest.mark.skipif(os.environ.get("ZEUS_GPU_CHECK_RUN") != "1",
                                reason="runs the whole check (minutes): make test-gpu-check")
CHECK = ROOT / "scripts" / "gpu-check.sh"
BUILD = ROOT / "build" / "gpu-check"


def run_check(*args, env=None, timeout=4800):
    p = subprocess.run([str(CHECK), "--cpu-only", *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=timeout)
    print(p.stdout[-6000:], p.stderr[-3000:])
    return p


def report(out: Path) -> dict:
    return json.loads((out / deliver.kReportJson).read_text())


@pytest.fixture(scope="module")
def full_run():
    # A fixed place, so that `make test-gpu-check` can print the report afterwards.
    out = BUILD / "ci-out"
    shutil.rmtree(out, ignore_errors=True)
    return run_check("--out", out), out


def test_the_dry_run_returns_the_report_and_the_log_archive_within_the_return_rules(full_run):
    p, out = full_run
    assert p.returncode == 0, "the CPU-only check failed"
    assert deliver.violations(out) == []
    assert sorted(os.listdir(out)) == sorted(deliver.kDelivered)
    r = report(out)
    assert r["passed"] and not r["failed_steps"] and not r["skipped_steps"]
    statuses = {s["name"]: s["status"] for s in r["steps"]}
    assert set(statuses.values()) == {"passed"}, statuses
    assert r["zeus_epoch_1"]["measure_only"] and r["zeus_epoch_1"]["epochs_run"] == 4
    assert r["window"]["window_s"] > 0 and r["energy_counter_vs_integral"]["samples"] > 1
    assert r["limits"]["fake_nvml_history"] == []
    assert r["step_ms"]["runs"] == [2, 2] and r["python_epoch"]["measure_only"]
    assert r["preflight"]["facts"]["torch"]["version"].startswith("2.11.0")
    with tarfile.open(out / deliver.kArchive) as tar:
        names = tar.getnames()
    for member in ("logs/build.log", "logs/gpu_test.log", "zeus_train_1.txt", "steps.json",
                   "zeus_log_1/gpucheck+bs64.train.json", "preflight.json"):
        assert f"gpu-check/{member}" in names
    if not isolation.available():
        assert "isolated: " in r["check"]["notes"][0]


def test_a_hanging_step_times_out_and_the_rest_still_runs_and_reports(full_run, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = run_check("--out", out, "--step-timeout", "gpu_test=5",
                  "--steps", "preflight,configure,build,gpu_test,zeus_train_1,torch_train_1,limits_after",
                  env={"ZEUS_GPU_CHECK_FAULTS": "gpu_test=hang"})
    assert p.returncode == 1
    r = report(out)
    steps = {s["name"]: s for s in r["steps"]}
    assert steps["gpu_test"]["status"] == "timed_out" and steps["gpu_test"]["rc"] == 124
    assert steps["gpu_test"]["limit_s"] == 5
    for name in ("preflight", "configure", "build", "zeus_train_1", "torch_train_1", "limits_after"):
        assert steps[name]["status"] == "passed", name
    assert r["failed_steps"] == ["gpu_test"] and r["zeus_epoch_1"] is not None
    assert "gpu_test" in r["missing"] and "timed out" in r["missing"]["gpu_test"]
    assert "gpu_test" in (out / deliver.kReportText).read_text()
    assert deliver.violations(out) == []
    pids = (BUILD / "work" / "logs" / "gpu_test.hang-pids").read_text().split()
    for pid in map(int, pids):
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", f"pid {pid} survived"
    assert time.monotonic() - t0 < 1800


@pytest.mark.skipif(bool(isolation.available()), reason=f"no isolation: {isolation.available()}")
def test_a_header_missing_from_the_carry_fails_the_check_although_the_system_has_it(full_run, tmp_path):
    carry = ROOT / ".gpu-carry"
    triplet = next((carry / "sysroot" / "usr" / "lib").glob("*-linux-gnu")).name
    system_copy = Path("/usr/include") / triplet / "jconfig.h"
    assert system_copy.exists(), "the test needs the system's jconfig.h (libjpeg62-turbo-dev)"
    partial = tmp_path / "carry"
    shutil.copytree(carry, partial, symlinks=True)
    (partial / "sysroot" / "usr" / "include" / triplet / "jconfig.h").unlink()
    out = tmp_path / "out"
    p = run_check("--out", out, "--carry", partial, "--build-dir", tmp_path / "build",
                  "--steps", "preflight,configure,build",
                  # The one object that includes jpeglib.h (so jconfig.h), not its library, which
                  # would build every module it links first: a fresh tree, minutes without ccache.
                  "--targets", "src/CMakeFiles/zeus_data.dir/zeus/data/image_codec.cpp.o")
    assert p.returncode == 1
    r = report(out)
    steps = {s["name"]: s["status"] for s in r["steps"]}
    assert steps["preflight"] == "passed" and steps["build"] == "failed", steps
    with tarfile.open(out / deliver.kArchive) as tar:
        log = tar.extractfile("gpu-check/logs/build.log").read().decode(errors="replace")
    assert "jconfig.h: No such file or directory" in log
