"""Drives upstream Zeus 0.16's batch-size server and zeus bso-server with the same requests and
compares what they answer, for the parts upstream decides deterministically: registration, the
pruning stage (down then up, two rounds, concurrent trials while an exploration is out, a
trial ended early), early stop at beta x min_cost, max_epochs, and the error statuses.

    parity.py UPSTREAM_URL OURS_URL

Prints one JSON line: {"ok": bool, "checked": N, "diffs": [...]}. Run by tests/bso_server_test.cpp
with the venv scripts/install-bso-upstream.sh makes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx

# Cost = 0.5 E + 0.5 x 300 W x T. Per epoch of each batch size: (energy J, time s, metric).
# 8: over beta x min_cost at its first report; 128: never reaches the target within max_epochs.
EPOCH = {8: (1500.0, 1.0, 0.9), 16: (450.0, 1.0, 0.9), 32: (350.0, 1.0, 0.9),
         64: (250.0, 1.0, 0.9), 128: (50.0, 0.5, 0.1)}


def spec(job_id: str, **extra: Any) -> dict[str, Any]:
    body = {"job_id": job_id, "job_id_prefix": job_id.split("-")[0],
            "batch_sizes": [8, 16, 32, 64, 128], "default_batch_size": 32, "max_epochs": 3,
            "max_power": 300, "number_of_gpus": 1, "gpu_model": "A40", "mab_seed": 1}
    body.update(extra)
    return body


class Side:
    """One server, and the answers it gave, in order."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30, trust_env=False)
        self.log: list[Any] = []

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        r = self.client.request(method, path, **kwargs)
        body = r.json() if r.content else None
        self.log.append([method, path, r.status_code])
        return r.status_code, body

    def next(self, job_id: str) -> dict[str, Any]:
        status, body = self.call("GET", "/jobs/batch_size", params={"job_id": job_id})
        # Upstream's TrialId; zeus-cpp's extra fields (cost_threshold, epoch_cap), which
        # upstream's client ignores, are checked by tests/bso_client_test.cpp.
        trial_id = ("job_id", "batch_size", "trial_number")
        is_trial = isinstance(body, dict) and "trial_number" in body
        self.log[-1].append({k: body[k] for k in trial_id} if is_trial else body)
        return {k: body[k] for k in trial_id} if is_trial else body

    def train(self, trial: dict[str, Any]) -> None:
        """Reports epoch after epoch until told to stop; logs each answer's flags."""
        energy, time, metric = EPOCH[trial["batch_size"]]
        for epoch in range(1, 10):
            status, body = self.call("POST", "/report", content=json.dumps(
                {**trial, "time": time * epoch, "energy": energy * epoch, "metric": metric,
                 "current_epoch": epoch}))
            message = body.get("message", "") if isinstance(body, dict) else ""
            if "exceeded the cost upper bound" in message:
                message = message.split(":")[0]  # upstream's text runs on with its indentation
            self.log[-1].append([body.get("stop_train"), body.get("converged"), message])
            if body.get("stop_train"):
                return


def scenario(side: Side) -> None:
    # Errors and registration.
    side.call("GET", "/jobs/batch_size", params={"job_id": "nobody"})
    side.call("POST", "/jobs", content=json.dumps(spec("p-1", default_batch_size=12)))
    side.call("POST", "/jobs", content=json.dumps(spec("p-1")))
    side.call("POST", "/jobs", content=json.dumps(spec("p-1")))
    side.call("POST", "/jobs", content=json.dumps(spec("p-1", eta_knob=0.3)))
    side.call("PATCH", "/trials", content=json.dumps(
        {"job_id": "p-1", "batch_size": 32, "trial_number": 9}))
    side.call("POST", "/report", content=json.dumps(
        {"job_id": "p-1", "batch_size": 32, "trial_number": 9, "time": 1, "energy": 1,
         "metric": 1, "current_epoch": 1}))
    side.call("DELETE", "/jobs", params={"job_id": "nobody"})

    # An exploration out while more recurrences come: concurrent trials at the cheapest size.
    first = side.next("p-1")
    second = side.next("p-1")
    side.train(second)
    side.train(first)
    # A recurrence that ends without a result: its exploration is handed out again.
    dropped = side.next("p-1")
    side.call("PATCH", "/trials", content=json.dumps(dropped))
    # The rest of pruning, one recurrence at a time, through both rounds.
    for _ in range(7):  # trials 4..10; the 11th would be the bandit's (random)
        trial = side.next("p-1")
        side.train(trial)
    side.call("DELETE", "/jobs", params={"job_id": "p-1"})
    side.call("GET", "/jobs/batch_size", params={"job_id": "p-1"})


def main() -> None:
    upstream, ours = Side(sys.argv[1]), Side(sys.argv[2])
    scenario(upstream)
    scenario(ours)
    diffs = [{"step": i, "upstream": a, "ours": b}
             for i, (a, b) in enumerate(zip(upstream.log, ours.log)) if a != b]
    if len(upstream.log) != len(ours.log):
        diffs.append({"steps": [len(upstream.log), len(ours.log)]})
    print(json.dumps({"ok": not diffs, "checked": len(upstream.log), "diffs": diffs,
                      "upstream": upstream.log}))


if __name__ == "__main__":
    main()
