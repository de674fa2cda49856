"""The monitors' HTTP GETs (ElectricityMaps, OpenEI): the standard library's client with a
timeout, a bounded body, and errors that name the URL and what the service said."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

MAX_BODY_BYTES = 8 << 20  # OpenEI's full rate details are large; anything past this is refused


class HttpFailure(Exception):
    """The service could not be reached, timed out, or answered a status other than 200
    (``status``; None where it did not answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BadReply(Exception):
    """The service answered 200 with something that is not the JSON expected."""


def _said(body: bytes) -> str:
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and "error" in doc:
            return str(doc["error"])
    except ValueError:
        pass
    return body[:300].decode("utf-8", "replace")


def get_json(url: str, headers: dict[str, str] | None = None, timeout_s: float = 10.0) -> Any:
    request = urllib.request.Request(url, headers=headers or {})
    # Never through a proxy the environment names: services are reached directly, as the C++
    # client does (a proxy variable meant for pip must not see the token).
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as reply:
            body = reply.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise HttpFailure(f"{url} answered {e.code}: {_said(e.read(64 * 1024))}", e.code) from e
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise HttpFailure(f"{url} could not be reached: {reason}") from e
    if len(body) > MAX_BODY_BYTES:
        raise BadReply(f"{url} answered more than {MAX_BODY_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError as e:
        raise BadReply(f"{url} answered something that is not JSON: "
                       f"{body[:200].decode('utf-8', 'replace')!r}") from e
