"""A data-parallel rank (Gloo, one process per rank, the launcher's RANK/WORLD_SIZE/MASTER_*
variables) that drives PerGpuPowerLimitOptimizer (or, with --plan global,
GlobalPowerLimitOptimizer) on its own simulated GPU, then measures `--after` steps at the limits
the optimizer settled on. Prints one JSON line: the limits, Zeus's single limit, and the energy
and time of every rank's GPU over those steps (all-reduced).

  python per_gpu_job.py [--plan per_gpu|global] [--after 40] [--slow-rank R --slowdown S]

With --slow-rank, that rank's GPU becomes S times slower (heat) after the optimizer settles, and
the `--after` steps measured follow (the optimizer's pace checks see it within 200 steps).
"""

from __future__ import annotations

import argparse
import json
import os

import torch.distributed as dist

from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer, PerGpuPowerLimitOptimizer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plan", choices=["per_gpu", "global"], default="per_gpu")
    p.add_argument("--after", type=int, default=40)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slowdown", type=float, default=1.0)
    p.add_argument("--no-follow", action="store_true", help="keep the first per-GPU plan")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    monitor = ZeusMonitor(gpu_indices=[local_rank])
    cls = PerGpuPowerLimitOptimizer if args.plan == "per_gpu" else GlobalPowerLimitOptimizer
    plo = cls(monitor, wait_steps=1, warmup_steps=1, profile_steps=3, pl_step=25)
    if args.no_follow:
        plo.check_steps = 10**9
    plo.on_epoch_begin()
    steps = 0
    while type(plo.state).__name__ != "Done":
        plo.on_step_begin()
        plo.on_step_end()
        steps += 1
        assert steps < 1000, "profiling never ended"
    plo.on_step_begin()  # the step that set the optimum runs at it
    plo.on_step_end()
    first_limits = getattr(plo, "optimal_power_limits", None)
    if rank == args.slow_rank:
        monitor.gpus._gpus.sim_set_slowdown(local_rank, args.slowdown)
    monitor.begin_window("after")
    for _ in range(args.after):
        plo.on_step_begin()
        plo.on_step_end()
    plo.on_step_begin()  # runs the last step on the simulated clock
    m = monitor.end_window("after")
    energy = [0.0] * dist.get_world_size()
    energy[rank] = m.gpu_energy[local_rank]
    import torch

    t = torch.tensor(energy, dtype=torch.float64)
    dist.all_reduce(t)
    limits = getattr(plo, "optimal_power_limits", None)
    if rank == 0:
        print(json.dumps({"limits_mw": limits,
                          "first_limits_mw": first_limits,
                          "replans": getattr(plo, "replans", []),
                          "single_mw": plo.state.optimal_power_limit,
                          "own_limit_mw": plo.current_power_limit,
                          "energy_j": t.tolist(), "time_s": m.time}), flush=True)
    plo.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
