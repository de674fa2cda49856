#!/usr/bin/env python3
"""zeus-cpp's AMD SMI structure layouts (src/zeus/device/amdsmi/amdsmi_api.h, printed by
zeus_test_amdsmi_layouts) held to AMD's own Python bindings of each ABI: the ctypes structures of
the amdsmi package's amdsmi_wrapper.py (6.3.3: ABI 24, 6.4.4: ABI 25, 7.0.2: ABI 26), which AMD
generates from its headers of that release. The wrapper is not imported (it loads libamd_smi at
import): its structure classes and their _pack_/_fields_ are evaluated alone with ctypes. Every
size and offset zeus-cpp reads must be AMD's. Exit 0 when they all match, 1 otherwise.

    check_layouts.py PRINTER WHEELS_DIR
"""

from __future__ import annotations

import ast
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

ABIS = {"24": "6.3.3", "25": "6.4.4", "26": "7.0.2"}


def amd_structures(wrapper: Path) -> dict[str, type]:
    """The wrapper's ctypes structures, by their typedef names (amdsmi_power_info_t, ...)."""
    tree = ast.parse(wrapper.read_text(encoding="utf-8"))
    keep = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id in ("Structure", "Union") for b in node.bases):
            keep.append(ast.ClassDef(node.name, node.bases, [], [ast.Pass()], [], type_params=[])
                        if sys.version_info >= (3, 12) else
                        ast.ClassDef(node.name, node.bases, [], [ast.Pass()], []))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr in ("_pack_", "_fields_"):
                keep.append(node)
            elif isinstance(target, ast.Name) and isinstance(node.value, (ast.Name, ast.Attribute)):
                keep.append(node)  # typedefs: amdsmi_x_t = struct_amdsmi_x_t, c_uint32 aliases
    module = ast.fix_missing_locations(ast.Module(keep, type_ignores=[]))
    scope: dict = {"ctypes": ctypes, "Structure": ctypes.Structure, "Union": ctypes.Union}
    for stmt in module.body:  # one at a time: a line naming what the wrapper leaves out is skipped
        try:
            exec(compile(ast.Module([stmt], type_ignores=[]), str(wrapper), "exec"), scope)
        except (NameError, AttributeError, TypeError):
            pass
    return {k: v for k, v in scope.items()
            if isinstance(v, type) and issubclass(v, (ctypes.Structure, ctypes.Union))}


def layout(struct: type) -> dict:
    return {"size": ctypes.sizeof(struct),
            "offsets": {name: getattr(struct, name).offset for name, *_ in struct._fields_}}


def main() -> int:
    printer, wheels = sys.argv[1], Path(sys.argv[2])
    failures = []
    checked = 0
    for abi, version in ABIS.items():
        wrapper = wheels / version / "amdsmi" / "amdsmi_wrapper.py"
        if not wrapper.exists():
            print(f"check_layouts: {wrapper} is missing: run scripts/install-amdsmi-abis.sh")
            return 1 if os.environ.get("CI") in ("true", "1") else 77  # ctest: skipped
        ours = json.loads(subprocess.run([printer, abi], check=True, capture_output=True,
                                         text=True).stdout)
        amd = amd_structures(wrapper)
        for name, mine in ours.items():
            if name not in amd:
                if mine.get("optional"):
                    continue  # a structure this release lacks (its call is optional here)
                failures.append(f"ABI {abi} ({version}): AMD's wrapper has no {name}")
                continue
            theirs = layout(amd[name])
            checked += 1
            if "size" in mine and mine["size"] != theirs["size"]:
                failures.append(f"ABI {abi} ({version}): {name} is {mine['size']} bytes here, "
                                f"{theirs['size']} in AMD's")
            for field, offset in mine["offsets"].items():
                if theirs["offsets"].get(field) != offset:
                    failures.append(f"ABI {abi} ({version}): {name}.{field} at offset {offset} "
                                    f"here, {theirs['offsets'].get(field)} in AMD's")
    for f in failures:
        print(f"check_layouts: {f}")
    print(f"check_layouts: {checked} structures of {len(ABIS)} ABIs, {len(failures)} mismatch(es)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
