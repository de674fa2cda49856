"""Zeus 0.16's ``GlobalPowerLimitOptimizer``: profiles each power limit for a few training steps
(just in time, in the first epoch), then keeps the one its selector chooses, over zeus-cpp's
engine. Upstream's constructor, defaults, state machine (``Ready`` -> ``Warmup`` ->
``Profiling`` -> ... -> ``Done``; an epoch end mid-profile starts that limit over), selectors and
profile file; and where upstream is fragile:

- Limits come back however the process ends: return and exceptions (``close()``, ``atexit``),
  signals (the C++ guard), and SIGKILL or a crash (a watchdog process started before the first
  change restores the journal; with ``ZEUSD_SOCK_PATH`` the daemon's lease does). They come back
  to what they were before, not to the maximum.
- ``ZEUS_MEASURE_ONLY=true``: no limit and no persistence mode is ever set, nothing profiled.
- Persistence mode is set only on GPUs where it is off.
- ``warmup_steps=0`` profiles right after the limit is set.
- On simulated GPUs with a virtual clock (``ZEUS_DEVICE=sim:<gpu>:<workload>:<bs>``) each step
  the optimizer sees runs one iteration of the trace at the current limit.
"""

from __future__ import annotations

import logging
import os
import socket
import weakref
from pathlib import Path

from zeus_cpp import _core
from zeus_cpp.callback import Callback
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer._job_push import JobPush
from zeus_cpp.optimizer._states import Done, Profiling, Ready, Warmup
from zeus_cpp.optimizer._states import all_reduce as _all_reduce
from zeus_cpp.optimizer._states import gather_strings as _gather_strings
from zeus_cpp.optimizer._states import world_size as _world_size
from zeus_cpp.optimizer._frameworks import (
    HFGlobalPowerLimitOptimizer,
    LightningGlobalPowerLimitOptimizer,
)
from zeus_cpp.optimizer._selectors import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
    load_profile,
    save_profile,
)

__all__ = [
    "CarbonAwarePowerLimitOptimizer",
    "Done",
    "PerGpuPowerLimitOptimizer",
    "CarbonAwarePerGpuPowerLimitOptimizer",
    "Energy",
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",
    "LightningGlobalPowerLimitOptimizer",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Profiling",
    "Ready",
    "Time",
    "Warmup",
    "ZeusCost",
]

logger = logging.getLogger(__name__)


def measure_only() -> bool:
    """``ZEUS_MEASURE_ONLY``, as the loaders read it."""
    value = os.environ.get("ZEUS_MEASURE_ONLY", "false").strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise _core.ConfigError(f"ZEUS_MEASURE_ONLY='{value}': expected true or false")


def _journal_dir() -> Path:
    explicit = os.environ.get("ZEUS_JOURNAL_DIR")
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "zeus-cpp" if runtime else Path(f"/tmp/zeus-cpp-{os.getuid()}")


class GlobalPowerLimitOptimizer(Callback):
    """Finds and applies the optimal power limit of the monitor's GPUs.

    ``monitor``: its ``gpu_indices`` are the GPUs changed, its windows measure the profile.
    ``optimum_selector``: default ``ZeusCost(0.5, world_size=len(monitor.gpu_indices))``.
    ``wait_steps``: steps before anything happens. ``warmup_steps``, ``profile_steps``: steps per
    limit. ``pl_step``: W between profiled limits, from the maximum down. ``profile_path``: an
    existing file skips profiling; otherwise the profile is written there when done.
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
    ) -> None:
        if wait_steps < 0:
            raise ValueError(f"wait_steps must be non-negative, got {wait_steps}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be non-negative, got {warmup_steps}")
        if profile_steps <= 0:
            raise ValueError(f"profile_steps must be positive, got {profile_steps}")
        if pl_step <= 0:
            raise ValueError(f"pl_step must be positive, got {pl_step}")
        self.monitor = monitor
        self.optimum_selector = optimum_selector or ZeusCost(
            eta_knob=0.5, world_size=len(monitor.gpu_indices))
        self.wait_steps = wait_steps
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = pl_step * 1000
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.measure_only = measure_only()
        self._gpus = monitor.gpus
        self._stepping = False  # a step began and has not been run on a simulated clock yet
        self._own_s = 0.0  # simulated: this rank's own step time so far, no wait at the sync

        ranges = {g: self._gpus.get_power_management_limit_constraints(g)
                  for g in monitor.gpu_indices}
        if len(set(ranges.values())) > 1:
            raise ValueError(f"power limit ranges differ across the GPUs (mW): {ranges}")
        low, high = next(iter(ranges.values()))
        self.power_limits: list[int] = list(range(high, low - 1, -self.pl_step))
        self.measurements: list[PowerLimitMeasurement] = []
        self.current_power_limit = 0
        self.state: Ready | Warmup | Profiling | Done
        self._keeper = None
        self._job_push = JobPush.from_env(self)

        if self.measure_only:
            current = self._gpus.get_power_management_limit(monitor.gpu_indices[0])
            logger.info("ZEUS_MEASURE_ONLY=true: no power limit is set (the GPUs stay at %d W) "
                        "and nothing is profiled", current // 1000)
            self.current_power_limit = current
            self.state = Done(optimal_power_limit=current)
            return

        self._enable_persistence()
        self._keeper = self._make_keeper()
        # Runs when the optimizer is collected, or at exit (weakref.finalize's atexit).
        self._finalizer = weakref.finalize(self, _close_keeper, self._keeper)

        if self.profile_path is not None and self.profile_path.exists():
            self.measurements = load_profile(self.profile_path)
            optimal = self._compute_optimal_power_limit()
            logger.info("Loaded the profile %s: optimal power limit %d W", self.profile_path,
                        optimal // 1000)
            self.state = Done(optimal_power_limit=optimal)
            self._set_power_limit(optimal)
        else:
            logger.info("JIT profiling of %d power limits after %d step(s)%s",
                        len(self.power_limits), wait_steps,
                        f"; profile to {self.profile_path}" if self.profile_path else "")
            self.state = Ready(next_power_limit=self.power_limits[0], steps=wait_steps + 1)
            self._set_power_limit(max(self.power_limits))

    # Setup ------------------------------------------------------------------------------

    def _enable_persistence(self) -> None:
        for g in self.monitor.gpu_indices:
            try:
                if self._gpus.get_persistence_mode(g):
                    continue
            except _core.DeviceError as e:
                if isinstance(e, _core.DevicePermissionError):
                    raise
                logger.debug("GPU %d: persistence mode not readable (%s); left alone", g, e)
                continue
            self._gpus.set_persistence_mode(g, True)

    def _make_keeper(self) -> _core.LimitKeeper:
        locator = self._gpus.locator
        in_memory_sim = locator.startswith("sim:") and "@" not in locator
        journal = ""
        watchdog = None
        if not in_memory_sim:
            directory = _journal_dir()
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if directory.stat().st_uid != os.getuid():
                # /tmp is shared: a directory another user made could be swapped under us.
                raise _core.ConfigError(
                    f"the power-limit journal directory {directory} belongs to uid "
                    f"{directory.stat().st_uid}, not this user ({os.getuid()}); remove it, or "
                    "set XDG_RUNTIME_DIR or ZEUS_JOURNAL_DIR to a directory of yours")
            self._settle_stale_journals(directory)
            journal = str(directory / _core.process_journal_name(socket.gethostname(),
                                                                 os.getpid()))
            zeusd = self._gpus._gpus.through_zeusd
            if zeusd:
                logger.info("power limits are set through %s, whose lease restores them when "
                            "this process ends", zeusd)
            else:
                import sys

                watchdog = [sys.executable, "-m", "zeus_cpp._watchdog", str(os.getpid()),
                            journal]
        return _core.LimitKeeper(self._gpus._gpus, journal, watchdog)

    @staticmethod
    def _settle_stale_journals(directory: Path) -> None:
        # Those of a live owner are left to it; a restore that fails is said, and kept.
        for line in _core.settle_gone_journals(str(directory)):
            logger.warning("%s", line)

    # Hooks ------------------------------------------------------------------------------

    def on_epoch_end(self) -> None:
        """An epoch ended: a limit being warmed up or profiled starts over in the next one, at
        the maximum limit meanwhile (as upstream)."""
        self._run_pending_step()
        if self._job_push is not None:
            self._job_push.epoch_end()
        if isinstance(self.state, (Ready, Done)):
            return
        if isinstance(self.state, Profiling):
            self.monitor.end_window(self._window(self.state.current_power_limit), cancel=True)
        logger.info("Epoch ended while profiling %d W; it starts over in the next epoch",
                    self.state.current_power_limit // 1000)
        self.state = Ready(next_power_limit=self.state.current_power_limit, steps=1)
        self._set_power_limit(max(self.power_limits))

    def on_step_begin(self) -> None:
        """A training step begins."""
        if self._gpus._gpus.virtual_clock:
            self._run_pending_step()
            self._stepping = True
        state = self.state
        if isinstance(state, Done):
            return
        state.steps -= 1
        if state.steps > 0:
            return
        if isinstance(state, Ready):
            self._set_power_limit(state.next_power_limit)
            self._start_warmup(state.next_power_limit)
        elif isinstance(state, Warmup):
            self._start_profiling(state.current_power_limit)
        else:
            self._finish_profiling(state.current_power_limit)

    # The state machine ------------------------------------------------------------------

    def _start_warmup(self, limit_mw: int) -> None:
        if self.warmup_steps == 0:
            self._start_profiling(limit_mw)
        else:
            self.state = Warmup(current_power_limit=limit_mw, steps=self.warmup_steps)

    def _start_profiling(self, limit_mw: int) -> None:
        self.state = Profiling(current_power_limit=limit_mw, steps=self.profile_steps)
        self.monitor.begin_window(self._window(limit_mw))

    def _finish_profiling(self, limit_mw: int) -> None:
        self.measurements.append(self._measure_window(limit_mw))
        nxt = self.power_limits.index(limit_mw) + 1
        if nxt < len(self.power_limits):
            self._set_power_limit(self.power_limits[nxt])
            self._start_warmup(self.power_limits[nxt])
            return
        self._settle()

    def _measure_window(self, limit_mw: int) -> PowerLimitMeasurement:
        """Closes the profiling window of `limit_mw`: the job's energy (every rank's GPUs) and
        time (the slowest rank's). Collective under torch.distributed."""
        m = self.monitor.end_window(self._window(limit_mw))
        energy = sum(_all_reduce([m.gpu_energy[g] for g in self.monitor.gpu_indices], "sum"))
        elapsed = max(_all_reduce([m.time], "max"))
        logger.info("Profiled %d W: %.2f J in %.3f s", limit_mw // 1000, energy, elapsed)
        return PowerLimitMeasurement(limit_mw // 1000, energy, elapsed)

    def _settle(self) -> None:
        """Every limit was profiled: run at the optimum from now on, and save the profile."""
        optimal = self._compute_optimal_power_limit()
        self.state = Done(optimal_power_limit=optimal)
        self._set_power_limit(optimal)
        self._save_profile()

    def _save_profile(self) -> None:
        if self.profile_path is not None:
            save_profile(self.profile_path, self.measurements)
            logger.info("Profile written to %s", self.profile_path)

    def _compute_optimal_power_limit(self) -> int:
        optimal = self.optimum_selector.select(self.measurements) * 1000
        logger.info("Optimal power limit: %d W (%s)", optimal // 1000,
                    type(self.optimum_selector).__name__)
        return optimal

    def _set_power_limit(self, power_limit_mw: int) -> None:
        if self.measure_only or self.current_power_limit == power_limit_mw:
            return
        for g in self.monitor.gpu_indices:
            self._keeper.set_power_limit_mw(g, power_limit_mw)
        self.current_power_limit = power_limit_mw

    def _run_pending_step(self) -> None:
        """Simulated GPUs (virtual clock): the step that began runs now. Under torch.distributed
        each rank runs it on its own GPUs at their own pace, then the gradient sync brings every
        rank's clock to the slowest one's, the faster GPUs idling meanwhile (one all-reduce)."""
        if not self._stepping:
            return
        self._stepping = False
        gpus = self._gpus._gpus
        if _world_size() == 1:
            gpus.run_steps(1)
            return
        for g in self.monitor.gpu_indices:
            self._own_s += gpus.run_gpu_steps(g, 1)
        slowest = max(_all_reduce([max(gpus.sim_gpu_now_s(g) for g in self.monitor.gpu_indices)],
                                  "max"))
        for g in self.monitor.gpu_indices:
            gpus.sim_idle_until_s(g, slowest)

    @staticmethod
    def _window(limit_mw: int) -> str:
        return f"__GlobalPowerLimitOptimizer_{limit_mw // 1000}"

    # zeus-cpp's ---------------------------------------------------------------------------

    def close(self) -> None:
        """Puts the limits back as they were before this optimizer (also at exit)."""
        if self._keeper is not None:
            self._finalizer()

    @property
    def watchdog_pid(self) -> int | None:
        """The process that restores the limits if this one dies, or None."""
        return self._keeper.watchdog_pid if self._keeper is not None else None


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _selector_text(selector: OptimumSelector) -> tuple[str, float]:
    """The selector as the C++ planner reads it, and its eta."""
    if isinstance(selector, ZeusCost):
        return "cost", selector.eta_knob
    if isinstance(selector, Energy):
        return "energy", 1.0
    if isinstance(selector, Time):
        return "time", 0.0
    if isinstance(selector, MaxSlowdownConstraint):
        return f"slowdown:{selector.factor}", 0.5
    raise ValueError(f"{type(selector).__name__} has no per-GPU form; use ZeusCost, Energy, "
                     "Time or MaxSlowdownConstraint, or GlobalPowerLimitOptimizer")


class PerGpuPowerLimitOptimizer(GlobalPowerLimitOptimizer):
    """zeus-cpp's: one power limit per GPU of a data-parallel job (DDP, FSDP), so that the GPUs
    faster than the slowest do not wait at the gradient sync at a limit they do not need.

    ``GlobalPowerLimitOptimizer``'s constructor and callbacks. Every rank constructs it with a
    monitor of its own GPU (``ZeusMonitor(gpu_indices=[local_rank])``) and calls the callbacks
    at the same steps. Profiling is Zeus's (every GPU at each limit in turn, the same windows);
    each rank measures its own GPU's step time without the wait at the sync and its energy, the
    ranks share them (all-reduce) and each makes the same plan (``zeus_cpp._core.GpuPlan``, the
    C++ loader's: the exact optimum of the straggler model). ``optimal_power_limits`` then holds
    every rank's limit (mW, by rank) and ``state.optimal_power_limit`` Zeus's single limit,
    which the profile file keeps. Every ``check_steps`` steps the ranks compare their step times
    with their profile; a GPU whose pace changed (two checks agreeing, > 5%) gets the plan made
    again, without profiling (``replans``). On one process it is ``GlobalPowerLimitOptimizer``.

    A rank's own step time: on simulated GPUs with a virtual clock, its GPU's trace time; on
    real GPUs Python cannot see DDP's wait inside backward, so it is the wall time (said once),
    and the plan differs from Zeus's only where the GPUs' power differs (the C++ loader measures
    the wait). The profile file keeps each GPU's curve under its UUID and host (``per_gpu``); a
    later job on the same GPUs plans from it without profiling, one on other GPUs profiles again,
    and one from a file without curves runs Zeus's one limit, saying why.
    """

    check_steps = 100

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
    ) -> None:
        self.optimal_power_limits: list[int] | None = None
        self.replans: list[dict] = []
        self._world = _world_size()
        self._rank = _rank()
        self._per_gpu = self._world > 1
        self._own_from = 0.0
        self._span_from = 0.0
        self._span_steps = 0
        self._plan: _core.GpuPlan | None = None
        self._owners: list[tuple[str, str]] = []
        # Before anything is set: a monitor of several GPUs cannot plan them one each.
        if self._per_gpu and len(monitor.gpu_indices) != 1:
            raise ValueError(
                f"rank {self._rank}: PerGpuPowerLimitOptimizer needs a monitor of the rank's own "
                f"GPU (ZeusMonitor(gpu_indices=[local_rank])), not {monitor.gpu_indices}")
        # Every rank's monitor holds its own GPU: Zeus's MAXPOWER is the world's.
        optimum_selector = optimum_selector or ZeusCost(eta_knob=0.5, world_size=self._world)
        super().__init__(monitor, optimum_selector, wait_steps, warmup_steps, profile_steps,
                         pl_step, profile_path)
        if self._per_gpu and not self.measure_only:
            selector, eta = _selector_text(self.optimum_selector)
            gpu = monitor.gpu_indices[0]
            sim_idle = self._gpus._gpus.sim_idle_power_w(gpu)
            mine = [0.0] * self._world
            # Before training the GPU waits: what it draws then is what it draws at the sync.
            mine[self._rank] = (sim_idle if sim_idle is not None
                                else self._gpus.get_instant_power_usage(gpu) / 1000)
            idle = _all_reduce(mine, "sum")
            # MAXPOWER as the selector counts it (ZeusCost's world_size x the maximum limit),
            # spread over the GPUs, so that equal GPUs get the selector's own choice.
            gpus_counted = getattr(self.optimum_selector, "world_size", self._world)
            share = max(self.power_limits) * gpus_counted // self._world
            self._plan = _core.GpuPlan(idle, [share] * self._world, eta, selector)
            self._owners = [tuple(s.split("\n", 1)) for s in _gather_strings(
                f"{self._gpus.get_uuid(gpu)}\n{socket.gethostname()}")]
            if not self._gpus._gpus.virtual_clock and self._rank == 0:
                logger.warning(
                    "per-GPU limits: each rank's own step time is its wall time, waits at the "
                    "gradient sync included (Python cannot see DDP's wait inside backward); "
                    "the plan sees every GPU as slow as the slowest and leans to one limit. "
                    "zeus::DataLoader's GradientSync measures the wait")
            if isinstance(self.state, Done) and self.profile_path is not None:
                self._plan_from_profile()

    def _plan_from_profile(self) -> None:
        """A profile was loaded: its curves of these GPUs make the plan; another job's GPUs'
        curves mean profiling again; no curves, Zeus's one limit (said)."""
        import json

        doc = json.loads(self.profile_path.read_text(encoding="utf-8"))
        curves = doc.get("per_gpu")
        why = (self._plan.load_json(json.dumps(curves), self._owners, str(self.profile_path))
               if curves else "it has no per-GPU curves (written by a job that planned one "
               "limit, or by Zeus)")
        if why is None:
            self.optimal_power_limits = list(self._plan.plan())
            logger.info("Per-GPU power limits %s W (by rank), from %s",
                        [mw // 1000 for mw in self.optimal_power_limits], self.profile_path)
            self._set_power_limit(self.optimal_power_limits[self._rank])
            self._span_from, self._span_steps = self._own_now(), 0
        elif curves:
            logger.warning("The profile %s is not of these GPUs: %s; profiling again, per GPU",
                           self.profile_path, why)
            self.measurements = []
            self.state = Ready(next_power_limit=self.power_limits[0], steps=self.wait_steps + 1)
            self._set_power_limit(max(self.power_limits))
        elif self._rank == 0:
            logger.warning("per-GPU limits: the profile %s is used with Zeus's one limit, "
                           "because %s; move it away to profile per GPU", self.profile_path, why)

    def _save_profile(self) -> None:
        if self.profile_path is None or self._plan is None:
            super()._save_profile()
            return
        import json

        save_profile(self.profile_path, self.measurements,
                     json.loads(self._plan.curves_json(self._owners)))
        logger.info("Profile written to %s, with each GPU's curve", self.profile_path)

    def _own_now(self) -> float:
        """This rank's own time so far (simulated: its steps' trace time; real: the wall)."""
        import time

        return self._own_s if self._gpus._gpus.virtual_clock else time.monotonic()

    def _start_profiling(self, limit_mw: int) -> None:
        self._own_from = self._own_now()
        super()._start_profiling(limit_mw)

    def _measure_window(self, limit_mw: int) -> PowerLimitMeasurement:
        if self._plan is None:
            return super()._measure_window(limit_mw)
        m = self.monitor.end_window(self._window(limit_mw))
        own = [0.0] * self._world
        energy = [0.0] * self._world
        own[self._rank] = self._own_now() - self._own_from
        energy[self._rank] = m.gpu_energy[self.monitor.gpu_indices[0]]
        own = _all_reduce(own, "sum")
        energy = _all_reduce(energy, "sum")
        elapsed = max(_all_reduce([m.time], "max"))
        self._plan.add_window(limit_mw, self.profile_steps, elapsed, own, energy)
        logger.info("Profiled %d W: %.2f J in %.3f s; own step times %s s", limit_mw // 1000,
                    sum(energy), elapsed,
                    ", ".join(f"{o / self.profile_steps:.4f}" for o in own))
        return PowerLimitMeasurement(limit_mw // 1000, sum(energy), elapsed)

    def _settle(self) -> None:
        if self._plan is None:
            super()._settle()
            return
        optimal = self._compute_optimal_power_limit()
        self.state = Done(optimal_power_limit=optimal)
        self.optimal_power_limits = list(self._plan.plan())
        single = self._plan.single_energy_j
        logger.info("Per-GPU power limits %s W (by rank)%s",
                    [mw // 1000 for mw in self.optimal_power_limits],
                    f"; the plan saves {100 * (1 - self._plan.energy_j / single):.1f}% energy "
                    "per step against Zeus's one limit" if single else "")
        self._set_power_limit(self.optimal_power_limits[self._rank])
        self._span_from, self._span_steps = self._own_now(), 0
        self._save_profile()

    def on_step_begin(self) -> None:
        """A training step begins; every ``check_steps`` steps at the plan, a pace check
        (collective)."""
        planned = self.optimal_power_limits is not None
        super().on_step_begin()  # runs the previous step on a simulated clock
        if not planned:
            return
        self._span_steps += 1
        if self._span_steps < self.check_steps:
            return
        own = [0.0] * self._world
        own[self._rank] = self._own_now() - self._span_from
        own = _all_reduce(own, "sum")
        steps = self._span_steps
        self._span_from, self._span_steps = self._own_now(), 0
        reason = self._plan.observe(steps, own)
        if reason is None:
            return
        before = self.optimal_power_limits
        self.optimal_power_limits = list(self._plan.limits_mw)
        self.replans.append({"reason": reason, "power_limits_mw": self.optimal_power_limits})
        logger.info("%s; per-GPU limits %s W (were %s W), not profiled again", reason,
                    [mw // 1000 for mw in self.optimal_power_limits],
                    [mw // 1000 for mw in before])
        self._set_power_limit(self.optimal_power_limits[self._rank])


def _close_keeper(keeper: _core.LimitKeeper) -> None:
    keeper.close()


# Chase's rule over this module's optimizer (_carbon_aware.py).
from zeus_cpp.optimizer._carbon_aware import make_class as _make_carbon_aware  # noqa: E402

CarbonAwarePowerLimitOptimizer = _make_carbon_aware(GlobalPowerLimitOptimizer)
CarbonAwarePerGpuPowerLimitOptimizer = _make_carbon_aware(PerGpuPowerLimitOptimizer,
                                                          "CarbonAwarePerGpuPowerLimitOptimizer")
