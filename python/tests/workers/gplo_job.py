"""A data-parallel rank that drives Zeus 0.16's GlobalPowerLimitOptimizer as upstream's docs do
(one ZeusMonitor and one optimizer per rank, on the rank's own GPU): `--profile-path` is the
optimizer's profile file, the "model" is a short sleep per step. Faults on request: the rank
SIGKILLs itself at a step (in the middle of profiling) after writing `--killed-flag`.

  python gplo_job.py --profile-path P [--epochs 2 --steps 30] [--kill-at STEP --killed-flag F]
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--profile-path", default=None)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--killed-flag", default=None)
    args = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    monitor = ZeusMonitor(gpu_indices=[local_rank])
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=1, warmup_steps=1, profile_steps=2,
                                    pl_step=25, profile_path=args.profile_path)
    step = 0
    for _ in range(args.epochs):
        plo.on_epoch_begin()
        for _ in range(args.steps):
            plo.on_step_begin()
            if step == args.kill_at and local_rank == 0:
                Path(args.killed_flag).write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.002)
            plo.on_step_end()
            step += 1
        plo.on_epoch_end()
    print(f"rank {local_rank}: {type(plo.state).__name__}", flush=True)


if __name__ == "__main__":
    main()
