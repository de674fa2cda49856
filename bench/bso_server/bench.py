"""zeus bso-server against upstream Zeus 0.16's batch-size server, side by side in one run, under
the same client load: J jobs at once, each recurring R times one after another; a recurrence asks
for a batch size, then reports one result per epoch until told to stop (2 to 4 epochs; some
batch sizes stop early or fail to converge, as real jobs do), then ends its trial (upstream's
atexit PATCH). Every request goes over HTTP/1.1 with keep-alive, one connection per job; the
jobs' clients are threads spread over one process per core.

Servers: upstream's (zeus[bso-server]==0.16.0 under uvicorn, one worker, SQLite via aiosqlite)
and zeus bso-server on SQLite, then on PostgreSQL 15 (started here on a free loopback port, as
the 'postgres' user when root) when its binaries are installed.

    .venv-bso-zeus016/bin/python bench/bso_server/bench.py [--jobs 8,64] [--recurrences 10]

Needs the CMake build (build/ci: the zeus CLI, zeus_test_as_uid) and .venv-bso-zeus016
(scripts/install-bso-upstream.sh). Prints a Markdown table: wall time, requests per second,
p50/p99 latency per request, errors.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build" / "ci"
ZEUS = BUILD / "apps" / "zeus" / "zeus"
AS_UID = BUILD / "tests" / "zeus_test_as_uid"
VENV_PY = REPO / ".venv-bso-zeus016" / "bin" / "python"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
sys.path.insert(0, str(REPO / "bench"))
from bench_util import free_port  # noqa: E402

# Per epoch of each batch size: (energy J, time s, metric). Cost = 0.5 E + 150 T.
EPOCH = {8: (1500.0, 1.0, 0.2), 16: (450.0, 1.0, 0.3), 32: (350.0, 1.0, 0.25),
         64: (250.0, 1.0, 0.2), 128: (50.0, 0.5, 0.1)}


def wait_http(url: str, timeout_s: float = 60) -> None:
    host, port = url.rsplit("/", 1)[1].split(":")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=2)
            conn.request("GET", "/jobs/batch_size?job_id=-")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no server at {url}")


def one_job(port: int, job: str, recurrences: int) -> tuple[list[float], list[str]]:
    """One job's recurrences over one keep-alive connection (http.client: a light client, so
    the servers, not the client, are what is measured)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    latencies: list[float] = []
    errors: list[str] = []

    def call(method: str, path: str, body: str | None = None) -> dict | None:
        t0 = time.perf_counter()
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        latencies.append(time.perf_counter() - t0)
        if r.status >= 300:
            errors.append(f"{method} {path} {r.status} {data[:200]!r}")
            return None
        return json.loads(data) if data else None

    spec = {"job_id": job, "job_id_prefix": job.split("-")[0], "batch_sizes": list(EPOCH),
            "default_batch_size": 32, "max_epochs": 4, "max_power": 300, "number_of_gpus": 1,
            "gpu_model": "A40", "target_metric": 0.5}
    call("POST", "/jobs", json.dumps(spec))
    for _ in range(recurrences):
        trial = call("GET", f"/jobs/batch_size?job_id={job}")
        if trial is None:
            continue
        energy, t, metric = EPOCH[trial["batch_size"]]
        for epoch in range(1, 10):
            body = {**trial, "time": t * epoch, "energy": energy * epoch,
                    "metric": metric * epoch, "current_epoch": epoch}
            reply = call("POST", "/report", json.dumps(body))
            if reply is None or reply["stop_train"]:
                break
        call("PATCH", "/trials", json.dumps(trial))
    conn.close()
    return latencies, errors


def client_process(args: tuple[int, list[str], int]) -> tuple[list[float], list[str]]:
    """A share of the jobs, a thread each, in one process (the clients use every core)."""
    port, jobs, recurrences = args
    out: list[tuple[list[float], list[str]]] = []
    threads = [threading.Thread(target=lambda j=j: out.append(one_job(port, j, recurrences)))
               for j in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return [x for lat, _ in out for x in lat], [e for _, errs in out for e in errs]


def load(url: str, jobs: int, recurrences: int, tag: str) -> dict:
    port = int(url.rsplit(":", 1)[1])
    procs = min(jobs, os.cpu_count() or 1)
    shares = [(port, [f"{tag}-{j}" for j in range(jobs) if j % procs == p], recurrences)
              for p in range(procs)]
    with multiprocessing.Pool(procs) as pool:
        t0 = time.perf_counter()
        parts = pool.map(client_process, shares)
        wall = time.perf_counter() - t0
    latencies = sorted(x for lat, _ in parts for x in lat)
    errors = [e for _, errs in parts for e in errs]
    return {"wall_s": wall, "requests": len(latencies), "rps": len(latencies) / wall,
            "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
            "errors": len(errors), "first_error": errors[0] if errors else ""}


class Server:
    def __init__(self, argv: list[str], env: dict[str, str], url: str) -> None:
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.url = url
        wait_http(url)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def upstream_server(work: Path) -> Server:
    db = work / "upstream.db"
    # Upstream ships no migrations: its tables come from zeus bso-server's first migration
    # (the same DDL SQLAlchemy would emit).
    init = subprocess.Popen([str(ZEUS), "bso-server", "--database", f"sqlite:///{db}",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    init.stdout.readline()
    init.terminate()
    init.wait()
    port = free_port()
    env = {**os.environ, "ZEUS_BSO_DATABASE_URL": f"sqlite+aiosqlite:///{db}",
           "ZEUS_BSO_LOG_LEVEL": "WARNING"}
    return Server([str(VENV_PY), "-m", "uvicorn", "zeus.optimizer.batch_size.server.router:app",
                   "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                  env, f"http://127.0.0.1:{port}")


def ours_server(database: str) -> Server:
    port = free_port()
    return Server([str(ZEUS), "bso-server", "--port", str(port), "--database", database,
                   "--max-connections", "1024"], dict(os.environ), f"http://127.0.0.1:{port}")


class Postgres:
    """PostgreSQL 15 on a free loopback port in a temporary directory (fsync on: durable)."""

    def __init__(self, work: Path) -> None:
        self.prefix: list[str] = []
        user = pwd.getpwuid(os.geteuid()).pw_name
        data = work / "pg"
        data.mkdir()
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            user = pw.pw_name
            os.chmod(work, 0o777)
            os.chown(data, pw.pw_uid, pw.pw_gid)
            self.prefix = [str(AS_UID), str(pw.pw_uid)]
        subprocess.run(self.prefix + [str(PG_BIN / "initdb"), "-D", str(data), "-U", user,
                                      "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True)
        self.port = free_port()
        self.proc = subprocess.Popen(
            self.prefix + [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(self.port),
                           "-c", "listen_addresses=127.0.0.1",
                           "-c", f"unix_socket_directories={data}", "-c", "max_connections=300",
                           "-c", "log_min_messages=panic"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if subprocess.run([str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p",
                               str(self.port)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run([str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                        user, "bso"], check=True)
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/bso"

    def stop(self) -> None:
        self.proc.send_signal(2)  # fast shutdown
        self.proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="8,64")
    ap.add_argument("--recurrences", type=int, default=10)
    args = ap.parse_args()
    for need in (ZEUS, VENV_PY):
        if not need.exists():
            sys.exit(f"bench: {need} is missing (build build/ci; scripts/install-bso-upstream.sh)")
    rows = []
    for jobs in [int(j) for j in args.jobs.split(",")]:
        work = Path(tempfile.mkdtemp(prefix="bso-bench-"))
        try:
            results = {}
            s = upstream_server(work)
            results["upstream 0.16 (SQLite)"] = load(s.url, jobs, args.recurrences, "u")
            s.stop()
            s = ours_server(f"sqlite:///{work / 'ours.db'}")
            results["zeus bso-server (SQLite)"] = load(s.url, jobs, args.recurrences, "o")
            s.stop()
            if (PG_BIN / "postgres").exists():
                pg = Postgres(work)
                s = ours_server(pg.url)
                results["zeus bso-server (PostgreSQL 15)"] = load(s.url, jobs, args.recurrences,
                                                                  "p")
                s.stop()
                pg.stop()
            base = results["upstream 0.16 (SQLite)"]["rps"]
            for name, r in results.items():
                rows.append((jobs, name, r, r["rps"] / base))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.recurrences} recurrences per job; one connection per job\n")
    print("| jobs at once | server | requests | wall (s) | requests/s | p50 (ms) | p99 (ms) "
          "| errors | throughput vs upstream |")
    print("|---|---|---|---|---|---|---|---|---|")
    for jobs, name, r, ratio in rows:
        print(f"| {jobs} | {name} | {r['requests']} | {r['wall_s']:.2f} | {r['rps']:.0f} | "
              f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['errors']} | {ratio:.1f}x |")
        if r["first_error"]:
            print(f"|   | first error: {r['first_error']} |")


if __name__ == "__main__":
    main()
