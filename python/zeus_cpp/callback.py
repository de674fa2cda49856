"""Zeus 0.16's training callbacks: ``Callback`` (every hook a no-op) and ``CallbackSet`` (calls
its callbacks' hooks in order)."""

from __future__ import annotations

__all__ = ["Callback", "CallbackSet"]


class Callback:
    """Hooks a training loop calls; each is a no-op until overridden."""

    def on_train_begin(self) -> None:
        """At the beginning of training."""

    def on_train_end(self) -> None:
        """At the end of training."""

    def on_epoch_begin(self) -> None:
        """At the beginning of each epoch."""

    def on_epoch_end(self) -> None:
        """At the end of each epoch."""

    def on_step_begin(self) -> None:
        """At the beginning of each step."""

    def on_step_end(self) -> None:
        """At the end of each step."""

    def on_evaluate(self, metric: float) -> None:
        """After evaluating the model."""

    def on_instruction_begin(self, name: str) -> None:
        """At the beginning of a pipeline instruction (forward, backward)."""

    def on_instruction_end(self, name: str) -> None:
        """At the end of a pipeline instruction."""


class CallbackSet(Callback):
    """Several callbacks as one: each hook calls theirs in list order."""

    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks

    def _each(self, hook: str, *args: object) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(*args)

    def on_train_begin(self) -> None:
        self._each("on_train_begin")

    def on_train_end(self) -> None:
        self._each("on_train_end")

    def on_epoch_begin(self) -> None:
        self._each("on_epoch_begin")

    def on_epoch_end(self) -> None:
        self._each("on_epoch_end")

    def on_step_begin(self) -> None:
        self._each("on_step_begin")

    def on_step_end(self) -> None:
        self._each("on_step_end")

    def on_evaluate(self, metric: float) -> None:
        self._each("on_evaluate", metric)

    def on_instruction_begin(self, name: str) -> None:
        self._each("on_instruction_begin", name)

    def on_instruction_end(self, name: str) -> None:
        self._each("on_instruction_end", name)
