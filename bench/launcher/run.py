#!/usr/bin/env python3
"""bench/launcher: `zeus run` against torchrun (PyPI's current PyTorch and Debian's 1.13), side by
side in one run, 2 workers on this machine:
  join:    time from starting the launcher until every worker has joined a Gloo process group and
           finished one all-reduce (the workers record the moment; C++ and Python workers);
  start:   time from starting the launcher until every (trivial, shell) worker is running: the
           launcher's own cost, without the ~1 s a libtorch worker needs to load its libraries;
  failure: time from a worker's failure (it records the moment, then exits 1 while the other
           worker keeps running) until the launcher has exited;
  killed:  time from the launcher's SIGKILL, while rank 0 holds two GPUs (the fake NVML) at
           150 W below their 280 W, until both are back at 280 W (not within 30 s: "never").
Each measure runs `--runs` times per launcher, interleaved; prints medians and ratios as
Markdown.

Usage: bench/launcher/run.py [--runs 5]
"""
import argparse
import glob
import json
import os
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from bench_util import free_port  # noqa: E402


def launchers(args):
    """name -> (function(port, program_args, python) -> argv, python for .py workers)."""
    zeus = args.zeus
    venv_py = args.pypi_python
    deb_py = args.debian_python
    torchrun_pypi = os.path.join(os.path.dirname(venv_py), "torchrun")
    return {
        "zeus run": lambda port, prog, py: [zeus, "run", "--nproc-per-node", "2",
                                            "--master-port", str(port)] + prog,
        "torchrun (PyPI)": lambda port, prog, py: [torchrun_pypi, "--nproc_per_node", "2",
                                                   "--master_port", str(port)]
        + (["--no_python"] if not prog[0].endswith(".py") else []) + prog,
        # torchrun 1.13 on Python 3.11 needs per-rank --redirects/--tee maps (see bench/README.md)
        "torchrun (Debian 1.13)": lambda port, prog, py: [deb_py, "-m", "torch.distributed.run",
                                                          "--nproc_per_node", "2", "--master_port",
                                                          str(port), "--redirects", "7:1",
                                                          "--tee", "7:1"]
        + (["--no_python"] if not prog[0].endswith(".py") else []) + prog,
    }


def one_run(argv, env, probe_dir, mode):
    for f in glob.glob(os.path.join(probe_dir, "*")):
        if os.path.isfile(f):
            os.remove(f)
    start = time.time()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    end = time.time()
    stamps = {}
    for f in glob.glob(os.path.join(probe_dir, f"{mode}.*")):
        with open(f) as fh:
            stamps[f.rsplit(".", 1)[1]] = float(fh.read())
    if mode in ("join", "start"):
        if proc.returncode != 0 or len(stamps) != 2:
            sys.exit(f"{' '.join(argv)}: exit {proc.returncode}, {len(stamps)} of 2 workers "
                     f"joined\n{proc.stderr[-2000:]}")
        return max(stamps.values()) - start, end - start
    if proc.returncode == 0 or "1" not in stamps:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}, failure not recorded\n"
                 f"{proc.stderr[-2000:]}")
    return end - stamps["1"], proc.returncode


def marked(mark):
    """Pids of the processes whose environment holds BENCH_MARK=<mark>."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"BENCH_MARK={mark}".encode() + b"\0" in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def fake_state(path, limit_mw):
    gpus = [{"name": "NVIDIA A40", "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
             "power_mw": 150000, "energy_mj": 0, "limit_mw": limit_mw, "min_limit_mw": 100000,
             "max_limit_mw": 300000, "default_limit_mw": 300000, "instant_power": True,
             "energy_counter": True} for i in range(2)]
    with open(path, "w") as f:
        json.dump({"gpus": gpus, "faults": {}, "permissive": True, "limit_history": []}, f)


def killed_run(argv, env, probe_dir, fake_lib, mark):
    """Seconds from the launcher's SIGKILL until the fake GPUs are back at 280 W, or None."""
    for f in glob.glob(os.path.join(probe_dir, "*")):
        if os.path.isfile(f):
            os.remove(f)
    state = os.path.join(probe_dir, "nvml.json")
    log = os.path.join(probe_dir, "log")
    os.makedirs(log, exist_ok=True)
    fake_state(state, 280000)
    env = dict(env, ZEUS_NVML_LIBRARY=fake_lib, FAKE_NVML_STATE=state, ZEUS_LOG_DIR=log,
               BENCH_MARK=mark)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(glob.glob(os.path.join(probe_dir, "limits.*"))) < 2:
        if time.time() > deadline or proc.poll() is not None:
            sys.exit(f"{' '.join(argv)}: the workers never lowered the limits")
        time.sleep(0.005)
    killed = time.time()
    proc.kill()
    proc.wait()
    took = None
    while time.time() < killed + 30:
        try:
            with open(state) as f:
                limits = [g["limit_mw"] for g in json.load(f)["gpus"]]
        except (OSError, ValueError):
            limits = []
        if limits and all(mw == 280000 for mw in limits):
            took = time.time() - killed
            break
        time.sleep(0.005)
    for pid in marked(mark):  # torchrun leaves its workers running: stop them for the next run
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--zeus", default=os.path.join(ROOT, "build/release/apps/zeus/zeus"))
    parser.add_argument("--probe", default=os.path.join(ROOT, "build/release/bench/zeus_launch_probe"))
    parser.add_argument("--pypi-python", default=os.path.join(ROOT, "bench/.venv/bin/python"))
    parser.add_argument("--debian-python", default="/usr/bin/python3")
    parser.add_argument("--fake-nvml",
                        default=os.path.join(ROOT, "build/release/tests/fakes/full/libnvidia-ml.so.1"))
    args = parser.parse_args()
    for path in (args.zeus, args.probe, args.pypi_python, args.debian_python, args.fake_nvml):
        if not os.path.exists(path):
            sys.exit(f"{path} not found: build the release preset with -DZEUS_BUILD_BENCH=ON and "
                     "create bench/.venv (see bench/README.md)")

    probe_dir = tempfile.mkdtemp(prefix="zeus-launch-bench-")
    py_probe = os.path.join(HERE, "probe.py")
    runs = launchers(args)
    # (measure, worker, launcher) -> list of seconds
    results = {}
    exit_codes = {}
    for i in range(args.runs):
        for name, make in runs.items():
            # The Python worker runs on the interpreter that matches the launcher's PyTorch:
            # PyPI's torchrun and zeus run with the venv's python, Debian's with /usr/bin/python3.
            pairs = [("C++ worker", [args.probe, "join"], None)]
            if name != "torchrun (Debian 1.13)":
                pairs.append(("Python worker, PyPI torch", [py_probe], args.pypi_python))
            if name != "torchrun (PyPI)":
                pairs.append(("Python worker, Debian torch 1.13", [py_probe], args.debian_python))
            for worker, prog, py in pairs:
                env = dict(os.environ, PROBE_DIR=probe_dir, OMP_NUM_THREADS="1")
                if py:
                    env["ZEUS_PYTHON"] = py
                    if name == "torchrun (PyPI)":
                        env["PATH"] = os.path.dirname(py) + ":" + env["PATH"]
                joined, _ = one_run(make(free_port(), prog, py), env, probe_dir, "join")
                results.setdefault(("join", worker, name), []).append(joined)
            env = dict(os.environ, PROBE_DIR=probe_dir, OMP_NUM_THREADS="1")
            started, _ = one_run(make(free_port(), [os.path.join(HERE, "start_probe.sh")], None),
                                 env, probe_dir, "start")
            results.setdefault(("start", "shell worker", name), []).append(started)
            took, code = one_run(make(free_port(), [args.probe, "fail"], None), env, probe_dir,
                                 "fail")
            results.setdefault(("failure", "C++ worker", name), []).append(took)
            exit_codes[name] = code
            restored = killed_run(make(free_port(), [args.probe, "limits"], None), env,
                                  probe_dir, args.fake_nvml, f"{os.getpid()}-{i}-{len(results)}")
            results.setdefault(("killed", "C++ worker", name), []).append(restored)
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
    shutil.rmtree(probe_dir, ignore_errors=True)

    print(f"\n2 workers, {args.runs} runs each, median seconds, {time.strftime('%Y-%m-%d')}\n")
    print("| measure | worker | launcher | median | all runs | launcher / zeus run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (measure, worker, name), values in results.items():
        if any(v is None for v in values):
            runs_text = ", ".join("never" if v is None else f"{v:.3f}" for v in values)
            print(f"| {measure} | {worker} | {name} | never (> 30 s) | {runs_text} | - |")
            continue
        base = statistics.median(results[(measure, worker, "zeus run")])
        med = statistics.median(values)
        runs_text = ", ".join(f"{v:.3f}" for v in values)
        print(f"| {measure} | {worker} | {name} | {med:.3f} | {runs_text} | {med / base:.1f}x |")
    print("\nexit codes after the failure (worker exited 1): " +
          ", ".join(f"{k}: {v}" for k, v in exit_codes.items()))


if __name__ == "__main__":
    main()
