"""``python -m zeus_cpp.show_env``: what zeus_cpp sees on this machine, for bug reports (upstream's
``python -m zeus.show_env``): the package and its engine, Python, the frameworks, the GPUs and
how they are read, the CPUs' RAPL, and the ZEUS_* / ZEUSD_* variables set (tokens masked)."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

import zeus_cpp
from zeus_cpp import _core


def _section(title: str) -> None:
    print(f"\n## {title}\n")


def _frameworks() -> None:
    for name in ("torch", "jax", "cupy"):
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed")
            continue
        try:
            module = __import__(name)
            line = f"{name}: {getattr(module, '__version__', '?')}"
            if name == "torch":
                cuda = module.cuda.is_available()
                line += (f" (CUDA {module.version.cuda}, {module.cuda.device_count()} device(s))"
                         if cuda else " (no CUDA device)")
            print(line)
        except Exception as e:  # a broken install is what the report is for
            print(f"{name}: fails to import: {e}")


def _gpus() -> None:
    from zeus_cpp.device import get_gpus

    try:
        gpus = get_gpus()
    except Exception as e:
        print(f"No GPU: {e}")
        return
    print(f"GPUs ({gpus.locator}): {len(gpus)}")
    for g in gpus.gpus:
        try:
            low, high = gpus.get_power_management_limit_constraints(g)
            limits = f", limits {low // 1000}-{high // 1000} W"
        except Exception as e:
            limits = f", limits unreadable ({e})"
        print(f"  GPU {g}: {gpus.get_name(g)}{limits}; {gpus._gpus.describe(g)}")


def _cpus() -> None:
    from zeus_cpp.device import get_cpus

    try:
        cpus = get_cpus()
    except Exception as e:
        print(f"No CPU energy: {e}")
        return
    print(f"CPU packages (RAPL): {len(cpus)}")
    for c in cpus.cpus:
        dram = "with DRAM" if cpus.supports_get_dram_energy_consumption(c) else "no DRAM zone"
        print(f"  CPU {c}: {cpus.get_name(c)}, {dram}")


def _variables() -> None:
    shown = False
    for name in sorted(os.environ):
        if name.startswith(("ZEUS_", "ZEUSD_")) or name == "CUDA_VISIBLE_DEVICES":
            value = os.environ[name]
            if "TOKEN" in name or "KEY" in name:
                value = "<set>"
            print(f"{name}={value}")
            shown = True
    if not shown:
        print("(none set)")


def main() -> int:
    _section("Package availability and versions")
    print(f"zeus_cpp: {zeus_cpp.__version__} ({os.path.dirname(zeus_cpp.__file__)})")
    print(f"engine: {_core.__file__}")
    print(f"Python: {sys.version.split()[0]} on {platform.platform()}")
    _frameworks()
    _section("Devices")
    _gpus()
    _cpus()
    _section("Environment")
    _variables()
    return 0


if __name__ == "__main__":
    sys.exit(main())
