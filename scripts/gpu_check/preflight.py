"""The GPU check's preflight: a few seconds that record and check what the rest needs, so that a
missing piece fails at once with what is missing, not after minutes of building.

Run by the interpreter the check builds against (`PY -m gpu_check.preflight`, PYTHONPATH at
scripts/): its Python.h, pybind11, scikit-build-core and torch are the ones that count. Writes
the facts and problems as JSON (--json) and prints them; exits 1 when anything is missing.
Standard library only.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

kMinCmake = (3, 25)
kMinGcc = (11,)  # C++20 as the project uses it; 12 is what CI builds with
kMinClang = (14,)
kMinNvcc = (12, 6)  # the torch wheel's CMake config enables CUDA (docs/gpu.md)
kMinTorch = (2, 11)
kMinFreeGiB = 4  # the cuda build tree with debug info, and the Python package's
kFashionMnist = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def version_tuple(text: str) -> Tuple[int, ...]:
    m = re.search(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(x) for x in m[1].split(".")) if m else ()


def dotted(v: Sequence[int]) -> str:
    return ".".join(map(str, v))


def run(argv: Sequence[str], timeout: float = 20) -> Tuple[int, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)}: no answer in {timeout:.0f} s"
    return p.returncode, (p.stdout + p.stderr).strip()


def build_requires(pyproject: Path) -> Dict[str, Tuple[int, ...]]:
    """The lower bounds of python/pyproject.toml's build requirements ('name>=X')."""
    text = pyproject.read_text()
    block = re.search(r"^requires\s*=\s*\[(.*?)\]", text, re.M | re.S)
    out = {}
    for item in re.findall(r"\"([^\"]+)\"", block[1] if block else ""):
        m = re.match(r"([A-Za-z0-9_.-]+)\s*(?:>=|==|~=)\s*([0-9.]+)", item)
        if m:
            out[m[1].lower().replace("_", "-")] = version_tuple(m[2])
    return out


def nccl_pin(requires: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(distribution, version) of the NCCL that torch's metadata pins, if it pins one."""
    for req in requires or ():
        m = re.match(r"(nvidia-nccl-cu\d+)\s*==\s*([0-9.]+)", req)
        if m:
            return m[1], m[2]
    return None


class Preflight:
    def __init__(self, mode: str, root: Path, carry: Path, build: Path):
        self.mode = mode
        self.root = root
        self.carry = carry
        self.build = build
        self.facts: Dict[str, object] = {}
        self.missing: List[str] = []
        self.python_missing: List[str] = []  # blocks the Python package only
        self.warnings: List[str] = []

    def need(self, ok: bool, problem: str, *, python_only: bool = False) -> bool:
        if not ok:
            (self.python_missing if python_only else self.missing).append(problem)
        return ok

    def tools(self) -> None:
        rc, out = run(["cmake", "--version"])
        v = version_tuple(out) if rc == 0 else ()
        self.facts["cmake"] = dotted(v) if v else out
        if self.need(rc == 0, f"cmake: {out}"):
            self.need(v >= kMinCmake, f"cmake {dotted(v)} is older than {dotted(kMinCmake)}")
        rc, out = run(["ninja", "--version"])
        self.facts["ninja"] = out if rc == 0 else None
        self.need(rc == 0, f"ninja: {out} (the build uses the Ninja generator)")
        cxx = os.environ.get("CXX") or shutil.which("c++") or "c++"
        rc, out = run([cxx, "--version"])
        self.facts["cxx"] = {"path": cxx, "version": out.splitlines()[0] if out else ""}
        if self.need(rc == 0, f"C++ compiler {cxx}: {out}"):
            rc2, full = run([cxx, "-dumpfullversion"])
            v = version_tuple(full if rc2 == 0 else out)
            clang = "clang" in out.lower()
            floor = kMinClang if clang else kMinGcc
            self.need(v >= floor, f"C++ compiler {cxx} is {'clang' if clang else 'GCC'} "
                                  f"{dotted(v)}; C++20 here needs >= {dotted(floor)}")
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                        if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else "")
        self.facts["nvcc"] = {"path": nvcc or None}
        if self.need(bool(nvcc), "nvcc: not on PATH nor at /usr/local/cuda/bin (the torch "
                                 "wheel's CMake config enables CUDA)"):
            rc, out = run([nvcc, "--version"])
            v = version_tuple(re.search(r"release ([0-9.]+)", out)[1]) if "release" in out else ()
            self.facts["nvcc"]["version"] = dotted(v)
            self.need(v >= kMinNvcc, f"nvcc {dotted(v) or out} is older than {dotted(kMinNvcc)}")

    def python(self, pyproject: Path) -> None:
        include = sysconfig.get_paths()["include"]
        self.facts["python"] = {"executable": sys.executable, "version": sys.version.split()[0],
                                "include": include}
        self.need((Path(include) / "Python.h").is_file(),
                  f"Python.h is not in {include} (the Python package needs this Python's headers)",
                  python_only=True)
        floors = build_requires(pyproject)
        for dist, module in (("pybind11", "pybind11"), ("scikit-build-core", "scikit_build_core")):
            try:
                have = metadata.version(dist)
            except metadata.PackageNotFoundError:
                have = None
            self.facts[dist] = have
            floor = floors.get(dist, ())
            if self.need(have is not None and importlib.util.find_spec(module) is not None,
                         f"{dist} is not installed for {sys.executable} (the Python package "
                         f"builds with it; nothing is downloaded here)", python_only=True):
                self.need(version_tuple(have) >= floor,
                          f"{dist} {have} is older than {dotted(floor)} (python/pyproject.toml)",
                          python_only=True)
        # The backend's wheel builder imports what a bare install may lack (scikit-build-core
        # 0.8 without its [pyproject] extra has no pyproject-metadata).
        if importlib.util.find_spec("scikit_build_core") is not None:
            try:
                importlib.import_module("scikit_build_core.build.wheel")
            except Exception as e:  # any import failure means no wheel can be built
                self.need(False, f"scikit-build-core cannot build a wheel here: {type(e).__name__}: "
                                 f"{e}", python_only=True)

    def torch(self) -> None:
        try:
            dist = metadata.distribution("torch")
        except metadata.PackageNotFoundError:
            self.need(False, f"torch is not installed for {sys.executable}")
            return
        v = version_tuple(dist.version)
        info: Dict[str, object] = {"version": dist.version}
        self.facts["torch"] = info
        self.need(v >= kMinTorch, f"torch {dist.version} is older than {dotted(kMinTorch)}")
        version_py = Path(str(dist.locate_file("torch/version.py")))
        if version_py.is_file():
            m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)", version_py.read_text(), re.M)
            info["cuda"] = m[1] if m else None
        pin = nccl_pin(dist.requires)
        info["nccl_pin"] = f"{pin[0]}=={pin[1]}" if pin else None
        if self.need(pin is not None, f"torch {dist.version}'s metadata pins no nvidia-nccl "
                                      f"wheel: this is not a CUDA build of torch"):
            try:
                installed = metadata.version(pin[0])
            except metadata.PackageNotFoundError:
                installed = None
            info["nccl_installed"] = installed
            self.need(installed == pin[1], f"{pin[0]} {installed or 'is not installed'}, but "
                                           f"torch {dist.version} pins {pin[1]}")
        nvcc = self.facts.get("nvcc") or {}
        if info.get("cuda") and nvcc.get("version") and \
                version_tuple(info["cuda"])[:1] != version_tuple(nvcc["version"])[:1]:
            self.warnings.append(f"torch is built for CUDA {info['cuda']}, nvcc is "
                                 f"{nvcc['version']}")

    def runtime(self) -> None:
        self.facts["LD_LIBRARY_PATH"] = os.environ.get("LD_LIBRARY_PATH", "")
        glibc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else ""
        self.facts["glibc"] = glibc
        requires = self.carry / "REQUIRES"
        wanted = {}
        if requires.is_file():
            for line in requires.read_text().split():
                name, _, v = line.partition("_")
                wanted[name] = version_tuple(v)
        if "GLIBC" in wanted:
            self.need(version_tuple(glibc) >= wanted["GLIBC"],
                      f"{glibc} is older than GLIBC_{dotted(wanted['GLIBC'])}, which the carried "
                      f"libraries need")
        if "GLIBCXX" in wanted:
            cxx = (self.facts.get("cxx") or {}).get("path") or "c++"
            rc, lib = run([cxx, "-print-file-name=libstdc++.so.6"])
            have = ()
            if rc == 0 and os.path.isfile(lib):
                found = re.findall(rb"GLIBCXX_(\d+\.\d+\.\d+)", Path(lib).read_bytes())
                have = max((version_tuple(x.decode()) for x in found), default=())
            self.facts["libstdcxx"] = {"path": lib, "newest": dotted(have)}
            self.need(have >= wanted["GLIBCXX"],
                      f"the compiler's libstdc++ ({lib}) has GLIBCXX_{dotted(have) or '?'}, the "
                      f"carried libraries need GLIBCXX_{dotted(wanted['GLIBCXX'])}")
        self.facts["cpus"] = os.cpu_count()
        self.build.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.build).free / 2**30
        self.facts["free_gib"] = round(free, 1)
        self.need(free >= kMinFreeGiB, f"{free:.1f} GiB free at {self.build}; the build needs "
                                       f"about {kMinFreeGiB}")

    def carry_files(self) -> None:
        what = "run scripts/gpu-carry.sh where Debian's packages are, and carry the folder"
        manifest = self.carry / "MANIFEST"
        self.facts["carry"] = {"path": str(self.carry)}
        if not self.need(manifest.is_file(), f"the carry {self.carry} is missing or incomplete "
                                             f"(no MANIFEST): {what}"):
            return
        self.facts["carry"]["packages"] = len(manifest.read_text().split("\n"))
        for name in ("FILES", "REQUIRES", "sysroot/usr/include", *(f"fashion-mnist/{f}" for f in kFashionMnist)):
            self.need((self.carry / name).exists(), f"the carry lacks {name}: {what}")

    def gpu(self) -> None:
        rc, out = run(["nvidia-smi", "-L"])
        self.facts["gpus"] = out.splitlines() if rc == 0 else None
        if not self.need(rc == 0 and "GPU" in out,
                         f"nvidia-smi -L failed (exit {rc}: {out[:300]}): no GPU is visible. "
                         f"This is the GPU mode; on a machine without a GPU pass --cpu-only"):
            return
        rc, out = run(["nvidia-smi", "--query-gpu=driver_version,name,power.limit,"
                       "power.default_limit,enforced.power.limit,persistence_mode",
                       "--format=csv,noheader"])
        self.facts["nvidia_smi"] = out
        try:
            ctypes.CDLL("libnvidia-ml.so.1")
            self.facts["nvml"] = "libnvidia-ml.so.1 loads"
        except OSError as e:
            self.need(False, f"libnvidia-ml.so.1 does not load ({e}); zeus-cpp's NVML backend "
                             f"needs it (LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')})")

    def report(self) -> dict:
        return {"mode": self.mode, "facts": self.facts, "missing": self.missing,
                "python_missing": self.python_missing, "warnings": self.warnings}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--carry", type=Path, required=True)
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)

    p = Preflight(args.mode, args.root, args.carry, args.build)
    p.tools()
    p.python(args.root / "python" / "pyproject.toml")
    p.torch()
    p.carry_files()
    p.runtime()
    if args.mode == "gpu":
        p.gpu()
    report = p.report()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from gpu_check.steps import write_json_atomic

    write_json_atomic(args.json, report)
    print(json.dumps(report["facts"], indent=2))
    for w in report["warnings"]:
        print(f"preflight: warning: {w}")
    for m in report["missing"]:
        print(f"preflight: MISSING: {m}")
    for m in report["python_missing"]:
        print(f"preflight: MISSING (the Python package will fail): {m}")
    print(f"preflight: {'ok' if not report['missing'] else str(len(report['missing'])) + ' missing'}")
    return 1 if report["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
