"""ZeusDataLoader: Zeus's data loader (the seed's ``distributed="dp"`` version) over zeus-cpp's
C++ job. The train loader (``max_epochs`` set) drives one energy-optimized job per process:
just-in-time profiling of the power limits, the optimal limit, early stop on the predicted cost
and the result files, exactly as zeus-cpp's C++ ``zeus::DataLoader`` does; the eval loader's
loop is measured with it."""

from __future__ import annotations

import atexit
import json
import logging
import os
import weakref
from typing import Any, Iterator, Literal

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from zeus_cpp import _core
from zeus_cpp._collectives import SingleProcess, TorchCollectives, group_layout
from zeus_cpp._errors import ZeusCostThresholdExceededException

__all__ = ["ZeusDataLoader"]

_log = logging.getLogger("zeus_cpp")


class _Registry:
    """The process's loaders: one train loader, whose job the eval loaders report to. The rules
    and their errors are C++'s (``_core.LoaderPairing``, Note [loader pairing]): one train loader
    at a time, eval loaders before or after it, ``epochs()`` needs an eval loader."""

    def __init__(self) -> None:
        self.pairing = _core.LoaderPairing("ZeusDataLoader")
        self.train: weakref.ref[ZeusDataLoader] | None = None
        self.jobs: weakref.WeakSet[Any] = weakref.WeakSet()

    def train_loader(self) -> ZeusDataLoader | None:
        loader = self.train() if self.train is not None else None
        if loader is None or loader._zeus_job.closed:
            return None
        return loader

    def forget_closed_train(self) -> None:
        """A train loader whose job was closed (close(), or training over) makes room for the
        next one."""
        loader = self.train() if self.train is not None else None
        if self.pairing.train is not None and (loader is None or loader._zeus_job.closed):
            self.pairing.remove(self.pairing.train)
            self.train = None


_registry = _Registry()


@atexit.register
def _close_jobs() -> None:
    # An exception that ends the script keeps its frames (and the loaders) alive until the
    # interpreter is torn down, where destructors may never run: restore the limits here.
    for job in list(_registry.jobs):
        job.close()


def _rank_device() -> _core.RankDevice:
    """What this rank trains on: the current CUDA device when CUDA is in use, else the CPU."""
    device = _core.RankDevice()
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        index = torch.cuda.current_device()
        device.cuda_index = index
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        if uuid is not None:
            text = str(uuid)
            device.cuda_uuid = text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text
        # Zeus's rule: the device finished its queued work before a measurement timestamp.
        device.synchronize = lambda: torch.cuda.synchronize(index)
    return device


class ZeusDataLoader(DataLoader):
    """A ``torch.utils.data.DataLoader`` that optimizes the GPUs' energy while it trains.

    ``batch_size`` is per process; the global batch size (x world size) names the files.
    ``max_epochs != -1`` makes the train loader (one per process), otherwise it is the eval
    loader, made after the train loader. ``distributed="dp"``: data-parallel training over the
    default process group, whose ``DistributedSampler`` the loader must use. Everything else
    goes to ``DataLoader`` unchanged. The job's options come from Zeus's ``ZEUS_*`` variables
    (``ZEUS_TARGET_METRIC`` is required for the train loader)::

        for epoch in train_loader.epochs():
            for batch in train_loader: ...
            for batch in eval_loader: ...
            train_loader.report_metric(accuracy, higher_is_better=True)
    """

    def __init__(
        self,
        *args: Any,
        batch_size: int,
        max_epochs: int = -1,
        distributed: Literal["dp"] | None = None,
        **kwargs: Any,
    ) -> None:
        if distributed is not None and distributed != "dp":
            raise TypeError(f"distributed must be None or 'dp', not {distributed!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        if not isinstance(max_epochs, int) or (max_epochs != -1 and max_epochs < 1):
            raise ValueError(f"max_epochs must be -1 (eval loader) or >= 1, not {max_epochs!r}")
        super().__init__(*args, batch_size=batch_size, **kwargs)
        self._zeus_train = max_epochs != -1
        self._zeus_epoch: int | None = None
        self._zeus_job: Any = None
        role = "train loader" if self._zeus_train else "eval loader"
        world, rank = 1, 0
        if distributed == "dp":
            if not dist.is_available() or not dist.is_initialized():
                raise RuntimeError(
                    f"ZeusDataLoader ({role}): distributed='dp' needs the default process group; "
                    "call torch.distributed.init_process_group() or "
                    "zeus_cpp.distributed.init_torch() first"
                )
            world, rank = dist.get_world_size(), dist.get_rank()
            sampler = self.sampler
            if not isinstance(sampler, DistributedSampler):
                raise ValueError(
                    f"ZeusDataLoader ({role}): distributed='dp' needs a DistributedSampler, not "
                    f"{type(sampler).__name__}; pass sampler=DistributedSampler(dataset)"
                )
            if sampler.num_replicas != world or sampler.rank != rank:
                raise ValueError(
                    f"ZeusDataLoader ({role}): the DistributedSampler is for rank "
                    f"{sampler.rank} of {sampler.num_replicas}, but this process is rank {rank} "
                    f"of {world}; make it with num_replicas=world size and rank=rank (the "
                    "defaults)"
                )
        elif self._zeus_train and os.environ.get("WORLD_SIZE", "1") != "1":
            _log.warning(
                "ZeusDataLoader: WORLD_SIZE=%s but distributed=None: every process runs its own "
                "job on the same GPUs and log dir; pass distributed='dp'",
                os.environ["WORLD_SIZE"],
            )
        self._zeus_global_batch_size = batch_size * world
        if self._zeus_train:
            _registry.forget_closed_train()
            if _registry.pairing.train is not None:
                _registry.pairing.add_train()  # raises: the process has a train loader
            collectives: Any = (
                TorchCollectives(group_layout()) if distributed == "dp" else SingleProcess()
            )
            self._zeus_job = _core.EnergyJob(
                _core.JobOptions(), max_epochs, batch_size, collectives, _rank_device()
            )
            _registry.jobs.add(self._zeus_job)
            pairing_id = _registry.pairing.add_train()
            _registry.train = weakref.ref(self)
        else:
            pairing_id = _registry.pairing.add_eval()
        weakref.finalize(self, _registry.pairing.remove, pairing_id)

    # ---- the seed's API -----------------------------------------------------------------

    def epochs(self) -> Iterator[int]:
        """The train loader's epochs, 0, 1, ...: ends at the target metric or max_epochs; raises
        ZeusCostThresholdExceededException (every rank, same epoch) when the next epoch's
        predicted cost reaches ZEUS_COST_THRESH."""
        self._train_only("epochs()")
        _registry.pairing.check_can_start_epochs()
        return self._epochs()

    def report_metric(self, metric: float, higher_is_better: bool = True) -> None:
        """The epoch's validation metric, already averaged across ranks (the master's decides)."""
        self._train_only("report_metric()")
        self._zeus_job.report_metric(float(metric), bool(higher_is_better))

    # ---- zeus_cpp's additions -----------------------------------------------------------

    @property
    def is_train(self) -> bool:
        return self._zeus_train

    @property
    def global_batch_size(self) -> int:
        return self._zeus_global_batch_size

    @property
    def result(self) -> dict | None:
        """The job's result (the ``{job_id}+bs{B}.train.json`` content) once training is over."""
        self._train_only("result")
        text = self._zeus_job.result_json
        return json.loads(text) if text is not None else None

    @property
    def optimal_power_limit_w(self) -> float | None:
        self._train_only("optimal_power_limit_w")
        mw = self._zeus_job.optimal_power_limit_mw
        return mw / 1000 if mw is not None else None

    @property
    def log_dir(self) -> str:
        self._train_only("log_dir")
        return str(self._zeus_job.log_dir)

    def close(self) -> None:
        """Restores the GPUs' limits and releases them now (otherwise at exit). Idempotent."""
        if self._zeus_job is not None:
            self._zeus_job.close()

    # ---- iteration ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if self._zeus_train:
            if self._zeus_epoch is None:
                raise RuntimeError(
                    "the train loader is iterated outside epochs(): write `for epoch in "
                    "train_loader.epochs(): for batch in train_loader: ...`"
                )
            return self._train_batches(super().__iter__())
        return self._eval_batches(super().__iter__())

    def _train_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        job = self._zeus_job
        job.begin_train_epoch(len(self))
        begin, end = job.train_step_begin, job.train_step_end
        for batch in batches:
            begin()
            yield batch
            end()
        job.end_train_epoch()

    def _eval_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        train = _registry.train_loader()  # the train loader of now, made before or after this one
        if train is None or train._zeus_epoch is None:
            yield from batches  # outside training (a final test): nothing to measure
            return
        job = train._zeus_job
        job.begin_eval_epoch(len(self))
        end = job.eval_step_end
        for batch in batches:
            yield batch
            end()
        job.end_eval_epoch()

    def _epochs(self) -> Iterator[int]:
        job = self._zeus_job
        while True:
            try:
                epoch = job.next_epoch()
            except _core.CostThresholdExceeded as error:
                self._zeus_epoch = None
                result = self.result
                raise ZeusCostThresholdExceededException._from_core(error, result) from None
            self._zeus_epoch = epoch
            if epoch is None:
                return
            yield epoch

    def _train_only(self, what: str) -> None:
        if not self._zeus_train:
            raise ValueError(f"{what} is for the train loader (the one with max_epochs)")
