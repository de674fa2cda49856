"""The power-limit optimizer's job state pushed to a Pushgateway (``ZEUS_PUSHGATEWAY_URL``),
as zeus-cpp's train loader pushes it: the same ``zeus_job_*`` metrics, grouped by ``job`` =
``ZEUS_JOB_ID`` (default ``zeus``), at each epoch end and when the optimizer is done with, from
rank 0 only. Energy is summed and time maxed over the ranks (collectives every rank makes at
``on_epoch_end``). A push never blocks training: it goes out on zeus-cpp's pusher thread."""

from __future__ import annotations

import atexit
import os
import weakref
from typing import TYPE_CHECKING

from zeus_cpp import _core
from zeus_cpp.optimizer._states import Done, all_reduce, world_size

if TYPE_CHECKING:
    from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer

_WINDOW = "__zeus_cpp_job_metrics"


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return 0


class JobPush:
    """Pushes ``optimizer``'s job state; see the module's docstring."""

    def __init__(self, optimizer: GlobalPowerLimitOptimizer, url: str) -> None:
        # A weak reference: the optimizer is collected (its finalizer restores the limits) while
        # this object waits for the exit to push the last state.
        self._opt = weakref.ref(optimizer)
        self._monitor = optimizer.monitor
        self._pusher = (_core.Pusher(url, os.environ.get("ZEUS_JOB_ID") or "zeus")
                        if _rank() == 0 else None)
        self._epochs = 0
        self._energy_j = 0.0
        self._time_s = 0.0
        self._last: tuple | None = None
        self._closed = False
        self._monitor.begin_window(_WINDOW, sync_execution=False)
        atexit.register(self.close)

    @staticmethod
    def from_env(optimizer: GlobalPowerLimitOptimizer) -> JobPush | None:
        url = os.environ.get("ZEUS_PUSHGATEWAY_URL", "").strip()
        return JobPush(optimizer, url) if url else None

    def epoch_end(self) -> None:
        """Every rank: the epoch's energy and time (collectives), then rank 0 pushes."""
        monitor = self._monitor
        m = monitor.end_window(_WINDOW, sync_execution=False)
        monitor.begin_window(_WINDOW, sync_execution=False)
        energies = [m.gpu_energy[g] for g in monitor.gpu_indices]
        self._energy_j += sum(all_reduce(energies, "sum"))
        self._time_s += max(all_reduce([m.time], "max"))
        self._epochs += 1
        self._push(finished=False)

    def close(self) -> None:
        """The last state, flushed (at most 2 s); once."""
        if self._closed:
            return
        self._closed = True
        self._push(finished=True)
        if self._pusher is not None:
            self._pusher.flush()

    def _push(self, finished: bool) -> None:
        if self._pusher is None:
            return
        opt = self._opt()
        if opt is None:  # collected: its last state, marked finished
            if self._last is not None:
                self._pusher.push(_core.job_state_families(*self._last[:-1], finished))
            return
        max_mw = max(opt.power_limits)
        eta = getattr(opt.optimum_selector, "eta_knob", 0.5)
        max_power_w = max_mw / 1000 * len(opt.monitor.gpu_indices) * world_size()
        cost = eta * self._energy_j + (1 - eta) * max_power_w * self._time_s
        done = isinstance(opt.state, Done)
        phase = "measure_only" if opt.measure_only else "optimal" if done else "profiling"
        optimal = opt.state.optimal_power_limit if done and not opt.measure_only else None
        self._last = (self._epochs, self._energy_j, self._time_s, cost, opt.current_power_limit,
                      optimal, max_mw, phase, finished)
        self._pusher.push(_core.job_state_families(*self._last))
