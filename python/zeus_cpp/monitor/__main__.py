"""``python -m zeus_cpp.monitor energy|power``: upstream's monitor CLI.

``energy``: one ``ZeusMonitor`` window from start to Ctrl-C (or SIGTERM), then the measurement.
``power``: each GPU's power every ``--update-period`` s, then the time and energy at the end.
Beyond upstream: ``--duration S`` ends it by itself (scripts, tests), SIGTERM ends it as Ctrl-C
does, ``--device`` picks the GPUs (a locator; default ``ZEUS_DEVICE``), and no ``rich``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from datetime import datetime

from zeus_cpp.monitor.energy import ZeusMonitor
from zeus_cpp.monitor.power import PowerMonitor


def _until_stopped(duration_s: float | None, tick_s: float | None = None, on_tick=None) -> None:
    """Waits for Ctrl-C, SIGTERM or the duration; `on_tick` every `tick_s`."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not stop.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            wait = min(x for x in (tick_s, left, 3600.0) if x is not None)
            if stop.wait(wait):
                return
            if on_tick is not None and (left is None or left > wait):
                on_tick()
    except KeyboardInterrupt:
        return


def energy(gpu_indices: list[int] | None = None, duration_s: float | None = None,
           device: str | None = None) -> None:
    """One window over every GPU asked for, printed at the end."""
    monitor = ZeusMonitor(gpu_indices, device=device)
    monitor.begin_window("zeus.monitor.energy", sync_execution=False)
    _until_stopped(duration_s)
    m = monitor.end_window("zeus.monitor.energy", sync_execution=False)
    print(m, flush=True)


def power(gpu_indices: list[int] | None = None, update_period: float = 1.0,
          power_domain: str = "device_instant", duration_s: float | None = None,
          device: str | None = None) -> None:
    """Each GPU's power every `update_period` s; the total time and energy at the end."""
    monitor = PowerMonitor(gpu_indices=gpu_indices, update_period=update_period,
                           power_domains=[power_domain], device=device)
    start = time.time()

    def show() -> None:
        readings = monitor.get_power(power_domain=power_domain)
        if readings is not None:
            print(datetime.now(), {f"GPU{k}": v for k, v in readings.items()}, flush=True)

    _until_stopped(duration_s, update_period, show)
    end = time.time()
    print("\nTotal time (s):", end - start)
    joules = monitor.get_energy(start, end, power_domain=power_domain)
    if joules is not None:
        print("Total energy (J):", {f"GPU{k}": v for k, v in joules.items()}, flush=True)
    monitor.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zeus_cpp.monitor",
                                     description="Zeus Monitor CLI")
    sub = parser.add_subparsers(dest="subcommand", required=True)
    for name, help_text in (("energy", "Measure the time and energy of the GPUs until Ctrl-C"),
                            ("power", "Print the GPUs' power; the total energy at Ctrl-C")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--gpu-indices", nargs="+", type=int,
                       help="GPUs to monitor (default: all)")
        p.add_argument("--duration", type=float, default=None,
                       help="zeus-cpp's: stop after this many seconds")
        p.add_argument("--device", default=None,
                       help="zeus-cpp's: nvml, amdsmi or sim:<gpu> (default: ZEUS_DEVICE)")
        if name == "power":
            p.add_argument("--update-period", type=float, default=1.0,
                           help="seconds between readings")
            p.add_argument("--power-domain", default="device_instant",
                           choices=["device_instant", "device_average", "memory_average"])
    args = parser.parse_args(argv)
    if args.duration is not None and not args.duration > 0:
        parser.error(f"--duration {args.duration} must be positive")
    if args.subcommand == "energy":
        energy(args.gpu_indices, args.duration, args.device)
    else:
        if not args.update_period > 0:
            parser.error(f"--update-period {args.update_period} must be positive")
        power(args.gpu_indices, args.update_period, args.power_domain, args.duration,
              args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
