"""Zeus's ``PowerStreamingClient``: GPU and CPU power from one or more ``zeusd`` daemons over
their server-sent-event streams (Zeus 0.16's wire: ``GET /gpu/stream_power[?gpu_ids=]`` and
``/cpu/stream_power[?cpu_ids=]``, one ``data: {json}`` event per device change), on a Unix socket
or TCP, against zeus-cpp's ``zeusd`` or upstream's.

One thread per stream keeps the latest readings; ``get_power()`` is a snapshot, iterating the
client yields a snapshot on every event. A stream that drops is reconnected after
``reconnect_delay_s``; 401 or 403 ends it (the token is wrong: retrying would not help) with one
log line. Beyond upstream: no ``httpx`` (the standard library's client), ``ZEUSD_TOKEN`` is sent
as a bearer token where set (zeusd over TCP requires one), and each reading's time is shifted
to this machine's clock by the daemon's offset (the median of 5 ``GET /time``)."""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CpuPowerReading",
    "PowerReadings",
    "PowerStreamingClient",
    "ZeusdTcpConfig",
    "ZeusdUdsConfig",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZeusdTcpConfig:
    """A zeusd over TCP. ``gpu_indices``/``cpu_indices``: None streams every device, [] none."""

    host: str
    port: int = 4938
    gpu_indices: list[int] | None = None
    cpu_indices: list[int] | None = None

    @property
    def key(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ZeusdUdsConfig:
    """A zeusd on a Unix socket (its ``ZEUSD_SOCK_PATH``)."""

    socket_path: str
    gpu_indices: list[int] | None = None
    cpu_indices: list[int] | None = None

    @property
    def key(self) -> str:
        return self.socket_path


@dataclass
class CpuPowerReading:
    cpu_w: float = 0.0
    dram_w: float | None = None


@dataclass
class PowerReadings:
    """One daemon's latest readings: ``timestamp_s`` (Unix s, this machine's clock), W per GPU
    and per CPU package."""

    timestamp_s: float = 0.0
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    cpu_power_w: dict[int, CpuPowerReading] = field(default_factory=dict)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class _Rejected(Exception):
    """401/403: the daemon refused this client."""


Server = ZeusdTcpConfig | ZeusdUdsConfig


class PowerStreamingClient:
    """Streams power from `servers` (``ZeusdTcpConfig`` / ``ZeusdUdsConfig``). Raises
    ``ConnectionError`` naming the server when one cannot be reached, ``ValueError`` when it
    lacks a GPU or CPU asked for."""

    def __init__(self, servers: Sequence[Server], reconnect_delay_s: float = 1.0) -> None:
        self._servers = list(servers)
        self._reconnect_delay = reconnect_delay_s
        self._condition = threading.Condition()
        self._readings: dict[str, PowerReadings] = {}
        self._offset_s: dict[str, float] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: list[http.client.HTTPConnection] = []
        for server in self._servers:
            gpus = self._get_json(server, "/gpu/get_power").get("power_mw", {})
            self._check(server, "GPU", server.gpu_indices, gpus)
            self._offset_s[server.key] = self._clock_offset(server)
            self._readings[server.key] = PowerReadings()
            if server.gpu_indices is None or server.gpu_indices:
                self._start(server, "gpu", server.gpu_indices)
            if server.cpu_indices is None or server.cpu_indices:
                try:
                    cpus = self._get_json(server, "/cpu/get_power").get("power_mw", {})
                except ConnectionError:
                    cpus = {}
                if cpus:
                    self._check(server, "CPU", server.cpu_indices, cpus)
                    self._start(server, "cpu", server.cpu_indices)
                elif server.cpu_indices:
                    raise ValueError(f"CPU power was asked of {server.key}, whose zeusd has "
                                     "no RAPL to read")

    # Requests --------------------------------------------------------------------------

    @staticmethod
    def _connection(server: Server, timeout: float | None) -> http.client.HTTPConnection:
        if isinstance(server, ZeusdUdsConfig):
            return _UnixConnection(server.socket_path, timeout)
        return http.client.HTTPConnection(server.host, server.port, timeout=timeout)

    @staticmethod
    def _headers() -> dict[str, str]:
        token = os.environ.get("ZEUSD_TOKEN")
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _get_json(self, server: Server, path: str) -> dict:
        conn = self._connection(server, 5.0)
        try:
            conn.request("GET", path, headers=self._headers())
            reply = conn.getresponse()
            body = reply.read(1 << 20)
        except OSError as e:
            raise ConnectionError(f"cannot reach zeusd at {server.key} ({e}); is it running, "
                                  "and is this the address it serves?") from e
        finally:
            conn.close()
        if reply.status != 200:
            raise ConnectionError(f"zeusd at {server.key} answered {path} with {reply.status}: "
                                  f"{body[:200].decode('utf-8', 'replace')}")
        return json.loads(body)

    @staticmethod
    def _check(server: Server, what: str, wanted: list[int] | None, available: dict) -> None:
        if wanted is None:
            return
        have = {int(k) for k in available}
        missing = sorted(set(wanted) - have)
        if missing:
            raise ValueError(f"{what} indices {missing} were asked of {server.key}, which has "
                             f"{sorted(have)}")

    def _clock_offset(self, server: Server) -> float:
        """This machine's clock minus the daemon's, s (the median of 5 round trips)."""
        offsets = []
        for _ in range(5):
            before = time.time()
            try:
                remote = self._get_json(server, "/time")
            except (ConnectionError, ValueError):
                return 0.0  # a daemon without /time: its clock is taken as ours
            after = time.time()
            t = remote.get("timestamp_ms")
            if t is None:
                return 0.0
            offsets.append((before + after) / 2 - t / 1000)
        return statistics.median(offsets)

    # Streams ---------------------------------------------------------------------------

    def _start(self, server: Server, kind: str, ids: list[int] | None) -> None:
        path = f"/{kind}/stream_power"
        if ids is not None:
            path += f"?{kind}_ids=" + ",".join(str(i) for i in ids)
        t = threading.Thread(target=self._loop, args=(server, path, kind),
                             name=f"zeusd-{kind}-stream-{server.key}", daemon=True)
        t.start()
        self._threads.append(t)

    def _loop(self, server: Server, path: str, kind: str) -> None:
        while not self._stop.is_set():
            try:
                self._stream(server, path, kind)
            except _Rejected as e:
                logger.error("zeusd at %s refused the %s power stream: %s; set ZEUSD_TOKEN to a "
                             "token with the read scope", server.key, kind.upper(), e)
                return
            except (OSError, http.client.HTTPException, ValueError) as e:
                if self._stop.is_set():
                    return
                logger.warning("%s power stream from %s lost (%s); reconnecting in %.1f s",
                               kind.upper(), server.key, e, self._reconnect_delay)
            self._stop.wait(self._reconnect_delay)

    def _stream(self, server: Server, path: str, kind: str) -> None:
        conn = self._connection(server, None)
        with self._condition:
            self._streams.append(conn)
        try:
            conn.request("GET", path, headers={**self._headers(),
                                                "Accept": "text/event-stream"})
            reply = conn.getresponse()
            if reply.status in (401, 403):
                raise _Rejected(f"{reply.status} {reply.read(300).decode('utf-8', 'replace')}")
            if reply.status != 200:
                raise ValueError(f"{path} answered {reply.status}: "
                                 f"{reply.read(300).decode('utf-8', 'replace')}")
            while not self._stop.is_set():
                line = reply.readline(64 * 1024)
                if not line:
                    raise ConnectionError("the daemon closed the stream")
                text = line.decode("utf-8", "replace").strip()
                if text.startswith("data:"):
                    self._event(server.key, kind, json.loads(text[5:]))
        finally:
            with self._condition:
                if conn in self._streams:
                    self._streams.remove(conn)
            conn.close()

    def _event(self, key: str, kind: str, event: dict) -> None:
        with self._condition:
            r = self._readings[key]
            r.timestamp_s = event["timestamp_ms"] / 1000 + self._offset_s.get(key, 0.0)
            if kind == "gpu":
                r.gpu_power_w[int(event["gpu_id"])] = event["power_mw"] / 1000
            else:
                dram = event.get("dram_mw")
                r.cpu_power_w[int(event["cpu_id"])] = CpuPowerReading(
                    event["cpu_mw"] / 1000, None if dram is None else dram / 1000)
            self._condition.notify_all()

    # Readers ---------------------------------------------------------------------------

    def get_power(self) -> dict[str, PowerReadings]:
        """The latest readings of every daemon, by its key (``host:port`` or socket path)."""
        with self._condition:
            return {k: PowerReadings(v.timestamp_s, dict(v.gpu_power_w),
                                     {i: CpuPowerReading(c.cpu_w, c.dram_w)
                                      for i, c in v.cpu_power_w.items()})
                    for k, v in self._readings.items()}

    def __iter__(self) -> Iterator[dict[str, PowerReadings]]:
        """A snapshot on every event, until ``stop()``."""
        while not self._stop.is_set():
            with self._condition:
                notified = self._condition.wait(timeout=1.0)
            if self._stop.is_set():
                return
            if notified:
                yield self.get_power()

    def stop(self) -> None:
        """Ends every stream and wakes the iterators."""
        self._stop.set()
        with self._condition:
            self._condition.notify_all()
            for conn in list(self._streams):
                try:
                    if conn.sock is not None:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in self._threads:
            t.join(timeout=5.0)
        self._threads.clear()
