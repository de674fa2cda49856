"""The exceptions zeus_cpp raises. Errors from the C++ engine keep its message (what, where,
what to do); ConfigError is also a ValueError, so ``except ValueError`` catches bad options."""

from __future__ import annotations

from zeus_cpp._core import (
    ConfigError,
    CostThresholdExceeded,
    DeviceError,
    DevicePermissionError,
    DistError,
    IoError,
    ZeusError,
)

__all__ = [
    "ConfigError",
    "DeviceError",
    "DevicePermissionError",
    "DistError",
    "IoError",
    "ZeusCostThresholdExceededException",
    "ZeusError",
]


class ZeusCostThresholdExceededException(ZeusError):
    """The next epoch's predicted cost reaches ``ZEUS_COST_THRESH``: training stops.

    Raised by ``ZeusDataLoader.epochs()`` on every rank at the same epoch, after the master
    wrote the job's result file. The attributes are Zeus's.
    """

    def __init__(
        self,
        time_consumed: float,
        energy_consumed: float,
        cost: float,
        next_cost: float,
        cost_thresh: float,
        message: str | None = None,
    ) -> None:
        self.time_consumed = time_consumed
        self.energy_consumed = energy_consumed
        self.cost = cost
        self.next_cost = next_cost
        self.cost_thresh = cost_thresh
        if message is None:
            message = (
                f"the next epoch's predicted cost {next_cost:.1f} reaches the threshold "
                f"{cost_thresh:.1f} (so far {cost:.1f}: {energy_consumed:.1f} J, "
                f"{time_consumed:.2f} s)"
            )
        super().__init__(message)

    def __reduce__(self):  # type: ignore[override]
        return (
            type(self),
            (
                self.time_consumed,
                self.energy_consumed,
                self.cost,
                self.next_cost,
                self.cost_thresh,
                str(self),
            ),
        )

    @classmethod
    def _from_core(
        cls, error: CostThresholdExceeded, result: dict | None
    ) -> ZeusCostThresholdExceededException:
        message, cost, next_cost, threshold = error.args
        time_s = float(result["time"]) if result else float("nan")
        energy_j = float(result["energy"]) if result else float("nan")
        return cls(time_s, energy_j, cost, next_cost, threshold, message)
