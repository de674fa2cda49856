"""Packs one zeus-cpp wheel from the wheel build's tree (scripts/wheels/build-wheels.sh).

The wheel holds the zeus_cpp package (python/zeus_cpp, the extension built for one CPython, the
Zeus traces), the programs `zeus` and `zeusd` as scripts (pip puts them in the environment's
bin/), and the traces again under share/zeus/ where the programs look beside themselves
(PREFIX/bin/zeus -> PREFIX/share/zeus/zeus-traces). Written to a temporary name and renamed, so a
half-written wheel never has a wheel's name. Prints the wheel's path.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import stat
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "zeus_cpp"
SUMMARY = ("Energy-optimal deep learning training (Zeus's power-limit and batch-size optimizers) "
           "over a C++ engine, with the zeus launcher and the zeusd node daemon")


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True, help="cp39, cp310, ...")
    parser.add_argument("--arch", required=True, choices=["x86_64", "aarch64"])
    parser.add_argument("--build", required=True, type=Path, help="the wheel build's tree")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()

    cpython = args.tag[2:]
    extension = (args.build / "python" / args.tag /
                 f"_core.cpython-{cpython}-{args.arch}-linux-gnu.so")
    programs = [args.build / "apps" / "zeus" / "zeus", args.build / "apps" / "zeusd" / "zeusd"]
    for path in [extension, *programs]:
        if not path.is_file():
            print(f"assemble_wheel: {path} is missing: build it first "
                  "(scripts/wheels/build-wheels.sh)", file=sys.stderr)
            return 1

    platform = f"manylinux_2_28_{args.arch}"
    wheel_tag = f"{args.tag}-{args.tag}-{platform}"
    data_dir = f"{NAME}-{args.version}.data"
    info_dir = f"{NAME}-{args.version}.dist-info"
    # (name in the wheel, bytes, executable)
    entries: list[tuple[str, bytes, bool]] = []
    package = ROOT / "python" / NAME
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            entries.append((f"{NAME}/{path.relative_to(package).as_posix()}", path.read_bytes(),
                            False))
    entries.append((f"{NAME}/{extension.name}", extension.read_bytes(), True))
    traces = ROOT / "data" / "zeus-traces"
    for path in sorted(traces.iterdir()):
        if path.is_file():
            data = path.read_bytes()
            entries.append((f"{NAME}/zeus-traces/{path.name}", data, False))
            entries.append((f"{data_dir}/data/share/zeus/zeus-traces/{path.name}", data, False))
    for program in programs:
        entries.append((f"{data_dir}/scripts/{program.name}", program.read_bytes(), True))

    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: zeus-cpp",
        f"Version: {args.version}",
        f"Summary: {SUMMARY}",
        "Requires-Python: >=3.9",
        "Classifier: Programming Language :: C++",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Operating System :: POSIX :: Linux",
        "",
        "The zeus-cpp engine for PyTorch scripts (`import zeus_cpp`), the `zeus` launcher and",
        "simulator and the `zeusd` node daemon, in one self-contained wheel. See docs/packaging.md",
        "for what this wheel leaves out (`zeus --version` lists it).",
        "",
    ])
    wheel = "\n".join([
        "Wheel-Version: 1.0",
        "Generator: zeus-cpp scripts/wheels/assemble_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {wheel_tag}",
        "",
    ])
    entries.append((f"{info_dir}/METADATA", metadata.encode(), False))
    entries.append((f"{info_dir}/WHEEL", wheel.encode(), False))
    entries.append((f"{info_dir}/top_level.txt", f"{NAME}\n".encode(), False))
    record = [f"{name},{record_hash(data)},{len(data)}" for name, data, _ in entries]
    record.append(f"{info_dir}/RECORD,,")
    entries.append((f"{info_dir}/RECORD", ("\n".join(record) + "\n").encode(), False))

    args.out.mkdir(parents=True, exist_ok=True)
    final = args.out / f"{NAME}-{args.version}-{wheel_tag}.whl"
    partial = final.with_name(final.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            mode = 0o755 if executable else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    with open(partial, "rb") as f:
        os.fsync(f.fileno())
    os.replace(partial, final)
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
