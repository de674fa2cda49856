// zeus_cpp.monitor's engine: EnergyMonitor windows over a shared Gpus and the CPUs' RAPL
// counters, and PowerMonitor timelines. Both only measure: they never change a limit.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "gpus.h"
#include "zeus/common/errors.h"
#include "zeus/device/discovery.h"
#include "zeus/monitor/energy_monitor.h"
#include "zeus/monitor/power_monitor.h"
#include "zeus/monitor/temperature_monitor.h"

namespace py = pybind11;

namespace zeus::python {
namespace {

using std::chrono::duration;
using std::chrono::nanoseconds;

nanoseconds seconds_to_ns(double s) {
  return std::chrono::duration_cast<nanoseconds>(duration<double>(s));
}

// Windows on one Gpus (and optionally the CPU packages). On simulated GPUs with a virtual
// clock a window's time is that clock's (the steps the optimizer ran), not the machine's.
class Monitor {
 public:
  Monitor(std::shared_ptr<Gpus> gpus, std::optional<std::vector<int>> gpu_indices,
          std::shared_ptr<device::CpuSet> cpus, double fallback_period_s)
      : gpus_(std::move(gpus)), cpus_(std::move(cpus)) {
    monitor::EnergyMonitorOptions options;
    if (gpu_indices) {
      options.gpus = *gpu_indices;
    } else {
      for (int g = 0; g < gpus_->set().count(); ++g) {
        options.gpus.push_back(g);
      }
    }
    options.cpus = cpus_.get();
    options.fallback_period = seconds_to_ns(fallback_period_s);
    if (gpus_->virtual_clock()) {
      options.counter_resolution = nanoseconds(0);  // a simulated counter is exact
    }
    monitor_ = std::make_unique<monitor::EnergyMonitor>(&gpus_->set(), options);
  }

  void begin_window(const std::string& name) {
    monitor_->begin_window(name);
    if (gpus_->virtual_clock()) {
      sim_start_s_[name] = gpus_->sim_now_s();
    }
  }

  monitor::Measurement end_window(const std::string& name) {
    auto m = monitor_->end_window(name);
    if (gpus_->virtual_clock()) {
      const auto it = sim_start_s_.find(name);
      m.elapsed = duration<double>(gpus_->sim_now_s() - it->second);
      sim_start_s_.erase(it);
    }
    return m;
  }

  monitor::EnergyMonitor& get() { return *monitor_; }
  const std::shared_ptr<Gpus>& gpus() const { return gpus_; }
  std::vector<int> gpu_indices() const { return monitor_->gpus(); }
  int cpu_count() const { return cpus_ ? cpus_->count() : 0; }
  std::vector<bool> cpu_has_dram() const {
    std::vector<bool> out;
    for (int c = 0; c < cpu_count(); ++c) {
      out.push_back(cpus_->has_dram(c));
    }
    return out;
  }

 private:
  std::shared_ptr<Gpus> gpus_;
  std::shared_ptr<device::CpuSet> cpus_;
  std::unique_ptr<monitor::EnergyMonitor> monitor_;  // refers to gpus_ and cpus_
  std::map<std::string, double> sim_start_s_;        // guarded by the GIL (not released)
};

// A PowerMonitor over some GPUs of a Gpus, with its timeline read in Unix seconds and W.
class Timeline {
 public:
  Timeline(std::shared_ptr<Gpus> gpus, std::vector<int> gpu_indices, double period_s,
           size_t capacity)
      : gpus_(std::move(gpus)) {
    monitor::PowerMonitorOptions options;
    options.gpus = std::move(gpu_indices);
    options.period = seconds_to_ns(period_s);
    options.capacity = capacity;
    monitor_ = std::make_unique<monitor::PowerMonitor>(&gpus_->set(), options);
    monitor_->start();
  }

  // (Unix s, W) of GPU position `pos` within [start, end] (Unix s; unbounded when absent).
  std::vector<std::pair<double, double>> timeline(size_t pos, std::optional<double> start,
                                                  std::optional<double> end) const {
    std::vector<std::pair<double, double>> out;
    for (const auto& s : monitor_->timeline()) {
      const double t = duration<double>(s.wall_time.time_since_epoch()).count();
      if ((start && t < *start) || (end && t > *end) || !s.power_mw.at(pos)) {
        continue;
      }
      out.emplace_back(t, static_cast<double>(*s.power_mw[pos]) / 1000.0);
    }
    return out;
  }

  // J of GPU position `pos` over [start, end] (Unix s): the samples' trapezoid, each edge
  // reading held to the window's edge; 0 with fewer than two samples in reach.
  double energy_j(size_t pos, double start, double end) const {
    std::vector<std::pair<monitor::SteadyTime, int64_t>> readings;
    for (const auto& s : monitor_->timeline()) {
      if (s.power_mw.at(pos)) {
        readings.emplace_back(monitor::SteadyTime(s.wall_time.time_since_epoch()),
                              *s.power_mw[pos]);
      }
    }
    const auto at = [](double t) { return monitor::SteadyTime(seconds_to_ns(t)); };
    return monitor::integrate_power_j(readings, at(start), at(end)).value_or(0.0);
  }

  size_t sample_count() const { return monitor_->sample_count(); }
  void stop() { monitor_->stop(); }
  std::optional<std::string> error() const {
    if (const auto e = monitor_->error()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        return std::string(x.what());
      }
    }
    return std::nullopt;
  }

 private:
  std::shared_ptr<Gpus> gpus_;
  std::unique_ptr<monitor::PowerMonitor> monitor_;  // refers to gpus_
};

// A TemperatureMonitor over some GPUs of a Gpus, read in Unix seconds and degrees C.
class Temperatures {
 public:
  Temperatures(std::shared_ptr<Gpus> gpus, std::vector<int> gpu_indices, double period_s,
               size_t capacity)
      : gpus_(std::move(gpus)) {
    monitor::TemperatureMonitorOptions options;
    options.gpus = std::move(gpu_indices);
    options.period = seconds_to_ns(period_s);
    options.capacity = capacity;
    monitor_ = std::make_unique<monitor::TemperatureMonitor>(&gpus_->set(), options);
  }

  std::vector<std::pair<double, double>> timeline(int gpu) const {
    std::vector<std::pair<double, double>> out;
    for (const auto& s : monitor_->timeline(gpu)) {
      out.emplace_back(duration<double>(s.time.time_since_epoch()).count(), s.temperature_c);
    }
    return out;
  }
  std::vector<int> unsupported() const { return monitor_->unsupported(); }
  std::optional<std::string> error() const { return monitor_->error(); }
  void stop() { monitor_->stop(); }

 private:
  std::shared_ptr<Gpus> gpus_;
  std::unique_ptr<monitor::TemperatureMonitor> monitor_;  // refers to gpus_
};

}  // namespace

void bind_monitor(py::module_& m) {
  py::class_<monitor::Measurement>(m, "Measurement")
      .def_property_readonly("elapsed_s",
                             [](const monitor::Measurement& x) { return x.elapsed.count(); })
      .def_readonly("gpu_energy_j", &monitor::Measurement::gpu_energy_j)
      .def_readonly("cpu_energy_j", &monitor::Measurement::cpu_energy_j)
      .def_readonly("dram_energy_j", &monitor::Measurement::dram_energy_j)
      .def_readonly("gpu_integral_j", &monitor::Measurement::gpu_integral_j)
      .def_readonly("warnings", &monitor::Measurement::warnings);

  py::class_<device::CpuSet, std::shared_ptr<device::CpuSet>>(m, "CpuSet")
      .def_property_readonly("count", &device::CpuSet::count)
      .def("name", &device::CpuSet::name)
      .def("energy_uj", &device::CpuSet::energy_uj, py::arg("cpu"))
      .def("has_dram", &device::CpuSet::has_dram, py::arg("cpu"))
      .def("dram_energy_uj", &device::CpuSet::dram_energy_uj, py::arg("cpu"));
  m.def(
      "open_rapl", [] { return std::shared_ptr<device::CpuSet>(device::open_cpu_set()); },
      "The CPU packages' RAPL counters (ZEUS_RAPL_ROOT or /sys/class/powercap)");

  // The windows' methods release the GIL where they read devices (and may wait for a sampler).
  py::class_<Monitor>(m, "EnergyMonitor")
      .def(py::init<std::shared_ptr<Gpus>, std::optional<std::vector<int>>,
                    std::shared_ptr<device::CpuSet>, double>(),
           py::arg("gpus"), py::arg("gpu_indices"), py::arg("cpus"), py::arg("fallback_period_s"))
      .def("begin_window", &Monitor::begin_window, py::arg("name"))
      .def("end_window", &Monitor::end_window, py::arg("name"))
      .def("is_open", [](Monitor& mon, const std::string& name) { return mon.get().is_open(name); })
      .def_property_readonly("gpu_set", &Monitor::gpus)
      .def_property_readonly("gpus", &Monitor::gpu_indices)
      .def_property_readonly("cpu_count", &Monitor::cpu_count)
      .def_property_readonly("cpu_has_dram", &Monitor::cpu_has_dram);

  py::class_<Timeline>(m, "PowerTimeline")
      .def(py::init<std::shared_ptr<Gpus>, std::vector<int>, double, size_t>(), py::arg("gpus"),
           py::arg("gpu_indices"), py::arg("period_s"), py::arg("capacity"))
      .def("timeline", &Timeline::timeline, py::arg("pos"), py::arg("start"), py::arg("end"),
           py::call_guard<py::gil_scoped_release>())
      .def("energy_j", &Timeline::energy_j, py::arg("pos"), py::arg("start"), py::arg("end"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("sample_count", &Timeline::sample_count)
      .def_property_readonly("error", &Timeline::error)
      .def("stop", &Timeline::stop, py::call_guard<py::gil_scoped_release>());

  // Zeus 0.16's TemperatureMonitor: one C++ thread, only the changes kept.
  py::class_<Temperatures>(m, "TemperatureTimeline")
      .def(py::init<std::shared_ptr<Gpus>, std::vector<int>, double, size_t>(), py::arg("gpus"),
           py::arg("gpu_indices"), py::arg("period_s"), py::arg("capacity"))
      .def("timeline", &Temperatures::timeline, py::arg("gpu"),
           py::call_guard<py::gil_scoped_release>(),
           "(Unix s, degrees C) of a GPU, oldest first: only the changes.")
      .def_property_readonly("unsupported", &Temperatures::unsupported)
      .def_property_readonly("error", &Temperatures::error)
      .def("stop", &Temperatures::stop, py::call_guard<py::gil_scoped_release>());
}

}  // namespace zeus::python
