"""Zeus 0.16's price monitor: ``EnergyCostMonitor`` (windows like ``ZeusMonitor`` that return
the electricity cost in $ per GPU, CPU and DRAM: each hour's joules times that hour's price,
``J / 3.6e6 * $/kWh``) over an ``ElectricityPriceProvider``: ``OpenEIClient`` (OpenEI's
utility-rate database, the rate of the tier the schedule names for the month and hour) or
zeus-cpp's ``TraceElectricityPriceProvider`` (a local ``datetime,price_per_kwh`` trace).

Beyond upstream: ``ZEUS_OPENEI_URL`` replaces the API's base URL (default
``https://api.openei.org``) and ``ZEUS_OPENEI_API_KEY`` gives the key (OpenEI requires one);
every provider answers ``price_at(when)``; the schedule is read in the machine's local time
(a utility's tariff hours are local; upstream reads them in UTC); requests time out; a provider
that fails mid-window is logged once and its last price used, which ``warnings`` says."""

from __future__ import annotations

import abc
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Literal

from zeus_cpp._errors import ZeusError
from zeus_cpp.monitor._buckets import BucketMonitor, RateAt, TraceFile, by_kind, fetched_once
from zeus_cpp.monitor._http import BadReply, HttpFailure, get_json
from zeus_cpp.monitor.energy import ZeusMonitor

__all__ = [
    "ElectricityPriceProvider",
    "EnergyCostMeasurement",
    "EnergyCostMonitor",
    "OpenEIClient",
    "TraceElectricityPriceProvider",
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
    "get_time_info",
]

logger = logging.getLogger(__name__)

OPENEI_URL = "https://api.openei.org"


def get_time_info() -> tuple[str, str, int]:
    """Upstream's helper: the month's name, ``Weekday`` or ``Weekend``, and the hour, now."""
    now = datetime.now()
    return now.strftime("%B"), "Weekend" if now.weekday() >= 5 else "Weekday", now.hour


class ZeusElectricityPriceHTTPError(ZeusError):
    """The price provider could not be reached or answered an error status."""


class ZeusElectricityPriceNotFoundError(ZeusError):
    """The provider answered, but without the rate asked for."""


class ElectricityPriceProvider(abc.ABC):
    """Where the price of electricity ($/kWh) comes from."""

    @abc.abstractmethod
    def get_current_electricity_price(self) -> dict[str, list]:
        """Upstream's: the provider's rate data."""

    def price_at(self, when: datetime) -> float:
        """zeus-cpp's: the price ($/kWh) in force at `when`; by default read from upstream's
        rate data (``energy_rate_structure`` and the weekday/weekend schedules)."""
        return rate_from_schedule(self.get_current_electricity_price(), when)

    @property
    def update_period(self) -> timedelta:
        """How long one price holds (a tariff's hour)."""
        return timedelta(hours=1)


def rate_from_schedule(data: dict[str, Any], when: datetime) -> float:
    """OpenEI's rate at `when` (local time): the tier that the weekday or weekend schedule names
    for its month and hour, and that tier's first rate."""
    local = when.astimezone() if when.tzinfo else when
    schedule = data["energy_weekday_schedule" if local.weekday() < 5
                    else "energy_weekend_schedule"]
    try:
        tier = schedule[local.month - 1][local.hour]
        return float(data["energy_rate_structure"][tier][0]["rate"])
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise ZeusElectricityPriceNotFoundError(
            f"the rate structure has no rate for {local.isoformat()}: {e!r}") from e


def _search(data: Any, key_name: str, target: Any, wanted: str) -> list[Any]:
    """Every `wanted` field of an object (at any depth) whose `key_name` is `target`."""
    found: list[Any] = []
    if isinstance(data, dict):
        if data.get(key_name) == target:
            found.append(data.get(wanted))
        for value in data.values():
            found.extend(_search(value, key_name, target, wanted))
    elif isinstance(data, list):
        for item in data:
            found.extend(_search(item, key_name, target, wanted))
    return found


class OpenEIClient(ElectricityPriceProvider):
    """OpenEI's utility-rate API (upstream's class and arguments).

    ``location``: (latitude, longitude). ``label``: the rate's unique label. ``sector``:
    ``Residential``, ``Commercial``, ``Industrial`` or ``Lighting``. ``radius``: miles around
    the location. zeus-cpp's: ``timeout_s`` per request; the rate data is fetched once and
    kept (a tariff changes by the season, not by the hour).
    """

    def __init__(
        self,
        location: tuple[float, float],
        label: str,
        sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
        radius: int = 0,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self.lat, self.long = location
        self.label = label
        self.sector = sector
        self.radius = radius
        self.timeout_s = timeout_s
        self.base_url = os.environ.get("ZEUS_OPENEI_URL", OPENEI_URL).rstrip("/")
        self._rates: dict[str, list] | None = None

    def url(self) -> str:
        query = {"version": "latest", "format": "json", "lat": self.lat, "lon": self.long,
                 "radius": self.radius, "detail": "full", "sector": self.sector}
        key = os.environ.get("ZEUS_OPENEI_API_KEY")
        if key:
            query["api_key"] = key
        return f"{self.base_url}/utility_rates?{urllib.parse.urlencode(query)}"

    def get_current_electricity_price(self) -> dict[str, list]:
        if self._rates is not None:
            return self._rates
        url = self.url()
        try:
            data = get_json(url, timeout_s=self.timeout_s)
        except HttpFailure as e:
            raise ZeusElectricityPriceHTTPError(
                f"Failed to retrieve the electricity price: {e}") from e
        except BadReply as e:
            raise ZeusElectricityPriceNotFoundError(str(e)) from e
        if isinstance(data, dict) and "error" in data:
            raise ZeusElectricityPriceHTTPError(f"OpenEI says: {data['error']}")
        parts = {name: _search(data, "label", self.label, field_name)
                 for name, field_name in (("energy_rate_structure", "energyratestructure"),
                                          ("energy_weekday_schedule", "energyweekdayschedule"),
                                          ("energy_weekend_schedule", "energyweekendschedule"))}
        if not all(parts.values()) or any(v[0] is None for v in parts.values()):
            raise ZeusElectricityPriceNotFoundError(
                f"no rate labelled '{self.label}' with an energy rate structure and schedules "
                f"near ({self.lat}, {self.long}) in sector {self.sector}")
        self._rates = {name: values[0] for name, values in parts.items()}
        return self._rates


class TraceElectricityPriceProvider(ElectricityPriceProvider):
    """zeus-cpp's: prices from a local trace (CSV ``datetime,price_per_kwh``, ISO 8601 UTC
    times); the price now is the row in force now; the file is read again when it changes.
    ``clock``: Unix seconds."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self._file = TraceFile(path, "price")
        self.path = self._file.path
        self._clock = clock

    def price_at(self, when: datetime | float) -> float:
        return self._file.value_at(when)

    def get_current_electricity_price(self) -> dict[str, list]:
        """The trace as ``{"datetime": [...], "price_per_kwh": [...]}``."""
        points = self._file.points()
        return {"datetime": [t for t, _ in points], "price_per_kwh": [v for _, v in points]}

    def get_current_price(self) -> float:
        """The price now."""
        return self.price_at(self._clock())

    def get_forecast_mean(self, horizon_s: float) -> float | None:
        """zeus-cpp's: the mean price over the next `horizon_s` where the trace reaches that
        far (day-ahead prices), else None. ``CarbonAwarePowerLimitOptimizer`` rules on it."""
        return self._file.mean_over(self._clock(), horizon_s)

    def get_history_mean(self, window_s: float) -> float | None:
        """zeus-cpp's: the mean over the last `window_s` the trace covers, else None: the
        grid's own reference of ``CarbonAwarePowerLimitOptimizer`` (docs/grid.md)."""
        return self._file.history_mean(self._clock(), window_s)

    @property
    def update_period(self) -> timedelta:
        return self._file.step


@dataclass
class EnergyCostMeasurement:
    """One window: ``time`` (s), energy (J) and its cost ($) per GPU, CPU package and DRAM.
    ``warnings`` (zeus-cpp's): a period whose price was not known and what was used."""

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None
    warnings: list[str] = field(default_factory=list)


def price_rates(provider: ElectricityPriceProvider) -> RateAt:
    """The price of each period of one ended window, by its start: the provider's own
    ``price_at`` where it has one (a trace), else upstream's rate data fetched once for all the
    window's periods (one OpenEI request, not one a period)."""
    if type(provider).price_at is not ElectricityPriceProvider.price_at:
        return provider.price_at
    return fetched_once(provider.get_current_electricity_price, rate_from_schedule)


class EnergyCostMonitor(BucketMonitor):
    """Time, energy and electricity cost of named windows (upstream's constructor and
    methods). ``device`` (zeus-cpp's): a locator; None reads ``ZEUS_DEVICE``."""

    def __init__(
        self,
        electricity_price_provider: ElectricityPriceProvider,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Literal["torch", "jax"] = "torch",
        *,
        device: str | None = None,
    ) -> None:
        self.electricity_price_provider = electricity_price_provider
        super().__init__(
            ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices,
                        sync_execution_with=sync_execution_with, approx_instant_energy=True,
                        device=device),
            lambda: electricity_price_provider.update_period,
            lambda: price_rates(electricity_price_provider), "electricity price")

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """Ends the window `key`: its time, energy and cost."""
        m, dollars, warnings = self._end(key, sync_execution)
        return EnergyCostMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_energy_cost=by_kind(dollars, "gpu"),
            cpu_energy=m.cpu_energy,
            cpu_energy_cost=by_kind(dollars, "cpu") or None,
            dram_energy=m.dram_energy,
            dram_energy_cost=by_kind(dollars, "dram") or None,
            warnings=warnings,
        )
