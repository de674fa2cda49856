"""``PowerMonitor``: Zeus 0.16's power timelines, sampled by one C++ thread (upstream runs one
Python process per power domain). Each GPU has one power reading, the one NVML gives the
device (instant where the GPU has that field, else the 1 s average); its domain is reported as
``device_instant`` or ``device_average`` accordingly.

Unlike upstream, the timeline keeps every sample (upstream drops unchanged readings and so loses
a constant power entirely), and ``get_energy`` integrates the samples up to the window's edges,
holding the edge readings: a GPU at a constant 200 W for 1.5 s gives about 300 J (upstream: 0)."""

from __future__ import annotations

import bisect
import weakref
from enum import Enum
from typing import Literal, Union

from zeus_cpp import _core
from zeus_cpp.device import get_gpus

__all__ = ["PowerDomain", "PowerMonitor"]

_DEFAULT_PERIOD_S = 0.1
_DEFAULT_CAPACITY = 1 << 16


class PowerDomain(Enum):
    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


DomainArg = Union[PowerDomain, Literal["device_instant", "device_average", "memory_average"]]


class PowerMonitor:
    """Samples the GPUs' power in the background from construction until ``stop()``.

    ``gpu_indices``: CUDA indices; None: every GPU. ``update_period``: s between samples (None:
    0.1 s; at least 0.005 s). ``max_samples_per_gpu``: samples kept (the oldest are dropped
    beyond it; None: 65536). ``power_domains``: the domains wanted, which must be the one the
    GPUs report. ``device`` (zeus-cpp): a locator; None reads ``ZEUS_DEVICE``.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float | None = None,
        max_samples_per_gpu: int | None = None,
        power_domains: list[DomainArg] | None = None,
        *,
        device: str | None = None,
    ) -> None:
        self.gpus = get_gpus(device=device)
        if gpu_indices is not None and len(gpu_indices) == 0:
            raise ValueError("gpu_indices is empty: give at least one GPU, or None for all")
        self.gpu_indices: list[int] = (list(gpu_indices) if gpu_indices is not None
                                       else list(self.gpus.gpus))
        names = {self.gpus.get_name(g) for g in self.gpu_indices}
        if len(names) > 1:
            raise ValueError(f"PowerMonitor needs GPUs of one model; got {sorted(names)}")
        describe = self.gpus._gpus.describe(self.gpu_indices[0])
        self.domain = (PowerDomain.DEVICE_AVERAGE if "average" in describe
                       else PowerDomain.DEVICE_INSTANT)
        if power_domains is not None:
            if len(power_domains) == 0:
                raise ValueError("power_domains is empty: give at least one, or None")
            for d in power_domains:
                self._check_domain(d)
        self.power_domains: list[PowerDomain] = [self.domain]
        self.update_period = update_period if update_period is not None else _DEFAULT_PERIOD_S
        capacity = max_samples_per_gpu if max_samples_per_gpu is not None else _DEFAULT_CAPACITY
        self._timeline = _core.PowerTimeline(self.gpus._gpus, self.gpu_indices,
                                             self.update_period, capacity)
        self._finalizer = weakref.finalize(self, self._timeline.stop)

    def stop(self) -> None:
        """Stops sampling; the timeline stays readable."""
        self._timeline.stop()

    def _check_domain(self, domain: DomainArg) -> PowerDomain:
        try:
            d = PowerDomain(domain) if not isinstance(domain, PowerDomain) else domain
        except ValueError:
            raise ValueError(f"unknown power domain {domain!r}: one of "
                             f"{[x.value for x in PowerDomain]}") from None
        if d != self.domain:
            raise ValueError(
                f"power domain {d.value} is not sampled: these GPUs report "
                f"{self.domain.value} ({self.gpus.get_name(self.gpu_indices[0])})")
        return d

    def _positions(self, gpu_index: int | None) -> list[tuple[int, int]]:
        if gpu_index is None:
            return list(enumerate(self.gpu_indices))
        if gpu_index not in self.gpu_indices:
            raise ValueError(f"GPU {gpu_index} is not monitored (GPUs {self.gpu_indices})")
        return [(self.gpu_indices.index(gpu_index), gpu_index)]

    def get_power_timeline(
        self,
        power_domain: DomainArg,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, float]]]:
        """Per GPU, the samples (Unix s, W) within [start_time, end_time]."""
        self._check_domain(power_domain)
        return {g: self._timeline.timeline(pos, start_time, end_time)
                for pos, g in self._positions(gpu_index)}

    def get_all_power_timelines(
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[str, dict[int, list[tuple[float, float]]]]:
        """Every sampled domain's timelines, by the domain's value."""
        return {self.domain.value: self.get_power_timeline(self.domain, gpu_index, start_time,
                                                           end_time)}

    def get_energy(self, start_time: float, end_time: float,
                   power_domain: DomainArg | None = None) -> dict[int, float] | None:
        """J per GPU over [start_time, end_time] (Unix s): the samples integrated, the edge
        readings held to the window's edges; 0.0 for a GPU with fewer than two samples."""
        if power_domain is not None:
            self._check_domain(power_domain)
        return {g: self._timeline.energy_j(pos, start_time, end_time)
                for pos, g in self._positions(None)}

    def get_power(self, time: float | None = None,
                  power_domain: DomainArg = PowerDomain.DEVICE_INSTANT) -> dict[int, float] | None:
        """W per GPU: the latest sample, or the one nearest to ``time``; None if a GPU has no
        sample yet. Any domain name is accepted here and means the one sampled."""
        out: dict[int, float] = {}
        for pos, g in self._positions(None):
            samples = self._timeline.timeline(pos, None, None)
            if not samples:
                return None
            if time is None:
                out[g] = samples[-1][1]
                continue
            times = [t for t, _ in samples]
            i = bisect.bisect_left(times, time)
            near = min((j for j in (i - 1, i) if 0 <= j < len(samples)),
                       key=lambda j: abs(times[j] - time))
            out[g] = samples[near][1]
        return out

    @property
    def sample_count(self) -> int:
        """Samples taken (per GPU; zeus-cpp's)."""
        return self._timeline.sample_count

