"""ENOT's distributed helpers (``enot.distributed``) for zeus_cpp: start the default process
group from whatever launched the script, keep a model identical on every rank, and ask who is
the master. Launchers: torchrun / ``zeus run`` (their variables), ``python -m
torch.distributed.launch`` (its ``--local_rank`` argument), Slurm (``srun``), Open MPI, a worker
that ``torch.multiprocessing`` spawned after setting the variables, or a single process."""

from __future__ import annotations

import atexit
import datetime
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from zeus_cpp import _core
from zeus_cpp._collectives import launcher_env

__all__ = ["RankInfo", "init_torch", "is_local_master", "is_master", "sync_model"]


@dataclass(frozen=True)
class RankInfo:
    """Who this process is once ``init_torch()`` returned."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    backend: str
    device: torch.device
    launcher: str  # torchrun, legacy_local_rank, slurm, open_mpi, single, explicit


_info: RankInfo | None = None


def init_torch(
    backend: str | None = None,
    timeout: datetime.timedelta = datetime.timedelta(minutes=5),
    set_device: bool = True,
) -> RankInfo:
    """Initializes the default process group from the launcher's environment.

    Sets the CUDA device to the local rank when CUDA has devices (``set_device=False`` leaves
    it); the backend is NCCL on CUDA, else Gloo, unless ``backend`` says otherwise. A single
    process gets a group of one, so ``distributed="dp"`` code runs unchanged. Idempotent: a
    second call returns the first call's answer. Raises ConfigError for a bad variable, or naming
    the rank and host when the local rank has no GPU.
    """
    global _info
    if _info is not None and dist.is_initialized():
        return _info
    env = _core.detect_env(sys.argv[1:])
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    device = torch.device("cpu")
    if cuda and set_device:
        # The C++ runtime's rule (zeus/cluster/device_binding.h): under `zeus run --devices`
        # each worker sees one device of its own, its cuda:0.
        # ROCm PyTorch calls AMD GPUs cuda:N too; its HIP_/ROCR_VISIBLE_DEVICES count as well.
        index = _core.cuda_device_index(
            env, torch.cuda.device_count(), _core.runtime_visible_devices())
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    elif cuda:
        device = torch.device("cuda", torch.cuda.current_device())
    if backend is None:
        backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        atexit.register(_destroy_at_exit)
        if env.world_size == 1 and not env.master_addr:
            # A group of one on a private store: nothing to rendezvous with.
            store = dist.HashStore()
            dist.init_process_group(backend, store=store, rank=0, world_size=1, timeout=timeout)
        else:
            # env:// is PyTorch's own path (it also serves torchrun's agent store); the launchers
            # that do not set its variables (Slurm, --local_rank, Open MPI) get them here, as
            # zeus run writes them (contract::WorkerEnv).
            for name, value in _core.worker_env_vars(env).items():
                os.environ.setdefault(name, value)
            dist.init_process_group(
                backend,
                init_method="env://",
                rank=env.rank,
                world_size=env.world_size,
                timeout=timeout,
            )
    _info = RankInfo(
        rank=dist.get_rank(),
        local_rank=env.local_rank,
        world_size=dist.get_world_size(),
        local_world_size=env.local_world_size,
        node_rank=env.node_rank,
        backend=dist.get_backend(),
        device=device,
        launcher=env.source.name,
    )
    return _info


def _destroy_at_exit() -> None:
    """Destroys the default group init_torch() made, if the script did not. torch 2.x's Gloo
    can abort a process ("terminate called without an active exception") that exits with the
    group alive after its peer left: 3 of 8 two-rank runs of the tests did with torch 2.15, none
    of 10 with the group destroyed. No barrier: after a rank's error its peers are in another
    collective."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def sync_model(
    model: torch.nn.Module, reduce_parameters: bool = False, reduce_buffers: bool = False
) -> None:
    """Makes ``model`` identical on every rank: its parameters and buffers are broadcast from
    the master, or averaged over the ranks where ``reduce_parameters`` / ``reduce_buffers`` say
    so (buffers that are not floating point, such as BatchNorm's counters, are always taken
    from the master). Collective; a no-op without a process group or in a world of one."""
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return
    world = dist.get_world_size()
    with torch.no_grad():
        for tensors, reduce in (
            (list(model.parameters()), reduce_parameters),
            (list(model.buffers()), reduce_buffers),
        ):
            for t in tensors:
                if reduce and t.is_floating_point():
                    dist.all_reduce(t.data, op=dist.ReduceOp.SUM)
                    t.data.div_(world)
                else:
                    dist.broadcast(t.data, src=0)


def is_master() -> bool:
    """Global rank 0 (true in a single process)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    env = launcher_env()
    return env is None or env.rank == 0


def is_local_master() -> bool:
    """Local rank 0 on this node (true in a single process)."""
    if _info is not None:
        return _info.local_rank == 0
    env = launcher_env()
    return env is None or env.local_rank == 0
