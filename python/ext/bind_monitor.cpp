#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "zeus/device/discovery.h"
#include "zeus/device/gpu_set.h"
#include "zeus/monitor/energy_monitor.h"

namespace py = pybind11;

namespace zeus::python {
namespace {

// ZeusMonitor's engine: the GPUs it opened and the monitor over them (which refers to them).
// Measures only: it never changes a limit.
class Monitor {
 public:
  Monitor(const std::string& device, std::optional<std::vector<int>> gpu_indices,
          double fallback_period_s) {
    device::OpenGpuSetOptions open;
    open.sim_start_busy = true;  // a simulated GPU draws its training power, as if in use
    gpus_ = device::open_gpu_set(device, open);
    monitor::EnergyMonitorOptions options;
    if (gpu_indices) {
      options.gpus = *gpu_indices;
    } else {
      for (int g = 0; g < gpus_->count(); ++g) {
        options.gpus.push_back(g);
      }
    }
    options.fallback_period = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(fallback_period_s));
    monitor_ = std::make_unique<monitor::EnergyMonitor>(gpus_.get(), options);
  }

  monitor::EnergyMonitor& get() { return *monitor_; }
  std::vector<int> gpus() const { return monitor_->gpus(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (int g : monitor_->gpus()) {
      out.push_back(gpus_->name(g));
    }
    return out;
  }
  std::vector<bool> has_energy_counter() const {
    std::vector<bool> out;
    for (int g : monitor_->gpus()) {
      out.push_back(gpus_->has_energy_counter(g));
    }
    return out;
  }
  std::string locator() const { return gpus_->locator(); }

 private:
  std::unique_ptr<device::GpuSet> gpus_;
  std::unique_ptr<monitor::EnergyMonitor> monitor_;  // refers to *gpus_
};

}  // namespace

void bind_monitor(py::module_& m) {
  py::class_<monitor::Measurement>(m, "Measurement")
      .def_property_readonly("elapsed_s",
                             [](const monitor::Measurement& x) { return x.elapsed.count(); })
      .def_readonly("gpu_energy_j", &monitor::Measurement::gpu_energy_j)
      .def_readonly("warnings", &monitor::Measurement::warnings);

  // The windows' methods release the GIL: they read devices (and may wait for a sampler).
  py::class_<Monitor>(m, "EnergyMonitor")
      .def(py::init<const std::string&, std::optional<std::vector<int>>, double>(),
           py::arg("device"), py::arg("gpu_indices"), py::arg("fallback_period_s"))
      .def(
          "begin_window",
          [](Monitor& mon, const std::string& name) { mon.get().begin_window(name); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "end_window",
          [](Monitor& mon, const std::string& name) { return mon.get().end_window(name); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def("is_open", [](Monitor& mon, const std::string& name) { return mon.get().is_open(name); })
      .def_property_readonly("gpus", &Monitor::gpus)
      .def_property_readonly("names", &Monitor::names)
      .def_property_readonly("has_energy_counter", &Monitor::has_energy_counter)
      .def_property_readonly("locator", &Monitor::locator);
}

}  // namespace zeus::python
