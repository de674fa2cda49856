"""One recurrence of a training job driven by upstream Zeus 0.16's own batch-size client.

Run by tests/bso_server_test.cpp with the venv scripts/install-bso-upstream.sh makes: upstream's
`BatchSizeOptimizer` and `ZeusMonitor`, unchanged, on the fake NVML, against `zeus bso-server`.

    recurring_job.py SERVER_URL JOB_ID [--die-after-get | --exit-after-get]

Trains (sleeps) epoch by epoch with the batch size the server hands out; a larger batch size takes
longer per epoch and converges sooner. Prints one JSON line: the trial and how it ended.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from zeus.monitor import ZeusMonitor
from zeus.optimizer.batch_size.client import BatchSizeOptimizer
from zeus.optimizer.batch_size.common import JobSpec
from zeus.optimizer.batch_size.exceptions import ZeusBSOTrainFailError


def main() -> None:
    url, job_id = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    # No CUDA here: tests/bso_upstream/no_cuda/cupy is on PYTHONPATH to synchronize nothing.
    monitor = ZeusMonitor(gpu_indices=[0], sync_execution_with="cupy")
    spec = JobSpec(
        job_id=job_id,
        job_id_prefix=job_id.split("-")[0],
        batch_sizes=[16, 32, 64],
        default_batch_size=32,
        target_metric=0.5,
        max_epochs=6,
        beta_knob=None,  # no early stop on cost: these epochs last milliseconds, their costs noise
    )
    bso = BatchSizeOptimizer(monitor, url, spec)
    batch_size = bso.get_batch_size()
    result = {"batch_size": batch_size, "trial_number": bso.trial_number}
    if mode == "--die-after-get":
        print(json.dumps(result), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit: the trial stays Dispatched
    if mode == "--exit-after-get":
        print(json.dumps(result), flush=True)
        sys.exit(0)  # upstream's atexit tells the server the trial ended
    bso.on_train_begin()
    epochs = 0
    try:
        while not bso.training_finished:
            time.sleep(0.002 * batch_size / 16)
            epochs += 1
            bso.on_evaluate(metric=min(1.0, epochs * batch_size / 64))
        result["ended"] = "converged"
    except ZeusBSOTrainFailError as e:
        result["ended"] = e.message
    result["epochs"] = epochs
    result["energy"] = bso.consumed_energy
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
