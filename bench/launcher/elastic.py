#!/usr/bin/env python3
"""bench/launcher/elastic.py: elastic `zeus run` (over etcd and over its c10d rendezvous) against
torchrun's elastic agent (PyPI's PyTorch) over etcd and c10d, side by side in one run: three
launchers on this machine (`--nnodes 2:3 --nproc-per-node 1`, the same `--rdzv-conf
last_call_timeout`), their workers in one Gloo group all-reducing every 50 ms
(bench/launcher/elastic_probe.py). Once the world of 3 runs, one "node" dies (its launcher and
its workers SIGKILLed at once, as a machine would): the first one started (c10d's serving node;
over etcd, the node that started the run in it), or another. Measured is the time from that
kill until both survivors' workers run again in a world of 2.

Both etcd backends use the same 3-member etcd cluster on loopback (Debian's etcd-server, its v2
API on for torchrun: its `etcd` backend speaks v2 through python-etcd); zeus run is given all
three members, torchrun the first (it takes one). torchrun needs --max-restarts >= 1: its agents
learn of the loss when their workers' all-reduce fails, which counts as a failure. zeus run's
launchers learn of it from the rendezvous (the dead launcher's connection, or over etcd the
liveness link to it), and a membership change is no failure.

Usage: bench/launcher/elastic.py [--runs 3] [--last-call 1] [--backends zeus-etcd,...]
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
from bench_util import EtcdCluster, free_port  # noqa: E402

BACKENDS = ("zeus-etcd", "zeus-c10d", "torchrun-etcd", "torchrun-c10d")
VICTIMS = {"first": 0, "other": 2}


def wait_for(pred, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def ups(probe_dir, world, what="up"):
    """Workers that reported running ("up": after torch's import and the Gloo group) or started
    ("start": the interpreter's first line) in a world of `world`: {file: unix time}."""
    found = {}
    for path in glob.glob(os.path.join(probe_dir, f"{what}.*")):
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


def one_run(name, argv_of, env, timeout_s, victim):
    """Seconds from the kill until the survivors' workers run in a world of 2 and until they
    were started, or (None, why)."""
    probe_dir = tempfile.mkdtemp(prefix=f"elastic-{name.replace(' ', '-')}-")
    env = dict(env, PROBE_DIR=probe_dir)
    port = free_port()
    logs = [open(os.path.join(probe_dir, f"launcher{i}.log"), "w") for i in range(3)]
    procs = []
    try:
        procs.append(subprocess.Popen(argv_of(port), env=env, stdout=logs[0], stderr=logs[0],
                                      start_new_session=True))
        time.sleep(0.5)  # the first launcher: c10d's serving one; over etcd, the run's starter
        for i in (1, 2):
            procs.append(subprocess.Popen(argv_of(port), env=env, stdout=logs[i],
                                          stderr=logs[i], start_new_session=True))
        formed = wait_for(lambda: len(ups(probe_dir, 3)) >= 3
                          or any(p.poll() is not None for p in procs), timeout_s)
        if not formed or len(ups(probe_dir, 3)) < 3:
            return None, f"the world of 3 did not form (see {probe_dir}/launcher*.log)"
        victims = process_tree(procs[victim].pid)
        t0 = time.time()
        for pid in victims:  # the node dies: its launcher and its workers at once
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        survivors = [p for i, p in enumerate(procs) if i != victim]
        ok = wait_for(lambda: len(ups(probe_dir, 2)) >= 2
                      or all(p.poll() is not None for p in survivors), timeout_s)
        if ok and len(ups(probe_dir, 2)) >= 2:
            started = max(ups(probe_dir, 2, "start").values()) - t0
            return (max(ups(probe_dir, 2).values()) - t0, started), probe_dir
        if all(p.poll() is not None for p in survivors):
            return None, f"the survivors exited (see {probe_dir}/launcher*.log)"
        return None, f"no world of 2 within {timeout_s:.0f} s (see {probe_dir})"
    finally:
        open(os.path.join(probe_dir, "finish"), "w").close()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        # The killed launcher's workers may linger under torchrun: end every session.
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for f in logs:
            f.close()


def has_python_etcd(python):
    return subprocess.run([python, "-c", "import etcd"], capture_output=True).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--last-call", type=int, default=1,
                        help="last_call_timeout, whole seconds (torchrun takes integers)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--victims", default="first,other")
    parser.add_argument("--zeus", default=os.path.join(ROOT, "build/release/apps/zeus/zeus"))
    parser.add_argument("--python", default=os.path.join(ROOT, ".venv-torch/bin/python"),
                        help="the interpreter whose torch runs the probe and torchrun")
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    probe = os.path.join(HERE, "elastic_probe.py")
    conf = f"last_call_timeout={args.last_call}"
    common = ["--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-conf", conf,
              "--local-addr", "127.0.0.1"]
    torchrun = os.path.join(os.path.dirname(args.python), "torchrun")
    backends = args.backends.split(",")
    victims = args.victims.split(",")
    skipped = {}
    if "torchrun-etcd" in backends and not has_python_etcd(args.python):
        skipped["torchrun-etcd"] = (f"{args.python} has no python-etcd (torchrun's etcd backend "
                                    "needs it): pip install python-etcd==0.4.5")
    with EtcdCluster(members=3, v2=True) as etcd:
        first_member = etcd.endpoints.split(",")[0]
        # (launcher, backend, endpoint of a run on `port`): every run gets an id of its own
        # (torchrun's etcd backend keeps a closed rendezvous under its id).
        runners = {
            "zeus-etcd": ([args.zeus, "run"], "etcd", lambda port: etcd.endpoints),
            "zeus-c10d": ([args.zeus, "run"], "c10d", lambda port: f"127.0.0.1:{port}"),
            "torchrun-etcd": ([torchrun, "--max-restarts", "3"], "etcd",
                              lambda port: first_member),
            "torchrun-c10d": ([torchrun, "--max-restarts", "3"], "c10d",
                              lambda port: f"127.0.0.1:{port}"),
        }
        env = dict(os.environ, ZEUS_PYTHON=args.python, OMP_NUM_THREADS="1")
        # Python's default: the workers' imports come from cached bytecode (a sandbox that sets
        # PYTHONDONTWRITEBYTECODE recompiles torch at every start, ~0.5 s more on both sides).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        results = {(b, v): [] for b in backends for v in victims}
        for run in range(args.runs):
            for b in backends:
                if b in skipped:
                    continue
                for v in victims:
                    launcher, backend, endpoint = runners[b]
                    run_id = f"bench-{b}-{v}-{run}-{os.getpid()}"

                    def argv_of(port, launcher=launcher, backend=backend, endpoint=endpoint,
                                run_id=run_id):
                        return [*launcher, *common, "--rdzv-backend", backend, "--rdzv-endpoint",
                                endpoint(port), "--rdzv-id", run_id, probe]

                    took, note = one_run(f"{b}-{v}", argv_of, env, args.timeout, VICTIMS[v])
                    results[(b, v)].append(took)
                    shown = (f"running again after {took[0]:.3f} s (workers started after "
                             f"{took[1]:.3f} s)" if took is not None else f"none: {note}")
                    print(f"{b}, {v} node killed: {shown}", flush=True)
    print(f"\nnode SIGKILLed -> survivors' workers running in the world of 2, and (in brackets) "
          f"started by their launchers (median of {args.runs}; --rdzv-conf {conf}; torchrun "
          f"--max-restarts 3)")
    print("| launcher | first node killed (s) | runs | another node killed (s) | runs |")
    print("| --- | --- | --- | --- | --- |")
    med = {}
    for b in backends:
        row = [b]
        for v in ("first", "other"):
            values = results.get((b, v), [])
            got = [x for x in values if x is not None]
            med[(b, v)] = (statistics.median(x[0] for x in got),
                           statistics.median(x[1] for x in got)) if got else None
            shown = (f"{med[(b, v)][0]:.3f} ({med[(b, v)][1]:.3f})" if med[(b, v)] else
                     "not run" if b in skipped or not values else "never")
            row += [shown, ", ".join("%.3f" % x[0] if x is not None else "-" for x in values)]
        print("| " + " | ".join(row) + " |")
    for b, why in skipped.items():
        print(f"\n{b}: not run: {why}")
    for v in ("first", "other"):
        z, t = med.get(("zeus-etcd", v)), med.get(("torchrun-etcd", v))
        if z and t:
            print(f"\n{v} node: torchrun etcd / zeus run etcd = {t[0] / z[0]:.1f}x running "
                  f"again, {t[1] / z[1]:.1f}x started")
    return 0


if __name__ == "__main__":
    sys.exit(main())
