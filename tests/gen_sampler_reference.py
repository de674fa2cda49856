"""Writes tests/data/sampler_reference.json: index sequences of PyTorch's own Python
DistributedSampler, which zeus::distributed::DistributedSampler must reproduce exactly.

Not run in CI. Regenerate with Debian's python3-torch (1.13, the libtorch zeus-cpp builds on):
    apt-get install python3-torch && /usr/bin/python3 tests/gen_sampler_reference.py
"""
import json
import os

import torch
from torch.utils.data import DistributedSampler

CASES = [  # (n, world, rank, seed, epoch, shuffle, drop_last)
    (10, 3, 0, 0, 0, True, False),
    (10, 3, 2, 0, 0, True, False),
    (10, 3, 1, 42, 5, True, True),
    (100, 4, 3, 7, 1, True, False),
    (101, 4, 0, 7, 2, True, True),
    (1000, 2, 1, 123, 9, True, False),
    (7, 8, 5, 0, 0, True, False),
    (7, 8, 5, 0, 0, False, False),
    (60000, 2, 0, 0, 3, True, False),
]


def main() -> None:
    out = []
    for n, world, rank, seed, epoch, shuffle, drop_last in CASES:
        sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle,
                                     seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        indices = list(sampler)
        out.append({"n": n, "world": world, "rank": rank, "seed": seed, "epoch": epoch,
                    "shuffle": shuffle, "drop_last": drop_last,
                    # The long case keeps its length and first 50 indices to stay small.
                    "len": len(indices), "indices": indices[:50]})
    path = os.path.join(os.path.dirname(__file__), "data", "sampler_reference.json")
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "cases": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
