"""zeus_cpp: energy-optimal training for PyTorch scripts, over zeus-cpp's C++ engine.

Zeus's ``ZeusDataLoader`` (with ``distributed="dp"``) and ENOT's distributed helpers
(``zeus_cpp.distributed``), with the same engine, files and environment as zeus-cpp's C++
``zeus::DataLoader``; and Zeus 0.16's API at upstream's paths (``zeus_cpp.monitor``,
``zeus_cpp.optimizer.power_limit``, ``zeus_cpp.device``, ``zeus_cpp.callback``). Switching from
Zeus is one changed import::

    from zeus_cpp import ZeusDataLoader
    from zeus_cpp.monitor import ZeusMonitor
"""

from __future__ import annotations

import os

# The simulated GPUs (ZEUS_DEVICE=sim:<gpu>) read Zeus's traces, shipped inside the package.
_TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zeus-traces")
if os.path.isdir(_TRACES):
    os.environ.setdefault("ZEUS_TRACE_DIR", _TRACES)

from zeus_cpp import _core  # noqa: E402
from zeus_cpp._errors import (  # noqa: E402
    ConfigError,
    DeviceError,
    DevicePermissionError,
    DistError,
    IoError,
    ZeusCostThresholdExceededException,
    ZeusError,
)

__version__: str = _core.__version__


def __getattr__(name: str) -> object:
    # ZeusDataLoader imports torch: only when asked for, so that what needs no torch (the
    # monitors, the optimizers' watchdog process) starts fast.
    if name == "ZeusDataLoader":
        from zeus_cpp._loader import ZeusDataLoader

        return ZeusDataLoader
    raise AttributeError(f"module 'zeus_cpp' has no attribute {name!r}")

__all__ = [
    "ConfigError",
    "DeviceError",
    "DevicePermissionError",
    "DistError",
    "IoError",
    "ZeusCostThresholdExceededException",
    "ZeusDataLoader",
    "ZeusError",
    "__version__",
]
