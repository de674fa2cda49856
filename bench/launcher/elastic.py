#!/usr/bin/env python3
"""bench/launcher/elastic.py: elastic `zeus run` against torchrun's elastic agent (PyPI's
PyTorch), side by side: three launchers on this machine (`--nnodes 2:3 --nproc-per-node 1
--rdzv-backend c10d`, the same --rdzv-conf for both), their workers in one Gloo group
all-reducing every 50 ms (bench/launcher/elastic_probe.py). Once the world of 3 runs, a
non-endpoint "node" dies (its launcher and workers SIGKILLed at once); measured is the time from that kill until both survivors'
workers run again in a world of 2. torchrun needs --max-restarts >= 1 for it (its agents learn
of the loss when their workers' all-reduce fails, which counts as a failure); zeus run's
launchers learn of it from the rendezvous connection, and a membership change is no failure.

Usage: bench/launcher/elastic.py [--runs 3] [--last-call 1]
"""
import argparse
import glob
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from bench_util import free_port  # noqa: E402


def wait_for(pred, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def ups(probe_dir, world):
    """Workers that reported running in a world of `world`: {(restart, rank): unix time}."""
    found = {}
    for path in glob.glob(os.path.join(probe_dir, "up.*")):
        with open(path) as f:
            parts = f.read().split()
        if len(parts) == 2 and int(parts[1]) == world:
            found[os.path.basename(path)] = float(parts[0])
    return found


def process_tree(pid):
    """pid and every descendant (from /proc), so that a "node" dies whole, as a machine would:
    torchrun's workers outlive a killed agent otherwise."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def one_run(name, argv_of, env, timeout_s):
    probe_dir = tempfile.mkdtemp(prefix=f"elastic-{name}-")
    env = dict(env, PROBE_DIR=probe_dir)
    port = free_port()
    logs = [open(os.path.join(probe_dir, f"launcher{i}.log"), "w") for i in range(3)]
    procs = []
    try:
        procs.append(subprocess.Popen(argv_of(port), env=env, stdout=logs[0], stderr=logs[0],
                                      start_new_session=True))
        time.sleep(0.5)  # the first launcher serves the rendezvous (the endpoint's host)
        for i in (1, 2):
            procs.append(subprocess.Popen(argv_of(port), env=env, stdout=logs[i],
                                          stderr=logs[i], start_new_session=True))
        formed = wait_for(lambda: len(ups(probe_dir, 3)) >= 3
                          or any(p.poll() is not None for p in procs), timeout_s)
        if not formed or len(ups(probe_dir, 3)) < 3:
            print(f"{name}: the world of 3 did not form (see {probe_dir}/launcher*.log)")
            return None, probe_dir
        victims = process_tree(procs[2].pid)
        t0 = time.time()
        for pid in victims:  # the node dies: its launcher and its workers at once
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # The survivors' workers of a later round, in a world of 2.
        ok = wait_for(lambda: len(ups(probe_dir, 2)) >= 2, timeout_s)
        t1 = max(ups(probe_dir, 2).values()) if ok else None
        return (t1 - t0 if t1 else None), probe_dir
    finally:
        open(os.path.join(probe_dir, "finish"), "w").close()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        # The killed launcher's workers may linger under torchrun: end its whole session.
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for f in logs:
            f.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--last-call", type=int, default=1,
                        help="last_call_timeout, whole seconds (torchrun takes integers)")
    parser.add_argument("--zeus", default=os.path.join(ROOT, "build/release/apps/zeus/zeus"))
    parser.add_argument("--python", default=os.path.join(ROOT, ".venv-torch/bin/python"),
                        help="the interpreter whose torch runs the probe and torchrun")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    probe = os.path.join(HERE, "elastic_probe.py")
    conf = f"last_call_timeout={args.last_call}"
    common = ["--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
              "--rdzv-id", "bench", "--rdzv-conf", conf]
    torchrun = os.path.join(os.path.dirname(args.python), "torchrun")
    runners = {
        "zeus run": lambda port: [args.zeus, "run", *common, "--rdzv-endpoint",
                                  f"127.0.0.1:{port}", "--local-addr", "127.0.0.1", probe],
        "torchrun": lambda port: [torchrun, *common, "--rdzv-endpoint", f"127.0.0.1:{port}",
                                  "--local-addr", "127.0.0.1", "--max-restarts", "3", probe],
    }
    env = dict(os.environ, ZEUS_PYTHON=args.python, OMP_NUM_THREADS="1")
    results = {name: [] for name in runners}
    for _ in range(args.runs):
        for name, argv_of in runners.items():
            took, probe_dir = one_run(name, argv_of, env, args.timeout)
            results[name].append(took)
            print(f"{name}: {'%.3f s' % took if took is not None else 'not within timeout'}"
                  f" ({probe_dir})", flush=True)
    print(f"\nnode SIGKILLed -> survivors' workers running in the world of 2 "
          f"(median of {args.runs}; --rdzv-conf {conf}; torchrun --max-restarts 3)")
    print("| launcher | seconds | runs |")
    print("| --- | --- | --- |")
    med = {}
    for name, values in results.items():
        got = [v for v in values if v is not None]
        med[name] = statistics.median(got) if got else None
        shown = f"{med[name]:.3f}" if med[name] is not None else "never"
        print(f"| {name} | {shown} | {', '.join('%.3f' % v if v else '-' for v in values)} |")
    if med.get("zeus run") and med.get("torchrun"):
        print(f"\ntorchrun / zeus run = {med['torchrun'] / med['zeus run']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
