"""The power-limit watchdog an optimizer starts (``python -m zeus_cpp._watchdog PID JOURNAL``):
it watches process PID and, when that process ends without saying its limits are back (a
SIGKILL, a crash), restores them from JOURNAL. Its body is the guardian program's, the one
``zeus run``'s sentinel runs (``_core.guardian_main``): failed restores are retried with the
restore rule's backoff for up to a minute, then left in JOURNAL for the next job."""

from __future__ import annotations

import sys

from zeus_cpp import _core


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m zeus_cpp._watchdog PID JOURNAL", file=sys.stderr)
        return 2
    if not argv[0].isdigit():
        print(f"python -m zeus_cpp._watchdog: PID {argv[0]!r} is not a process id", file=sys.stderr)
        return 2
    return _core.guardian_main(
        ["--pid", argv[0], "--journal", argv[1], "--name", "zeus_cpp watchdog"]
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
