"""The GPU-only parts of the check that a CPU machine can still run: the monitored run's window
and its nvidia-smi sampling, and the settings comparison, against a fake nvidia-smi."""
import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from gpu_check import limits, monitored


def executable(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """nvidia-smi that knows no power.draw.instant, loops with -lms, and reads its settings from
    SMI_SETTINGS."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    executable(bindir / "nvidia-smi", f"""\
        #!{sys.executable}
        import os, sys, time
        args = " ".join(sys.argv[1:])
        if "power.draw.instant" in args:
            print('Field "power.draw.instant" is not a valid field to query.'); sys.exit(2)
        if "-lms" in args:
            while True:
                print("2026/12/01 10:00:00.000, 123.0", flush=True); time.sleep(0.05)
        print(open(os.environ["SMI_SETTINGS"]).read(), end="")
        """)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    settings = tmp_path / "settings.csv"
    settings.write_text("index, power.limit [W]\n0, 700.00 W\n")
    monkeypatch.setenv("SMI_SETTINGS", str(settings))
    return settings


def test_the_window_opens_after_the_first_epoch_and_samples_until_the_run_ends(tmp_path, fake_smi):
    zeus = executable(tmp_path / "zeus", f"""\
        #!{sys.executable}
        import signal, sys, time
        open(sys.argv[sys.argv.index("--out") + 1], "w").write("time,power\\n0,300000\\n")
        stop = []
        signal.signal(signal.SIGINT, lambda *a: stop.append(1))
        while not stop:
            time.sleep(0.01)
        print("energy counter 10.0 J vs the integral of its 20 power samples 10.1 J (+1.00%)")
        """)
    train = [sys.executable, "-c",
             "import time; time.sleep(0.5); print('epoch 1/2: x', flush=True); time.sleep(1.0); "
             "import sys; sys.exit(3)"]
    rc = monitored.main(["--train-log", str(tmp_path / "train.txt"), "--zeus", str(zeus),
                         "--monitor-csv", str(tmp_path / "monitor.csv"),
                         "--monitor-log", str(tmp_path / "monitor.txt"),
                         "--smi-csv", str(tmp_path / "smi.csv"), "--ok-codes", "0,3", "--", *train])
    assert rc == 0
    window = json.loads((tmp_path / "window.json").read_text())
    assert window["startup_s"] >= 0.4 and 0.8 < window["window_s"] < 5
    assert window["nvidia_smi"] and window["monitor_rc"] == 0 and window["train_rc"] == 3
    assert "integral" in (tmp_path / "monitor.txt").read_text()
    rows = (tmp_path / "smi.csv").read_text().splitlines()
    assert len(rows) >= 5 and all(r.endswith("123.0") for r in rows)  # fell back to power.draw


def test_a_run_that_never_finishes_an_epoch_has_no_window_and_fails(tmp_path):
    rc = monitored.main(["--train-log", str(tmp_path / "t.txt"), "--zeus", "/nonexistent",
                         "--monitor-csv", str(tmp_path / "m.csv"), "--monitor-log", str(tmp_path / "m.txt"),
                         "--", sys.executable, "-c", "print('crashed before any epoch')"])
    assert rc == 1
    assert json.loads((tmp_path / "window.json").read_text())["window_s"] is None


def test_settings_that_changed_fail_the_check(tmp_path, fake_smi):
    before = tmp_path / "before.csv"
    assert limits.main(["--save", str(before)]) == 0
    assert limits.main(["--save", str(tmp_path / "after.csv"), "--compare", str(before)]) == 0
    fake_smi.write_text("index, power.limit [W]\n0, 300.00 W\n")
    assert limits.main(["--save", str(tmp_path / "after.csv"), "--compare", str(before)]) == 1


def test_the_fake_nvmls_history_must_stay_empty(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"limit_history": []}))
    assert limits.main(["--fake-state", str(state)]) == 0
    state.write_text(json.dumps({"limit_history": [{"gpu": 0, "limit_mw": 300000}]}))
    assert limits.main(["--fake-state", str(state)]) == 1
