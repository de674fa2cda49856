// The parts of zeus_cpp._core, one per zeus_core module it exposes. No libtorch: the Python
// package reaches PyTorch from Python (zeus_cpp/_collectives.py), never from here.
#pragma once

#include <pybind11/pybind11.h>

namespace zeus::python {

// ZeusError and its subclasses, and the translation of zeus::Error's tree into them (same
// message; ConfigError is also a ValueError, PermissionError also Python's PermissionError).
void bind_errors(pybind11::module_& m);
// detect_env(): who this process is, from whatever launched it.
void bind_cluster(pybind11::module_& m);
// JobOptions, RankDevice, EnergyJob over a Python object that does the collectives.
void bind_job(pybind11::module_& m);
// Gpus (one shared GpuSet), LimitKeeper (an optimizer's guarded, journaled, watched limits),
// the watchdog's body.
void bind_device(pybind11::module_& m);
// EnergyMonitor (named, nestable energy windows over a Gpus and RAPL) and PowerTimeline.
void bind_monitor(pybind11::module_& m);
// Pusher (a Pushgateway group), render_metrics, job_state_families.
void bind_metrics(pybind11::module_& m);
// SignalTrace (carbon/price traces), grid_eta and GridFollower (the rule that follows them).
void bind_grid(pybind11::module_& m);

}  // namespace zeus::python
