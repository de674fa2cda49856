"""Zeus 0.16's batch-size optimizer client (``zeus.optimizer.batch_size.client``) over zeus_cpp's
monitor, for ``zeus bso-server`` or upstream's server (the same REST API).

Upstream's methods and order: construct on every rank (registers the job), ``get_batch_size()``
on rank 0, ``on_train_begin()``, ``on_evaluate(metric)`` after each epoch. Unlike upstream it
needs no httpx or pydantic (the standard library's HTTP client), and its errors name the server
and what it answered.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from zeus_cpp.callback import Callback
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.batch_size.common import (
    GET_NEXT_BATCH_SIZE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
)
from zeus_cpp.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)

logger = logging.getLogger(__name__)

# Upstream's window name, spelled as upstream spells it.
_WINDOW = "BatciSizeOptimizerClient"


class BatchSizeOptimizer(Callback):
    """Asks the batch-size service for this run's batch size and reports every epoch.

    ``monitor`` measures all and only the GPUs that train (homogeneous); ``rank``: only rank 0
    asks for a batch size and reports (broadcast it to the others yourself, as upstream).
    """

    def __init__(self, monitor: ZeusMonitor, server_url: str, job: JobSpec,
                 rank: int = 0, timeout_s: float = 60.0) -> None:
        self.monitor = monitor
        self.server_url = server_url.rstrip("/")
        self.rank = rank
        self.timeout_s = timeout_s
        self.cur_epoch = 0
        self.running_time = 0.0
        self.consumed_energy = 0.0
        self.training_finished = False
        self.trial_number = 0
        self.current_batch_size = 0
        gpus = monitor.gpus
        indices = list(monitor.gpu_indices)
        if not indices:
            raise ZeusBSOConfigError("No GPUs detected: the monitor measures none.")
        names = {gpus.get_name(i) for i in indices}
        if len(names) > 1:
            raise ZeusBSOConfigError(f"the GPUs must be one model, found {sorted(names)}")
        max_mw = gpus.get_power_management_limit_constraints(indices[0])[1]
        self.job_spec = JobSpecFromClient(
            **job.dict(),
            max_power=max_mw // 1000 * len(indices),
            number_of_gpus=len(indices),
            gpu_model=gpus.get_name(indices[0]),
        )
        created = self._call("POST", REGISTER_JOB_URL, self.job_spec.json())
        known = {f.name for f in dataclasses.fields(JobSpec)}
        fields = {k: v for k, v in created.items() if k in known}
        if not fields.get("lean"):
            fields["lean"] = None  # the server names lean's knobs only under lean
        self.job = JobSpec(**fields)
        logger.info("Job is registered with job_id: %s", self.job.job_id)

    def get_batch_size(self) -> int:
        """The batch size of this run (asked once; later calls return it)."""
        if self.rank != 0:
            raise ZeusBSOBadOperationError("Only rank 0 gpu can ask for a batch size.")
        if self.current_batch_size != 0:
            return self.current_batch_size
        self.cur_epoch = 0
        reply = self._call("GET", f"{GET_NEXT_BATCH_SIZE_URL}?"
                           + urllib.parse.urlencode({"job_id": self.job.job_id}))
        trial = TrialId(**reply)
        if trial.batch_size not in self.job.batch_sizes:
            raise ZeusBSORuntimError(
                f"Zeus server returned a strange batch_size: {trial.batch_size}")
        self.current_batch_size = trial.batch_size
        self.trial_number = trial.trial_number
        logger.info("[BatchSizeOptimizer] Chosen batch size: %s", trial.batch_size)

        def report_end() -> None:
            # A run that ends without its last report: the server marks the trial Failed
            # (a finished trial is left as it is). Quietly: the server may be gone at exit.
            try:
                self._call("PATCH", REPORT_END_URL, trial.json())
            except ZeusBSORuntimError as e:
                logger.warning("could not end trial %s: %s", trial.trial_number, e.message)

        atexit.register(report_end)
        return trial.batch_size

    def on_train_begin(self) -> None:
        self.training_finished = False
        self.monitor.begin_window(_WINDOW)

    def on_evaluate(self, metric: float) -> None:
        """Reports this epoch; raises ``ZeusBSOTrainFailError`` when told to stop unconverged."""
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        if self.training_finished:
            return
        self.cur_epoch += 1
        measurement = self.monitor.end_window(_WINDOW)
        self.running_time += measurement.time
        self.consumed_energy += measurement.total_energy
        result = TrainingResult(
            job_id=self.job.job_id or "", batch_size=self.current_batch_size,
            trial_number=self.trial_number, time=self.running_time,
            energy=self.consumed_energy, metric=metric, current_epoch=self.cur_epoch)
        reply = ReportResponse(**self._call("POST", REPORT_RESULT_URL, result.json()))
        if not reply.stop_train:
            self.monitor.begin_window(_WINDOW)
            return
        self.training_finished = True
        if not reply.converged:
            raise ZeusBSOTrainFailError(
                f"Train failed: {reply.message} This batch size will not be selected again. "
                "Please re-launch the training")

    def _call(self, method: str, path: str, body: str | None = None) -> Any:
        request = urllib.request.Request(
            self.server_url + path, method=method,
            data=body.encode() if body is not None else None,
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data = response.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            raise ZeusBSORuntimError(
                f"Zeus server returned status code {e.code}: {text}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ZeusBSORuntimError(
                f"cannot reach the batch-size server at {self.server_url} ({method} {path}): "
                f"{reason}; is `zeus bso-server` running there?") from None
        return json.loads(data) if data else None
