"""The runner: limits, needs, the deadline, faults, and records."""
import json
import os
import sys
import time
from pathlib import Path

import pytest

from gpu_check import steps as st
from gpu_check.steps import Runner, Step


def py(code: str):
    return lambda: [sys.executable, "-c", code]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie that init has not reaped yet is dead for this purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_hanging_step_times_out_with_its_children_and_the_next_step_runs(tmp_path):
    # The parent and its child both ignore nothing; a group kill must take both.
    code = ("import subprocess, sys, time, os\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            f"open({str(tmp_path / 'pids')!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\n"
            "time.sleep(600)\n")
    r = Runner(tmp_path, echo=open(os.devnull, "w"))
    results = r.run_all([Step("hangs", "hangs", py(code), max_s=1.5, min_s=1),
                         Step("after", "after", py("print('ran')"), max_s=10, min_s=1)])
    assert [x.status for x in results] == [st.TIMED_OUT, st.PASSED]
    assert results[0].rc == st.kTimedOutRc and 1.4 < results[0].elapsed_s < 10
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), "a process of the timed-out step survived"
    assert "ran" in (tmp_path / "logs" / "after.log").read_text()


def test_a_process_that_ignores_sigterm_is_killed(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    t0 = time.monotonic()
    results = Runner(tmp_path, echo=open(os.devnull, "w")).run_all(
        [Step("stubborn", "x", py(code), max_s=1, min_s=1)])
    assert results[0].status == st.TIMED_OUT
    assert time.monotonic() - t0 < 1 + 2 * st.kGraceS + 2


def test_failed_needs_skip_dependents_and_name_them(tmp_path):
    results = Runner(tmp_path, echo=open(os.devnull, "w")).run_all([
        Step("a", "fails", py("import sys; sys.exit(3)"), 10, 1),
        Step("b", "needs a", py("pass"), 10, 1, needs=("a",)),
        Step("c", "independent", py("pass"), 10, 1)])
    assert [x.status for x in results] == [st.FAILED, st.SKIPPED, st.PASSED]
    assert results[0].rc == 3 and results[1].reason == "needs a failed"
    assert not st.all_passed(results)


def test_ok_codes_count_as_passed(tmp_path):
    results = Runner(tmp_path, echo=open(os.devnull, "w")).run_all(
        [Step("a", "exit 3 is fine", py("import sys; sys.exit(3)"), 10, 1, ok_codes=(0, 3))])
    assert results[0].status == st.PASSED and st.all_passed(results)


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_deadline_skips_optional_steps_first_and_caps_the_limit(tmp_path):
    clock = FakeClock()
    r = Runner(tmp_path, deadline_s=100, reserve_s=10, clock=clock, echo=open(os.devnull, "w"))

    def spend(seconds):
        def argv():
            clock.t += seconds
            return [sys.executable, "-c", "pass"]
        return argv

    results = r.run_all([
        Step("req1", "", spend(50), max_s=60, min_s=5),
        # 40 s left before the reserve; req2 needs 30 of them: 10 spare < 20 -> skipped.
        Step("opt", "", spend(0), max_s=60, min_s=20, optional=True),
        Step("req2", "", spend(0), max_s=100, min_s=30)])
    assert [x.status for x in results] == [st.PASSED, st.SKIPPED, st.PASSED]
    assert "deadline" in results[1].reason
    assert results[2].limit_s == pytest.approx(40)


def test_faults_replace_the_command_and_unknown_names_are_refused(tmp_path):
    r = Runner(tmp_path, faults={"a": "fail"}, echo=open(os.devnull, "w"))
    results = r.run_all([Step("a", "", py("pass"), 10, 1)])
    assert results[0].status == st.FAILED
    with pytest.raises(ValueError, match="unknown step"):
        Runner(tmp_path, faults={"nope": "hang"}).run_all([Step("a", "", py("pass"), 10, 1)])
    with pytest.raises(ValueError, match="unknown step"):
        Runner(tmp_path, selected=["zzz"]).run_all([Step("a", "", py("pass"), 10, 1)])


def test_records_are_written_after_every_step(tmp_path):
    seen = []
    r = Runner(tmp_path, on_record=lambda: seen.append(
        json.loads((tmp_path / "steps.json").read_text())["steps"][-1]["name"]),
        echo=open(os.devnull, "w"))
    r.run_all([Step("a", "", py("pass"), 10, 1), Step("b", "", py("pass"), 10, 1)])
    assert seen == ["a", "b"]


def test_not_selected_steps_do_not_fail_the_check(tmp_path):
    results = Runner(tmp_path, selected=["b"], echo=open(os.devnull, "w")).run_all(
        [Step("a", "", py("import sys; sys.exit(1)"), 10, 1), Step("b", "", py("pass"), 10, 1)])
    assert [x.status for x in results] == [st.NOT_SELECTED, st.PASSED]
    assert st.all_passed(results)


def test_a_missing_program_is_a_failure_not_a_crash(tmp_path):
    results = Runner(tmp_path, echo=open(os.devnull, "w")).run_all(
        [Step("a", "", lambda: [str(tmp_path / "no-such-program")], 10, 1)])
    assert results[0].status == st.FAILED and results[0].rc == 127
    assert "cannot start" in results[0].reason


def test_parse_pairs():
    assert st.parse_pairs(["a=1", "b=2.5"], "x", float) == {"a": 1.0, "b": 2.5}
    for bad in (["a"], ["=1"], ["a="]):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            st.parse_pairs(bad, "x")
    with pytest.raises(ValueError, match="not a valid value"):
        st.parse_pairs(["a=z"], "x", float)
