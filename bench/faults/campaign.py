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

    N faults, L limits left lowered, P processes left, C corrupt files

and the exit status is 0 only when L, P and C are 0 and every next job ran clean. Each failure
is printed with the seed and its fault number, so that `--seed S --only K` replays it.
Needs root (zeusd, the unprivileged user, the tmpfs); Linux only.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SITE_MW = 280_000
USER = 61003  # the unprivileged uid of the zeusd runs (no passwd entry needed)
DEADLINE_S = 25.0
KINDS = [
    "kill-launcher", "kill-worker", "kill-master", "kill-guardian", "kill-all",
    "stop-kill-launcher", "stop-kill-worker", "stop-kill-all",
    "restore-fails", "full-fs", "kill-zeusd",
]


class FakeNvml:
    """The fake NVML's state file, changed under the library's own lock."""

    device = "nvml"
    limit_key = "limit_mw"
    per_mw = 1  # the library's unit per mW
    retried_error = 999  # NVML_ERROR_UNKNOWN: retried by the rule

    def __init__(self, root: Path, build: Path, permissive: bool) -> None:
        self.path = root / "nvml-state.json"
        self.library = build / "tests/fakes/full/libnvidia-ml.so.1"
        gpu = {"name": "NVIDIA A40", "power_mw": 150_000, "energy_mj": 0, "limit_mw": SITE_MW,
               "min_limit_mw": 100_000, "max_limit_mw": 300_000, "default_limit_mw": 300_000,
               "instant_power": True, "energy_counter": True, "mig_uuids": []}
        state = {"gpus": [dict(gpu, uuid=f"GPU-00000000-0000-0000-0000-00000000000{i}")
                          for i in range(2)],
                 "faults": {}, "permissive": permissive, "limit_history": []}
        self._start(root, state)

    def env(self) -> dict[str, str]:
        return {"ZEUS_NVML_LIBRARY": str(self.library), "FAKE_NVML_STATE": str(self.path)}

    def _start(self, root: Path, state: dict) -> None:
        self._write(state)
        lock = str(self.path) + ".lock"
        os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o666))
        os.chmod(lock, 0o666)  # the fake library locks it in every uid's process
        os.chmod(root, 0o755)

    def _write(self, state: dict) -> None:
        tmp = self.path.with_suffix(".tmp-campaign")
        tmp.write_text(json.dumps(state))
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.path)

    def update(self, mutate) -> None:
        with open(str(self.path) + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self.path.read_text())
            mutate(state)
            state["limit_history"] = state.get("limit_history", [])[-200:]
            self._write(state)

    def limits(self) -> list[int]:
        """Every GPU's limit in mW."""
        return [g[self.limit_key] // self.per_mw
                for g in json.loads(self.path.read_text())["gpus"]]

    def set_error(self, gpu: int, code: int) -> None:
        def mutate(s: dict) -> None:
            s["gpus"][gpu]["faults"] = {"set_error": code} if code else {}
        self.update(mutate)

    def reset(self) -> None:
        def mutate(s: dict) -> None:
            for g in s["gpus"]:
                g[self.limit_key] = SITE_MW * self.per_mw
                g["faults"] = {}
        self.update(mutate)


class FakeAmdsmi(FakeNvml):
    """The fake libamd_smi's state file: the same machine, its caps in uW."""

    device = "amdsmi"
    limit_key = "cap_uw"
    per_mw = 1000
    retried_error = 8  # AMDSMI_STATUS_TIMEOUT: retried by the rule

    def __init__(self, root: Path, build: Path, permissive: bool) -> None:
        self.path = root / "amdsmi-state.json"
        self.library = build / "tests/fakes/amdsmi/lib/libamd_smi.so.26"
        gpu = {"name": "AMD Instinct MI300X", "power_w": 150, "cap_uw": SITE_MW * 1000,
               "min_cap_uw": 100_000_000, "max_cap_uw": 300_000_000,
               "default_cap_uw": 300_000_000}
        state = {"gpus": [dict(gpu, uuid=f"GPU-amd000000000000{i}", hip_id=i,
                               bdf=f"0000:{0x0c + 16 * i:02x}:00.0") for i in range(2)],
                 "faults": {}, "permissive": permissive, "limit_history": []}
        self._start(root, state)

    def env(self) -> dict[str, str]:
        return {"ZEUS_AMDSMI_LIBRARY": str(self.library), "FAKE_AMDSMI_STATE": str(self.path)}


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def marked(mark: str) -> list[int]:
    """The live processes of one run (ZEUS_TEST_MARK in their environment); zombies excluded."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and environ(int(entry)).get("ZEUS_TEST_MARK") == mark:
            pids.append(int(entry))
    return pids


def kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class Machine:
    build: Path
    root: Path
    zeusd_mode: bool
    vendor: str = "nvidia"
    fake: FakeNvml = field(init=False)  # the machine's fake library, whichever vendor's
    zeusd: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        fake = FakeAmdsmi if self.vendor == "amd" else FakeNvml
        self.fake = fake(self.root, self.build, permissive=not self.zeusd_mode)
        self.shared = self.root / "shared"
        self.shared.mkdir(mode=0o1777, exist_ok=True)
        os.chmod(self.shared, 0o1777)
        if self.zeusd_mode:
            self.start_zeusd()

    @property
    def socket(self) -> Path:
        return self.root / "zeusd.sock"

    def start_zeusd(self) -> None:
        env = dict(os.environ, **self.fake.env())
        self.zeusd = subprocess.Popen(
            [str(self.build / "apps/zeusd/zeusd"), "serve", "--socket-path", str(self.socket),
             "--state-dir", str(self.root / "zeusd-state"), "--socket-permissions", "666",
             "--gpu-backend", self.fake.device],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not self.listening() and time.monotonic() < deadline:
            time.sleep(0.05)

    def listening(self) -> bool:
        """Whether zeusd accepts on its socket (a killed one's socket file stays behind)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(self.socket))
                return True
            except OSError:
                return False

    def kill_zeusd(self) -> None:
        if self.zeusd:
            self.zeusd.kill()
            self.zeusd.wait()
            self.zeusd = None

    def stop(self) -> None:
        if self.zeusd:
            self.zeusd.terminate()
            self.zeusd.wait()

    def pending_leases(self) -> int:
        path = self.root / "zeusd-state/leases.json"
        try:
            return len(json.loads(path.read_text())["leases"])
        except (OSError, ValueError, KeyError):
            return 0


@dataclass
class Job:
    proc: subprocess.Popen
    mark: str
    log: Path
    started: float

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


def start_job(m: Machine, run_dir: Path, mark: str, epochs: int) -> Job:
    log = run_dir / "log"
    worker = m.build / "tests/zeus_test_loader_worker"
    argv = [str(m.build / "apps/zeus/zeus"), "run", "--nproc-per-node", "2", "--standalone",
            "--grace-period", "2s", str(worker), "--samples", "320", "--batch-size", "4",
            "--max-epochs", str(epochs), "--metrics", "0.1,0.9", "--step-ms", "8"]
    env = dict(os.environ, **m.fake.env(), ZEUS_DEVICE=m.fake.device, ZEUS_LOG_DIR=str(log),
               ZEUS_TARGET_METRIC="0.5", ZEUS_PROFILE_PARAMS="1,3", ZEUS_TEST_MARK=mark)
    env.pop("ZEUSD_SOCK_PATH", None)
    if m.zeusd_mode:
        env["ZEUSD_SOCK_PATH"] = str(m.socket)
        argv = [str(m.build / "tests/zeus_test_as_uid"), str(USER)] + argv
    proc = subprocess.Popen(argv, env=env, cwd=run_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return Job(proc, mark, log, time.monotonic())


def half_written(run_dir: Path) -> list[str]:
    """Temporaries of write_file_atomic left behind, and JSON results that do not parse."""
    bad = []
    for path in run_dir.rglob("*"):
        if not path.is_file():
            continue
        if ".tmp." in path.name and path.name.startswith("."):
            bad.append(f"{path} (a temporary left)")
        elif path.suffix in (".json", ".journal") and path.stat().st_size >= 0:
            try:
                json.loads(path.read_text())
            except (ValueError, OSError) as e:
                bad.append(f"{path} ({e})")
    return bad


def journals(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob("*.journal")]


@dataclass
class Outcome:
    lowered: int = 0
    left: int = 0
    corrupt: int = 0
    next_failed: bool = False
    notes: list[str] = field(default_factory=list)


def strike(m: Machine, job: Job, kind: str, rng: random.Random, run_dir: Path,
           calib_s: float) -> None:
    """Waits for the fault's moment, then does it."""
    time.sleep(rng.uniform(0.0, calib_s))
    if kind == "restore-fails":
        gpu = rng.randrange(2)
        m.fake.set_error(gpu, m.fake.retried_error)
        if rng.random() < 0.5:
            kill([job.proc.pid], signal.SIGKILL)  # the launcher dies while it cannot restore
        time.sleep(rng.uniform(0.5, 4.0))
        m.fake.set_error(gpu, 0)
        return
    if kind == "kill-zeusd":
        m.kill_zeusd()
        time.sleep(rng.uniform(0.1, 2.0))
        m.start_zeusd()
        return
    targets: list[int]
    target = kind.split("-")[-1]
    if target == "launcher":
        targets = [job.proc.pid]
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


def settle(m: Machine, job: Job, run_dir: Path, outcome: Outcome) -> None:
    try:
        out, _ = job.proc.communicate(timeout=DEADLINE_S + 30)
    except subprocess.TimeoutExpired:
        kill([job.proc.pid], signal.SIGKILL)
        out, _ = job.proc.communicate()
        outcome.notes.append("the launcher did not end: killed")
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
    for bad in half_written(run_dir):
        outcome.corrupt += 1
        outcome.notes.append(f"half-written: {bad}")
    job.output = out  # type: ignore[attr-defined]


def one_fault(m: Machine, index: int, kind: str, rng: random.Random, calib_s: float,
              work: Path) -> Outcome:
    outcome = Outcome()
    run_dir = Path(tempfile.mkdtemp(prefix=f"fault{index}-", dir=m.shared))
    os.chmod(run_dir, 0o777)
    mounted = False
    if kind == "full-fs":
        # The log (and journal) directory on a 64 KiB tmpfs filled to the brim.
        log = run_dir / "log"
        log.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=1777", "tmpfs",
                           str(log)], capture_output=True).returncode == 0:
            mounted = True
            with open(log / "filler", "wb") as f:
                try:
                    f.write(b"\0" * (1 << 20))
                except OSError:
                    pass
    job = start_job(m, run_dir, f"campaign-{os.getpid()}-{index}", epochs=2)
    if kind != "full-fs":
        strike(m, job, kind, rng, run_dir, calib_s)
    settle(m, job, run_dir, outcome)
    if mounted:
        (run_dir / "log" / "filler").unlink(missing_ok=True)
    if min(m.fake.limits()) < SITE_MW and not journals(run_dir) and not m.pending_leases():
        outcome.notes.append(f"limits {m.fake.limits()} lowered with no journal or lease")
    # The next job in the same place: it restores what was left, and runs clean.
    if m.zeusd_mode and m.zeusd is None:
        m.start_zeusd()
    nxt = start_job(m, run_dir, f"campaign-{os.getpid()}-{index}-next", epochs=1)
    nxt_outcome = Outcome()
    settle(m, nxt, run_dir, nxt_outcome)
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
    outcome.left += nxt_outcome.left
    outcome.corrupt += nxt_outcome.corrupt
    outcome.notes += nxt_outcome.notes
    if mounted:
        subprocess.run(["umount", "-l", str(run_dir / "log")], capture_output=True)
    m.fake.reset()  # whatever happened, the next fault starts from the site's limits
    shutil.rmtree(run_dir, ignore_errors=True)
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
    rng = random.Random(args.seed)
    plan = [(rng.choice(KINDS), rng.random() < 0.5, rng.randrange(1 << 30))
            for _ in range(args.faults)]
    print(f"campaign: seed {args.seed}, {args.faults} faults, {args.vendor} GPUs", flush=True)
    totals = Outcome()
    failures = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zeus-faults-") as tmp:
        os.chmod(tmp, 0o755)  # the zeusd runs' user reaches the fake NVML's state in it
        machines: dict[bool, Machine] = {}
        calib: dict[bool, float] = {}
        try:
            for i, (kind, via_zeusd, fault_seed) in enumerate(plan):
                if args.only is not None and i != args.only:
                    continue
                via_zeusd = via_zeusd or kind == "kill-zeusd"
                if via_zeusd not in machines:
                    root = Path(tmp) / ("zeusd" if via_zeusd else "root")
                    root.mkdir()
                    machines[via_zeusd] = Machine(build, root, via_zeusd, args.vendor)
                    calib[via_zeusd] = calibrate(machines[via_zeusd])
                m = machines[via_zeusd]
                if via_zeusd and m.zeusd is None:
                    m.start_zeusd()
                t0 = time.monotonic()
                o = one_fault(m, i, kind, random.Random(fault_seed), calib[via_zeusd], Path(tmp))
                how = f"fault {i} ({kind}, {'through zeusd' if via_zeusd else 'as root'})"
                bad = o.lowered or o.left or o.corrupt or o.next_failed
                print(f"{how}: {'FAILED' if bad else 'ok'} in {time.monotonic() - t0:.1f} s",
                      flush=True)
                if bad:
                    failures += 1
                    print(f"  replay: --seed {args.seed} --only {i}", flush=True)
                    for note in o.notes:
                        print(f"  {note}", flush=True)
                totals.lowered += o.lowered
                totals.left += o.left
                totals.corrupt += o.corrupt
        finally:
            for m in machines.values():
                m.stop()
    n = 1 if args.only is not None else args.faults
    print(f"campaign: {failures} fault(s) failed, {time.monotonic() - start:.0f} s", flush=True)
    print(f"{n} faults, {totals.lowered} limits left lowered, {totals.left} processes left, "
          f"{totals.corrupt} corrupt files")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
