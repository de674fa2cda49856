"""The worker of bench/launcher/elastic.py. First thing, before importing torch, it records
(Unix time) in $PROBE_DIR/start.<restart>.<rank> that the launcher started it in a world of
WORLD_SIZE; then it joins a Gloo group from the launcher's variables, records in
$PROBE_DIR/up.<restart>.<rank> that it runs, and all-reduces every 50 ms, as a training step
would, until $PROBE_DIR/finish exists. A peer that dies makes an all-reduce fail here (the way a
torchrun agent learns of it)."""
import os
import time

started = time.time()
probe = os.environ["PROBE_DIR"]
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
with open(os.path.join(probe, f"start.{restart}.{os.environ['RANK']}"), "w") as f:
    f.write(f"{started:.6f} {os.environ['WORLD_SIZE']}\n")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
with open(os.path.join(probe, f"up.{restart}.{rank}"), "w") as f:
    f.write(f"{time.time():.6f} {world}\n")
t = torch.ones(1)
while not os.path.exists(os.path.join(probe, "finish")):
    dist.all_reduce(t)
    time.sleep(0.05)
dist.destroy_process_group()
os._exit(0)
