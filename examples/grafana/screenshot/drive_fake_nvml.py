"""Drives the fake NVML (tests/fakes) like a node where a job profiles power limits: every 4 s
the limit of GPUs 0-1 steps down 300 -> 150 W and their power follows under it; GPUs 2-3 idle;
temperature follows power; GPUs 0-1 are held down by their limit 30% of the time. For the
README's screenshots only (take.sh)."""

import json
import os
import random
import sys
import time

path = sys.argv[1]
limits = [300, 275, 250, 225, 200, 175, 150, 200]
t0 = time.time()
while True:
    k = int((time.time() - t0) / 4) % len(limits)
    gpus = []
    for i in range(4):
        busy = i < 2
        limit = limits[k] if busy else 300
        power = (min(limit, 280) - random.uniform(2, 12)) if busy else random.uniform(60, 70)
        gpus.append({"name": "NVIDIA A40", "uuid": f"GPU-0000000{i}", "power_mw": int(power * 1000),
                     "energy_mj": 1000000, "limit_mw": limit * 1000, "min_limit_mw": 100000,
                     "max_limit_mw": 300000, "default_limit_mw": 300000,
                     "temperature_c": int(35 + power / 8), "sm_clock_mhz": 1740 if busy else 210,
                     "mem_clock_mhz": 7251, "throttle_power_ns": int((time.time() - t0) * 3e8) if busy else 0,
                     "throttle_thermal_ns": 0})
    tmp = path + ".tmp"
    open(tmp, "w").write(json.dumps({"gpus": gpus, "permissive": True, "faults": {}}))
    os.replace(tmp, path)
    time.sleep(0.5)
