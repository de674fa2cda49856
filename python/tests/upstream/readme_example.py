# A training loop written against upstream Zeus 0.16, in the style of its README and docs
# (ZeusMonitor windows, GlobalPowerLimitOptimizer as a callback, get_gpus). The test runs it with
# nothing changed but the package name in the imports. The "model" is a sleep per step.
import json
import time

from zeus.callback import Callback, CallbackSet
from zeus.device import get_gpus
from zeus.monitor import ZeusMonitor
from zeus.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint


class StepCounter(Callback):
    def __init__(self) -> None:
        self.steps = 0

    def on_step_begin(self) -> None:
        self.steps += 1


monitor = ZeusMonitor(gpu_indices=[0])
plo = GlobalPowerLimitOptimizer(
    monitor,
    optimum_selector=MaxSlowdownConstraint(factor=1.1),
    wait_steps=1,
    warmup_steps=2,
    profile_steps=5,
    pl_step=50,
)
counter = StepCounter()
callbacks = CallbackSet([plo, counter])

epochs = []
for epoch in range(2):
    monitor.begin_window("epoch")
    callbacks.on_epoch_begin()
    for step in range(40):
        callbacks.on_step_begin()
        monitor.begin_window("step")
        time.sleep(0.001)
        monitor.end_window("step")
        callbacks.on_step_end()
    callbacks.on_epoch_end()
    measurement = monitor.end_window("epoch")
    print(f"Epoch {epoch} consumed {measurement.time} s and {measurement.total_energy} J.")
    epochs.append({"time": measurement.time, "energy": measurement.total_energy})

gpus = get_gpus()
print("RESULT " + json.dumps({
    "epochs": epochs,
    "steps": counter.steps,
    "state": type(plo.state).__name__,
    "limit_mw": gpus.get_power_management_limit(0),
    "profiled_w": [m.power_limit for m in plo.measurements],
}))
