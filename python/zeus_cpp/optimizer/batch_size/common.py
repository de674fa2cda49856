"""Zeus 0.16's batch-size REST models (``zeus.optimizer.batch_size.common``) as dataclasses.

The field names, defaults and checks are upstream's pydantic models'; ``dict()`` and ``json()``
give what upstream's ``.dict()`` and ``.json()`` give, so specs move between the two.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"


class _Model:
    def dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def json(self) -> str:
        return json.dumps(self.dict())


@dataclass
class JobParams(_Model):
    """A recurring job's optimizer settings. Raises ``ValueError`` naming the field for values
    upstream's validators refuse; ``batch_sizes`` is sorted."""

    job_id_prefix: str
    batch_sizes: list[int]
    default_batch_size: int
    job_id: str | None = None
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = 100
    num_pruning_rounds: int = 2
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = 2
    mab_seed: int | None = None
    # zeus-cpp's: the job's batch-size policy on zeus bso-server, "zeus" (upstream's decisions)
    # or "lean", with lean's knobs ("gamma=1.5,cap=0"); None: the server's default. Sent only
    # when set (upstream's server ignores them either way).
    policy: str | None = None
    lean: str | None = None

    def dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("policy", "lean"):
            if d[key] is None:
                del d[key]
        return d

    def __post_init__(self) -> None:
        self.batch_sizes = sorted(int(b) for b in self.batch_sizes)
        if not self.batch_sizes:
            raise ValueError("batch_sizes: must not be empty")
        if len(set(self.batch_sizes)) != len(self.batch_sizes):
            raise ValueError(f"batch_sizes: {self.batch_sizes} has duplicates")
        if self.default_batch_size <= 0 or self.default_batch_size not in self.batch_sizes:
            raise ValueError(
                f"default_batch_size: {self.default_batch_size} must be positive and one of "
                f"batch_sizes {self.batch_sizes}")
        if not 0.0 <= self.eta_knob <= 1.0:
            raise ValueError(f"eta_knob: {self.eta_knob} must be in [0, 1]")
        if self.beta_knob is not None and self.beta_knob <= 0:
            raise ValueError(f"beta_knob: {self.beta_knob} must be positive, or None")
        if self.max_epochs <= 0:
            raise ValueError(f"max_epochs: {self.max_epochs} must be positive")
        if self.num_pruning_rounds < 0 or self.mab_num_explorations < 0:
            raise ValueError("num_pruning_rounds and mab_num_explorations must be >= 0")
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(
                f"job_id: '{self.job_id}' must start with job_id_prefix '{self.job_id_prefix}'")


# Upstream's JobSpec is JobParams with the same checks.
JobSpec = JobParams


@dataclass
class JobSpecFromClient(JobParams):
    """A JobSpec with the GPUs it runs on (upstream's GpuConfig fields)."""

    max_power: float = 0.0
    number_of_gpus: int = 0
    gpu_model: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_power <= 0 or self.number_of_gpus <= 0 or not self.gpu_model:
            raise ValueError("max_power and number_of_gpus must be positive and gpu_model set")


@dataclass
class TrialId(_Model):
    job_id: str
    batch_size: int
    trial_number: int


@dataclass
class TrainingResult(TrialId):
    """Cumulative time (s) and energy (J) of the trial so far, with this epoch's metric."""

    time: float = 0.0
    energy: float = 0.0
    metric: float = 0.0
    current_epoch: int = 0


@dataclass
class ReportResponse(_Model):
    stop_train: bool
    converged: bool
    message: str
