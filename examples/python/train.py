#!/usr/bin/env python3
"""Energy-optimized data-parallel Fashion-MNIST in PyTorch with zeus_cpp: the seed's example
workflow (Zeus's ZeusDataLoader with distributed="dp", ENOT's helpers, no DDP wrapper).

Launch methods (2 processes here; one per GPU on a GPU node):
  python train.py --multiprocessing-distributed --nproc 2 --zeus          # torch.multiprocessing
  python -m torch.distributed.launch --nproc_per_node 2 train.py --zeus   # --local_rank argument
  torchrun --nproc_per_node 2 train.py --zeus                             # or: zeus run ...
  zeus run --nproc-per-node 2 train.py --zeus
  srun -n 2 python train.py --zeus                                        # Slurm, a task per GPU

Without --zeus the same training runs on plain DataLoaders (no energy optimization). Zeus's
variables configure the job (ZEUS_LOG_DIR, ZEUS_ETA_KNOB, ZEUS_COST_THRESH, ZEUS_DEVICE,
ZEUS_MEASURE_ONLY, ...); --target-accuracy sets ZEUS_TARGET_METRIC when it is not set. Data:
Debian's dataset-fashion-mnist (IDX files, gzip or plain), or --data DIR.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import zeus_cpp
from zeus_cpp import ZeusCostThresholdExceededException, ZeusDataLoader
from zeus_cpp import distributed as zdist

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA, help="directory of the four IDX files")
    p.add_argument("--epochs", type=int, default=5, help="max epochs")
    p.add_argument("--batch-size", type=int, default=128, help="global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--target-accuracy", type=float, default=0.85)
    p.add_argument("--zeus", action="store_true", help="train with ZeusDataLoader")
    p.add_argument("--multiprocessing-distributed", action="store_true",
                   help="spawn --nproc workers with torch.multiprocessing")
    p.add_argument("--nproc", type=int, default=None,
                   help="workers to spawn (default: one per GPU, else 2)")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None,
                   help="set by python -m torch.distributed.launch")
    p.add_argument("--limit-train", type=int, default=0, help="use the first N training images")
    p.add_argument("--limit-test", type=int, default=0, help="use the first N test images")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def read_idx(path: Path) -> torch.Tensor:
    """An IDX file (the MNIST format): magic, dimensions, then uint8 data."""
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.exists():
            raw = candidate.read_bytes()
            if candidate.suffix == ".gz":
                raw = gzip.decompress(raw)
            break
    else:
        raise FileNotFoundError(
            f"{path}(.gz) is missing: install Debian's dataset-fashion-mnist or pass --data DIR"
        )
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8)
    return data.reshape(dims)


def load(data_dir: str, split: str, limit: int) -> TensorDataset:
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(Path(data_dir) / f"{prefix}-images-idx3-ubyte")
    labels = read_idx(Path(data_dir) / f"{prefix}-labels-idx1-ubyte")
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = (images.float().div_(255.0).sub_(0.2860).div_(0.3530)).unsqueeze(1)
    return TensorDataset(x, labels.long())


class Net(nn.Module):
    """A small CNN: two 3x3 convolutions with pooling, then two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def average_gradients(model: nn.Module, world: int) -> None:
    """Data parallelism without a DDP wrapper (ENOT's way): all-reduce and average gradients."""
    if world == 1:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat.div_(world)
    offset = 0
    for g in grads:
        g.copy_(flat[offset: offset + g.numel()].view_as(g))
        offset += g.numel()


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    """Accuracy over the whole test set, summed across ranks (the metric Zeus is given)."""
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            totals[0] += (model(x).argmax(1) == y).sum()
            totals[1] += y.numel()
    if dist.is_initialized():
        dist.all_reduce(totals)
    model.train()
    return (totals[0] / totals[1]).item()


def train(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    info = zdist.init_torch()
    world, device = info.world_size, info.device
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the world "
                         f"size {world}")
    per_rank = args.batch_size // world  # ZeusDataLoader scales it back for its file names
    os.environ.setdefault("ZEUS_TARGET_METRIC", str(args.target_accuracy))
    train_set = load(args.data, "train", args.limit_train)
    test_set = load(args.data, "test", args.limit_test)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(test_set, shuffle=False)
    common = dict(num_workers=args.num_workers, pin_memory=device.type == "cuda")
    if args.zeus:  # ZEUS
        train_loader = ZeusDataLoader(train_set, batch_size=per_rank, max_epochs=args.epochs,
                                      distributed="dp", sampler=train_sampler, **common)
        eval_loader = ZeusDataLoader(test_set, batch_size=per_rank, distributed="dp",
                                     sampler=test_sampler, **common)
        epochs = train_loader.epochs()
    else:
        train_loader = DataLoader(train_set, batch_size=per_rank, sampler=train_sampler, **common)
        eval_loader = DataLoader(test_set, batch_size=per_rank, sampler=test_sampler, **common)
        epochs = iter(range(args.epochs))

    model = Net().to(device)
    zdist.sync_model(model)  # DATA PARALLEL: every rank starts from the master's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    accuracy, start = 0.0, time.monotonic()
    try:
        for epoch in epochs:
            train_sampler.set_epoch(epoch)
            for x, y in train_loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                optimizer.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                average_gradients(model, world)
                optimizer.step()
            accuracy = evaluate(model, eval_loader, device)
            if zdist.is_master():
                print(f"epoch {epoch}: test accuracy {accuracy:.4f}", flush=True)
            if args.zeus:
                train_loader.report_metric(accuracy, higher_is_better=True)  # ZEUS
            elif accuracy >= args.target_accuracy:
                break
    except ZeusCostThresholdExceededException as e:  # ZEUS: every rank, same epoch
        if zdist.is_master():
            print(f"stopped early: {e}", flush=True)
    if zdist.is_master():
        where = f"rank 0 of {world} on {socket.gethostname()} ({info.launcher}, {device})"
        line = f"done: accuracy {accuracy:.4f} in {time.monotonic() - start:.1f} s; {where}"
        if args.zeus and train_loader.result is not None:
            r = train_loader.result
            line += (f"; energy {r['energy']:.1f} J, time {r['time']:.2f} s, "
                     f"reached {r['reached']}, results in {train_loader.log_dir}")
        print(line, flush=True)
    # The loaders (their energy jobs, which hold the group's collectives) go before the group.
    train_loader = eval_loader = None
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def spawned(local_rank: int, args: argparse.Namespace, nproc: int, port: int) -> None:
    """A torch.multiprocessing worker: it states its place the way torchrun would."""
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nproc),
                      LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(args)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.multiprocessing_distributed:
        nproc = args.nproc or (torch.cuda.device_count() if torch.cuda.is_available() else 2) or 2
        torch.multiprocessing.spawn(spawned, args=(args, nproc, free_port()), nprocs=nproc)
        return 0
    return train(args)


if __name__ == "__main__":
    print(f"zeus_cpp {zeus_cpp.__version__}, torch {torch.__version__}", file=sys.stderr)
    sys.exit(main(sys.argv[1:]))
