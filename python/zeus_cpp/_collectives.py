"""The collectives the C++ job needs, over torch.distributed (Gloo or NCCL), and where this
process sits among its node's processes."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from zeus_cpp import _core


@dataclass(frozen=True)
class Layout:
    """This process in its job: global and node-local ranks, and its node's index."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0


def launcher_env() -> _core.Env | None:
    """What the launcher said (torchrun / zeus run variables, --local_rank, Slurm, Open MPI), or
    None where it says nothing usable."""
    try:
        return _core.detect_env(sys.argv[1:])
    except _core.ConfigError:
        return None


def group_layout() -> Layout:
    """The default process group's layout. The launcher's variables give the node-local ranks
    where they describe this group (rank and world size agree); otherwise (a worker spawned by
    torch.multiprocessing, a group made by hand) ranks on one host form a node, in rank order.
    Collective when the variables do not describe the group on some rank: every rank gathers."""
    rank, world = dist.get_rank(), dist.get_world_size()
    env = launcher_env()
    matches = env is not None and env.world_size == world and env.rank == rank
    if world == 1:
        return Layout()
    # Every rank takes part, so that a rank whose variables disagree does not leave the others
    # waiting: one small gather at construction.
    flag = torch.tensor([0.0 if matches else 1.0], dtype=torch.float64, device=_device())
    dist.all_reduce(flag)
    if flag.item() == 0.0 and env is not None:
        return Layout(rank, world, env.local_rank, env.local_world_size, env.node_rank)
    hosts: list[str | None] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    order: list[str] = []
    for host in hosts:
        if host not in order:
            order.append(host)  # type: ignore[arg-type]
    mine = hosts[rank]
    peers = [r for r in range(world) if hosts[r] == mine]
    node = order.index(mine)  # type: ignore[arg-type]
    return Layout(rank, world, peers.index(rank), len(peers), node)


def _device() -> torch.device:
    """Where the default group's tensors must live: the current CUDA device under NCCL."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class TorchCollectives:
    """zeus::job::Collectives over the default process group (the C++ job calls these)."""

    def __init__(self, layout: Layout) -> None:
        self.rank = layout.rank
        self.world_size = layout.world_size
        self.local_rank = layout.local_rank
        self.local_world_size = layout.local_world_size
        self.node_rank = layout.node_rank
        self._device = _device()

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self._device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def broadcast(self, values: list[float], root: int) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self._device)
        dist.broadcast(t, src=root)
        return t.tolist()


class SingleProcess:
    """A world of one: the collectives return their input."""

    rank = 0
    world_size = 1
    local_rank = 0
    local_world_size = 1
    node_rank = 0

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        return values

    def broadcast(self, values: list[float], root: int) -> list[float]:
        return values
