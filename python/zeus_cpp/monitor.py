"""Energy windows like Zeus 0.16's ``ZeusMonitor``: ``begin_window(name)`` ...
``end_window(name)`` gives the window's time and each GPU's energy; windows may nest and
overlap. GPUs with an energy counter are read from it, others from a power timeline sampled in
the background. It only measures: no power limit is ever changed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from zeus_cpp import _core

__all__ = ["Measurement", "ZeusMonitor"]


@dataclass
class Measurement:
    """One window: ``time`` in s, ``gpu_energy`` in J per GPU index (as given to the
    monitor), and the warnings of a window too short for a GPU's energy counter."""

    time: float
    gpu_energy: dict[int, float]
    warnings: list[str] = field(default_factory=list)

    @property
    def total_energy(self) -> float:
        return sum(self.gpu_energy.values())


class ZeusMonitor:
    """Measures the GPUs' time and energy over named windows.

    ``gpu_indices``: the GPUs, as CUDA numbers them (``CUDA_VISIBLE_DEVICES`` applies); None:
    every visible GPU. ``device``: ``"auto"``/``"nvml"`` (the real GPUs) or a simulated
    ``"sim:<gpu>"``; None reads ``ZEUS_DEVICE``, else ``auto``. ``sync_execution_with="torch"``:
    windows wait for the monitored CUDA devices (``torch.cuda.synchronize``) before their
    timestamps, when CUDA is in use.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        *,
        device: str | None = None,
        sync_execution_with: str = "torch",
        fallback_period_s: float = 0.1,
    ) -> None:
        if sync_execution_with != "torch":
            raise ValueError(
                f"sync_execution_with={sync_execution_with!r}: only 'torch' is supported"
            )
        locator = device if device is not None else os.environ.get("ZEUS_DEVICE") or "auto"
        self._monitor = _core.EnergyMonitor(
            locator, list(gpu_indices) if gpu_indices is not None else None, fallback_period_s
        )
        self.gpu_indices: list[int] = list(self._monitor.gpus)

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Opens window ``key``; a name already open is a ConfigError."""
        if sync_execution:
            self._sync()
        self._monitor.begin_window(key)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> Measurement:
        """Closes window ``key`` and returns its measurement (``cancel``: closes it only)."""
        if sync_execution and not cancel:
            self._sync()
        m = self._monitor.end_window(key)
        if cancel:
            return Measurement(0.0, {})
        energy = {g: e for g, e in zip(self.gpu_indices, m.gpu_energy_j)}
        return Measurement(m.elapsed_s, energy, list(m.warnings))

    def _sync(self) -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            count = torch.cuda.device_count()
            for g in self.gpu_indices:
                if g < count:
                    torch.cuda.synchronize(g)
