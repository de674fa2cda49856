"""The CPU-only check's isolation: what is hidden, what is kept, and that hidden means absent."""
import os
import subprocess
from pathlib import Path

import pytest

from gpu_check import isolation


def test_paths_are_hidden_under_their_canonical_names_and_kept_ones_stay(tmp_path):
    real = tmp_path / "usr" / "lib"
    real.mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")  # merged /usr
    for name in ("libz.so.1", "libpng16.so.16", "zlib.h"):
        (real / name).write_text("x")
    carried = [str(tmp_path / "lib" / "libz.so.1"), str(tmp_path / "lib" / "libpng16.so.16"),
               str(tmp_path / "lib" / "gone.so")]
    also = [str(real / "zlib.h")]
    hide = isolation.hidden_set(carried, also, keep={str(real / "libz.so.1")})
    assert hide == {str(real / "libpng16.so.16"): "carried",
                    str(real / "zlib.h"): "not on the GPU machine"}


def test_top_level_entries_are_never_hidden():
    assert isolation.hidden_set(["/lib", "/bin"], [], keep=set()) == {}


def test_loaded_libraries_finds_what_a_program_loads():
    libs = isolation.loaded_libraries(["/bin/sh"])
    assert any(os.path.basename(p).startswith("libc.so") for p in libs), libs


def test_paths_outside_the_tops_are_refused(tmp_path):
    with pytest.raises(ValueError, match="under none of"):
        isolation.Isolation(tmp_path / "s", {"/etc/x": "carried"}, tops=[str(tmp_path)])


@pytest.mark.skipif(bool(isolation.available()), reason=f"no isolation here: {isolation.available()}")
def test_a_hidden_file_is_absent_inside_and_everything_else_is_there(tmp_path):
    top = tmp_path / "root"
    (top / "include" / "sub").mkdir(parents=True)
    (top / "include" / "hidden.h").write_text("h")
    (top / "include" / "sub" / "kept.h").write_text("k")
    (top / "include" / "link.h").symlink_to("sub/kept.h")
    hide = {str(top / "include" / "hidden.h"): "carried", str(top / "include" / "link.h"): "carried"}
    prefix = isolation.Isolation(tmp_path / "scratch", hide, tops=[str(top)]).make()
    probe = ("for f in include/hidden.h include/link.h include/sub/kept.h; do "
             "if [ -e \"$f\" ] || [ -L \"$f\" ]; then echo \"$f there\"; else echo \"$f gone\"; fi; done")
    out = subprocess.run(prefix + ["sh", "-c", f"cd {top} && {probe}"], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[:3] == ["include/hidden.h gone", "include/link.h gone", "include/sub/kept.h there"]
    # Outside the namespace nothing changed.
    assert (top / "include" / "hidden.h").exists() and (top / "include" / "link.h").is_symlink()


def test_carried_paths_needs_the_carrys_file_list(tmp_path):
    with pytest.raises(FileNotFoundError, match="gpu-carry.sh"):
        isolation.carried_paths(tmp_path)
    (tmp_path / "FILES").write_text("/usr/include/a.h\n\n/usr/include/b.h\n")
    assert isolation.carried_paths(tmp_path) == ["/usr/include/a.h", "/usr/include/b.h"]
