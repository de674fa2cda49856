"""The fault campaign's machine (bench/faults/campaign.py): the fake GPU libraries' state files
(NVML's and AMD SMI's, two GPUs the "site" holds at SITE_MW), zeusd on them, and the /proc
helpers that find a run's processes by their ZEUS_TEST_MARK."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SITE_MW = 280_000


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

    def set_error_to(self, gpu: int, mw: int, code: int) -> None:
        """Sets of `gpu` to exactly `mw` fail with `code` (restores to the site's limit), every
        other set lands; cleared by set_error(gpu, 0)."""
        key = "cap_uw" if self.per_mw == 1000 else "limit_mw"

        def mutate(s: dict) -> None:
            s["gpus"][gpu]["faults"] = {"set_error_to": {key: mw * self.per_mw, "error": code}}
        self.update(mutate)

    def lose_when_exists(self, flag: Path | None) -> None:
        """Every GPU is lost (the library's GPU_IS_LOST) while `flag` exists; None: never."""
        def mutate(s: dict) -> None:
            s["faults"]["lost_when_exists"] = str(flag) if flag else ""
        self.update(mutate)

    def reset(self) -> None:
        def mutate(s: dict) -> None:
            for g in s["gpus"]:
                g[self.limit_key] = SITE_MW * self.per_mw
                g["faults"] = {}
            s["faults"] = {}
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
