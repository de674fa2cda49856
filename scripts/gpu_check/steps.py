"""The GPU check's step runner: every step is one process group with its own time limit, its
outcome recorded, and the check goes on after a failure, so that one flaky test or one hang in
NCCL costs that step and nothing else.

Contract:
- A step runs only when every step it needs has passed; otherwise it is skipped, naming which.
- A step runs under min(its own limit, the time the deadline leaves it). An optional step is
  skipped when the deadline leaves less than its `min_s` after the least time of the required
  steps still to come: optional parts go first when time runs short.
- A step that outlives its limit gets SIGTERM on its whole process group, SIGKILL after
  `kGraceS`, and is recorded as timed out with exit code 124 (what timeout(1) reports).
- After every step the records are written (atomically) and `on_record` is called, so that a
  check killed from outside still leaves what it had.
- `faults` replaces a step's command by one that hangs (with a child, to prove that the whole
  group dies) or fails: the check's own tests use it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

kGraceS = 5.0
kTimedOutRc = 124

PASSED, FAILED, TIMED_OUT, SKIPPED, NOT_SELECTED = (
    "passed", "failed", "timed_out", "skipped", "not_selected")


@dataclasses.dataclass
class Step:
    name: str
    what: str  # one line for the report
    argv: Callable[[], List[str]]  # made when the step starts: it may read what earlier ones wrote
    max_s: float  # its limit when time is plentiful
    min_s: float  # the least time worth starting it with
    optional: bool = False
    needs: Sequence[str] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cwd: Optional[Path] = None
    ok_codes: Sequence[int] = (0,)
    isolate: bool = True  # run inside the isolation prefix when the check has one


@dataclasses.dataclass
class Result:
    name: str
    what: str
    status: str
    optional: bool
    rc: Optional[int] = None
    elapsed_s: float = 0.0
    limit_s: Optional[float] = None
    log: Optional[str] = None  # relative to the work folder
    reason: str = ""


class Interrupted(Exception):
    """The check itself got SIGTERM or SIGINT: the running step was stopped."""


def _hang_argv(pid_file: Path) -> List[str]:
    # A parent and a child that never return; both pids are written for the test to check.
    code = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(86400)'])\n"
        f"open({str(pid_file)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}\\n')\n"
        "print('injected hang: pids', os.getpid(), child.pid, flush=True)\n"
        "time.sleep(86400)\n")
    return [sys.executable, "-c", code]


def _fail_argv() -> List[str]:
    return [sys.executable, "-c", "import sys; print('injected failure'); sys.exit(1)"]


def kill_group(proc: subprocess.Popen, grace_s: float = kGraceS) -> None:
    """SIGTERM to the step's process group, SIGKILL to what is left after grace_s."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; its group may not be (a child that ignored SIGTERM).
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break


class Runner:
    def __init__(self, work: Path, *, deadline_s: Optional[float] = None, reserve_s: float = 0.0,
                 limits: Optional[Mapping[str, float]] = None,
                 faults: Optional[Mapping[str, str]] = None,
                 selected: Optional[Sequence[str]] = None,
                 prefix: Sequence[str] = (), base_env: Optional[Mapping[str, str]] = None,
                 on_record: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic, echo=sys.stdout):
        self.work = work
        self.deadline_s = deadline_s
        self.reserve_s = reserve_s
        self.limits = dict(limits or {})
        self.faults = dict(faults or {})
        self.selected = set(selected) if selected else None
        self.prefix = list(prefix)
        self.base_env = dict(base_env if base_env is not None else os.environ)
        self.on_record = on_record
        self.clock = clock
        self.echo = echo
        self.start = clock()
        self.results: List[Result] = []
        self._current: Optional[subprocess.Popen] = None
        (work / "logs").mkdir(parents=True, exist_ok=True)

    def left_s(self) -> Optional[float]:
        if self.deadline_s is None:
            return None
        return self.deadline_s - (self.clock() - self.start) - self.reserve_s

    def run_all(self, steps: Sequence[Step]) -> List[Result]:
        unknown = set(self.faults) | set(self.limits) | (self.selected or set())
        unknown -= {s.name for s in steps}
        if unknown:
            raise ValueError(f"unknown step(s) {', '.join(sorted(unknown))}; the steps are "
                             f"{', '.join(s.name for s in steps)}")
        try:
            for i, step in enumerate(steps):
                later = [s for s in steps[i + 1:] if not s.optional and self._chosen(s)]
                self._record(self._run(step, sum(s.min_s for s in later)))
        except Interrupted:
            done = {r.name for r in self.results}
            for step in steps:
                if step.name not in done:
                    self._record(Result(step.name, step.what, SKIPPED, step.optional,
                                        reason="the check was interrupted"))
            raise
        return self.results

    def stop_current(self) -> None:
        """From a signal handler: stop the running step (its group), then raise Interrupted."""
        if self._current is not None:
            kill_group(self._current, grace_s=2.0)
        raise Interrupted()

    def _chosen(self, step: Step) -> bool:
        return self.selected is None or step.name in self.selected

    def _run(self, step: Step, later_required_s: float) -> Result:
        def result(status: str, **kw) -> Result:
            return Result(step.name, step.what, status, step.optional, **kw)

        if not self._chosen(step):
            return result(NOT_SELECTED, reason="not among --steps")
        by_name = {r.name: r for r in self.results}
        missing = [n for n in step.needs if n not in by_name or by_name[n].status != PASSED]
        if missing:
            why = ", ".join(f"{n} {by_name[n].status.replace('_', ' ') if n in by_name else 'did not run'}"
                            for n in missing)
            return result(SKIPPED, reason=f"needs {why}")
        limit = self.limits.get(step.name, step.max_s)
        left = self.left_s()
        if left is not None:
            spare = left - later_required_s
            if step.optional and spare < step.min_s:
                return result(SKIPPED, reason=f"deadline: {max(spare, 0):.0f} s left for optional "
                                              f"steps, it needs {step.min_s:.0f} s")
            if left < 1:
                return result(SKIPPED, reason="deadline: no time left")
            limit = min(limit, max(spare, min(step.min_s, left)))
        log_rel = f"logs/{step.name}.log"
        fault = self.faults.get(step.name)
        if fault == "hang":
            argv = _hang_argv(self.work / "logs" / f"{step.name}.hang-pids")
        elif fault == "fail":
            argv = _fail_argv()
        elif fault is None:
            argv = step.argv()
        else:
            raise ValueError(f"unknown fault '{fault}' for step {step.name} (hang or fail)")
        if step.isolate:
            argv = self.prefix + argv
        env = dict(self.base_env)
        env.update(step.env)
        self._say(f"=== gpu-check: {step.name}: {step.what} (limit {limit:.0f} s)")
        t0 = self.clock()
        with open(self.work / log_rel, "ab") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=step.cwd, env=env,
                                        start_new_session=True)
            except OSError as e:
                return result(FAILED, rc=127, log=log_rel, reason=f"cannot start {argv[0]}: {e}")
            self._current = proc
            try:
                rc = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                elapsed = self.clock() - t0
                self._say(f"gpu-check: {step.name} timed out after {limit:.0f} s")
                return result(TIMED_OUT, rc=kTimedOutRc, elapsed_s=elapsed, limit_s=limit,
                              log=log_rel, reason=f"timed out after {limit:.0f} s")
            finally:
                self._current = None
            # What the step left running (a sampler, a forgotten child) does not outlive it.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elapsed = self.clock() - t0
        if rc in step.ok_codes:
            return result(PASSED, rc=rc, elapsed_s=elapsed, limit_s=limit, log=log_rel)
        tail = _tail(self.work / log_rel)
        self._say(f"gpu-check: {step.name} FAILED (exit {rc}); the end of {log_rel}:\n{tail}")
        return result(FAILED, rc=rc, elapsed_s=elapsed, limit_s=limit, log=log_rel,
                      reason=f"exit code {rc}")

    def _record(self, r: Result) -> None:
        self.results.append(r)
        if r.status in (SKIPPED,):
            self._say(f"=== gpu-check: {r.name}: skipped ({r.reason})")
        write_json_atomic(self.work / "steps.json", {
            "elapsed_s": self.clock() - self.start,
            "deadline_s": self.deadline_s,
            "steps": [dataclasses.asdict(x) for x in self.results],
        })
        self.on_record()

    def _say(self, line: str) -> None:
        print(line, file=self.echo, flush=True)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("  " + l for l in text[-lines:])


def write_json_atomic(path: Path, value) -> None:
    write_bytes_atomic(path, (json.dumps(value, indent=2) + "\n").encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def all_passed(results: Sequence[Result]) -> bool:
    return all(r.status in (PASSED, NOT_SELECTED) for r in results)


def parse_pairs(values: Sequence[str], what: str, convert=str) -> Dict[str, object]:
    """'name=value' items (of --step-timeout or ZEUS_GPU_CHECK_FAULTS) into a dict."""
    out: Dict[str, object] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{what}: '{item}' is not NAME=VALUE")
        try:
            out[name] = convert(value)
        except ValueError:
            raise ValueError(f"{what}: '{value}' in '{item}' is not a valid value") from None
    return out
