"""A PyTorch client nobody here wrote the launcher for: joins a Gloo group from torchrun's
environment, does one all-reduce, prints what it saw. Run by launch_test under `zeus run` and
under Debian's torchrun; the two must print the same."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} "
      f"local_rank={os.environ['LOCAL_RANK']} sum={t.item():.1f}", flush=True)
dist.destroy_process_group()
# PyTorch 1.13 on Python 3.11 sometimes hangs in interpreter teardown; the result is out.
os._exit(0)
