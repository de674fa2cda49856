"""One rank of the DDP benchmark on PyTorch: the CNN of zeus_worker.cpp wrapped in
DistributedDataParallel over Gloo. Started with torchrun's environment by run.py (or by torchrun
itself); rank 0 prints one JSON line with the measured throughput. Runs on any PyTorch >= 1.13.
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    rank = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank)]
    return torch.frombuffer(bytearray(data[4 + 4 * rank :]), dtype=torch.uint8).view(shape)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2).flatten(1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).long()
    images = ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)

    torch.manual_seed(1 + rank)
    model = DistributedDataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sampler = DistributedSampler(range(len(labels)), num_replicas=world, rank=rank, seed=0)
    state = {"order": [], "cursor": 0, "epoch": 0}

    def next_batch():
        if state["cursor"] + args.batch_size > len(state["order"]):
            sampler.set_epoch(state["epoch"])
            state["epoch"] += 1
            state["order"] = torch.tensor(list(sampler), dtype=torch.long)
            state["cursor"] = 0
        index = state["order"][state["cursor"] : state["cursor"] + args.batch_size]
        state["cursor"] += args.batch_size
        return images.index_select(0, index), labels.index_select(0, index)

    loss_sum = 0.0

    def step():
        nonlocal loss_sum
        x, y = next_batch()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        loss_sum += loss.item()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    loss_sum = 0.0
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for _ in range(args.iters):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    mean_loss = torch.tensor([loss_sum / args.iters], dtype=torch.float64)
    dist.all_reduce(mean_loss)
    if rank == 0:
        print(json.dumps({
            "side": f"pytorch-{torch.__version__}", "sync": "ddp", "world": world,
            "iters": args.iters, "batch_size": args.batch_size, "elapsed_s": elapsed,
            "samples_per_s": args.iters * args.batch_size * world / elapsed,
            "mean_loss": mean_loss.item() / world,
            "minor_faults_per_iter": faults / args.iters,
        }), flush=True)


if __name__ == "__main__":
    main()
    # PyTorch 1.13 on Python 3.11 sometimes hangs after DDP in destroy_process_group() or in
    # interpreter teardown (seen here in about 1 run of 3, after the result was printed, with
    # one rank spinning); every collective is done and the result flushed, so skip both.
    sys.stdout.flush()
    os._exit(0)
