#!/usr/bin/env python3
"""The fault campaign: proves the restore rule (Note [restore rule] in docs/security.md).

    python3 bench/faults/campaign.py --build BUILD_DIR --faults N --seed S [--vendor amd]

Runs N seeded random faults against short 2-rank jobs (the loader worker under `zeus run`, on
the fake NVML, two A40s held at 280 W by the "site", below their 300 W maximum; with
--vendor amd on the fake libamd_smi, two MI300Xs whose caps are in uW at the library): directly as
root, and through zeusd as an unprivileged user. Each fault strikes at a random moment of the
job (starting, profiling, training, exiting):

  SIGKILL, or SIGSTOP then SIGKILL, of the launcher, a worker, the master (rank 0), the guardian
  (the sentinel), or of all of them at once; zeusd SIGKILLed and restarted; a GPU whose restores
  fail for a while (the fake's per-GPU set_error, cleared later); a journal directory on a full
  file system.

After each: every GPU back at 280 W within a deadline, or the journal left for the next job
(which must then restore it); no process of the run left; no half-written file in the log
directory; and the next job runs clean. The last line is

    N faults, L limits left lowered, P processes left, C corrupt files, T temporaries removed ...

and the exit status is 0 only when L, P and C are 0 and every next job ran clean. Each failure
is printed with the seed and its fault number, so that `--seed S --only K` replays it.
Needs root (zeusd, the unprivileged user, the tmpfs); Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import SITE_MW, Machine, cmdline, environ, kill, marked  # noqa: E402

USER = 61003  # the unprivileged uid of the zeusd runs (no passwd entry needed)
DEADLINE_S = 25.0
KINDS = [
    "kill-launcher", "kill-worker", "kill-master", "kill-guardian", "kill-all",
    "stop-kill-launcher", "stop-kill-worker", "stop-kill-all",
    "restore-fails", "sets-fail", "full-fs", "kill-zeusd",
    "kill-python-watchdog", "gpu-lost", "kill-pod", "kill-etcd-node",
]
# Faults only a zeusd run has (the daemon, a client in a PID namespace of its own), and faults of
# a run that is never through zeusd (a Python process as root, two nodes on one etcd).
ZEUSD_ONLY = {"kill-zeusd", "kill-pod"}
ROOT_ONLY = {"kill-python-watchdog", "kill-etcd-node"}
HERE = Path(__file__).resolve().parent


@dataclass
class Job:
    proc: subprocess.Popen
    mark: str
    log: Path
    started: float
    in_namespace: bool = False  # proc is unshare: the run is the first process of its namespace

    def workers(self) -> list[int]:
        out = []
        for pid in marked(self.mark):
            if pid != self.proc.pid and "RANK" in environ(pid) and "__guardian" not in cmdline(pid):
                out.append(pid)
        return out

    def rank(self, r: int) -> list[int]:
        return [p for p in self.workers() if environ(p).get("RANK") == str(r)]

    def guardian(self) -> list[int]:
        return [p for p in marked(self.mark) if "__guardian" in cmdline(p)]

    def watchdog(self) -> list[int]:
        return [p for p in marked(self.mark) if "zeus_cpp._watchdog" in cmdline(p)]

    def running(self) -> bool:
        return self.proc.poll() is None


def start_job(m: Machine, run_dir: Path, mark: str, epochs: int, *, pod: bool = False,
              extra_env: dict[str, str] | None = None, argv_of=None) -> Job:
    """`zeus run` of two loader workers (or `argv_of(log)`'s program) on `m`'s GPUs; with `pod`,
    as the first process of a PID namespace of its own, as a pod's container runs."""
    log = run_dir / "log"
    worker = m.build / "tests/zeus_test_loader_worker"
    argv = argv_of(log) if argv_of else [
        str(m.build / "apps/zeus/zeus"), "run", "--nproc-per-node", "2", "--standalone",
        "--grace-period", "2s", str(worker), "--samples", "320", "--batch-size", "4",
        "--max-epochs", str(epochs), "--metrics", "0.1,0.9", "--step-ms", "8"]
    env = dict(os.environ, **m.fake.env(), ZEUS_DEVICE=m.fake.device, ZEUS_LOG_DIR=str(log),
               ZEUS_TARGET_METRIC="0.5", ZEUS_PROFILE_PARAMS="1,3", ZEUS_TEST_MARK=mark,
               **(extra_env or {}))
    env.pop("ZEUSD_SOCK_PATH", None)
    if m.zeusd_mode:
        env["ZEUSD_SOCK_PATH"] = str(m.socket)
        argv = [str(m.build / "tests/zeus_test_as_uid"), str(USER)] + argv
    if pod:
        # as_uid asks for the parent-death signal again after the uid changes (the kernel clears
        # it): killing unshare then kills the whole namespace.
        env["ZEUS_TEST_DIE_WITH_PARENT"] = "1"
        # A /proc of its own, as a container has: the job's pids (in its journal) are its
        # namespace's.
        argv = ["/usr/bin/unshare", "--pid", "--fork", "--kill-child", "--mount-proc"] + argv
    proc = subprocess.Popen(argv, env=env, cwd=run_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return Job(proc, mark, log, time.monotonic(), pod)


def python_job(m: Machine, run_dir: Path, mark: str, steps: int) -> Job:
    """GlobalPowerLimitOptimizer in one Python process as root, its watchdog beside it, its
    journal in the run's directory."""
    python = REPO / ".venv-py" / "bin" / "python"
    return start_job(m, run_dir, mark, 0,
                     extra_env={"ZEUS_JOURNAL_DIR": str(run_dir / "py-journals"),
                                "ZEUS_BUILD_DIR": str(m.build)},
                     argv_of=lambda log: [str(python), str(HERE / "python_job.py"), str(steps)])


REPO = HERE.parent.parent


def half_written(run_dir: Path, temporaries: bool = True) -> list[str]:
    """JSON results that do not parse, and (`temporaries`) temporaries of write_file_atomic left
    behind. A writer SIGKILLed (or stopped, then killed) between naming its temporary and the
    rename leaves it: no program can prevent that, so a faulted job is checked for corrupt
    results only, and the next job in the same place, whose writes of the same files remove the
    temporaries whose writers are gone, for both."""
    bad = []
    temps = set(temporaries_in(run_dir))
    for path in run_dir.rglob("*"):
        if not path.is_file():
            continue
        if path in temps:
            if temporaries:
                bad.append(f"{path} (a temporary left, and the next job did not remove it)")
        elif path.suffix in (".json", ".journal") and path.stat().st_size >= 0:
            try:
                json.loads(path.read_text())
            except (ValueError, OSError) as e:
                bad.append(f"{path} ({e})")
    return bad


def temporaries_in(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob(".*.tmp.*") if p.is_file()]


def journals(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob("*.journal")]


@dataclass
class Outcome:
    lowered: int = 0
    left: int = 0
    corrupt: int = 0
    unguarded: int = 0  # lowered at the deadline with neither a journal nor a lease to restore it
    swept: int = 0  # temporaries the faulted job left that the next job removed
    next_failed: bool = False
    failed: bool = False  # the fault could not be staged (a tmpfs that would not mount, ...)
    struck: bool = True  # False: it hit nothing (its target gone, or not yet there)
    notes: list[str] = field(default_factory=list)

    def bad(self) -> bool:
        return bool(self.lowered or self.left or self.corrupt or self.unguarded or
                    self.next_failed or self.failed)


def strike(m: Machine, job: Job, kind: str, rng: random.Random, run_dir: Path,
           calib_s: float) -> bool:
    """Waits for the fault's moment, then does it. Returns whether it struck the run: a target
    that was there while the job ran (a strike after the job ended, or before its target started,
    hit nothing)."""
    time.sleep(rng.uniform(0.0, calib_s))
    if kind in ("restore-fails", "sets-fail"):
        # restore-fails: only a set back to the site's limit fails (restores: the job's own, the
        # guardian's, zeusd's); sets-fail: every set of that GPU fails.
        gpu = rng.randrange(2)
        struck = job.running()
        if kind == "restore-fails":
            m.fake.set_error_to(gpu, SITE_MW, m.fake.retried_error)
        else:
            m.fake.set_error(gpu, m.fake.retried_error)
        if rng.random() < 0.5:
            kill([job.proc.pid], signal.SIGKILL)  # the launcher dies while it cannot restore
        time.sleep(rng.uniform(0.5, 4.0))
        m.fake.set_error(gpu, 0)
        return struck
    if kind == "gpu-lost":
        struck = job.running()
        (run_dir / "gpu-lost").touch()  # every GPU is lost from here (the fake's switch)
        time.sleep(rng.uniform(0.5, 3.0))
        (run_dir / "gpu-lost").unlink()
        return struck
    if kind == "kill-zeusd":
        struck = job.running()
        m.kill_zeusd()
        time.sleep(rng.uniform(0.1, 2.0))
        m.start_zeusd()
        return struck
    if kind == "kill-python-watchdog":
        targets = job.watchdog()
        kill(targets, signal.SIGKILL)
        time.sleep(rng.uniform(0.05, 1.0))
        struck = bool(targets) and job.running()
        kill([job.proc.pid], signal.SIGKILL)  # then the Python process: nobody restores now
        return struck
    if kind == "kill-pod":
        # The namespace's first process (the launcher), and with it every process of the pod.
        first = children(job.proc.pid)
        kill(first, signal.SIGKILL)
        kill([job.proc.pid], signal.SIGKILL)
        return bool(first)
    target = kind.split("-")[-1]
    if target == "launcher":
        targets = [job.proc.pid] if job.running() else []
    elif target == "worker":
        targets = job.rank(1)
    elif target == "master":
        targets = job.rank(0)
    elif target == "guardian":
        targets = job.guardian()
    else:
        targets = marked(job.mark)
    if kind.startswith("stop-kill"):
        kill(targets, signal.SIGSTOP)
        time.sleep(rng.uniform(0.05, 1.5))
    kill(targets, signal.SIGKILL)
    return bool(targets)


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def settle(m: Machine, job: Job, run_dir: Path, outcome: Outcome, faulted: bool = False) -> None:
    """Waits for the job (and what it left) to end; `faulted`: the job the fault struck."""
    try:
        out, _ = job.proc.communicate(timeout=DEADLINE_S + 30)
    except subprocess.TimeoutExpired:
        kill([job.proc.pid], signal.SIGKILL)
        out, _ = job.proc.communicate()
        outcome.notes.append(f"the launcher did not end: killed; its last output:\n{out[-1500:]}")
    deadline = time.monotonic() + DEADLINE_S
    while marked(job.mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = marked(job.mark)
    if left:
        outcome.left += len(left)
        outcome.notes.append(f"processes left: {[' '.join(cmdline(p))[:80] for p in left]}")
        kill(left, signal.SIGKILL)
    while time.monotonic() < deadline and (min(m.fake.limits()) < SITE_MW and
                                           not journals(run_dir) and not m.pending_leases()):
        time.sleep(0.1)
    if faulted:
        outcome.swept += len(temporaries_in(run_dir))
    for bad in half_written(run_dir, temporaries=not faulted):
        if f"half-written: {bad}" in outcome.notes:
            continue  # the faulted job's corrupt file, seen again after the next job
        outcome.corrupt += 1
        outcome.notes.append(f"half-written: {bad}")
    job.output = out  # type: ignore[attr-defined]


def mount_full_tmpfs(run_dir: Path, outcome: Outcome) -> bool:
    """The log (and journal) directory on a 64 KiB tmpfs filled to the brim; a tmpfs that will
    not mount fails the fault (it would otherwise run as no fault at all)."""
    log = run_dir / "log"
    log.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=1777", "tmpfs", str(log)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        outcome.failed = True
        outcome.notes.append(f"cannot mount a tmpfs on {log}: {done.stderr.strip()}")
        return False
    with open(log / "filler", "wb") as f:
        try:
            f.write(b"\0" * (1 << 20))
        except OSError:
            pass
    return True


def one_fault(m: Machine, index: int, kind: str, rng: random.Random, calib_s: float,
              work: Path) -> Outcome:
    outcome = Outcome()
    run_dir = Path(tempfile.mkdtemp(prefix=f"fault{index}-", dir=m.shared))
    os.chmod(run_dir, 0o777)
    mounted = kind == "full-fs" and mount_full_tmpfs(run_dir, outcome)
    if outcome.failed:
        shutil.rmtree(run_dir, ignore_errors=True)
        return outcome
    if kind == "gpu-lost":
        m.fake.lose_when_exists(run_dir / "gpu-lost")
    mark = f"campaign-{os.getpid()}-{index}"
    python = kind == "kill-python-watchdog"
    if python and not (REPO / ".venv-py" / "bin" / "python").exists():
        outcome.failed = True
        outcome.notes.append(f"{REPO / '.venv-py'} is missing: scripts/install-python.sh makes it")
        shutil.rmtree(run_dir, ignore_errors=True)
        return outcome
    job = (python_job(m, run_dir, mark, 200) if python else
           start_job(m, run_dir, mark, epochs=2, pod=kind == "kill-pod"))
    if kind != "full-fs":
        outcome.struck = strike(m, job, kind, rng, run_dir, calib_s)
    settle(m, job, run_dir, outcome, faulted=True)
    if mounted:
        (run_dir / "log" / "filler").unlink(missing_ok=True)
    if min(m.fake.limits()) < SITE_MW and not journals(run_dir) and not m.pending_leases():
        outcome.unguarded += 1
        outcome.notes.append(f"limits {m.fake.limits()} lowered with no journal or lease at the "
                             "deadline")
    m.fake.lose_when_exists(None)
    # The next job in the same place: it restores what was left, and runs clean.
    if m.zeusd_mode and m.zeusd is None:
        m.start_zeusd()
    nxt = (python_job(m, run_dir, f"{mark}-next", 20) if python else
           start_job(m, run_dir, f"{mark}-next", epochs=1))
    nxt_outcome = Outcome(notes=list(outcome.notes))
    settle(m, nxt, run_dir, nxt_outcome)
    outcome.left += nxt_outcome.left
    outcome.corrupt += nxt_outcome.corrupt
    outcome.notes = nxt_outcome.notes
    outcome.swept -= len(temporaries_in(run_dir))  # those left are failures, counted as corrupt
    if nxt.proc.returncode != 0:
        outcome.next_failed = True
        outcome.notes.append(f"the next job exited {nxt.proc.returncode}: "
                             f"{nxt.output[-600:]}")  # type: ignore[attr-defined]
    deadline = time.monotonic() + DEADLINE_S
    while min(m.fake.limits()) < SITE_MW and time.monotonic() < deadline:
        time.sleep(0.1)
    lowered = sum(1 for mw in m.fake.limits() if mw < SITE_MW)
    if lowered:
        outcome.lowered += lowered
        outcome.notes.append(f"after the next job, limits {m.fake.limits()}")
    if mounted:
        subprocess.run(["umount", "-l", str(run_dir / "log")], capture_output=True)
    m.fake.reset()  # whatever happened, the next fault starts from the site's limits
    shutil.rmtree(run_dir, ignore_errors=True)
    return outcome


class Etcd:
    """One etcd member on loopback for the two-node faults (Debian's etcd-server), on tmpfs-free
    scratch space; stopped with the campaign."""

    def __init__(self, root: Path) -> None:
        self.binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(self.binary).exists():
            raise RuntimeError("etcd is not installed (Debian's etcd-server: "
                               "scripts/install-deps.sh)")
        self.client, peer = free_port(), free_port()
        self.proc = subprocess.Popen(
            [self.binary, "--name", "campaign", "--data-dir", str(root / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.client}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.client}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"campaign=http://127.0.0.1:{peer}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import urllib.request

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.client}/health",
                                            timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"etcd did not answer on 127.0.0.1:{self.client} within 20 s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_fault(nodes: tuple[Machine, Machine], etcd: Etcd, index: int, rng: random.Random,
               calib_s: float) -> Outcome:
    """Two nodes (each its own fake machine) of one run over etcd's rendezvous, one worker each;
    node b dies whole (its launcher, worker and guardian SIGKILLed) at a random moment. Node a's
    launcher must end and restore its GPUs; node b's journal must be left, and the next job on
    each node runs clean with every GPU back at the site's limit."""
    outcome = Outcome()
    dirs = []
    for m in nodes:
        d = Path(tempfile.mkdtemp(prefix=f"fault{index}-", dir=m.shared))
        os.chmod(d, 0o777)
        dirs.append(d)
    marks = [f"campaign-{os.getpid()}-{index}-{n}" for n in "ab"]
    worker = nodes[0].build / "tests/zeus_test_loader_worker"

    def two_nodes(log: Path) -> list[str]:
        return [str(nodes[0].build / "apps/zeus/zeus"), "run", "--nnodes", "2", "--nproc-per-node",
                "1", "--rdzv-backend", "etcd", "--rdzv-endpoint", f"127.0.0.1:{etcd.client}",
                "--rdzv-id", f"campaign-{os.getpid()}-{index}", "--local-addr", "127.0.0.1",
                "--grace-period", "2s", "--rdzv-conf",
                "last_call_timeout=2,read_timeout=3,join_timeout=6",
                str(worker), "--samples", "320", "--batch-size", "4", "--max-epochs", "2",
                "--metrics", "0.1,0.9", "--step-ms", "8"]

    jobs = [start_job(m, d, mark, 2, argv_of=two_nodes) for m, d, mark in zip(nodes, dirs, marks)]
    time.sleep(rng.uniform(0.0, calib_s))
    b = marked(marks[1])
    outcome.struck = bool(b) and jobs[0].running()
    kill(b, signal.SIGKILL)
    for m, job, d in zip(nodes, jobs, dirs):
        settle(m, job, d, outcome, faulted=True)
        if min(m.fake.limits()) < SITE_MW and not journals(d):
            outcome.unguarded += 1
            outcome.notes.append(f"{d.name}: limits {m.fake.limits()} lowered with no journal")
    for m, d, mark in zip(nodes, dirs, marks):
        nxt = start_job(m, d, f"{mark}-next", epochs=1)
        settle(m, nxt, d, outcome)
        if nxt.proc.returncode != 0:
            outcome.next_failed = True
            outcome.notes.append(f"the next job of {d.name} exited {nxt.proc.returncode}: "
                                 f"{nxt.output[-600:]}")  # type: ignore[attr-defined]
        lowered = sum(1 for mw in m.fake.limits() if mw < SITE_MW)
        if lowered:
            outcome.lowered += lowered
            outcome.notes.append(f"after the next job of {d.name}, limits {m.fake.limits()}")
        outcome.swept -= len(temporaries_in(d))  # those left are failures, counted as corrupt
        m.fake.reset()
        shutil.rmtree(d, ignore_errors=True)
    return outcome


def calibrate(m: Machine) -> float:
    run_dir = Path(tempfile.mkdtemp(prefix="calibrate-", dir=m.shared))
    os.chmod(run_dir, 0o777)
    job = start_job(m, run_dir, f"campaign-{os.getpid()}-calibrate", epochs=2)
    out, _ = job.proc.communicate(timeout=120)
    took = time.monotonic() - job.started
    shutil.rmtree(run_dir, ignore_errors=True)
    if job.proc.returncode != 0:
        sys.exit(f"campaign: the fault-free job failed (exit {job.proc.returncode}):\n{out}")
    m.fake.reset()
    return took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, type=Path, help="the CMake build directory")
    p.add_argument("--faults", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", type=int, help="replay fault K of this seed alone")
    p.add_argument("--vendor", choices=("nvidia", "amd"), default="nvidia",
                   help="the fake GPUs' vendor library: NVML or AMD SMI")
    p.add_argument("--kinds", help="draw only these kinds of fault (comma-separated)")
    p.add_argument("--verbose", action="store_true",
                   help="print every fault's notes, not only a failed one's")
    args = p.parse_args()
    build = args.build.resolve()
    for need in ("apps/zeus/zeus", "apps/zeusd/zeusd", "tests/zeus_test_loader_worker",
                 "tests/zeus_test_as_uid", "tests/fakes/full/libnvidia-ml.so.1",
                 "tests/fakes/amdsmi/lib/libamd_smi.so.26"):
        if not (build / need).exists():
            sys.exit(f"campaign: {build / need} is missing: build the tests first "
                     f"(cmake --build --preset ci)")
    if os.geteuid() != 0:
        if os.environ.get("CI") in ("true", "1"):
            sys.exit("campaign: needs root (zeusd, another uid, a tmpfs); CI runs as root")
        print("campaign: skipped: needs root (zeusd, another uid, a tmpfs); run it as root")
        return 0
    kinds = args.kinds.split(",") if args.kinds else KINDS
    if unknown := set(kinds) - set(KINDS):
        sys.exit(f"campaign: --kinds {','.join(sorted(unknown))}: the kinds are {', '.join(KINDS)}")
    rng = random.Random(args.seed)
    plan = [(rng.choice(kinds), rng.random() < 0.5, rng.randrange(1 << 30))
            for _ in range(args.faults)]
    print(f"campaign: seed {args.seed}, {args.faults} faults, {args.vendor} GPUs", flush=True)
    totals = Outcome()
    failures = 0
    struck = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zeus-faults-") as tmp:
        os.chmod(tmp, 0o755)  # the zeusd runs' user reaches the fake NVML's state in it
        machines: dict[str, Machine] = {}
        calib: dict[str, float] = {}
        etcd: Etcd | None = None

        def machine(name: str, via_zeusd: bool) -> Machine:
            if name not in machines:
                root = Path(tmp) / name
                root.mkdir()
                machines[name] = Machine(build, root, via_zeusd, args.vendor)
                calib[name] = calibrate(machines[name])
            return machines[name]

        try:
            for i, (kind, via_zeusd, fault_seed) in enumerate(plan):
                if args.only is not None and i != args.only:
                    continue
                via_zeusd = (via_zeusd or kind in ZEUSD_ONLY) and kind not in ROOT_ONLY
                t0 = time.monotonic()
                if kind == "kill-etcd-node":
                    try:
                        etcd = etcd or Etcd(Path(tmp))
                        nodes = (machine("node-a", False), machine("node-b", False))
                        o = etcd_fault(nodes, etcd, i, random.Random(fault_seed),
                                       calib["node-a"])
                    except RuntimeError as e:
                        o = Outcome(failed=True, notes=[str(e)])
                else:
                    m = machine("zeusd" if via_zeusd else "root", via_zeusd)
                    if via_zeusd and m.zeusd is None:
                        m.start_zeusd()
                    o = one_fault(m, i, kind, random.Random(fault_seed),
                                  calib["zeusd" if via_zeusd else "root"], Path(tmp))
                how = f"fault {i} ({kind}, {'through zeusd' if via_zeusd else 'as root'})"
                verdict = "FAILED" if o.bad() else "ok" if o.struck else "missed (hit nothing)"
                print(f"{how}: {verdict} in {time.monotonic() - t0:.1f} s", flush=True)
                struck += 1 if o.struck else 0
                if o.bad():
                    failures += 1
                    print(f"  replay: --seed {args.seed} --only {i}", flush=True)
                if o.bad() or args.verbose:
                    for note in o.notes:
                        print(f"  {note}", flush=True)
                totals.lowered += o.lowered
                totals.left += o.left
                totals.corrupt += o.corrupt
                totals.unguarded += o.unguarded
                totals.swept += o.swept
        finally:
            for m in machines.values():
                m.stop()
            if etcd:
                etcd.stop()
    n = 1 if args.only is not None else args.faults
    print(f"campaign: {failures} fault(s) failed, {time.monotonic() - start:.0f} s", flush=True)
    print(f"{n} faults ({struck} struck, {n - struck} hit nothing), {totals.lowered} limits "
          f"left lowered, {totals.unguarded} lowered unguarded, {totals.left} processes left, "
          f"{totals.corrupt} corrupt files, {totals.swept} temporaries removed by the next job")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
