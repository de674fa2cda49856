"""Builds the Python package zeus_cpp (python/) with this interpreter's own scikit-build-core and
pybind11, whatever their versions (python/pyproject.toml's minimum-version is the floor), by
calling the PEP 517 backend directly: no pip, no build isolation, nothing downloaded. The wheel
is unpacked into --target, a folder for PYTHONPATH.

  PY -m gpu_check.build_python --root ROOT --target DIR --build-dir DIR [--define NAME=VALUE]...
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)

    try:
        import pybind11
        import scikit_build_core
        from scikit_build_core import build as backend
        from scikit_build_core.build import wheel as _  # noqa: F401  (what a bare 0.8 lacks)
    except ImportError as e:
        print(f"build_python: {sys.executable} cannot build zeus_cpp: {e}. It needs pybind11 and "
              f"scikit-build-core at python/pyproject.toml's floors installed for this Python; "
              f"nothing is downloaded here", flush=True)
        return 1

    settings = {"build-dir": str(args.build_dir.resolve()),
                "cmake.define.pybind11_DIR": pybind11.get_cmake_dir()}
    for item in args.define:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--define '{item}' is not NAME=VALUE")
        settings[f"cmake.define.{name}"] = value
    print(f"build_python: scikit-build-core {scikit_build_core.__version__}, pybind11 "
          f"{pybind11.__version__}, Python {sys.version.split()[0]}", flush=True)
    dist = args.build_dir.resolve() / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    here = os.getcwd()
    os.chdir(args.root / "python")
    try:
        wheel = backend.build_wheel(str(dist), config_settings=settings)
    finally:
        os.chdir(here)
    shutil.rmtree(args.target, ignore_errors=True)
    args.target.mkdir(parents=True)
    with zipfile.ZipFile(dist / wheel) as z:
        z.extractall(args.target)
    # zipfile drops the permission bits; the extension must stay loadable.
    for so in args.target.rglob("*.so"):
        so.chmod(0o755)
    print(f"build_python: {wheel} unpacked into {args.target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
