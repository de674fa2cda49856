"""The fault campaign's Python job (bench/faults/campaign.py, kill-python-watchdog): Zeus 0.16's
GlobalPowerLimitOptimizer over zeus_cpp on the campaign's fake GPUs, as root, with the watchdog
process that restores its limits if it dies (zeus_cpp._watchdog), training two epochs of `steps`
steps of 8 ms. Run by .venv-py's python; its journal goes to ZEUS_JOURNAL_DIR.

    python_job.py STEPS
"""

from __future__ import annotations

import sys
import time

from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer


def main() -> None:
    steps = int(sys.argv[1])
    monitor = ZeusMonitor(gpu_indices=[0, 1])
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=1, warmup_steps=1, profile_steps=3,
                                    pl_step=25)
    for _ in range(2):
        plo.on_epoch_begin()
        for _ in range(steps):
            plo.on_step_begin()
            time.sleep(0.008)
            plo.on_step_end()
        plo.on_epoch_end()
    plo.close()


if __name__ == "__main__":
    main()
