"""What comes back from the GPU machine, and the rules it must obey there (the device tool
returns at most 8 files from $OUT, 16 MiB each and 64 MiB together, at most two folders deep,
named only with letters, digits, '.', '_' and '-'; anything else is left behind).

The check writes only three files there: the report as JSON and as text, and one archive of
its work folder (logs, results, samples). Each is written whole and renamed into place, so a
check killed between two steps still leaves a complete set of the last state.
"""
from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path
from typing import List, Sequence

kMaxFiles = 8
kMaxFolders = 2
kMaxFileBytes = 16 << 20
kMaxTotalBytes = 64 << 20
kNameRe = re.compile(r"^[A-Za-z0-9._-]+$")

kReportJson = "gpu-check.json"
kReportText = "gpu-check.txt"
kArchive = "gpu-check-logs.tar.gz"
kDelivered = (kReportJson, kReportText, kArchive)


def violations(out: Path) -> List[str]:
    """Every way in which `out` breaks the return rules; empty when all of it comes back."""
    problems = []
    files = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(out):
        rel = Path(dirpath).relative_to(out)
        depth = len(rel.parts)
        for name in dirnames + filenames:
            if not kNameRe.match(name):
                problems.append(f"{rel / name}: the name has characters other than letters, "
                                f"digits, '.', '_' and '-'")
        for name in dirnames:
            if depth + 1 > kMaxFolders:
                problems.append(f"{rel / name}: a folder more than {kMaxFolders} deep")
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                problems.append(f"{rel / name}: not a plain file")
                continue
            size = path.stat().st_size
            total += size
            files.append(rel / name)
            if size > kMaxFileBytes:
                problems.append(f"{rel / name}: {size} bytes, over {kMaxFileBytes}")
    if len(files) > kMaxFiles:
        problems.append(f"{len(files)} files, over {kMaxFiles}: {', '.join(map(str, files))}")
    if total > kMaxTotalBytes:
        problems.append(f"{total} bytes in all, over {kMaxTotalBytes}")
    return problems


def archive_bytes(work: Path, *, skip: Sequence[str] = (), limit: int = kMaxFileBytes) -> bytes:
    """A .tar.gz of `work` (under the folder name 'gpu-check'), without `skip` (relative paths)
    and, where it would exceed `limit`, without its largest files, named in OMITTED.txt."""
    members = sorted(p for p in work.rglob("*")
                     if (p.is_file() or p.is_symlink()) and str(p.relative_to(work)) not in skip)
    omitted: List[Path] = []
    while True:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
            for p in members:
                if p not in omitted:
                    tar.add(p, arcname=f"gpu-check/{p.relative_to(work)}", recursive=False)
            if omitted:
                note = ("left out to stay under the return limit:\n" + "".join(
                    f"{p.relative_to(work)} ({p.stat().st_size} bytes)\n" for p in omitted)).encode()
                info = tarfile.TarInfo("gpu-check/OMITTED.txt")
                info.size = len(note)
                tar.addfile(info, io.BytesIO(note))
        data = buf.getvalue()
        rest = [p for p in members if p not in omitted and p.is_file()]
        if len(data) <= limit or not rest:
            return data
        omitted.append(max(rest, key=lambda p: p.stat().st_size))


def deliver(work: Path, out: Path, *, skip: Sequence[str] = ()) -> List[str]:
    """Puts the report (if written) and the archive into `out`; returns the rule violations
    that `out` then has (files someone else left there, say)."""
    from .steps import write_bytes_atomic

    out.mkdir(parents=True, exist_ok=True)
    for name in (kReportJson, kReportText):
        src = work / name
        if src.is_file():
            write_bytes_atomic(out / name, src.read_bytes())
    write_bytes_atomic(out / kArchive, archive_bytes(work, skip=skip))
    # Temporary files of write_bytes_atomic are renamed away; none may stay behind.
    return violations(out)


def clear(out: Path) -> None:
    """Removes an earlier run's deliverables from `out` (only those)."""
    for name in kDelivered:
        try:
            (out / name).unlink()
        except FileNotFoundError:
            pass
