"""A training job for the pytest suite: a tiny model over ZeusDataLoader whose validation metric
follows a given schedule, so that each test decides when the target is reached. Every rank
writes what it saw to OUT/rank{R}.json. Faults on request: a rank raises, or stops to be killed.

  python job.py --out DIR [--dp] [--spawn N] [--epochs E] [--metrics 0.1,0.5] [--raise-rank R
      --raise-at STEP] [--hang-rank R --hang-at STEP]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DistributedSampler, TensorDataset

from zeus_cpp import ZeusCostThresholdExceededException, ZeusDataLoader
from zeus_cpp import distributed as zdist


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--dp", action="store_true")
    p.add_argument("--spawn", type=int, default=0)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--samples", type=int, default=128)
    p.add_argument("--metrics", default="0.1")
    p.add_argument("--raise-rank", type=int, default=-1)
    p.add_argument("--raise-at", type=int, default=-1, help="global train step")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-at", type=int, default=-1, help="global train step")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None)
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    rank = 0
    if args.dp:
        info = zdist.init_torch()
        rank = info.rank
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {"rank": rank, "epochs": [], "outcome": None, "pid": os.getpid()}
    if args.dp:
        record.update(info=dict(rank=info.rank, local_rank=info.local_rank,
                                world_size=info.world_size, node_rank=info.node_rank,
                                launcher=info.launcher, backend=info.backend,
                                is_master=zdist.is_master(),
                                is_local_master=zdist.is_local_master()))
    x = torch.arange(args.samples * 2, dtype=torch.float32).reshape(args.samples, 2)
    data = TensorDataset(x, torch.zeros(args.samples))
    kwargs: dict = {}
    eval_kwargs: dict = {}
    if args.dp:
        kwargs = dict(distributed="dp", sampler=DistributedSampler(data, seed=1))
        eval_kwargs = dict(distributed="dp", sampler=DistributedSampler(data, shuffle=False))
    train = ZeusDataLoader(data, batch_size=args.batch_size, max_epochs=args.epochs, **kwargs)
    evaluation = ZeusDataLoader(data, batch_size=args.batch_size * 4, **eval_kwargs)
    metrics = [float(m) for m in args.metrics.split(",")]
    step = 0
    try:
        for epoch in train.epochs():
            record["epochs"].append(epoch)
            seen = 0
            for (batch, _) in train:
                if rank == args.raise_rank and step == args.raise_at:
                    raise RuntimeError(f"rank {rank} fails at step {step} on purpose")
                if rank == args.hang_rank and step == args.hang_at:
                    # Atomically: the test reads the pid as soon as the file exists.
                    (out / f"hang{rank}.tmp").write_text(str(os.getpid()))
                    os.replace(out / f"hang{rank}.tmp", out / f"hang{rank}")
                    while True:
                        time.sleep(1)
                seen += batch.shape[0]
                step += 1
            for _ in evaluation:
                pass
            train.report_metric(metrics[min(epoch, len(metrics) - 1)], higher_is_better=True)
        record["outcome"] = "finished"
    except ZeusCostThresholdExceededException as e:
        record["outcome"] = "cost_threshold"
        record["exception"] = dict(time=e.time_consumed, energy=e.energy_consumed, cost=e.cost,
                                   next_cost=e.next_cost, thresh=e.cost_thresh, message=str(e))
    record["result"] = train.result
    record["optimal_pl"] = train.optimal_power_limit_w
    record["global_batch_size"] = train.global_batch_size
    (out / f"rank{rank}.json").write_text(json.dumps(record))


def spawned(local_rank: int, args: argparse.Namespace, port: int) -> None:
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank),
                      WORLD_SIZE=str(args.spawn), LOCAL_WORLD_SIZE=str(args.spawn),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(args)


def main() -> None:
    args = parse(sys.argv[1:])
    if args.spawn:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        torch.multiprocessing.spawn(spawned, args=(args, port), nprocs=args.spawn)
    else:
        run(args)


if __name__ == "__main__":
    main()
