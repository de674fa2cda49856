"""Zeus 0.16's ``TemperatureMonitor``: each GPU's temperature over time, sampled every
``update_period`` s and kept only when it changed. Upstream spawns a process; here one C++ thread
samples (``zeus_cpp._core.TemperatureTimeline``), so nothing is pickled, nothing is spawned, and it
may be made anywhere (a global included). A GPU without a temperature sensor is left out with
one warning, as upstream."""

from __future__ import annotations

import bisect
import logging

from zeus_cpp import _core
from zeus_cpp.device import get_gpus

__all__ = ["TemperatureMonitor", "TemperatureSample"]

logger = logging.getLogger(__name__)


class TemperatureSample:
    """One change of a GPU's temperature (upstream's fields)."""

    __slots__ = ("timestamp", "gpu_index", "temperature_c")

    def __init__(self, timestamp: float, gpu_index: int, temperature_c: int) -> None:
        self.timestamp = timestamp
        self.gpu_index = gpu_index
        self.temperature_c = temperature_c


class TemperatureMonitor:
    """Upstream's constructor and methods. ``gpu_indices``: None for every GPU (a list must not
    be empty). ``update_period``: s between reads. ``max_samples_per_gpu``: the changes kept per
    GPU (None: all). zeus-cpp's: ``device`` (a locator; None reads ``ZEUS_DEVICE``)."""

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float = 1.0,
        max_samples_per_gpu: int | None = None,
        *,
        device: str | None = None,
    ) -> None:
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        if not update_period > 0:
            raise ValueError(f"update_period must be positive, got {update_period}")
        gpus = get_gpus(ensure_homogeneous=True, device=device)
        self.gpu_indices = list(gpu_indices) if gpu_indices is not None else list(gpus.gpus)
        self.update_period = update_period
        self._timeline = _core.TemperatureTimeline(gpus._gpus, self.gpu_indices,
                                                   update_period, max_samples_per_gpu or 0)
        logger.info("Monitoring temperature of GPUs %s", self.gpu_indices)

    def stop(self) -> None:
        """Stops sampling (what was sampled stays readable)."""
        self._timeline.stop()

    def get_temperature_timeline(
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, int]]]:
        """(Unix s, degrees C) per GPU within [start_time, end_time], oldest first."""
        targets = [gpu_index] if gpu_index is not None else self.gpu_indices
        out: dict[int, list[tuple[float, int]]] = {}
        for g in targets:
            if g not in self.gpu_indices or g in self._timeline.unsupported:
                continue
            out[g] = [(t, int(c)) for t, c in self._timeline.timeline(g)
                      if (start_time is None or t >= start_time)
                      and (end_time is None or t <= end_time)]
        return out

    def get_temperature(self, time: float | None = None) -> dict[int, int] | None:
        """Each GPU's temperature at `time` (Unix s; None: the latest); None when a GPU has no
        sample."""
        result: dict[int, int] = {}
        for g in self.gpu_indices:
            if g in self._timeline.unsupported:
                continue
            samples = self._timeline.timeline(g)
            if not samples:
                return None
            if time is None:
                result[g] = int(samples[-1][1])
                continue
            # Only changes are kept, so the value at `time` is the last change at or before it
            # (upstream takes the nearest sample, which may be a later change).
            pos = bisect.bisect_right([t for t, _ in samples], time) - 1
            result[g] = int(samples[max(pos, 0)][1])
        return result or None
