"""The README's Python example (section "Python: `zeus_cpp` for PyTorch scripts"), made whole so
that it runs: a small classifier on synthetic data instead of the user's datasets, with the
example's loaders, sync_model and report_metric unchanged. tests/wheels/run.sh runs it from the
pip wheel under `zeus run --nproc-per-node 2` on simulated V100s (ZEUS_DEVICE=sim:v100).

  zeus run --nproc-per-node 2 --standalone readme_train.py --log-dir DIR
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DistributedSampler, TensorDataset

from zeus_cpp import ZeusCostThresholdExceededException, ZeusDataLoader
from zeus_cpp import distributed as zdist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--log-dir", required=True)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    os.environ["ZEUS_LOG_DIR"] = args.log_dir
    torch.manual_seed(0)
    x = torch.randn(1024, 8)
    y = (x.sum(dim=1) > 0).long()
    train_set = TensorDataset(x, y)
    test_set = TensorDataset(x[:256], y[:256])

    # From here on, the README's example.
    info = zdist.init_torch()        # torchrun / zeus run, --local_rank, Slurm, spawn; NCCL or Gloo
    train_loader = ZeusDataLoader(train_set, batch_size=64, max_epochs=args.epochs,
                                  distributed="dp", sampler=DistributedSampler(train_set))
    eval_loader = ZeusDataLoader(test_set, batch_size=64, distributed="dp",
                                 sampler=DistributedSampler(test_set, shuffle=False))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    zdist.sync_model(model)
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    epochs, accuracy = 0, 0.0
    try:
        for epoch in train_loader.epochs():
            model.train()
            for xb, yb in train_loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
            model.eval()
            correct = torch.zeros(2)
            with torch.no_grad():
                for xb, yb in eval_loader:
                    correct += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
            dist.all_reduce(correct)
            accuracy = (correct[0] / correct[1]).item()
            train_loader.report_metric(accuracy, higher_is_better=True)  # all-reduced
            epochs = epoch + 1
    except ZeusCostThresholdExceededException:
        pass
    print(f"readme_train: rank {info.rank} done after {epochs} epoch(s), accuracy {accuracy:.3f}",
          flush=True)


if __name__ == "__main__":
    main()
