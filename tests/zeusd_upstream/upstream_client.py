"""Upstream Zeus 0.16's own zeusd client against zeus-cpp's zeusd (run by zeusd_daemon_test).

Run as an unprivileged user with ZEUSD_SOCK_PATH set, in a venv holding zeus==0.16.0 from PyPI
(scripts/install-zeus016.sh). Discovers the GPUs, reads limits and constraints, sets GPU
`argv[1]` to `argv[2]` mW, reads it back, prints one JSON line of what it saw and "ready", and
sleeps until killed (the caller then checks that the daemon puts the limit back).
"""

from __future__ import annotations

import json
import sys
import time

import zeus
from zeus.device.exception import ZeusdError
from zeus.utils.zeusd import ZeusdClient


def main() -> int:
    gpu = int(sys.argv[1])
    limit_mw = int(sys.argv[2])
    client = ZeusdClient()  # from ZEUSD_SOCK_PATH, as upstream's GPU classes do
    seen: dict[str, object] = {
        "zeus_version": zeus.__version__,
        "gpu_ids": client.gpu_ids,
        "names": [g.name for g in client.gpus],
        "can_control_gpu": client.can_control_gpu,
        "can_read_gpu": client.can_read_gpu,
        "limits": {str(k): v for k, v in client.get_power_limit().items()},
        "constraints": {str(k): list(v) for k, v in client.get_power_limit_constraints().items()},
    }
    client.set_power_limit([gpu], limit_mw, block=True)
    seen["after"] = client.get_power_limit([gpu])[gpu]
    try:
        client.set_power_limit([gpu], 1, block=True)
        seen["out_of_range"] = "accepted"
    except ZeusdError as e:
        seen["out_of_range"] = f"refused: {e}"
    print(json.dumps(seen), flush=True)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
