"""The optimum selectors of Zeus 0.16's ``GlobalPowerLimitOptimizer`` and the profile they read:
``select(measurements) -> W``, ties to the first entry in list order (the highest limit first,
as profiled)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "Energy",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Time",
    "ZeusCost",
    "load_profile",
    "save_profile",
]


@dataclass(frozen=True)
class PowerLimitMeasurement:
    """One profiled limit: ``power_limit`` in W, ``energy`` in J (all GPUs of all ranks),
    ``time`` in s (the slowest rank). All positive, as upstream's pydantic model demands."""

    power_limit: int
    energy: float
    time: float

    def __post_init__(self) -> None:
        if isinstance(self.power_limit, bool) or not isinstance(self.power_limit, int) \
                or self.power_limit <= 0:
            raise ValueError(f"power_limit must be a positive integer (W), got {self.power_limit!r}")
        for name in ("energy", "time"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"{name} must be a positive number at {self.power_limit} W, got {value!r}")


class OptimumSelector(ABC):
    """Chooses the optimal limit (W) from the profile."""

    @abstractmethod
    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        """The chosen limit in W."""

    def _need(self, measurements: list[PowerLimitMeasurement]) -> None:
        if not measurements:
            raise ValueError(
                f"{type(self).__name__} got no measurements to select from: profile at least "
                "one power limit (is profile_steps reached within an epoch?)")


class Energy(OptimumSelector):
    """The limit with the least energy."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        self._need(measurements)
        return min(measurements, key=lambda m: m.energy).power_limit


class Time(OptimumSelector):
    """The limit with the least time."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        self._need(measurements)
        return min(measurements, key=lambda m: m.time).power_limit


class ZeusCost(OptimumSelector):
    """The limit with the least ``eta*E + (1-eta)*maxP*T``, ``maxP`` the highest profiled limit
    times ``world_size`` (the GPUs that spent E)."""

    def __init__(self, eta_knob: float, world_size: int = 1) -> None:
        if not 0.0 <= eta_knob <= 1.0:
            raise ValueError(f"eta_knob must be in [0, 1], got {eta_knob}")
        if world_size < 1:
            raise ValueError(f"world_size must be at least 1, got {world_size}")
        self.eta_knob = eta_knob
        self.world_size = world_size

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        self._need(measurements)
        max_power = max(m.power_limit for m in measurements) * self.world_size
        eta = self.eta_knob
        return min(measurements,
                   key=lambda m: eta * m.energy + (1 - eta) * max_power * m.time).power_limit


class MaxSlowdownConstraint(OptimumSelector):
    """The lowest limit whose time is within ``factor`` times the time at the highest limit."""

    def __init__(self, factor: float) -> None:
        if factor < 1.0:
            raise ValueError(f"factor must be at least 1.0, got {factor}")
        self.factor = factor

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        self._need(measurements)
        top = max(measurements, key=lambda m: m.power_limit)
        return min(m.power_limit for m in measurements if m.time <= self.factor * top.time)


def save_profile(path: Path, measurements: list[PowerLimitMeasurement],
                 per_gpu: list | None = None) -> None:
    """Upstream's profile JSON (``{"measurements": [...]}``, indented by 4), written atomically:
    a temporary file in the same directory, fsynced, renamed over ``path``. zeus-cpp's per-GPU
    curves (the C++ profile's ``per_gpu`` array) go under a key of their own, which upstream's
    reader leaves alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict = {"measurements": [asdict(m) for m in measurements]}
    if per_gpu:
        doc["per_gpu"] = per_gpu
    text = json.dumps(doc, indent=4)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_profile(path: Path) -> list[PowerLimitMeasurement]:
    """The measurements of a profile file; a ``ValueError`` naming the path and what is wrong
    (the file is left as it is)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["measurements"]
        if not isinstance(rows, list) or not rows:
            raise ValueError("'measurements' must be a non-empty list")
        return [PowerLimitMeasurement(r["power_limit"], r["energy"], r["time"]) for r in rows]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise ValueError(
            f"power-limit profile {path} is not a valid profile ({what}); fix or delete it to "
            "profile again") from None
