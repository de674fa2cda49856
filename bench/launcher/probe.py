"""The Python worker of bench/launcher/run.py: records (Unix time, in $PROBE_DIR/join.<rank>)
the moment it has joined a Gloo group from torchrun's environment and finished one all-reduce."""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
with open(os.path.join(os.environ.get("PROBE_DIR", "."), f"join.{os.environ['RANK']}"), "w") as f:
    f.write(f"{time.time():.6f}\n")
dist.destroy_process_group()
os._exit(0)  # PyTorch 1.13 on Python 3.11 can hang in interpreter teardown
