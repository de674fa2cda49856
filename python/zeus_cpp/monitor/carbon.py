"""Zeus 0.16's carbon monitor: ``CarbonEmissionMonitor`` (windows like ``ZeusMonitor`` that
return gCO2eq per GPU, CPU and DRAM: each hour's joules times that hour's carbon intensity,
``J / 3.6e6 * gCO2eq/kWh``) over a ``CarbonIntensityProvider``: ``ElectrictyMapsClient``
(upstream's spelling; ElectricityMaps' v3 API) or zeus-cpp's ``TraceCarbonIntensityProvider``
(a local trace file, for machines without internet and for tests).

Beyond upstream: ``ZEUS_ELECTRICITYMAPS_URL`` replaces the API's base URL (default
``https://api.electricitymap.org/v3``), ``ZEUS_ELECTRICITYMAPS_TOKEN`` is sent as the
``auth-token`` header, requests time out, and a provider that fails mid-window does not end it:
the last value is used, once logged, and the measurement's ``warnings`` say since when."""

from __future__ import annotations

import abc
import json
import logging
import math
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Literal

from zeus_cpp import _core
from zeus_cpp._errors import ZeusError
from zeus_cpp.monitor._buckets import BucketMonitor, RateAt, TraceFile, by_kind, fetched_once
from zeus_cpp.monitor._http import BadReply, HttpFailure, get_json
from zeus_cpp.monitor.energy import ZeusMonitor

__all__ = [
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
    "CarbonIntensityProvider",
    "ElectrictyMapsClient",
    "TraceCarbonIntensityProvider",
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
    "get_ip_lat_long",
]

logger = logging.getLogger(__name__)

ELECTRICITYMAPS_URL = "https://api.electricitymap.org/v3"
FORECAST_MAX_AGE_S = 900.0  # ElectricityMaps updates its forecast hourly


def get_ip_lat_long() -> tuple[float, float]:
    """The machine's latitude and longitude: ``ZEUS_CARBON_LOCATION`` ("lat,lon") when set,
    else upstream's lookup of this IP's position at ipinfo.io (network)."""
    explicit = os.environ.get("ZEUS_CARBON_LOCATION")
    if explicit:
        return _parse_location(explicit, "ZEUS_CARBON_LOCATION")
    try:
        loc = get_json("http://ipinfo.io/json")["loc"]
    except (HttpFailure, BadReply, KeyError, TypeError) as e:
        raise ZeusCarbonIntensityHTTPError(
            f"the position of this machine's IP could not be found ({e}); set "
            "ZEUS_CARBON_LOCATION=lat,lon") from e
    return _parse_location(loc, "ipinfo.io's loc")


def _parse_location(text: str, what: str) -> tuple[float, float]:
    try:
        lat, lon = (float(x) for x in text.split(","))
    except ValueError:
        raise _core.ConfigError(f"{what}='{text}': expected latitude,longitude "
                                "(e.g. 42.28,-83.74)") from None
    if not (abs(lat) <= 90 and abs(lon) <= 180):
        raise _core.ConfigError(f"{what}='{text}': latitude or longitude out of range")
    return lat, lon


class ZeusCarbonIntensityHTTPError(ZeusError):
    """The carbon-intensity provider could not be reached or answered an error status."""


class ZeusCarbonIntensityNotFoundError(ZeusError):
    """The provider answered, but without a carbon intensity."""


class CarbonIntensityProvider(abc.ABC):
    """Where carbon intensity (gCO2eq/kWh) comes from."""

    @abc.abstractmethod
    def get_current_carbon_intensity(self) -> float:
        """The intensity now."""

    @abc.abstractmethod
    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """Recent intensities by the (UTC) start of the period each holds for."""

    @property
    @abc.abstractmethod
    def update_period(self) -> timedelta:
        """How long one value holds."""

    @property
    @abc.abstractmethod
    def history_length(self) -> int:
        """How many values ``get_recent_carbon_intensity`` returns."""


def _parse_time(text: str) -> datetime:
    """ElectricityMaps' ``datetime`` ("2024-09-24T03:00:00.000Z") as an aware UTC datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


class ElectrictyMapsClient(CarbonIntensityProvider):
    """ElectricityMaps' v3 API (upstream's class, upstream's spelling).

    ``location``: (latitude, longitude). ``estimate``: let ElectricityMaps estimate where it
    has no measured value (``disableEstimations`` is its negation). ``emission_factor_type``:
    ``direct`` or ``lifecycle``. zeus-cpp's: ``timeout_s`` per request.
    """

    def __init__(
        self,
        location: tuple[float, float],
        estimate: bool = False,
        emission_factor_type: Literal["direct", "lifecycle"] = "direct",
        *,
        timeout_s: float = 10.0,
    ) -> None:
        if emission_factor_type not in ("direct", "lifecycle"):
            raise ValueError(f"emission_factor_type '{emission_factor_type}': choose direct or "
                             "lifecycle")
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type
        self.timeout_s = timeout_s
        self.base_url = os.environ.get("ZEUS_ELECTRICITYMAPS_URL", ELECTRICITYMAPS_URL).rstrip("/")
        self._latest: tuple[float, float] | None = None  # (Unix s it holds from, value)
        self._forecast: tuple[float, object] | None = None  # (fetched at, _core.SignalTrace)
        self._forecast_refused = False
        self._history: tuple[float, object] | None = None  # (fetched at, _core.SignalTrace)

    def _url(self, route: str, **extra: object) -> str:
        params: dict[str, object] = {"lat": self.lat, "lon": self.long}
        if route == "forecast":  # the forecast's own parameters
            params.update(extra)
        else:
            params["disableEstimations"] = str(not self.estimate)
        params["emissionFactorType"] = self.emission_factor_type
        return f"{self.base_url}/carbon-intensity/{route}?{urllib.parse.urlencode(params)}"

    def _get(self, route: str, **extra: object) -> dict:
        url = self._url(route, **extra)
        headers = {}
        token = os.environ.get("ZEUS_ELECTRICITYMAPS_TOKEN")
        if token:
            headers["auth-token"] = token
        try:
            doc = get_json(url, headers, self.timeout_s)
        except HttpFailure as e:
            raise ZeusCarbonIntensityHTTPError(
                f"Failed to retrieve the carbon intensity: {e}") from e
        except BadReply as e:
            raise ZeusCarbonIntensityNotFoundError(str(e)) from e
        if not isinstance(doc, dict):
            raise ZeusCarbonIntensityNotFoundError(f"{url} answered {doc!r}, not an object")
        return doc

    def _where(self) -> str:
        return (f"at ({self.lat}, {self.long}) with estimate={self.estimate} and "
                f"emission_factor_type={self.emission_factor_type}")

    def get_current_carbon_intensity(self) -> float:
        doc = self._get("latest")
        value = doc.get("carbonIntensity")
        if not isinstance(value, (int, float)):
            raise ZeusCarbonIntensityNotFoundError(
                f"no current carbon intensity {self._where()}; the API said {doc}")
        try:
            self._latest = (_parse_time(doc["datetime"]).timestamp(), float(value))
        except (KeyError, TypeError, ValueError):
            self._latest = None
        return float(value)

    def get_forecast_mean(self, horizon_s: float) -> float | None:
        """zeus-cpp's: the mean of ElectricityMaps' hourly forecast (``carbon-intensity/forecast``,
        a paid plan's endpoint) over the next `horizon_s`, the value last read leading it until
        its first hour; ``CarbonAwarePowerLimitOptimizer`` rules on it. None where it does not
        reach that far, and for good once the API refused it (401, 403, 404: raised once, as
        ``ZeusCarbonIntensityHTTPError``). A forecast is reused for 15 minutes."""
        if self._forecast_refused or not horizon_s > 0:
            return None
        now = time.time()

        def mean() -> float | None:
            if self._forecast is None:
                return None
            trace = self._forecast[1]
            if self._latest is not None:
                trace = trace.with_leading(*self._latest)
            return trace.mean_over(now, horizon_s)

        if self._forecast is not None and 0 <= now - self._forecast[0] < FORECAST_MAX_AGE_S:
            reused = mean()
            if reused is not None:
                return reused
        needed_h = math.ceil((horizon_s + FORECAST_MAX_AGE_S) / 3600) + 1
        hours = next((h for h in (6, 24, 48) if needed_h <= h), 72)
        self._forecast = None
        try:
            doc = self._get("forecast", horizonHours=hours)
        except ZeusCarbonIntensityHTTPError as e:
            status = getattr(e.__cause__, "status", None)
            if status in (401, 403, 404):
                self._forecast_refused = True
                raise ZeusCarbonIntensityHTTPError(
                    f"{e} (the forecast is a paid plan's endpoint); it is not asked again in "
                    "this run") from e
            raise
        source = self._url("forecast", horizonHours=hours)
        try:
            self._forecast = (now, _core.SignalTrace.parse(json.dumps(doc), source, "carbon"))
        except _core.ConfigError as e:
            raise ZeusCarbonIntensityNotFoundError(str(e)) from e
        return mean()

    def get_history_mean(self, window_s: float) -> float | None:
        """zeus-cpp's: the mean of ``carbon-intensity/history`` (the last 24 hours) over the
        last `window_s`, fetched at most once an hour: the grid's own reference of
        ``CarbonAwarePowerLimitOptimizer`` (docs/grid.md). None where it covers none of it."""
        now = time.time()
        if self._history is None or not 0 <= now - self._history[0] < 3600:
            doc = self._get("history")
            try:
                trace = _core.SignalTrace.parse(json.dumps(doc), self._url("history"), "carbon")
            except _core.ConfigError as e:
                raise ZeusCarbonIntensityNotFoundError(str(e)) from e
            self._history = (now, trace)
        return self._history[1].history_mean(now, window_s)

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        doc = self._get("history")
        try:
            return {_parse_time(m["datetime"]): float(m["carbonIntensity"])
                    for m in doc["history"]}
        except (KeyError, TypeError, ValueError) as e:
            raise ZeusCarbonIntensityNotFoundError(
                f"no recent carbon intensity {self._where()}; the API said {doc}") from e

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24


class TraceCarbonIntensityProvider(CarbonIntensityProvider):
    """zeus-cpp's: carbon intensity from a local trace (CSV ``datetime,carbonIntensity`` with
    ISO 8601 UTC times, ElectricityMaps' CSV export, or its history JSON). The value now is the
    row in force now; the file is read again when it changes. ``clock``: Unix seconds (tests
    and replays pass their own)."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self._file = TraceFile(path, "carbon")
        self.path = self._file.path
        self._clock = clock

    def value_at(self, when: datetime | float) -> float:
        """The row in force at `when` (a datetime, or Unix seconds)."""
        return self._file.value_at(when)

    def get_current_carbon_intensity(self) -> float:
        return self.value_at(self._clock())

    def get_forecast_mean(self, horizon_s: float) -> float | None:
        """zeus-cpp's: the mean over the next `horizon_s` where the trace reaches that far (a
        forecast export), else None. ``CarbonAwarePowerLimitOptimizer`` rules on it."""
        return self._file.mean_over(self._clock(), horizon_s)

    def get_history_mean(self, window_s: float) -> float | None:
        """zeus-cpp's: the mean over the last `window_s` the trace covers, else None: the
        grid's own reference of ``CarbonAwarePowerLimitOptimizer`` (docs/grid.md)."""
        return self._file.history_mean(self._clock(), window_s)

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        return dict(self._file.points())

    @property
    def update_period(self) -> timedelta:
        return self._file.step

    @property
    def history_length(self) -> int:
        return len(self._file.points())


def intensity_rates(provider: CarbonIntensityProvider) -> RateAt:
    """The intensity of each period of one ended window, by its start: a trace's row; else the
    provider's recent value for it (or the latest one before it within a period), fetched once
    for all the window's periods, else its current value (the hour ElectricityMaps has not got
    yet)."""
    if isinstance(provider, TraceCarbonIntensityProvider):
        return provider.value_at

    def lookup(recent: dict[datetime, float], start: datetime) -> float:
        normalized = {(k if k.tzinfo else k.replace(tzinfo=timezone.utc)): v
                      for k, v in recent.items()}
        if start in normalized:
            return normalized[start]
        before = [k for k in normalized if k <= start]
        if before and start - max(before) < provider.update_period:
            return normalized[max(before)]
        return provider.get_current_carbon_intensity()

    return fetched_once(provider.get_recent_carbon_intensity, lookup)


@dataclass
class CarbonEmissionMeasurement:
    """One window: ``time`` (s), energy (J) and carbon emission (gCO2eq) per GPU, CPU package
    and DRAM. ``warnings`` (zeus-cpp's): a period whose intensity was not known and what was
    used instead."""

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None
    warnings: list[str] = field(default_factory=list)


class CarbonEmissionMonitor(BucketMonitor):
    """Time, energy and carbon emission of named windows (upstream's constructor and methods:
    ``begin_window(key, sync_execution=True)``, ``end_window``, ``current_keys``).

    ``carbon_intensity_provider``: where the intensity comes from. ``gpu_indices``,
    ``cpu_indices``, ``sync_execution_with``: as ``ZeusMonitor``. zeus-cpp's: ``device`` (a
    locator; None reads ``ZEUS_DEVICE``).
    """

    def __init__(
        self,
        carbon_intensity_provider: CarbonIntensityProvider,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Literal["torch", "jax"] = "torch",
        *,
        device: str | None = None,
    ) -> None:
        self.carbon_intensity_provider = carbon_intensity_provider
        super().__init__(
            ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices,
                        sync_execution_with=sync_execution_with, device=device),
            lambda: carbon_intensity_provider.update_period,
            lambda: intensity_rates(carbon_intensity_provider), "carbon intensity")

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """Ends the window `key` (``ValueError`` if it is not open): its time, energy and
        carbon emission."""
        m, grams, warnings = self._end(key, sync_execution)
        return CarbonEmissionMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_carbon_emission=by_kind(grams, "gpu"),
            cpu_energy=m.cpu_energy,
            cpu_carbon_emission=by_kind(grams, "cpu") or None,
            dram_energy=m.dram_energy,
            dram_carbon_emission=by_kind(grams, "dram") or None,
            warnings=warnings,
        )
