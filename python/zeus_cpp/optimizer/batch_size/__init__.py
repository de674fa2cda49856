"""Zeus 0.16's batch-size optimizer client: ``BatchSizeOptimizer`` against ``zeus bso-server``
(or upstream's server), with upstream's ``JobSpec`` and exceptions."""

from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer
from zeus_cpp.optimizer.batch_size.common import JobParams, JobSpec
from zeus_cpp.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)

__all__ = [
    "BatchSizeOptimizer",
    "JobParams",
    "JobSpec",
    "ZeusBSOBadOperationError",
    "ZeusBSOConfigError",
    "ZeusBSOOperationOrderError",
    "ZeusBSORuntimError",
    "ZeusBSOTrainFailError",
]
