"""One training run sampled by `zeus monitor` (NVML through zeus-cpp) and by nvidia-smi over the
same window, which covers training, not start-up: both samplers start when the run prints the
end of its first epoch (CUDA, the data and the first epoch's warm-up are behind it) and stop
when the run exits.

  python -m gpu_check.monitored --train-log L --zeus ZEUS --monitor-csv M --monitor-log T
      [--smi-csv S] [--ok-codes 0,3] -- TRAIN ARGV...

Writes window.json beside the monitor's CSV: when the window opened and how long it lasted.
Exit 0 when the run ended with an accepted code, the window opened, and the monitor reported.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

kFirstEpoch = re.compile(rb"^epoch 1/\d+:", re.M)
kPoll = 0.02
kStopWait = 15.0
kSmiFields = ("timestamp,power.draw,power.draw.instant", "timestamp,power.draw")


def start_smi(out: Path) -> Optional[subprocess.Popen]:
    """nvidia-smi every 100 ms; without power.draw.instant where the driver lacks it."""
    for fields in kSmiFields:
        f = open(out, "wb")
        p = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                              "-i", "0", "-lms", "100"], stdout=f, stderr=subprocess.STDOUT)
        f.close()
        try:
            rc = p.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return p
        print(f"monitored: nvidia-smi --query-gpu={fields} exited {rc}: "
              f"{out.read_text(errors='replace').strip()[:200]}", flush=True)
    return None


def stop(p: Optional[subprocess.Popen], sig: int) -> Optional[int]:
    if p is None:
        return None
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout=kStopWait)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-log", type=Path, required=True)
    parser.add_argument("--zeus", required=True)
    parser.add_argument("--monitor-csv", type=Path, required=True)
    parser.add_argument("--monitor-log", type=Path, required=True)
    parser.add_argument("--smi-csv", type=Path)
    parser.add_argument("--ok-codes", default="0")
    parser.add_argument("train", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    train_argv: List[str] = args.train[1:] if args.train[:1] == ["--"] else args.train
    ok_codes = {int(c) for c in args.ok_codes.split(",")}

    with open(args.train_log, "wb") as log:
        train = subprocess.Popen(train_argv, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    opened = None
    while train.poll() is None:
        if kFirstEpoch.search(args.train_log.read_bytes()):
            opened = time.monotonic()
            break
        time.sleep(kPoll)
    monitor = smi = None
    if opened is not None:
        with open(args.monitor_log, "wb") as mlog:
            monitor = subprocess.Popen([args.zeus, "monitor", "--gpus", "0", "--interval", "50ms",
                                        "--out", str(args.monitor_csv)], stdout=mlog,
                                       stderr=subprocess.STDOUT)
        if args.smi_csv:
            smi = start_smi(args.smi_csv)
    rc = train.wait()
    closed = time.monotonic()
    monitor_rc = stop(monitor, signal.SIGINT)
    stop(smi, signal.SIGTERM)
    window = {"train_rc": rc, "startup_s": None if opened is None else opened - t0,
              "window_s": None if opened is None else closed - opened,
              "monitor_rc": monitor_rc, "nvidia_smi": smi is not None}
    (args.monitor_csv.parent / "window.json").write_text(json.dumps(window, indent=2) + "\n")
    print(f"monitored: {json.dumps(window)}", flush=True)
    if rc not in ok_codes:
        print(f"monitored: the training run exited {rc}; the end of {args.train_log}:\n" +
              "\n".join(args.train_log.read_text(errors="replace").splitlines()[-20:]))
        return 1
    if opened is None:
        print("monitored: the run ended without finishing its first epoch: no window")
        return 1
    if monitor_rc != 0:
        print(f"monitored: zeus monitor exited {monitor_rc}: "
              f"{args.monitor_log.read_text(errors='replace')[-1000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
