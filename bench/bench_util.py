"""Helpers shared by the benchmark drivers under bench/."""
import socket


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdCluster:
    """A local etcd cluster for a benchmark (Debian's etcd-server): `members` members on free
    loopback ports, data on tmpfs where there is one, the v2 API on too when `v2` (torchrun's etcd
    backends speak it). Use as a context manager; `endpoints` is "127.0.0.1:P,...". The same
    election settings as the tests' fixture (tests/support/etcd_cluster.cpp)."""

    def __init__(self, members=3, v2=False, etcd="/usr/bin/etcd"):
        import os
        import shutil
        import subprocess
        import tempfile
        import time
        import urllib.request
        if not os.access(etcd, os.X_OK):
            raise RuntimeError(f"{etcd} not found: install Debian's etcd-server")
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="zeus-bench-etcd-", dir=base)
        self.ports = [(free_port(), free_port()) for _ in range(members)]
        self.procs = []
        initial = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in
                           enumerate(self.ports))
        for i, (client, peer) in enumerate(self.ports):
            argv = [etcd, "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
                    "--listen-client-urls", f"http://127.0.0.1:{client}",
                    "--advertise-client-urls", f"http://127.0.0.1:{client}",
                    "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", os.path.basename(self.dir),
                    "--heartbeat-interval", "50", "--election-timeout", "500",
                    "--log-level", "warn"]
            if v2:
                argv.append("--enable-v2=true")
            log = open(os.path.join(self.dir, f"m{i}.log"), "w")
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log))
        deadline = time.time() + 30
        for client, _ in self.ports:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{client}/health",
                                                timeout=1) as r:
                        if b'"true"' in r.read():
                            break
                except OSError:
                    pass
                if time.time() > deadline:
                    self.close()
                    raise RuntimeError(f"etcd did not come up (logs in {self.dir})")
                time.sleep(0.05)
        self.endpoints = ",".join(f"127.0.0.1:{c}" for c, _ in self.ports)
        self._rmtree = shutil.rmtree

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        self._rmtree(self.dir, ignore_errors=True)
