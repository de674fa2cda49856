"""``GlobalPowerLimitOptimizer`` as a training framework's callback: HuggingFace's
``transformers.TrainerCallback`` (as upstream) and Lightning's ``Callback`` (upstream has none).
Both import without their framework installed and say so when constructed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zeus_cpp.monitor import ZeusMonitor
    from zeus_cpp.optimizer._selectors import OptimumSelector

try:
    from transformers.trainer_callback import TrainerCallback

    _HAVE_TRANSFORMERS = True
except ImportError:
    TrainerCallback = object  # type: ignore[misc,assignment]
    _HAVE_TRANSFORMERS = False

try:
    from lightning.pytorch.callbacks import Callback as LightningCallback

    _HAVE_LIGHTNING = True
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback as LightningCallback  # type: ignore

        _HAVE_LIGHTNING = True
    except ImportError:
        LightningCallback = object  # type: ignore[misc,assignment]
        _HAVE_LIGHTNING = False


def _optimizer(**kwargs: Any):
    from zeus_cpp.optimizer.power_limit import GlobalPowerLimitOptimizer

    return GlobalPowerLimitOptimizer(**kwargs)


class HFGlobalPowerLimitOptimizer(TrainerCallback):  # type: ignore[misc,valid-type]
    """``GlobalPowerLimitOptimizer`` for ``transformers.Trainer(callbacks=[...])``: its step
    beginnings and epoch ends drive the optimizer (``self.optimizer``)."""

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
    ) -> None:
        if not _HAVE_TRANSFORMERS:
            raise ImportError("HFGlobalPowerLimitOptimizer needs the transformers package "
                              "(pip install transformers)")
        self.optimizer = _optimizer(monitor=monitor, optimum_selector=optimum_selector,
                                    wait_steps=wait_steps, warmup_steps=warmup_steps,
                                    profile_steps=profile_steps, pl_step=pl_step,
                                    profile_path=profile_path)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.optimizer.on_epoch_end()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.optimizer.on_step_begin()


class LightningGlobalPowerLimitOptimizer(LightningCallback):  # type: ignore[misc,valid-type]
    """``GlobalPowerLimitOptimizer`` for ``lightning.Trainer(callbacks=[...])``: each training
    batch begins a step, each training epoch's end ends an epoch."""

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
    ) -> None:
        if not _HAVE_LIGHTNING:
            raise ImportError("LightningGlobalPowerLimitOptimizer needs lightning "
                              "(pip install lightning)")
        super().__init__()
        self.optimizer = _optimizer(monitor=monitor, optimum_selector=optimum_selector,
                                    wait_steps=wait_steps, warmup_steps=warmup_steps,
                                    profile_steps=profile_steps, pl_step=pl_step,
                                    profile_path=profile_path)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int, *args: Any) -> None:
        self.optimizer.on_step_begin()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.optimizer.on_epoch_end()
