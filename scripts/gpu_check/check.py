"""The GPU check's plan: which steps, in which order, with which limits, and what comes back.
scripts/gpu-check.sh runs it; docs/gpu.md says how and where the report goes.

Steps (each its own process group and time limit, steps.Runner; optional ones go first when the
deadline nears):
  preflight      tools, compiler, nvcc, Python.h, pybind11, scikit-build-core, torch and its NCCL,
                 the carry, C/C++ runtime versions, LD_LIBRARY_PATH, the GPU and NVML
  limits_before  the card's power limit, persistence and compute mode, clocks (GPU mode)
  configure, build   the `cuda` configuration against the machine's torch and the carry
  gpu_test       the tests that need a GPU
  zeus_train_1   examples/fashion_mnist on the device in measure-only mode, sampled by zeus
                 monitor and nvidia-smi from the end of its first epoch to its exit
  torch_train_1  the same CNN in the machine's PyTorch (bench/gpu_check/torch_step.py)
  python_build, python_train   zeus_cpp with the machine's pybind11/scikit-build-core, and one
                 epoch of examples/python/train.py (optional)
  torch_test     the libtorch suite (optional)
  zeus_train_2, torch_train_2  a second epoch each, for a median of two (optional)
  limits_after   the card's settings again: unchanged, or the check fails
Then the report (bench/gpu_check/report.py) and the return: gpu-check.json, gpu-check.txt and
gpu-check-logs.tar.gz in OUT, refreshed after every step.

With --cpu-only: the fake NVML and the CPU, a slice of the data, no deadline, and every step in
a mount namespace where the system's copies of the carried files are hidden (isolation.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import deliver, isolation
from .steps import Runner, Step, all_passed, parse_pairs, write_json_atomic

kGpuPython = "/opt/torch/.venv/bin/python3"
kGpuDeadlineS = 480.0  # the device call's limit is 600 s, and the machine's start counts too
kReserveS = 20.0  # the report and the return after the last step
kTargets = ("zeus", "fashion_mnist", "gpu_test", "torch_test", "zeus_test_dist_worker",
            "fake_nvml_full")
kTrainOk = (0, 3)  # 3: the 0.99 target is not reached, as intended (every epoch runs whole)
kMonitoredEpochs = 4  # the window covers epochs 2..4

# A fake NVML GPU like the H200: 700 W limit, drawing 300 W; refusing to set limits.
kFakeNvml = """{"gpus": [{"name": "NVIDIA H200 (fake)", "uuid": "GPU-00000000-0000-0000-0000-0000000000c0",
  "power_mw": 300000, "energy_mj": 0, "limit_mw": 700000, "min_limit_mw": 200000,
  "max_limit_mw": 700000, "default_limit_mw": 700000, "instant_power": true,
  "energy_counter": true}], "faults": {"set_no_permission": true}, "limit_history": []}
"""


class SetupError(Exception):
    """The check cannot start: what and what to do."""


@dataclasses.dataclass
class Context:
    root: Path
    cpu_only: bool
    python: str
    carry: Path
    build: Path  # the check's folder of the build: tree/, work/, python/
    out: Path
    jobs: int
    limit_train: int
    targets: Sequence[str]

    @property
    def mode(self) -> str:
        return "cpu" if self.cpu_only else "gpu"

    @property
    def tree(self) -> Path:
        return self.build / "tree"

    @property
    def work(self) -> Path:
        return self.build / "work"

    @property
    def sys_usr(self) -> Path:
        return self.carry / "sysroot" / "usr"

    @property
    def triplet(self) -> str:
        found = sorted(p.name for p in (self.sys_usr / "lib").glob("*-linux-gnu*"))
        return found[0] if found else "x86_64-linux-gnu"

    @property
    def lib(self) -> Path:
        return self.sys_usr / "lib" / self.triplet

    def limit(self, gpu_s: float, cpu_s: float) -> float:
        return cpu_s if self.cpu_only else gpu_s


def configure_argv(c: Context) -> List[str]:
    s, lib = c.sys_usr, c.lib
    argv = ["cmake", "-S", str(c.root), "-B", str(c.tree), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DZEUS_TORCH_PYTHON={c.python}",
            "-DZEUS_BUILD_BENCH=OFF", f"-DZEUS_USE_CCACHE={'ON' if c.cpu_only else 'OFF'}",
            # The common headers precompiled, as in the cuda preset (a PCH another compiler
            # cannot use is a warning here, and the header is read instead).
            "-DZEUS_PCH=ON",
            # Unity batches, as in the cuda preset: about half the compile time of a build from
            # nothing, which is what this one always is.
            "-DZEUS_UNITY=ON",
            # Warnings stay warnings: the GPU machine's compiler is not this one, and a new
            # warning must not cost the one run. CMake 4 refuses the old policy versions of
            # Debian's CMake configs unless told a minimum.
            "-DZEUS_WERROR=OFF", "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
            # Neither zeusd nor its client: the machine has no libcurl, libmicrohttpd, OpenSSL
            # or toml++ headers, and measure-only mode needs none of them.
            "-DZEUS_BUILD_ZEUSD=OFF", "-DZEUS_WITH_ZEUSD_CLIENT=OFF",
            f"-DCMAKE_PREFIX_PATH={s}", f"-Dfmt_DIR={lib}/cmake/fmt",
            f"-Dspdlog_DIR={lib}/cmake/spdlog", f"-DGTest_DIR={lib}/cmake/GTest",
            f"-DCLI11_DIR={s}/share/cmake/CLI11", f"-Dnlohmann_json_DIR={s}/share/cmake/nlohmann_json",
            f"-DZEUS_GLOO_INCLUDE_DIR={s}/include",
            # Debian keeps some headers (jconfig.h) in the multiarch folder, which its compiler
            # searches by itself; the carry's is searched because it is named here.
            f"-DCMAKE_C_STANDARD_INCLUDE_DIRECTORIES={s}/include/{c.triplet}",
            f"-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES={s}/include/{c.triplet}",
            f"-DZLIB_INCLUDE_DIR={s}/include", f"-DZLIB_LIBRARY={lib}/libz.so",
            f"-DJPEG_INCLUDE_DIR={s}/include", f"-DJPEG_LIBRARY={lib}/libjpeg.so",
            f"-DPNG_PNG_INCLUDE_DIR={s}/include", f"-DPNG_LIBRARY={lib}/libpng16.so"]
    nvcc = "/usr/local/cuda/bin/nvcc"
    if not c.cpu_only and not _which("nvcc") and os.access(nvcc, os.X_OK):
        argv.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    return argv


def _which(name: str) -> Optional[str]:
    import shutil
    return shutil.which(name)


def plan(c: Context) -> List[Step]:
    w, py = c.work, c.python
    scripts = {"PYTHONPATH": str(c.root / "scripts")}
    run_env = {"LD_LIBRARY_PATH": f"{c.lib}:{os.environ['LD_LIBRARY_PATH']}"
               if os.environ.get("LD_LIBRARY_PATH") else str(c.lib)}
    data = str(c.carry / "fashion-mnist")
    train = [str(c.tree / "examples" / "fashion_mnist"), "--target-accuracy", "0.99",
             "--measure-only", "--threads", "1", "--data", data, "--job-id", "gpucheck",
             "--device-type", "cpu" if c.cpu_only else "cuda", "--device", "nvml"]
    peer = [py, str(c.root / "bench" / "gpu_check" / "torch_step.py"), "--data", data,
            "--device", "cpu" if c.cpu_only else "cuda:0"]
    if c.limit_train > 0:
        train += ["--limit-train", str(c.limit_train)]
        peer += ["--limit-train", str(c.limit_train)]

    def monitored() -> List[str]:
        argv = [py, "-m", "gpu_check.monitored", "--train-log", str(w / "zeus_train_1.txt"),
                "--zeus", str(c.tree / "apps" / "zeus" / "zeus"),
                "--monitor-csv", str(w / "monitor.csv"), "--monitor-log", str(w / "monitor.txt"),
                "--ok-codes", ",".join(map(str, kTrainOk))]
        if not c.cpu_only:
            argv += ["--smi-csv", str(w / "nvidia-smi.csv")]
        return argv + ["--"] + train + ["--epochs", str(kMonitoredEpochs),
                                        "--log-dir", str(w / "zeus_log_1")]

    def build_python() -> List[str]:
        argv = [py, "-m", "gpu_check.build_python", "--root", str(c.root),
                "--target", str(c.build / "python-target"), "--build-dir", str(c.build / "python")]
        # The carried packages by their config folders (a CMAKE_PREFIX_PATH would replace the
        # one through which scikit-build-core finds pybind11).
        for define in (f"ZEUS_WERROR=OFF", f"ZEUS_USE_CCACHE={'ON' if c.cpu_only else 'OFF'}",
                       "ZEUS_UNITY=ON",
                       "ZEUS_WITH_ZEUSD_CLIENT=OFF",
                       "CMAKE_POLICY_VERSION_MINIMUM=3.5", f"fmt_DIR={c.lib}/cmake/fmt",
                       f"spdlog_DIR={c.lib}/cmake/spdlog",
                       f"nlohmann_json_DIR={c.sys_usr}/share/cmake/nlohmann_json",
                       f"CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES={c.sys_usr}/include/{c.triplet}"):
            argv += ["--define", define]
        return argv

    py_train = [py, str(c.root / "examples" / "python" / "train.py"), "--zeus", "--epochs", "1",
                "--batch-size", "64", "--target-accuracy", "0.99", "--data", data]
    if c.limit_train > 0:
        py_train += ["--limit-train", str(c.limit_train), "--limit-test", str(c.limit_train)]
    limits_after = ([py, "-m", "gpu_check.limits", "--fake-state", str(w / "fake-nvml.json")]
                    if c.cpu_only else
                    [py, "-m", "gpu_check.limits", "--save", str(w / "limit-after.csv"),
                     "--compare", str(w / "limit-before.csv")])
    L = c.limit
    steps = [
        Step("preflight", "what the check needs, recorded and checked",
             lambda: [py, "-m", "gpu_check.preflight", "--mode", c.mode, "--root", str(c.root),
                      "--carry", str(c.carry), "--build", str(c.build),
                      "--json", str(w / "preflight.json")],
             L(60, 120), 10, env=scripts),
        Step("limits_before", "the card's settings before anything runs",
             lambda: [py, "-m", "gpu_check.limits", "--save", str(w / "limit-before.csv")],
             30, 5, needs=("preflight",), env=scripts),
        Step("configure", "cmake: the cuda configuration against this torch and the carry",
             lambda: configure_argv(c), L(180, 900), 30, needs=("preflight",)),
        Step("build", f"ninja: {' '.join(c.targets)}",
             lambda: ["cmake", "--build", str(c.tree), "-j", str(c.jobs), "--target", *c.targets],
             L(420, 3600), 60, needs=("configure",)),
        Step("gpu_test", "the tests that need a GPU", lambda: [str(c.tree / "tests" / "gpu_test")],
             L(120, 300), 15, needs=("build",), env=run_env),
        Step("zeus_train_1", f"fashion_mnist, {kMonitoredEpochs} epochs, measure-only, sampled "
                             f"from the end of epoch 1", monitored, L(180, 600), 30,
             needs=("build",), env={**run_env, **scripts}),
        Step("torch_train_1", "the same CNN in PyTorch, one epoch",
             lambda: peer + ["--json-out", str(w / "torch_train_1.json")], L(120, 600), 20,
             needs=("preflight",)),
        Step("python_build", "zeus_cpp with this Python's pybind11 and scikit-build-core",
             build_python, L(240, 1200), 40, optional=True, needs=("preflight",), env=scripts),
        Step("python_train", "examples/python/train.py (ZeusDataLoader), one epoch",
             lambda: py_train, L(120, 600), 20, optional=True, needs=("python_build",),
             env={**run_env, "PYTHONPATH": str(c.build / "python-target"),
                  "ZEUS_LOG_DIR": str(w / "py_log"), "ZEUS_JOB_ID": "gpucheck",
                  "ZEUS_DEVICE": "nvml"}),
        Step("torch_test", "the libtorch test suite", lambda: [str(c.tree / "tests" / "torch_test")],
             L(180, 900), 30, optional=True, needs=("build",), env=run_env),
        Step("zeus_train_2", "fashion_mnist again, one epoch",
             lambda: train + ["--epochs", "1", "--log-dir", str(w / "zeus_log_2")],
             L(120, 600), 20, optional=True, needs=("build",), env=run_env, ok_codes=kTrainOk),
        Step("torch_train_2", "PyTorch again, one epoch",
             lambda: peer + ["--json-out", str(w / "torch_train_2.json")], L(120, 600), 20,
             optional=True, needs=("preflight",)),
        Step("limits_after", "the card's settings again: unchanged", lambda: limits_after, 30, 5,
             needs=() if c.cpu_only else ("limits_before",), env=scripts),
    ]
    if c.cpu_only:
        steps = [s for s in steps if s.name != "limits_before"]
    return steps


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/gpu-check.sh", description=__doc__.split("\n")[0])
    p.add_argument("--cpu-only", action="store_true",
                   help="on a machine without a GPU: the fake NVML, the CPU, isolation")
    p.add_argument("--python", help=f"the interpreter with torch to build against (GPU default "
                                    f"{kGpuPython}; CPU default .venv-gpu-check, made if missing)")
    p.add_argument("--out", type=Path, help="where the report and the log archive go "
                                            "(default $OUT, else BUILD/out)")
    p.add_argument("--carry", type=Path, help="the carried prefix (default .gpu-carry)")
    p.add_argument("--build-dir", type=Path, help="the check's folder (default build/gpu-check)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--limit-train", type=int, default=None,
                   help="train on the first N samples (CPU default 2048, GPU all)")
    p.add_argument("--deadline", type=float, default=None,
                   help=f"seconds for the whole check (GPU default {kGpuDeadlineS:.0f}, CPU none)")
    p.add_argument("--steps", help="run only these steps (comma-separated)")
    p.add_argument("--targets", help=f"build targets (default {','.join(kTargets)})")
    p.add_argument("--step-timeout", action="append", default=[], metavar="STEP=SECONDS")
    return p.parse_args(argv)


def make_context(a: argparse.Namespace, root: Path) -> Context:
    python = a.python
    if not python:
        if not a.cpu_only:
            python = kGpuPython
        else:
            python = str(root / ".venv-gpu-check" / "bin" / "python")
            if not os.access(python, os.X_OK):
                print("gpu-check: making .venv-gpu-check (the GPU machine's torch and build tools)")
                if subprocess.run([str(root / "scripts" / "install-torch.sh"), "--gpu-machine"]).returncode:
                    raise SetupError("cannot make .venv-gpu-check (scripts/install-torch.sh "
                                     "--gpu-machine, above); pass --python PY with torch >= 2.11")
    build = (a.build_dir or root / "build" / "gpu-check").resolve()
    out = a.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else build / "out")
    limit_train = a.limit_train if a.limit_train is not None else (2048 if a.cpu_only else 0)
    targets = a.targets.split(",") if a.targets else list(kTargets)
    return Context(root=root, cpu_only=a.cpu_only, python=python,
                   carry=(a.carry or root / ".gpu-carry").resolve(), build=build,
                   out=out.resolve(), jobs=a.jobs, limit_train=limit_train, targets=targets)


def main(argv: Optional[Sequence[str]] = None) -> int:
    root = Path(__file__).resolve().parents[2]
    a = parse_args(argv)
    try:
        limits = parse_pairs(a.step_timeout, "--step-timeout", float)
        faults = parse_pairs([f for f in os.environ.get("ZEUS_GPU_CHECK_FAULTS", "").split(",") if f],
                             "ZEUS_GPU_CHECK_FAULTS")
    except ValueError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    try:
        c = make_context(a, root)
    except SetupError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    work = c.work
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    deliver.clear(c.out)
    if not c.python or not os.access(c.python, os.X_OK):
        print(f"gpu-check: {c.python} is not an interpreter here: pass --python (GPU default "
              f"{kGpuPython})", file=sys.stderr)
    env = dict(os.environ, ZEUS_MEASURE_ONLY="true")
    prefix: List[str] = []
    notes: List[str] = []
    if c.cpu_only:
        (work / "fake-nvml.json").write_text(kFakeNvml)
        env.update(ZEUS_NVML_LIBRARY=str(c.tree / "tests" / "fakes" / "full" / "libnvidia-ml.so.1"),
                   FAKE_NVML_STATE=str(work / "fake-nvml.json"))
        if not (c.carry / "MANIFEST").is_file() or not (c.carry / "FILES").is_file():
            subprocess.run([str(root / "scripts" / "gpu-carry.sh"), str(c.carry)], check=False)
        prefix, note = isolate(c)
        notes.append(note)
        print(f"gpu-check: {note}")
    write_json_atomic(work / "check.json", {
        "mode": c.mode, "python": c.python, "carry": str(c.carry), "targets": list(c.targets),
        "limit_train": c.limit_train, "notes": notes, "argv": list(argv or sys.argv[1:])})

    deadline = a.deadline if a.deadline is not None else (None if c.cpu_only else kGpuDeadlineS)
    runner = Runner(work, deadline_s=deadline or None, reserve_s=kReserveS, limits=limits,
                    faults=faults, selected=a.steps.split(",") if a.steps else None,
                    prefix=prefix, base_env=env, on_record=lambda: finish(c, quiet=True))

    def on_signal(signum, _frame):
        print(f"gpu-check: got signal {signum}: stopping the running step", flush=True)
        runner.stop_current()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    interrupted = False
    try:
        results = runner.run_all(plan(c))
    except ValueError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # Interrupted, or a bug: the report still goes out
        interrupted = True
        print(f"gpu-check: stopped: {type(e).__name__} {e}", file=sys.stderr)
        results = runner.results
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    report_ok = finish(c, quiet=False)
    ok = all_passed(results) and report_ok and not interrupted
    print(f"gpu-check: {'PASSED' if ok else 'FAILED'}: the report and logs are in {c.out}")
    return 0 if ok else 1


def isolate(c: Context):
    """The prefix that hides the system's copies of the carried files; ([], why) where not."""
    why = isolation.available()
    if why:
        return [], f"not isolated ({why}): a file missing from the carry may go unnoticed here"
    tools = [t for t in (_which("cmake"), _which("ninja"), _which("ccache"), _which("c++"),
                         _which("cc"), _which("ld"), _which("as"), _which("sh"), _which("tar"),
                         _which("nvcc"), os.path.realpath(c.python), sys.executable) if t]
    for prog in ("cc1plus", "cc1", "collect2", "lto-wrapper"):
        found = subprocess.run(["c++", f"-print-prog-name={prog}"], capture_output=True,
                               text=True).stdout.strip()
        if os.path.isabs(found):
            tools.append(found)
    for python in {os.path.realpath(c.python), os.path.realpath(sys.executable)}:
        dynload = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('platstdlib'))"],
                                 capture_output=True, text=True).stdout.strip()
        # Its extension modules (zlib for the wheel, hashlib, ctypes...), but Tk: no build
        # step opens a window, and Tk would keep libpng visible.
        tools += [str(p) for p in Path(dynload, "lib-dynload").glob("*.so")
                  if not p.name.startswith("_tkinter")]
    try:
        carried = isolation.carried_paths(c.carry)
    except FileNotFoundError as e:
        return [], f"not isolated: {e}"
    also = [p for pkg in isolation.kAlsoHidden for p in isolation.package_files(pkg)]
    keep = isolation.loaded_libraries(tools)
    iso = isolation.Isolation(c.build / "isolation", isolation.hidden_set(carried, also, keep))
    kept = sorted({isolation.canonical(p) for p in carried} & keep)
    try:
        prefix = iso.make()
    except (RuntimeError, OSError) as e:
        return [], f"not isolated: {e}"
    return prefix, (f"isolated: {iso.summary()}; kept visible because this machine's build tools "
                    f"load them: {', '.join(kept) or 'none'}")


def finish(c: Context, quiet: bool) -> bool:
    """The report from what is there, then the return; True when the report ran and passed."""
    argv = [sys.executable, str(c.root / "bench" / "gpu_check" / "report.py"), "--work",
            str(c.work), "--mode", c.mode] + (["--quiet"] if quiet else [])
    try:
        rc = subprocess.run(argv, timeout=60).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    problems = deliver.deliver(c.work, c.out)
    for p in problems:
        print(f"gpu-check: {c.out} breaks the return rules: {p}", file=sys.stderr)
    return rc == 0 and not problems
