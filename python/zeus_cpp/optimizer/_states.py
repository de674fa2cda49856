"""The power-limit optimizer's states (upstream's names: ``Ready`` -> ``Warmup`` ->
``Profiling`` -> ... -> ``Done``) and its reduction over the ranks, apart from the optimizer
so that its helpers (the job push) use them without importing it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Done", "Profiling", "Ready", "Warmup", "all_reduce", "world_size"]


@dataclass
class Ready:
    """Waiting ``steps`` more step beginnings before setting ``next_power_limit`` (mW)."""

    next_power_limit: int
    steps: int


@dataclass
class Warmup:
    """At ``current_power_limit`` (mW), ``steps`` more step beginnings before profiling."""

    current_power_limit: int
    steps: int


@dataclass
class Profiling:
    """Measuring ``current_power_limit`` (mW) for ``steps`` more step beginnings."""

    current_power_limit: int
    steps: int


@dataclass
class Done:
    """At ``optimal_power_limit`` (mW) for good."""

    optimal_power_limit: int


def all_reduce(values: list[float], op: str) -> list[float]:
    """Elementwise over every rank (``sum`` or ``max``), as upstream; as is without a group."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return values
    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else torch.device("cpu"))
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.cpu().tolist()


def gather_strings(mine: str) -> list[str]:
    """Every rank's `mine`, by rank (one all_gather_object); [mine] without a group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [mine]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, mine)
    return [str(s) for s in out]


def world_size() -> int:
    """Ranks in torch.distributed's default group; 1 without one."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
