"""The wheels' checks on a machine that has nothing: run by tests/wheels/run.sh inside a bare
Debian root (debootstrap minbase: python3 and python3-venv, no compiler, no -dev package), as
root, with the root's own python3 (3.9 on bullseye: this file keeps to 3.9).

  python3 in_root.py --mode basic|train --version V --arch x86_64 [--expect-row ROW]

What run.sh puts in /opt/zeus-test: wheels/ (the zeus-cpp wheels), zeus016/ (upstream Zeus 0.16
and its client's dependencies, for --mode basic), torch/ (.venv-torch's site-packages, read-only,
for --mode train), fake/libnvidia-ml.so.1 (the fake NVML, by the wheel's toolchain),
upstream_client.py and readme_train.py. Every check says what it ran and what it saw; the first failure ends the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

T = Path("/opt/zeus-test")
VENV = Path("/opt/zeus-venv")
ZEUS = VENV / "bin" / "zeus"
ZEUSD = VENV / "bin" / "zeusd"
PY = VENV / "bin" / "python"


class CheckFailed(Exception):
    pass


def say(text: str) -> None:
    print(f"in_root: {text}", flush=True)


def run(cmd: list, timeout: float = 120, env: dict | None = None,
        expect_ok: bool = True) -> subprocess.CompletedProcess:
    say("$ " + " ".join(str(c) for c in cmd))
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    if expect_ok and proc.returncode != 0:
        raise CheckFailed(f"{cmd[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                          f"{proc.stderr[-3000:]}")
    return proc


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)
    say(f"ok: {what}")


def make_venv(path: Path, find_links: list, packages: list, no_deps: bool = False) -> None:
    run([sys.executable, "-m", "venv", path], timeout=300)
    cmd = [path / "bin" / "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check"]
    for d in find_links:
        cmd += ["--find-links", d]
    if no_deps:
        cmd.append("--no-deps")
    run(cmd + packages, timeout=900)


def fake_nvml_env(state: Path, limit_mw: int = 280_000) -> dict:
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({
        "gpus": [{"name": "NVIDIA A40", "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
                  "power_mw": 150_000, "energy_mj": 1_000_000, "limit_mw": limit_mw,
                  "min_limit_mw": 100_000, "max_limit_mw": 300_000,
                  "default_limit_mw": 300_000, "instant_power": True, "energy_counter": True,
                  "mig_uuids": [], "pci_bus": i + 1} for i in range(2)],
        "faults": {}, "permissive": False, "limit_history": []}))
    return {"ZEUS_NVML_LIBRARY": str(T / "fake" / "libnvidia-ml.so.1"),
            "FAKE_NVML_STATE": str(state)}


def gpu_limit_mw(state: Path, gpu: int) -> int:
    return int(json.loads(state.read_text())["gpus"][gpu]["limit_mw"])


def check_programs(version: str, arch: str, expect_row: str) -> None:
    out = run([ZEUS, "--version"]).stdout
    lines = out.splitlines()
    check(lines[0] == f"zeus {version}", f"zeus --version says 'zeus {version}' ({lines[0]!r})")
    check(f"build: pip wheel (manylinux_2_28 {arch})" in out, "zeus --version names the wheel")
    check(any(l.startswith("left out: ") and "kubelet" in l and "postgresql" in l for l in lines),
          "zeus --version lists what the wheel leaves out")
    out = run([ZEUSD, "--version"]).stdout
    check(out.splitlines()[0] == f"zeusd {version}", f"zeusd --version says 'zeusd {version}'")
    got = run([PY, "-c", "import zeus_cpp; print(zeus_cpp.__version__)"]).stdout.strip()
    check(got == version, f"zeus_cpp.__version__ is {version} ({got})")
    check("monitor" in run([ZEUS, "--help"]).stdout, "zeus --help works from the venv's bin/")
    # A feature the wheel left out fails with one line saying which build has it.
    proc = run([ZEUS, "bso-server", "--database", "postgresql://u@127.0.0.1:1/db"],
               timeout=30, expect_ok=False)
    err = proc.stderr.strip()
    check(proc.returncode != 0 and len(err.splitlines()) == 1 and "pip wheel" in err and
          "postgresql" in err, f"a left-out feature fails in one line ({err!r})")
    out = run([ZEUS, "monitor", "--device", "sim:v100", "--duration", "2s"], timeout=60)
    text = out.stdout + out.stderr
    check(" J" in text or "energy" in text.lower(), f"zeus monitor --device sim:v100 for 2 s "
          f"reports energy ({text.strip()[-200:]!r})")
    out = run([ZEUS, "simulate", "--gpu", "v100", "--workload", "cifar100"], timeout=300).stdout
    rows = [" ".join(l.split()) for l in out.splitlines() if l.startswith("v100 ")]
    check(rows == [" ".join(expect_row.split())],
          f"zeus simulate gives the paper's v100/cifar100 row of the README ({rows})")


def check_zeusd_with_upstream_client() -> None:
    upstream = Path("/opt/zeus016-venv")
    make_venv(upstream, [T / "zeus016"], ["-r", T / "zeus016-py39.txt"], no_deps=True)
    state = Path("/var/lib/zeus-test/nvml.json")
    env = fake_nvml_env(state)
    sock = Path("/run/zeusd-test.sock")
    if sock.exists():
        sock.unlink()
    zeusd = subprocess.Popen([str(ZEUSD), "serve", "--socket-path", str(sock),
                              "--socket-permissions", "666", "--state-dir", "/var/lib/zeusd-test"],
                             env=dict(os.environ, **env), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            if zeusd.poll() is not None or time.monotonic() > deadline:
                raise CheckFailed(f"zeusd did not serve {sock}:\n{zeusd.stdout.read()[-3000:]}")
            time.sleep(0.1)
        say(f"zeusd serves {sock}")
        client = subprocess.Popen(
            [str(upstream / "bin" / "python"), str(T / "upstream_client.py"), "0", "200000"],
            env=dict(os.environ, ZEUSD_SOCK_PATH=str(sock)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True)
        seen = None
        deadline = time.monotonic() + 60
        for line in client.stdout:
            if line.startswith("{"):
                seen = json.loads(line)
            if line.strip() == "ready" or time.monotonic() > deadline:
                break
        if seen is None:
            client.kill()
            raise CheckFailed(f"upstream's ZeusdClient failed:\n{client.stderr.read()[-3000:]}")
        check(seen["zeus_version"] == "0.16.0", "upstream Zeus 0.16.0's ZeusdClient ran")
        check(seen["after"] == 200_000 and gpu_limit_mw(state, 0) == 200_000,
              f"it set GPU 0 to 200 W through zeusd and read it back ({seen['after']} mW)")
        check(seen["out_of_range"].startswith("refused"), "zeusd refused an out-of-range limit")
        client.send_signal(signal.SIGKILL)
        client.wait()
        deadline = time.monotonic() + 5
        while gpu_limit_mw(state, 0) != 280_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        check(gpu_limit_mw(state, 0) == 280_000,
              "zeusd put GPU 0 back to 280 W when the client was killed")
    finally:
        zeusd.send_signal(signal.SIGTERM)
        try:
            zeusd.wait(timeout=20)
        except subprocess.TimeoutExpired:
            zeusd.kill()


def check_monitor_window() -> None:
    env = fake_nvml_env(Path("/var/lib/zeus-test/monitor.json"))
    code = ("import time, json\n"
            "from zeus_cpp.monitor import ZeusMonitor\n"
            "m = ZeusMonitor(gpu_indices=[0])\n"
            "m.begin_window('w')\n"
            "time.sleep(0.5)\n"
            "r = m.end_window('w')\n"
            "print(json.dumps({'time': r.time, 'gpu_energy': r.gpu_energy}))\n")
    out = run([PY, "-c", code], env=dict(env, ZEUS_DEVICE="nvml"), timeout=60).stdout
    got = json.loads(out.strip().splitlines()[-1])
    energy = got["gpu_energy"].get("0", got["gpu_energy"].get(0))
    check(got["time"] >= 0.4 and energy is not None and energy > 0,
          f"ZeusMonitor measured a window on the fake NVML ({got})")


def check_train(version: str) -> None:
    # torch/ is .venv-torch's site-packages (PyTorch's PyPI wheel, installed once on the host),
    # mounted read-only: a .pth file puts it on the venv's path, after the venv's own packages.
    purelib = run([PY, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout
    site = Path(purelib.strip())
    (site / "zeus-test-torch.pth").write_text(f"{T / 'torch'}\n")
    torch_version = run([PY, "-c", "import torch; print(torch.__version__)"], timeout=300).stdout
    say(f"torch {torch_version.strip()} from PyTorch's wheel, beside zeus-cpp in the venv")
    log_dir = Path("/tmp/zeus-readme-train")
    proc = run([ZEUS, "run", "--nproc-per-node", "2", "--standalone", "--omp-num-threads", "1",
                T / "readme_train.py", "--log-dir", log_dir],
               # The README's "ZEUS_TARGET_METRIC, ... as in Zeus": the target the loop reports
               # against (high: the job runs its epochs).
               env={"ZEUS_DEVICE": "sim:v100", "ZEUS_PYTHON": str(PY), "ZEUS_TARGET_METRIC": "0.99",
                    "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"},
               timeout=1200)
    # zeus run prefixes each worker's lines with "[RANK] ", as torchrun --tee does.
    ranks = sorted(l for l in proc.stdout.splitlines() if "readme_train: rank" in l)
    check(len(ranks) == 2 and all("done" in r for r in ranks),
          f"the README's example trained on 2 ranks under zeus run ({ranks})")
    results = sorted(log_dir.glob("*.train.json"))
    check(len(results) == 1, f"the job wrote its train result ({[p.name for p in results]})")
    out = run([ZEUS, "report", log_dir], timeout=120).stdout
    check(len(out) > 0, "zeus report reads the Python job's log dir")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["basic", "train"], required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--arch", default="x86_64")
    p.add_argument("--expect-row", default="")
    args = p.parse_args()
    say(f"Python {sys.version.split()[0]}, mode {args.mode}")
    try:
        if not ZEUS.exists():
            make_venv(VENV, [T / "wheels"], ["zeus-cpp"])
        if args.mode == "basic":
            check_programs(args.version, args.arch, args.expect_row)
            check_zeusd_with_upstream_client()
            check_monitor_window()
        else:
            check_train(args.version)
    except (CheckFailed, subprocess.TimeoutExpired) as e:
        print(f"in_root: FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
