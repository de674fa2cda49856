"""A stand-in for CuPy on machines without CUDA, for tests only.

Upstream's ZeusMonitor synchronizes the GPUs before reading their counters; with
sync_execution_with="cupy" it calls cupy.cuda.Device(i).synchronize(). The fake NVML has no
kernels in flight, so there is nothing to wait for. On a GPU machine, the real CuPy (or torch)
does this; the client code under test is upstream's, unchanged.
"""


class _Device:
    def __init__(self, index: int) -> None:
        self.index = index

    def synchronize(self) -> None:
        return None


class cuda:  # noqa: N801 - CuPy's module name
    Device = _Device
