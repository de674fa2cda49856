"""A data-parallel rank (Gloo, one process per rank, the launcher's RANK/WORLD_SIZE/MASTER_*
variables) that drives PerGpuPowerLimitOptimizer (or, with --plan global,
GlobalPowerLimitOptimizer) on its own simulated GPU, then measures `--after` steps at the limits
the optimizer settled on. Prints one JSON line: the limits, Zeus's single limit, and the energy
and time of every rank's GPU over those steps (all-reduced).

  python per_gpu_job.py [--plan per_gpu|global] [--after 40] [--slow-rank R --slowdown S]

With --slow-rank, that rank's GPU becomes S times slower (heat) after the optimizer settles, and
the `--after` steps measured follow (the optimizer's pace checks see it within 200 steps).

With --plan carbon_per_gpu --trace CSV, CarbonAwarePerGpuPowerLimitOptimizer follows the trace's
carbon intensity, read on a grid clock that runs one minute a step from the trace's first row
once the optimizer settled (so the `--after` steps cross its hours).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch.distributed as dist

from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.monitor.carbon import TraceCarbonIntensityProvider
from zeus_cpp.optimizer.power_limit import (
    CarbonAwarePerGpuPowerLimitOptimizer,
    GlobalPowerLimitOptimizer,
    PerGpuPowerLimitOptimizer,
)


def first_row_s(trace: str) -> float:
    from datetime import datetime

    with open(trace) as f:
        stamp = f.read().splitlines()[1].split(",")[0]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plan", choices=["per_gpu", "global", "carbon_per_gpu"], default="per_gpu")
    p.add_argument("--trace", help="with carbon_per_gpu: the carbon-intensity trace")
    p.add_argument("--after", type=int, default=40)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slowdown", type=float, default=1.0)
    p.add_argument("--no-follow", action="store_true", help="keep the first per-GPU plan")
    p.add_argument("--profile", help="the optimizer's profile_path")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    monitor = ZeusMonitor(gpu_indices=[local_rank])
    grid_steps = [0]  # steps run since the optimizer settled: the grid clock's minutes
    if args.plan == "carbon_per_gpu":
        first = first_row_s(args.trace)
        provider = TraceCarbonIntensityProvider(args.trace,
                                                clock=lambda: first + 60.0 * grid_steps[0])
        plo = CarbonAwarePerGpuPowerLimitOptimizer(
            monitor, provider, eta_knob=0.5, max_carbon_intensity=750.0, interval_s=10**6,
            wait_steps=1, warmup_steps=1, profile_steps=3, pl_step=25, poll_s=0.002)
    else:
        cls = PerGpuPowerLimitOptimizer if args.plan == "per_gpu" else GlobalPowerLimitOptimizer
        plo = cls(monitor, wait_steps=1, warmup_steps=1, profile_steps=3, pl_step=25,
                  profile_path=args.profile)
    if args.no_follow:
        plo.check_steps = 10**9
    plo.on_epoch_begin()
    profiled = type(plo.state).__name__ != "Done"
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
        grid_steps[0] += 1
        if args.plan == "carbon_per_gpu":
            time.sleep(0.003)  # the poller reads the grid clock's new minute
    plo.on_step_begin()  # runs the last step on the simulated clock
    m = monitor.end_window("after")
    energy = [0.0] * dist.get_world_size()
    energy[rank] = m.gpu_energy[local_rank]
    import torch

    t = torch.tensor(energy, dtype=torch.float64)
    dist.all_reduce(t)
    own = torch.zeros(dist.get_world_size(), dtype=torch.float64)
    own[rank] = plo.current_power_limit
    dist.all_reduce(own)
    limits = getattr(plo, "optimal_power_limits", None)
    if rank == 0:
        print(json.dumps({"limits_mw": limits, "profiled": profiled,
                          "first_limits_mw": first_limits,
                          "replans": getattr(plo, "replans", []),
                          "single_mw": plo.state.optimal_power_limit,
                          "choices": getattr(plo, "choices", []),
                          "own_limit_mw": plo.current_power_limit,
                          "own_limits_mw": [int(x) for x in own.tolist()],
                          "energy_j": t.tolist(), "time_s": m.time}), flush=True)
    plo.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
