"""``CarbonAwarePowerLimitOptimizer`` (zeus-cpp's; Chase's rule on Zeus's profile): profiles like
``GlobalPowerLimitOptimizer``, then keeps choosing the limit again from that profile as the
grid's carbon intensity (or price) moves, never profiling again.

For each profiled limit p with energy E(p) and time T(p):
``cost(p) = eta * E(p) * S + (1 - eta) * MAXPOWER * S_max * T(p)``, S the signal now, S_max the
reference. That is ``ZeusCost`` at the knob ``zeus_cpp._core.grid_eta(eta, S, S_max)``, so at
S = S_max the choice is ``ZeusCost``'s own. The reference is the grid's own by default (``"grid"``:
the provider's mean over the last day, ``get_history_mean``; else its forecast of the next day;
else the mean of the readings so far), so that the rule never leans away from Zeus's trade-off on
an average hour; ``"chase"`` (750 gCO2eq/kWh) or a number fix it (docs/grid.md). The rule is the C++ one (``_core.GridFollower``, as
``zeus::DataLoader``'s jobs and ``zeus simulate --carbon`` run it): the limit is chosen again
every ``interval_s`` and whenever the signal moved by more than ``relative_change`` since the
last choice, on the provider's forecast of the next interval where it has one
(``get_forecast_mean``: the trace providers, where their rows reach that far). The provider is
read on a thread every ``poll_s``: one that hangs or fails never holds up a step; it is logged
once and its last value kept."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from zeus_cpp import _core
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.monitor.carbon import CarbonIntensityProvider
from zeus_cpp.monitor.price import ElectricityPriceProvider
from zeus_cpp.optimizer._selectors import ZeusCost
from zeus_cpp.optimizer._states import Done
from zeus_cpp.optimizer._states import all_reduce as _all_reduce
from zeus_cpp.optimizer._states import world_size as _world_size

logger = logging.getLogger(__name__)


class SignalPoller:
    """Reads `read()` every `period_s` on a daemon thread; ``latest`` is the last good value
    (None before one), ``latest_forecast`` the forecast read with it (`forecast()`, None where
    there is none or it failed). A failure is logged once, and its recovery; a forecast that
    fails is logged once and asked again at each read (a provider that will never give one
    returns None)."""

    def __init__(self, read: Callable[[], float], period_s: float, what: str,
                 forecast: Callable[[], float | None] | None = None,
                 reference: Callable[[], float | None] | None = None) -> None:
        self._read = read
        self._forecast = forecast
        self._reference = reference
        self.latest_reference: float | None = None
        self._held: tuple[float, float] | None = None  # (monotonic s, value) of the last read
        self._held_weighted = 0.0
        self._held_s = 0.0
        self._period_s = period_s
        self._what = what
        self._stop = threading.Event()
        self.latest: float | None = None
        self.latest_forecast: float | None = None
        self.failing: str | None = None
        self.failures = 0
        self._forecast_failing = False  # its failure logged
        self._thread = threading.Thread(target=self._run, name="zeus-grid-poller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                value = float(self._read())
                forecast = self._read_forecast()
                reference = self._read_reference(value)
                if self.failing is not None:
                    logger.info("the %s answers again: %g", self._what, value)
                self.failing = None
                self.latest, self.latest_forecast = value, forecast
                self.latest_reference = reference
            except Exception as e:  # a provider's failure never stops training
                self.failures += 1
                if self.failing is None:
                    logger.warning("reading the %s failed: %s; %s", self._what, e,
                                   f"the last value, {self.latest:g}, is kept"
                                   if self.latest is not None
                                   else "the limit stays Zeus's choice until it answers")
                self.failing = str(e)
            self._stop.wait(self._period_s)

    def _read_forecast(self) -> float | None:
        if self._forecast is None:
            return None
        try:
            value = self._forecast()
            self._forecast_failing = False
            return None if value is None else float(value)
        except Exception as e:  # no forecast: the rule goes by the value now, asked again next
            if not self._forecast_failing:
                logger.warning("no %s forecast (%s); the rule goes by the value now", self._what,
                               e)
            self._forecast_failing = True
            return None

    def _read_reference(self, value: float) -> float | None:
        """The grid's own reference (the provider's, else the mean of the readings so far, each
        held until the next), as the C++ poller's; None without a reference function."""
        if self._reference is None:
            return None
        now = time.monotonic()
        if self._held is not None:
            self._held_weighted += self._held[1] * (now - self._held[0])
            self._held_s += now - self._held[0]
        self._held = (now, value)
        try:
            given = self._reference()
            if given is not None:
                return float(given)
        except Exception as e:  # the readings' own mean serves
            logger.warning("no history or forecast of the %s for the grid's reference (%s)",
                           self._what, e)
        return self._held_weighted / self._held_s if self._held_s > 0 else value

    def close(self) -> None:
        self._stop.set()


def make_class(base: type, name: str = "CarbonAwarePowerLimitOptimizer") -> type:
    """The optimizer over `base` (``GlobalPowerLimitOptimizer``, or
    ``PerGpuPowerLimitOptimizer`` for one limit per GPU), made where both are known."""

    class CarbonAwarePowerLimitOptimizer(base):  # type: ignore[misc, valid-type]
        """Power limits that follow the grid's carbon intensity or electricity price.

        ``provider``: a ``CarbonIntensityProvider`` (S in gCO2eq/kWh, reference
        ``max_carbon_intensity``) or an ``ElectricityPriceProvider`` (S in $/kWh, reference
        ``max_price``); each ``"grid"`` by default (the grid's own mean over the last day),
        ``"chase"`` (750, carbon only) or a number. ``eta_knob``: Zeus's knob. ``interval_s``: the
        limit is chosen again at least this often. The rest are ``GlobalPowerLimitOptimizer``'s.
        zeus-cpp's: ``poll_s`` (how often the provider is read), ``relative_change``,
        ``clock`` (seconds, for the interval). Under torch.distributed every rank constructs
        it; rank 0's reading is shared every ``check_steps`` steps so that all ranks set the
        same limit. ``choices`` lists every choice made after profiling.

        Over ``PerGpuPowerLimitOptimizer`` (``CarbonAwarePerGpuPowerLimitOptimizer``) a choice
        makes the per-GPU plan again at the signal's knob, from the same profile
        (``optimal_power_limits``; each choice's ``power_limits_mw``), as the C++ loader does.
        """

        check_steps = 100

        def __init__(
            self,
            monitor: ZeusMonitor,
            provider: CarbonIntensityProvider | ElectricityPriceProvider,
            eta_knob: float = 0.5,
            max_carbon_intensity: float | str = "grid",
            interval_s: float = 1800.0,
            wait_steps: int = 1,
            warmup_steps: int = 10,
            profile_steps: int = 40,
            pl_step: int = 25,
            profile_path: str | Path | None = None,
            *,
            max_price: float | str = "grid",
            poll_s: float = 300.0,
            relative_change: float = 0.10,
            clock: Callable[[], float] = time.monotonic,
        ) -> None:
            carbon = isinstance(provider, CarbonIntensityProvider)
            if carbon:
                self.signal_kind = "carbon intensity"
                reference = max_carbon_intensity
                read = provider.get_current_carbon_intensity
            elif isinstance(provider, ElectricityPriceProvider):
                self.signal_kind = "electricity price"
                reference = max_price
                read = lambda: provider.price_at(datetime.now(timezone.utc))  # noqa: E731
            else:
                raise TypeError(f"provider must be a CarbonIntensityProvider or an "
                                f"ElectricityPriceProvider, not {type(provider).__name__}")
            try:  # 0.0: the grid's own (its mean over the last day)
                self.signal_max = _core.parse_grid_reference(
                    str(reference), "max_carbon_intensity" if carbon else "max_price", carbon)
            except _core.ConfigError as e:
                raise ValueError(str(e)) from e
            if not interval_s > 0 or not poll_s > 0 or relative_change < 0:
                raise ValueError("interval_s and poll_s must be positive, relative_change >= 0")
            self.provider = provider
            self.eta_knob = eta_knob
            self.interval_s = interval_s
            self.relative_change = relative_change
            self.choices: list[dict] = []
            self._clock = clock
            self._world = _world_size()
            self._follower = None  # the C++ rule, made on the profile once there is one
            self._steps_since_check = 0
            super().__init__(monitor, ZeusCost(eta_knob, world_size=self._world * len(
                monitor.gpu_indices)), wait_steps, warmup_steps, profile_steps, pl_step,
                profile_path)
            forecast = getattr(provider, "get_forecast_mean", None)
            history = getattr(provider, "get_history_mean", None)
            window = _core.GRID_REFERENCE_WINDOW_S

            def grid_reference() -> float | None:
                given = history(window) if history is not None else None
                return forecast(window) if given is None and forecast is not None else given

            self._poller = None if self.measure_only else SignalPoller(
                read, poll_s, self.signal_kind,
                (lambda: forecast(interval_s)) if forecast is not None else None,
                grid_reference if self.signal_max == 0 else None)

        def _make_follower(self):  # -> _core.GridFollower
            world = self.optimum_selector.world_size
            return _core.GridFollower(
                [(m.power_limit * 1000, m.energy, m.time) for m in self.measurements],
                eta=self.eta_knob,
                max_power_w=max(m.power_limit for m in self.measurements) * world,
                signal_max=self.signal_max, interval_s=self.interval_s,
                relative_change=self.relative_change)

        def choose(self, signal: float, reference: float | None = None) -> int:
            """The rule's limit (mW) at `signal` over the profile (under the grid's own
            reference, at `reference`; without one, Zeus's choice)."""
            return self._make_follower().observe(signal, 0.0, None, reference)["power_limit_mw"]

        def _shared_reading(self) -> tuple[float, float | None, float | None, float] | None:
            """Rank 0's latest reading, forecast, reference and clock on every rank (one
            collective under torch.distributed), so that all ranks choose on one value at the
            same check; None until rank 0 has read the signal."""
            poller = self._poller
            mine = poller.latest if poller is not None else None
            ahead = poller.latest_forecast if poller is not None else None
            ref = poller.latest_reference if poller is not None else None
            now = self._clock()
            if self._world == 1:
                return None if mine is None else (mine, ahead, ref, now)
            from zeus_cpp.optimizer.power_limit import _rank

            share = [0.0] * 7
            if _rank() == 0:
                share[6] = now
                if mine is not None:
                    share[:6] = [1.0, mine, 1.0 if ahead is not None else 0.0, ahead or 0.0,
                                 1.0 if ref is not None else 0.0, ref or 0.0]
            known, value, ahead_known, ahead, ref_known, ref, now = _all_reduce(share, "sum")
            if not known > 0:
                return None
            return (value, ahead if ahead_known > 0 else None, ref if ref_known > 0 else None,
                    now)

        def _replan(self, signal: float, reference: float) -> int:
            """The per-GPU plan made again at the signal's knob; this rank's limit (mW)."""
            self._plan.set_eta(_core.grid_eta(self.eta_knob, signal, reference))
            self.optimal_power_limits = list(self._plan.plan())
            return self.optimal_power_limits[self._rank]

        def on_step_begin(self) -> None:
            """A training step begins; once profiled, the rule looks at the signal."""
            super().on_step_begin()
            if self.measure_only or not isinstance(self.state, Done) or not self.measurements:
                return
            self._steps_since_check += 1
            if self._world > 1 and self._steps_since_check < self.check_steps:
                return
            self._steps_since_check = 0
            shared = self._shared_reading()
            if shared is None:
                return
            value, forecast, reference, now = shared
            if self._follower is None:
                self._follower = self._make_follower()
            choice = self._follower.observe(value, now, forecast, reference)
            if choice is None:
                return
            limit = choice["power_limit_mw"]
            entry = {"signal": choice["signal"], "now": value, "forecast": forecast,
                     "reference": choice["reference"], "power_limit_mw": limit, "time": now,
                     "reason": choice["reason"]}
            if getattr(self, "_plan", None) is not None and \
                    getattr(self, "optimal_power_limits", None) is not None:
                limit = self._replan(choice["signal"], choice["reference"])
                entry["power_limits_mw"] = list(self.optimal_power_limits)
            self.choices.append(entry)
            if limit != self.current_power_limit:
                logger.info("%s %s (reference %g): power limit %d W (Zeus's choice %d W)",
                            self.signal_kind, choice["reason"], choice["reference"], limit // 1000,
                            self.state.optimal_power_limit // 1000)
                self._set_power_limit(limit)

        def close(self) -> None:
            if self._poller is not None:
                self._poller.close()
            super().close()

    CarbonAwarePowerLimitOptimizer.__name__ = name
    CarbonAwarePowerLimitOptimizer.__qualname__ = name
    return CarbonAwarePowerLimitOptimizer
