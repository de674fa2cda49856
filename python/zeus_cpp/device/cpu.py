"""The CPU packages' energy (Intel RAPL or AMD's powercap), as Zeus 0.16's
``zeus.device.get_cpus()`` offers it, over zeus-cpp's C++ RAPL reader (``ZEUS_RAPL_ROOT`` or
``/sys/class/powercap``; counter wraparounds handled there). Energies in mJ, as upstream."""

from __future__ import annotations

from dataclasses import dataclass

from zeus_cpp import _core

__all__ = ["CPUs", "CpuDramMeasurement", "get_cpus"]


@dataclass
class CpuDramMeasurement:
    """A package's energy counter and, where the package has one, its DRAM's, in mJ."""

    cpu_mj: float
    dram_mj: float | None = None

    def __sub__(self, other: CpuDramMeasurement) -> CpuDramMeasurement:
        dram = (None if self.dram_mj is None or other.dram_mj is None
                else self.dram_mj - other.dram_mj)
        return CpuDramMeasurement(self.cpu_mj - other.cpu_mj, dram)


class CPUs:
    """The machine's CPU packages (upstream's methods). Raises ``DeviceError`` when RAPL cannot
    be read (no powercap, or its files are root-only: ``zeusd`` serves them)."""

    def __init__(self) -> None:
        self._cpus = _core.open_rapl()

    def __len__(self) -> int:
        return self._cpus.count

    @property
    def cpus(self) -> list[int]:
        return list(range(self._cpus.count))

    def get_name(self, index: int) -> str:
        return self._cpus.name(index)

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        dram = self._cpus.dram_energy_uj(index) if self._cpus.has_dram(index) else None
        return CpuDramMeasurement(self._cpus.energy_uj(index) / 1000,
                                  None if dram is None else dram / 1000)

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self._cpus.has_dram(index)


_cpus: CPUs | None = None


def get_cpus() -> CPUs:
    """The process's CPUs (one object, made on first use)."""
    global _cpus
    if _cpus is None:
        _cpus = CPUs()
    return _cpus
