"""Windows whose energy is split into the signal's periods (an hour for ElectricityMaps and
OpenEI, a trace's step), so that each period's joules are charged that period's carbon
intensity or price: what ``CarbonEmissionMonitor`` and ``EnergyCostMonitor`` share.

Upstream spawns a process that ends and restarts an inner ``ZeusMonitor`` window at every hour;
here one thread does it (no pickling of providers, no second NVML handle), and a provider that
fails is logged once while the last value it gave goes on being used, saying since when."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, TypeVar

from zeus_cpp import _core
from zeus_cpp.monitor.energy import Measurement, ZeusMonitor

logger = logging.getLogger(__name__)
T = TypeVar("T")


def bucket_start(unix_s: float, period_s: float) -> float:
    """The start of the period holding `unix_s` (periods counted from the Unix epoch, so hours
    start on the UTC hour, as upstream floors them)."""
    return math.floor(unix_s / period_s) * period_s


def to_datetime(unix_s: float) -> datetime:
    return datetime.fromtimestamp(unix_s, timezone.utc)


RateAt = Callable[[datetime], float]


def fetched_once(fetch: Callable[[], T], lookup: Callable[[T, datetime], float]) -> RateAt:
    """A rate function over one fetch: ``fetch()`` runs at the first call, and its result (or its
    error, raised again) serves every later call, so that a window spanning many periods costs
    the provider one request (ElectricityMaps' history, OpenEI's schedule), not one a period."""
    box: list[tuple[bool, object]] = []

    def rate_at(start: datetime) -> float:
        if not box:
            try:
                box.append((True, fetch()))
            except Exception as e:  # kept: the next periods fail alike, without a request
                box.append((False, e))
        ok, value = box[0]
        if not ok:
            raise value  # type: ignore[misc]
        return lookup(value, start)  # type: ignore[arg-type]

    return rate_at


class BucketedWindows:
    """Named windows over one ``ZeusMonitor`` whose energy is kept per period.

    ``period_s`` is read from the provider at each boundary (it is ``update_period``).
    ``rates()`` is called once per ended window and gives the function from a period's start to
    its signal (it may raise: the last value is then used, with a warning on the measurement).
    ``what`` names the signal in logs.
    """

    def __init__(self, monitor: ZeusMonitor, period_s: Callable[[], float],
                 rates: Callable[[], RateAt], what: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.zeus_monitor = monitor
        self._period_s = period_s
        self._rates = rates
        self._what = what
        self._clock = clock
        self._lock = threading.RLock()
        self._keys: set[str] = set()
        # key -> period start (unix s) -> "gpu_0"/"cpu_0"/"dram_0" -> J
        self._energy: dict[str, dict[float, dict[str, float]]] = {}
        self._open_at: dict[str, float] = {}  # key -> start of the period its inner window is in
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._last_rate: tuple[float, datetime] | None = None  # (value, the period it was for)
        self._failing: str | None = None

    @staticmethod
    def _inner(key: str) -> str:
        return f"__bucket_{key}"

    def begin(self, key: str, sync_execution: bool) -> None:
        with self._lock:
            if key in self._keys:
                raise ValueError(f"Measurement window '{key}' already exists")
            self.zeus_monitor.begin_window(key, sync_execution=sync_execution)
            self.zeus_monitor.begin_window(self._inner(key), sync_execution=False)
            self._keys.add(key)
            self._energy[key] = defaultdict(lambda: defaultdict(float))
            self._open_at[key] = bucket_start(self._clock(), self._period_s())
            if self._thread is None or not self._thread.is_alive():
                self._wake.clear()
                self._thread = threading.Thread(target=self._roll, name="zeus-bucket-roller",
                                                daemon=True)
                self._thread.start()

    def end(self, key: str, sync_execution: bool) -> tuple[Measurement, dict[str, float],
                                                           list[str]]:
        """The whole window's measurement, its amount (gCO2eq or $) per device key, and the
        warnings about the signal."""
        with self._lock:
            if key not in self._keys:
                raise ValueError(f"Measurement window '{key}' does not exist")
            self._close_inner(key)
            overall = self.zeus_monitor.end_window(key, sync_execution=sync_execution)
            self._keys.discard(key)
            buckets = self._energy.pop(key)
            self._open_at.pop(key, None)
            if not self._keys:
                self._wake.set()
        _charge_edges(buckets, overall)
        amounts: dict[str, float] = defaultdict(float)
        warnings: list[str] = []
        rate_at = self._rates()
        for start, energies in sorted(buckets.items()):
            rate = self._rate(rate_at, to_datetime(start), warnings)
            for device, joules in energies.items():
                amounts[device] += joules / 3.6e6 * rate
        return overall, dict(amounts), warnings

    def _close_inner(self, key: str) -> None:
        m = self.zeus_monitor.end_window(self._inner(key), sync_execution=False)
        bucket = self._energy[key][self._open_at[key]]
        for g, j in m.gpu_energy.items():
            bucket[f"gpu_{g}"] += j
        for c, j in (m.cpu_energy or {}).items():
            bucket[f"cpu_{c}"] += j
        for c, j in (m.dram_energy or {}).items():
            bucket[f"dram_{c}"] += j

    def _roll(self) -> None:
        """At each period boundary, closes every open window's period and opens the next."""
        while True:
            with self._lock:
                if not self._keys:
                    return
                period = self._period_s()
                now = self._clock()
                next_start = bucket_start(now, period) + period
            if self._wake.wait(timeout=max(0.0, next_start - now)):
                return
            with self._lock:
                now = self._clock()
                for key in list(self._keys):
                    if bucket_start(now, period) == self._open_at[key]:
                        continue  # woke early
                    self._close_inner(key)
                    self.zeus_monitor.begin_window(self._inner(key), sync_execution=False)
                    self._open_at[key] = bucket_start(now, period)

    def _rate(self, rate_at: RateAt, start: datetime, warnings: list[str]) -> float:
        try:
            value = float(rate_at(start))
        except Exception as e:  # a provider's failure never ends the window
            if self._failing is None:
                logger.warning("%s for %s failed: %s", self._what, start.isoformat(), e)
            self._failing = str(e)
            if self._last_rate is None:
                warnings.append(f"no {self._what} for {start.isoformat()} ({e}) and none "
                                "before: counted as NaN")
                return math.nan
            value, since = self._last_rate
            warnings.append(f"{self._what} for {start.isoformat()} failed ({e}); used "
                            f"{value:g}, the value for {since.isoformat()}")
            return value
        if self._failing is not None:
            logger.info("%s answers again", self._what)
            self._failing = None
        self._last_rate = (value, start)
        return value


def _charge_edges(buckets: dict[float, dict[str, float]], overall: Measurement) -> None:
    """Adds to the last period what the whole window measured beyond its periods: the inner
    windows begin after the window and end before it (a fraction of a millisecond, more on a
    loaded machine), so without this a window's gCO2eq or $ would fall short of its energy times
    a rate that held all along it."""
    if not buckets:
        return
    last = buckets[max(buckets)]
    for kind, energies in (("gpu", overall.gpu_energy), ("cpu", overall.cpu_energy),
                           ("dram", overall.dram_energy)):
        for index, joules in (energies or {}).items():
            device = f"{kind}_{index}"
            charged = sum(b.get(device, 0.0) for b in buckets.values())
            last[device] += joules - charged


def by_kind(amounts: dict[str, float], kind: str) -> dict[int, float]:
    return {int(k.split("_", 1)[1]): v for k, v in amounts.items() if k.startswith(kind + "_")}


def period_seconds(period: timedelta | float | int) -> float:
    s = period.total_seconds() if isinstance(period, timedelta) else float(period)
    if not s > 0:
        raise ValueError(f"the provider's update_period must be positive, got {period!r}")
    return s


class TraceFile:
    """A carbon or price trace read by the C++ reader (``_core.SignalTrace``: the formats of
    docs/grid.md), read again when the file changes (its time or size)."""

    def __init__(self, path: str | Path, kind: str) -> None:
        self.path = Path(path)
        self._kind = kind
        self._stamp: tuple[float, int] | None = None
        self.reload()

    def reload(self) -> None:
        st = self.path.stat() if self.path.exists() else None
        stamp = (st.st_mtime, st.st_size) if st else None
        if stamp is not None and stamp == self._stamp:
            return
        self.trace = _core.SignalTrace.load(str(self.path), self._kind)
        self._stamp = stamp

    def value_at(self, when: datetime | float) -> float:
        """The row in force at `when` (a datetime, or Unix seconds)."""
        self.reload()
        unix_s = when.timestamp() if isinstance(when, datetime) else float(when)
        return self.trace.at(unix_s)[1]

    def mean_over(self, when: datetime | float, horizon_s: float) -> float | None:
        """The time-weighted mean over [when, when + horizon_s), or None where the trace does
        not reach that far."""
        self.reload()
        unix_s = when.timestamp() if isinstance(when, datetime) else float(when)
        return self.trace.mean_over(unix_s, horizon_s)

    def history_mean(self, when: datetime | float, window_s: float) -> float | None:
        """The time-weighted mean over the part of [when - window_s, when) the rows cover, or
        None where they cover none of it."""
        self.reload()
        unix_s = when.timestamp() if isinstance(when, datetime) else float(when)
        return self.trace.history_mean(unix_s, window_s)

    def points(self) -> list[tuple[datetime, float]]:
        self.reload()
        return [(to_datetime(t), v) for t, v in self.trace.points]

    @property
    def step(self) -> timedelta:
        return timedelta(seconds=self.trace.step_s)


class BucketMonitor:
    """The windows of a monitor that charges each period its signal (the carbon and price
    monitors): upstream's ``begin_window``/``end_window`` contract over ``BucketedWindows``."""

    def __init__(self, zeus_monitor: ZeusMonitor, period: Callable[[], timedelta | float],
                 rates: Callable[[], RateAt], what: str) -> None:
        self.zeus_monitor = zeus_monitor
        self._windows = BucketedWindows(zeus_monitor, lambda: period_seconds(period()),
                                        rates, what)

    @property
    def current_keys(self) -> set[str]:
        return set(self._windows._keys)

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begins the window `key` (``ValueError`` if it is open)."""
        self._windows.begin(key, sync_execution)

    def _end(self, key: str, sync_execution: bool) -> tuple[Measurement, dict[str, float],
                                                            list[str]]:
        return self._windows.end(key, sync_execution)
