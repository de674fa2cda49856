"""The GPUs, as Zeus 0.16's ``zeus.device.get_gpus()`` offers them, over zeus-cpp's C++ device
layer: NVML or AMD SMI (``ZEUS_DEVICE=amdsmi``, or ``auto`` on an AMD machine; through
``zeusd`` for the setters when ``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT`` is set) or the
simulated GPUs (``ZEUS_DEVICE=sim:<gpu>[:<workload>[:<batch size>]]``).

Indices are the ones PyTorch uses (``CUDA_VISIBLE_DEVICES`` applies; on AMD GPUs HIP's order,
after ``ROCR_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES``); powers in mW, energies in mJ,
clocks in MHz, as upstream (AMD SMI's W and uW are converted). ``block`` is accepted for upstream's signatures: every call
here completes before it returns."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from zeus_cpp import _core

__all__ = ["CPUs", "CpuDramMeasurement", "GPUs", "get_cpus", "get_gpus", "sim_virtual_clock"]


def sim_virtual_clock(locator: str) -> bool:
    """Whether a locator's simulated GPUs keep a virtual clock: a training simulation (the
    locator names a workload, ``sim:v100:cifar100:1024``) unless ``ZEUS_SIM_CLOCK=real``. A bare
    ``sim:<gpu>`` is a GPU under load on the machine's clock, as ``zeus monitor`` shows it."""
    if not locator.startswith("sim:"):
        return False
    if os.environ.get("ZEUS_SIM_CLOCK", "virtual") == "real":
        return False
    return locator.split("@", 1)[0].count(":") >= 2


class GPUs:
    """The GPUs one process sees. Methods take the GPU's index first, as upstream's."""

    def __init__(self, locator: str) -> None:
        self._gpus = _core.Gpus(locator, sim_virtual_clock(locator))
        self.locator: str = self._gpus.locator

    def __len__(self) -> int:
        return self._gpus.count

    @property
    def gpus(self) -> Sequence[int]:
        return list(range(self._gpus.count))

    def get_name(self, gpu_index: int) -> str:
        return self._gpus.name(gpu_index)

    def get_gpu_temperature(self, gpu_index: int) -> int:
        """Degrees C (upstream's); ``DeviceError`` where the GPU has no sensor."""
        t = self._gpus.temperature_c(gpu_index)
        if t is None:
            raise _core.DeviceError(f"GPU {gpu_index} ({self.get_name(gpu_index)}) has no "
                                    "temperature sensor to read")
        return int(t)

    def get_uuid(self, gpu_index: int) -> str:
        return self._gpus.uuid(gpu_index)

    def get_power_management_limit_constraints(self, gpu_index: int) -> tuple[int, int]:
        return tuple(self._gpus.power_limit_constraints_mw(gpu_index))  # type: ignore[return-value]

    def get_power_management_limit(self, gpu_index: int) -> int:
        return self._gpus.power_limit_mw(gpu_index)

    def get_default_power_management_limit(self, gpu_index: int) -> int:
        return self._gpus.default_power_limit_mw(gpu_index)

    def set_power_management_limit(self, gpu_index: int, power_limit_mw: int,
                                   block: bool = True) -> None:
        self._gpus.set_power_limit_mw(gpu_index, int(power_limit_mw))

    def reset_power_management_limit(self, gpu_index: int, block: bool = True) -> None:
        self._gpus.set_power_limit_mw(gpu_index, self._gpus.default_power_limit_mw(gpu_index))

    def get_persistence_mode(self, gpu_index: int) -> bool:
        return self._gpus.persistence_mode(gpu_index)

    def set_persistence_mode(self, gpu_index: int, enabled: bool, block: bool = True) -> None:
        self._gpus.set_persistence_mode(gpu_index, bool(enabled))

    def set_gpu_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        self._gpus.set_gpu_locked_clocks(gpu_index, min_clock_mhz, max_clock_mhz)

    def reset_gpu_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpus.reset_gpu_locked_clocks(gpu_index)

    def set_memory_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int,
                                 block: bool = True) -> None:
        self._gpus.set_mem_locked_clocks(gpu_index, min_clock_mhz, max_clock_mhz)

    def reset_memory_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpus.reset_mem_locked_clocks(gpu_index)

    def get_instant_power_usage(self, gpu_index: int) -> int:
        return self._gpus.power_mw(gpu_index)

    def get_average_power_usage(self, gpu_index: int) -> int:
        return self._gpus.power_mw(gpu_index)

    def supports_get_total_energy_consumption(self, gpu_index: int) -> bool:
        return self._gpus.has_energy_counter(gpu_index)

    def get_total_energy_consumption(self, gpu_index: int) -> int:
        energy = self._gpus.energy_mj(gpu_index)
        if energy is None:
            raise _core.DeviceError(
                f"GPU {gpu_index} ({self.get_name(gpu_index)}) has no energy counter; "
                "zeus_cpp.monitor.ZeusMonitor integrates its power instead")
        return energy


_lock = threading.Lock()
_by_locator: dict[str, GPUs] = {}


def get_gpus(ensure_homogeneous: bool = False, device: str | None = None) -> GPUs:
    """The process's GPUs (one object per locator, shared with ``ZeusMonitor`` and the
    optimizers, so a simulated GPU's clock and limits are one). ``device``: a locator; None
    reads ``ZEUS_DEVICE``, else ``auto`` (NVML, else AMD SMI)."""
    locator = device if device is not None else os.environ.get("ZEUS_DEVICE") or "auto"
    with _lock:
        gpus = _by_locator.get(locator)
        if gpus is None:
            gpus = _by_locator[locator] = GPUs(locator)
    if ensure_homogeneous and len({gpus.get_name(i) for i in gpus.gpus}) > 1:
        raise ValueError(
            f"the GPUs of {gpus.locator} are not all the same model: "
            f"{[gpus.get_name(i) for i in gpus.gpus]}")
    return gpus


# The CPUs (RAPL), as upstream's zeus.device.get_cpus() offers them (cpu.py).
from zeus_cpp.device.cpu import CPUs, CpuDramMeasurement, get_cpus  # noqa: E402
