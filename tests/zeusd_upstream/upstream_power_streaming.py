"""Upstream Zeus 0.16's own ``PowerStreamingClient`` against zeus-cpp's zeusd (run by
zeusd_daemon_test), unchanged, over the Unix socket in ZEUSD_SOCK_PATH.

Streams GPUs 0 and 1 until both have a reading, prints one JSON line of them (watts, and the
reading's age by the daemon's clock offset as upstream applies it) and "ready"; then waits up to
20 s for GPU 1 to read above 150 W (the caller raises it on the fake NVML) and prints a second
JSON line.

The module is upstream's file, unchanged, loaded by its path: importing it as
``zeus.monitor.power_streaming`` would run ``zeus.monitor``'s ``__init__``, whose energy monitor
imports scikit-learn, which this venv leaves out (tests/zeusd_upstream/requirements.txt).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import zeus
from zeus.utils.zeusd import ZeusdConfig

_spec = importlib.util.spec_from_file_location(
    "upstream_power_streaming", Path(zeus.__file__).parent / "monitor" / "power_streaming.py")
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module  # its dataclasses look their module up
_spec.loader.exec_module(_module)
PowerStreamingClient = _module.PowerStreamingClient


def wait_for(client: PowerStreamingClient, done, timeout_s: float = 20.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        readings = next(iter(client.get_power().values()), None)
        if readings is not None and done(readings):
            return readings
        time.sleep(0.05)
    return None


def line(readings) -> str:
    return json.dumps({"gpu_power_w": {str(k): v for k, v in readings.gpu_power_w.items()},
                       "age_s": time.time() - readings.timestamp_s})


def main() -> int:
    client = PowerStreamingClient(
        servers=[ZeusdConfig.uds(os.environ["ZEUSD_SOCK_PATH"], gpu_indices=[0, 1])])
    try:
        first = wait_for(client, lambda r: len(r.gpu_power_w) >= 2)
        if first is None:
            print("no readings of GPUs 0 and 1 within 20 s", file=sys.stderr)
            return 1
        print(line(first))
        print("ready", flush=True)
        second = wait_for(client, lambda r: r.gpu_power_w.get(1, 0.0) > 150.0)
        if second is None:
            print("GPU 1 never read above 150 W", file=sys.stderr)
            return 1
        print(line(second), flush=True)
        return 0
    finally:
        client.stop()


if __name__ == "__main__":
    sys.exit(main())
