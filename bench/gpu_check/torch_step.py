"""The Python side of scripts/gpu-check.sh's step-time comparison: the CNN of
examples/fashion_mnist (bench/ddp_vs_pytorch/ddp_peer.py's Net) trained by the machine's own
PyTorch in one process, as a PyTorch user would write it: a DataLoader with pinned memory,
non_blocking copies, SGD with momentum, batch 64. Prints one JSON line: steps, step time and
samples/s over the epoch's training loop (the device synchronized at both ends), the same span
zeus-cpp's train result measures.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp_vs_pytorch"))
from ddp_peer import MEAN, STD, Net, read_idx  # noqa: E402  (the benchmark's shared network)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit-train", type=int, default=0, help="first N samples only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json-out", help="also write the result here (atomically)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).long()
    if args.limit_train > 0:
        images, labels = images[: args.limit_train], labels[: args.limit_train]
    images = ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        pin_memory=device.type == "cuda",
    )
    net = Net().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_sum = torch.zeros((), device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    start = time.perf_counter()
    steps = 0
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach()
        steps += 1
    sync()
    elapsed = time.perf_counter() - start
    result = json.dumps(
        {
            "torch": torch.__version__,
            "device": str(device),
            "steps": steps,
            "train_s": elapsed,
            "step_ms": 1e3 * elapsed / steps,
            "samples_per_s": steps * args.batch_size / elapsed,
            "mean_loss": loss_sum.item() / steps,
        }
    )
    print(result, flush=True)
    if args.json_out:
        tmp = f"{args.json_out}.tmp"
        with open(tmp, "w") as f:
            f.write(result + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, args.json_out)


if __name__ == "__main__":
    main()
