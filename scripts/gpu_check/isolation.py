"""The CPU-only check's isolation: the build and every step after it run in a private mount
namespace in which the system's copy of every file that the carry provides is hidden, so that a
header, library or CMake config missing from the carry fails here, as it would on the GPU machine
(which has none of Debian's -dev packages), instead of being found in /usr.

What is hidden: every path in the carry's FILES (the carried packages' own file lists, written
by scripts/gpu-carry.sh), and the files of `kAlsoHidden` (Debian packages that the GPU machine
lacks too, and that could stand in for the torch wheel's). Kept visible: the shared objects that
the build's own tools (compiler, linker, CMake, ninja, ccache, Python) load on this machine,
such as zlib's libz.so.1; the GPU machine's tools bring their own.

How: one overlay mount per top-level folder that holds hidden paths (in practice /usr), whose
upper lower layer holds a whiteout (a 0/0 character device) for each hidden path. Needs root
and overlayfs; without them there is no isolation and the check says so.
"""
from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Set

kAlsoHidden = ("libtorch-dev",)


def canonical(path: str) -> str:
    """The path with its folder's links resolved (/lib/x.so -> /usr/lib/x.so on merged /usr);
    the last component stays as it is, since that may be the link being hidden."""
    parent, name = os.path.split(path)
    return os.path.join(os.path.realpath(parent), name)


def package_files(package: str) -> List[str]:
    """The files and links a Debian package installed; empty when it is not installed."""
    try:
        out = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True,
                             check=False).stdout
    except FileNotFoundError:
        return []
    return [p for p in out.splitlines()
            if p.startswith("/") and os.path.lexists(p) and (os.path.islink(p) or not os.path.isdir(p))]


def carried_paths(carry: Path) -> List[str]:
    files = carry / "FILES"
    if not files.is_file():
        raise FileNotFoundError(f"{files} is missing: make the carry again with "
                                f"scripts/gpu-carry.sh")
    return [line for line in files.read_text().splitlines() if line.startswith("/")]


def loaded_libraries(programs: Iterable[str]) -> Set[str]:
    """Every shared object that the programs load here (ldd), as canonical paths, with the
    files their links point to."""
    found: Set[str] = set()
    for program in programs:
        try:
            out = subprocess.run(["ldd", program], capture_output=True, text=True,
                                 check=False).stdout
        except FileNotFoundError:
            break
        for line in out.splitlines():
            parts = line.split("=>")
            target = (parts[1] if len(parts) == 2 else parts[0]).strip().split(" (")[0].strip()
            if target.startswith("/") and os.path.exists(target):
                found.add(canonical(target))
                found.add(os.path.realpath(target))
    return found


def hidden_set(carried: Sequence[str], also: Sequence[str], keep: Set[str]) -> Dict[str, str]:
    """{canonical path to hide: why} and the kept ones removed."""
    hide: Dict[str, str] = {}
    for path in carried:
        hide.setdefault(canonical(path), "carried")
    for path in also:
        hide.setdefault(canonical(path), "not on the GPU machine")
    for path in list(hide):
        if path in keep or os.path.realpath(path) in keep:
            del hide[path]
    # Never a top-level entry (merged /usr's /lib -> usr/lib, which a package may list).
    return {p: why for p, why in hide.items() if p.count("/") >= 2 and os.path.lexists(p)}


def submounts(top: str, mountinfo: str = "/proc/self/mountinfo") -> List[str]:
    """Mount points strictly below `top`: an overlay of `top` would hide what they hold."""
    points = []
    with open(mountinfo) as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(top.rstrip("/") + "/"):
                points.append(point)
    return points


class Isolation:
    """The prefix that runs a command with the hidden set hidden; [] where it cannot."""

    def __init__(self, scratch: Path, hide: Dict[str, str], tops: Sequence[str] = ()):
        """`tops`: the folders to overlay (default: the top-level folder of each hidden path)."""
        self.scratch = scratch
        self.hide = hide
        self.tops = sorted(tops) or sorted({"/" + p.lstrip("/").split("/", 1)[0] for p in hide})
        outside = [p for p in hide if not any(p.startswith(t + "/") for t in self.tops)]
        if outside:
            raise ValueError(f"{outside[0]} is under none of {', '.join(self.tops)}")

    def make(self) -> List[str]:
        if self.scratch.exists():
            shutil.rmtree(self.scratch)
        mounts = []
        for top in self.tops:
            below = submounts(top)
            if below:
                raise RuntimeError(f"cannot hide files under {top}: {', '.join(below)} is a "
                                   f"separate mount that an overlay of {top} would hide")
            layer = self.scratch / top.lstrip("/")
            for path in (p for p in self.hide if p.startswith(top + "/")):
                white = self.scratch / path.lstrip("/")
                white.parent.mkdir(parents=True, exist_ok=True)
                os.mknod(white, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            mounts.append(f"mount -t overlay zeus-gpu-check -o lowerdir={shlex.quote(str(layer))}:"
                          f"{shlex.quote(top)} {shlex.quote(top)}")
        script = " && ".join(mounts + ['exec "$@"'])
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def summary(self) -> str:
        counts: Dict[str, int] = {}
        for why in self.hide.values():
            counts[why] = counts.get(why, 0) + 1
        parts = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
        return f"{len(self.hide)} system files hidden under {', '.join(self.tops)} ({parts})"


def available() -> str:
    """'' when isolation can work here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("unshare"):
        return "no unshare(1)"
    try:
        with open("/proc/filesystems") as f:
            if "overlay" not in f.read():
                return "no overlayfs in this kernel"
    except OSError as e:
        return f"cannot read /proc/filesystems: {e}"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --mount fails: {probe.stderr.strip()}"
    return ""
