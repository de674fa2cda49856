"""Zeus 0.16's ``zeus.metric`` over zeus-cpp: ``EnergyHistogram``, ``EnergyCumulativeCounter``
and ``PowerGauge`` with upstream's constructors, metric names (``energy_monitor_{gpu,cpu,dram}_
energy_joules``, ``power_monitor_gpu_power_watts``) and labels (``window``, ``index``), pushed
to a Pushgateway grouped by ``job`` as upstream's ``push_to_gateway`` does (each object's
metrics replace its group's), so that dashboards built on upstream keep working.

Unlike upstream, ``prometheus-client`` is not needed; the periodic ones run a thread, not a
spawned process (no second CUDA context, nothing to re-import); and a push never blocks the
caller: it goes out on zeus-cpp's pusher thread, and one that fails is logged once and dropped.
"""

from __future__ import annotations

import abc
import threading
import warnings
from collections.abc import Sequence

from zeus_cpp import _core
from zeus_cpp.monitor.energy import ZeusMonitor, sync_gpus
from zeus_cpp.monitor.power import PowerMonitor

__all__ = ["Metric", "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge"]

_Labels = list[tuple[str, str]]
_Family = tuple[str, str, str, list[tuple[_Labels, float, str]]]


def _pusher(pushgateway_url: str, job: str) -> _core.Pusher:
    # prometheus_client's push_to_gateway takes "host:port" too and means http://.
    url = pushgateway_url if "://" in pushgateway_url else f"http://{pushgateway_url}"
    return _core.Pusher(url, job)


def _float_text(value: float) -> str:
    # prometheus_client writes a bucket's bound as Python's float repr ("50.0", "+Inf").
    return "+Inf" if value == float("inf") else repr(float(value))


class Metric(abc.ABC):
    """A metric measured over named windows."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Start the window ``name``."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """End the window ``name`` and report it."""


class _Histogram:
    """One histogram family: cumulative bucket counts, sum and count per (window, index)."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name = name
        self.help = help_text
        self.bounds = sorted(float(b) for b in buckets)
        if self.bounds[-1] != float("inf"):
            self.bounds.append(float("inf"))
        self.series: dict[tuple[str, str], tuple[list[int], float]] = {}

    def observe(self, window: str, index: int, value: float) -> None:
        key = (window, str(index))
        counts, total = self.series.get(key, ([0] * len(self.bounds), 0.0))
        counts = [c + (1 if value <= b else 0) for c, b in zip(counts, self.bounds)]
        self.series[key] = (counts, total + value)

    def family(self) -> _Family:
        samples: list[tuple[_Labels, float, str]] = []
        for (window, index), (counts, total) in self.series.items():
            labels = [("window", window), ("index", index)]
            for bound, count in zip(self.bounds, counts):
                samples.append((labels + [("le", _float_text(bound))], float(count), "_bucket"))
            samples.append((labels, float(counts[-1]), "_count"))
            samples.append((labels, total, "_sum"))
        return (self.name, self.help, "histogram", samples)


class EnergyHistogram(Metric):
    """Energy of each window per GPU, CPU package and DRAM, as Prometheus histograms pushed at
    each ``end_window``."""

    def __init__(
        self,
        cpu_indices: list,
        gpu_indices: list,
        pushgateway_url: str,
        job: str,
        gpu_bucket_range: Sequence[float] = (50.0, 100.0, 200.0, 500.0, 1000.0),
        cpu_bucket_range: Sequence[float] = (10.0, 50.0, 100.0, 500.0, 1000.0),
        dram_bucket_range: Sequence[float] = (5.0, 10.0, 20.0, 50.0, 150.0),
    ) -> None:
        for what, buckets in (("GPU", gpu_bucket_range), ("CPU", cpu_bucket_range),
                              ("DRAM", dram_bucket_range)):
            if not buckets:
                raise ValueError(f"{what} bucket range cannot be empty. Please provide a valid "
                                 "range or omit the argument to use defaults.")
        self.gpu_bucket_range = list(gpu_bucket_range)
        self.cpu_bucket_range = list(cpu_bucket_range)
        self.dram_bucket_range = list(dram_bucket_range)
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.energy_monitor = ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices)
        self._histograms: dict[str, _Histogram] = {}
        if gpu_indices:
            self._histograms["gpu"] = _Histogram(
                "energy_monitor_gpu_energy_joules", "GPU energy consumption", gpu_bucket_range)
        if cpu_indices:
            self._histograms["cpu"] = _Histogram(
                "energy_monitor_cpu_energy_joules", "CPU energy consumption", cpu_bucket_range)
            if self.energy_monitor._dram_indices:
                self._histograms["dram"] = _Histogram(
                    "energy_monitor_dram_energy_joules", "DRAM energy consumption",
                    dram_bucket_range)
        self._pusher = _pusher(pushgateway_url, job)

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Start measuring the window ``name``."""
        self.energy_monitor.begin_window(f"__EnergyHistogram_{name}",
                                         sync_execution=sync_execution)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """End the window, observe its energies, and push (off this thread)."""
        m = self.energy_monitor.end_window(f"__EnergyHistogram_{name}",
                                           sync_execution=sync_execution)
        for kind, values, buckets in (("gpu", m.gpu_energy, self.gpu_bucket_range),
                                      ("cpu", m.cpu_energy, self.cpu_bucket_range),
                                      ("dram", m.dram_energy, self.dram_bucket_range)):
            histogram = self._histograms.get(kind)
            if not values or histogram is None:
                continue
            for index, energy in values.items():
                histogram.observe(name, index, energy)
                if energy > max(buckets):
                    warnings.warn(f"{kind.upper()} {index} energy {energy} exceeds the maximum "
                                  f"bucket value of {max(buckets)}", stacklevel=2)
                if energy < min(buckets):
                    warnings.warn(f"{kind.upper()} {index} energy {energy} exceeds the minimum "
                                  f"bucket value of {min(buckets)}", stacklevel=2)
        self._pusher.push([h.family() for h in self._histograms.values()])


class _Periodic:
    """A thread that runs ``tick`` every ``period`` s until stopped."""

    def __init__(self, period: float, tick) -> None:
        self._stop = threading.Event()
        self._period = period
        self._tick = tick
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self._tick()

    def stop(self, timeout: float = 20.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


class EnergyCumulativeCounter(Metric):
    """Energy per GPU, CPU package and DRAM as counters that grow every ``update_period`` s
    while a window is open, pushed at each update."""

    def __init__(self, cpu_indices: list, gpu_indices: list, update_period: int,
                 pushgateway_url: str, job: str) -> None:
        if update_period <= 0:
            raise ValueError(f"update_period must be positive, got {update_period}")
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.window_state: dict[str, _Periodic] = {}
        self._monitor = ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices)
        self._totals: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self._pusher = _pusher(pushgateway_url, job)

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start counting the window ``name`` (a thread measures every ``update_period`` s)."""
        if name in self.window_state:
            raise ValueError(f"EnergyCumulativeCounter window '{name}' is already running.")
        if sync_execution:
            sync_gpus(self.gpu_indices)
        key = f"__EnergyCumulativeCounter_{name}"
        self._monitor.begin_window(key, sync_execution=False)

        def tick() -> None:
            m = self._monitor.end_window(key, sync_execution=False)
            self._monitor.begin_window(key, sync_execution=False)
            with self._lock:
                for kind, values in (("gpu", m.gpu_energy), ("cpu", m.cpu_energy),
                                     ("dram", m.dram_energy)):
                    for index, energy in (values or {}).items():
                        series = (kind, name, str(index))
                        self._totals[series] = self._totals.get(series, 0.0) + energy
                families = self._families()
            self._pusher.push(families)

        self.window_state[name] = _Periodic(float(self.update_period), tick)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stop counting the window ``name``."""
        if name not in self.window_state:
            raise ValueError(f"No active monitoring process found for '{name}'.")
        if sync_execution:
            sync_gpus(self.gpu_indices)
        self.window_state.pop(name).stop()
        self._monitor.end_window(f"__EnergyCumulativeCounter_{name}", cancel=True)

    def _families(self) -> list[_Family]:
        help_text = {"gpu": "GPU energy consumption", "cpu": "CPU energy consumption",
                     "dram": "DRAM energy consumption"}
        out: list[_Family] = []
        for kind in ("gpu", "cpu", "dram"):
            samples = [([("window", w), ("index", i)], total, "")
                       for (k, w, i), total in self._totals.items() if k == kind]
            if samples:
                out.append((f"energy_monitor_{kind}_energy_joules_total", help_text[kind],
                            "counter", samples))
        return out


class PowerGauge(Metric):
    """Each GPU's power as a gauge, set and pushed every ``update_period`` s while a window is
    open."""

    def __init__(self, gpu_indices: list, update_period: int, pushgateway_url: str,
                 job: str) -> None:
        if update_period <= 0:
            raise ValueError(f"update_period must be positive, got {update_period}")
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.window_state: dict[str, tuple[_Periodic, PowerMonitor]] = {}
        self._values: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._pusher = _pusher(pushgateway_url, job)

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start setting the gauge for the window ``name``."""
        if name in self.window_state:
            raise ValueError(f"PowerGauge metric '{name}' already exists.")
        if sync_execution:
            sync_gpus(self.gpu_indices)
        monitor = PowerMonitor(gpu_indices=self.gpu_indices,
                               update_period=min(float(self.update_period), 0.1))

        def tick() -> None:
            power = monitor.get_power() or {}
            with self._lock:
                for index, watts in power.items():
                    self._values[(name, str(index))] = watts
                samples = [([("window", w), ("index", i)], v, "")
                           for (w, i), v in self._values.items()]
            self._pusher.push([("power_monitor_gpu_power_watts",
                                "Records power consumption for GPU over time", "gauge",
                                samples)])

        self.window_state[name] = (_Periodic(float(self.update_period), tick), monitor)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stop the window ``name``."""
        if sync_execution:
            sync_gpus(self.gpu_indices)
        periodic, monitor = self.window_state.pop(name)
        periodic.stop()
        monitor.stop()
