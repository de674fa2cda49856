"""Zeus 0.16's batch-size optimizer exceptions (``zeus.optimizer.batch_size.exceptions``).

Each carries ``.message``, as upstream's ``ZeusBaseError`` does, and is a ``ZeusError``.
"""

from __future__ import annotations

from zeus_cpp._errors import ZeusError


class ZeusBaseError(ZeusError):
    """The base of the batch-size optimizer's errors; ``message`` is the text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ZeusBSORuntimError(ZeusBaseError):  # noqa: N801 - upstream's spelling
    """The server answered with an error, or with something the client cannot use."""


class ZeusBSOTrainFailError(ZeusBaseError):
    """Training stopped without converging (cost bound or max_epochs): relaunch for another
    batch size."""


class ZeusBSOConfigError(ZeusBaseError):
    """The client's configuration cannot work (no GPUs, GPUs of different models)."""


class ZeusBSOOperationOrderError(ZeusBaseError):
    """Methods called out of order (on_evaluate before get_batch_size)."""


class ZeusBSOBadOperationError(ZeusBaseError):
    """An operation this rank may not do (only rank 0 asks for a batch size)."""
