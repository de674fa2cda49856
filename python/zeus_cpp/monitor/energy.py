"""``ZeusMonitor``: Zeus 0.16's energy windows (``begin_window(name)`` ... ``end_window(name)``)
over zeus-cpp's C++ ``EnergyMonitor``: GPU energy from NVML's counter (or the integral of power
samples taken in C++ on GPUs without one), CPU package and DRAM energy from RAPL. Windows may
nest and overlap. It only measures: no limit is ever changed."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zeus_cpp import _core
from zeus_cpp.device import GPUs, get_gpus

__all__ = ["Measurement", "ZeusMonitor"]

logger = logging.getLogger(__name__)


@dataclass
class Measurement:
    """One window: ``time`` in s; ``gpu_energy``, ``cpu_energy`` and ``dram_energy`` in J per
    index as given to the monitor (None where no such device is measured); ``warnings`` (not in
    upstream) says what made a value unreliable."""

    time: float
    gpu_energy: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    soc_energy: object | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def total_energy(self) -> float:
        """The GPUs' energy (upstream counts only the GPUs here)."""
        return sum(self.gpu_energy.values())


def _open_cpus(cpu_indices: list[int] | None) -> tuple[object | None, list[int]]:
    """RAPL and the packages to measure; (None, []) where RAPL cannot be read (said once)."""
    if cpu_indices == []:
        return None, []
    try:
        cpus = _core.open_rapl()
    except _core.ZeusError as e:
        level = logging.WARNING if cpu_indices else logging.INFO
        logger.log(level, "CPU energy is not measured: %s", e)
        return None, []
    available = list(range(cpus.count))
    wanted = available if cpu_indices is None else list(cpu_indices)
    unknown = [c for c in wanted if c not in available]
    if unknown:
        raise ValueError(f"cpu_indices {unknown}: RAPL shows CPU packages {available}")
    return cpus, wanted


class ZeusMonitor:
    """Measures time and energy over named windows.

    ``gpu_indices``: GPUs as CUDA numbers them (``CUDA_VISIBLE_DEVICES`` applies); None: every
    visible GPU. ``cpu_indices``: RAPL packages; None: all where RAPL is readable, else none.
    ``approx_instant_energy``: a GPU whose counter did not move in a window (too short) is
    given power x time instead of 0. ``log_file``: a CSV row per window. ``device`` (zeus-cpp):
    a locator (``nvml``, ``sim:<gpu>[:<workload>:<bs>]``); None reads ``ZEUS_DEVICE``.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
        *,
        device: str | None = None,
        fallback_period_s: float = 0.1,
    ) -> None:
        if sync_execution_with != "torch":
            raise ValueError(
                f"sync_execution_with={sync_execution_with!r}: zeus_cpp supports only 'torch'")
        self.gpus: GPUs = get_gpus(device=device)
        cpus, self.cpu_indices = _open_cpus(cpu_indices)
        self._monitor = _core.EnergyMonitor(
            self.gpus._gpus, list(gpu_indices) if gpu_indices is not None else None, cpus,
            fallback_period_s)
        self.gpu_indices: list[int] = list(self._monitor.gpus)
        has_dram = self._monitor.cpu_has_dram
        self._dram_indices = [c for c in self.cpu_indices if has_dram[c]]
        self.approx_instant_energy = approx_instant_energy
        self._starts: dict[str, float] = {}
        for g in self.gpu_indices:
            if not self.gpus.supports_get_total_energy_consumption(g):
                logger.warning(
                    "GPU %d (%s) has no energy counter: its energy is the integral of power "
                    "sampled every %g s", g, self.gpus.get_name(g), fallback_period_s)
        self._log = None
        if log_file is not None:
            path = Path(log_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists() or path.stat().st_size == 0
            self._log = path.open("a", encoding="utf-8")
            if new:
                self._log.write(",".join(
                    ["start_time", "window_name", "elapsed_time"]
                    + [f"gpu{g}_energy" for g in self.gpu_indices]) + "\n")
                self._log.flush()

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Opens window ``key``. A name already open is a ``ValueError`` naming it, unless
        ``restart`` (the open one is dropped and begun again)."""
        if self._monitor.is_open(key):
            if not restart:
                raise _core.ConfigError(
                    f"measurement window '{key}' is already open; end it first, use another "
                    "name, or pass restart=True")
            self._monitor.end_window(key)
        if sync_execution:
            self._sync()
        self._starts[key] = time.time()
        self._monitor.begin_window(key)

    def end_window(self, key: str, sync_execution: bool = True,
                   cancel: bool = False) -> Measurement:
        """Closes window ``key`` and returns its measurement; ``cancel`` closes it and returns
        zeros (no log row). An unknown name is a ``ValueError`` naming it."""
        if not self._monitor.is_open(key):
            raise _core.ConfigError(
                f"measurement window '{key}' was never begun (open: "
                f"{sorted(self._starts) or 'none'})")
        power_w = ({g: self.gpus.get_instant_power_usage(g) / 1000 for g in self.gpu_indices}
                   if self.approx_instant_energy and not cancel else {})
        if sync_execution and not cancel:
            self._sync()
        m = self._monitor.end_window(key)
        start = self._starts.pop(key, time.time())
        if cancel:
            return Measurement(0.0, {g: 0.0 for g in self.gpu_indices},
                               cpu_energy={c: 0.0 for c in self.cpu_indices} or None)
        gpu_energy = dict(zip(self.gpu_indices, m.gpu_energy_j))
        warnings = list(m.warnings)
        for g, energy in gpu_energy.items():
            if energy == 0.0:
                if self.approx_instant_energy:
                    gpu_energy[g] = power_w[g] * m.elapsed_s
                else:
                    warnings.append(
                        f"window '{key}': GPU {g}'s energy is 0 ({m.elapsed_s:.3f} s is "
                        "shorter than its counter's update); pass approx_instant_energy=True")
                    logger.warning("%s", warnings[-1])
        cpu_energy = ({c: m.cpu_energy_j[c] for c in self.cpu_indices}
                      if self.cpu_indices else None)
        dram_energy = ({c: m.dram_energy_j[c] for c in self._dram_indices}
                       if self._dram_indices else None)
        measurement = Measurement(m.elapsed_s, gpu_energy, cpu_energy, dram_energy,
                                  warnings=warnings)
        if self._log is not None:
            self._log.write(",".join(
                [str(start), key, str(measurement.time)]
                + [str(gpu_energy[g]) for g in self.gpu_indices]) + "\n")
            self._log.flush()
        return measurement

    def _sync(self) -> None:
        sync_gpus(self.gpu_indices)


def sync_gpus(gpu_indices: list[int]) -> None:
    """Waits for the work queued on these CUDA devices (none where CUDA was never initialized:
    nothing is queued, and initializing it here would cost a context). Where the process never
    imported torch, torch queued nothing: no import here (seconds, or none installed at all)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        count = torch.cuda.device_count()
        for g in gpu_indices:
            if g < count:
                torch.cuda.synchronize(g)

