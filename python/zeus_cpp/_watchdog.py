"""The power-limit watchdog an optimizer starts (``python -m zeus_cpp._watchdog PID JOURNAL``):
it watches process PID and, when that process ends without saying its limits are back (a
SIGKILL, a crash), restores them from JOURNAL. Its body is C++ (``_core.watchdog_main``)."""

from __future__ import annotations

import sys

from zeus_cpp import _core


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m zeus_cpp._watchdog PID JOURNAL", file=sys.stderr)
        return 2
    return _core.watchdog_main(int(argv[0]), argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
