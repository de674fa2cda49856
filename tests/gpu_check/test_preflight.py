"""The preflight: what it reads from the project and torch's metadata, and that a missing GPU is
a failure that says what to do, never a quiet switch to CPU mode."""
import json
import os
import stat
import subprocess
import sys

from conftest import ROOT
from gpu_check import preflight


def test_the_floors_come_from_pyproject():
    floors = preflight.build_requires(ROOT / "python" / "pyproject.toml")
    assert floors["pybind11"] >= (2, 11) and floors["scikit-build-core"] >= (0, 9)
    text = (ROOT / "python" / "pyproject.toml").read_text()
    assert f'minimum-version = "{preflight.dotted(floors["scikit-build-core"])}"' in text


def test_nccl_pin_and_versions():
    reqs = ["filelock", 'nvidia-nccl-cu13==2.28.9; platform_system == "Linux"']
    assert preflight.nccl_pin(reqs) == ("nvidia-nccl-cu13", "2.28.9")
    assert preflight.nccl_pin(["filelock"]) is None
    assert preflight.version_tuple("g++ (Debian 12.2.0-14) 12.2.0") == (12, 2, 0)
    assert preflight.version_tuple("3.25.1") == (3, 25, 1) > (3, 25)


def test_gpu_mode_without_a_gpu_fails_and_says_to_pass_cpu_only(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "pf.json"
    p = subprocess.run([sys.executable, "-m", "gpu_check.preflight", "--mode", "gpu", "--root", str(ROOT),
                        "--carry", str(tmp_path / "no-carry"), "--build", str(tmp_path / "b"),
                        "--json", str(out)], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
                            "PYTHONPATH": str(ROOT / "scripts")})
    assert p.returncode == 1, p.stdout + p.stderr
    missing = "\n".join(json.loads(out.read_text())["missing"])
    assert "nvidia-smi -L failed (exit 9" in missing and "--cpu-only" in missing
    assert "carry" in missing and "gpu-carry.sh" in missing
