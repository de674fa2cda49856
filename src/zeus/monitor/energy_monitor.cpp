#include "zeus/monitor/energy_monitor.h"

#include <fmt/format.h>

#include <numeric>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/common/units.h"

namespace zeus::monitor {

double Measurement::total_energy_j() const {
  return std::accumulate(gpu_energy_j.begin(), gpu_energy_j.end(), 0.0) +
         std::accumulate(cpu_energy_j.begin(), cpu_energy_j.end(), 0.0);
}

EnergyMonitor::EnergyMonitor(device::GpuSet& gpus, EnergyMonitorOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (options_.gpus.empty()) {
    for (int i = 0; i < gpus_.count(); ++i) {
      options_.gpus.push_back(i);
    }
  }
  std::vector<int> without_counter;
  for (const int gpu : options_.gpus) {
    if (!gpus_.has_energy_counter(gpu)) {
      without_counter.push_back(gpu);
    }
  }
  timeline_ = options_.timeline;
  if (!without_counter.empty() && timeline_ == nullptr) {
    PowerMonitorOptions monitor_options;
    monitor_options.gpus = without_counter;
    monitor_options.period = options_.fallback_period;
    own_timeline_ = std::make_unique<PowerMonitor>(&gpus_, monitor_options);
    own_timeline_->start();
    timeline_ = own_timeline_.get();
  }
  timeline_device_.assign(options_.gpus.size(), 0);
  for (size_t i = 0; i < options_.gpus.size(); ++i) {
    if (gpus_.has_energy_counter(options_.gpus[i])) {
      continue;
    }
    const auto& devices = timeline_->devices();
    const auto it = std::find_if(devices.begin(), devices.end(), [&](const MonitoredDevice& d) {
      return d.kind == MonitoredDevice::Kind::kGpu && d.index == options_.gpus[i];
    });
    if (it == devices.end()) {
      throw ConfigError(fmt::format(
          "GPU {} has no energy counter and the given power timeline does not sample it; add it "
          "to the PowerMonitor's GPUs",
          options_.gpus[i]));
    }
    timeline_device_[i] = static_cast<size_t>(it - devices.begin());
  }
}

EnergyMonitor::~EnergyMonitor() = default;

void EnergyMonitor::begin_window(std::string_view name) {
  Window window;
  for (const int gpu : options_.gpus) {
    window.gpu_energy_mj.push_back(gpus_.energy_mj(gpu));
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      window.cpu_energy_uj.push_back(options_.cpus->energy_uj(cpu));
    }
  }
  window.start = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  if (!windows_.emplace(std::string(name), std::move(window)).second) {
    throw ConfigError(
        fmt::format("measurement window '{}' is already open; end it first or use "
                    "another name",
                    name));
  }
}

Measurement EnergyMonitor::end_window(std::string_view name) {
  const SteadyTime end = std::chrono::steady_clock::now();
  Window window;
  {
    std::lock_guard lock(mu_);
    const auto it = windows_.find(name);
    if (it == windows_.end()) {
      throw ConfigError(fmt::format("measurement window '{}' was never begun", name));
    }
    window = std::move(it->second);
    windows_.erase(it);
  }
  Measurement m;
  m.elapsed = end - window.start;
  bool used_counter = false;
  for (size_t i = 0; i < options_.gpus.size(); ++i) {
    const int gpu = options_.gpus[i];
    if (window.gpu_energy_mj[i]) {
      const auto now_mj = gpus_.energy_mj(gpu);
      ZEUS_ASSERT(now_mj.has_value(), "GPU {} lost its energy counter", gpu);
      m.gpu_energy_j.push_back(mj_to_j(*now_mj - *window.gpu_energy_mj[i]));
      used_counter = true;
      continue;
    }
    const auto energy = timeline_->energy_j(timeline_device_[i], window.start, end);
    if (!energy) {
      m.warnings.push_back(fmt::format(
          "window '{}' ({}): too few power samples of GPU {} to integrate (period {}); energy "
          "reported as 0",
          name, format_duration(end - window.start), gpu, format_duration(timeline_->period())));
    }
    m.gpu_energy_j.push_back(energy.value_or(0.0));
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      m.cpu_energy_j.push_back(
          uj_to_j(options_.cpus->energy_uj(cpu) - window.cpu_energy_uj[static_cast<size_t>(cpu)]));
    }
  }
  if (used_counter && end - window.start < options_.counter_resolution) {
    m.warnings.push_back(fmt::format(
        "window '{}' lasted {}, shorter than the energy counter's update period (~{}); its GPU "
        "energy is unreliable",
        name, format_duration(end - window.start), format_duration(options_.counter_resolution)));
  }
  for (const auto& warning : m.warnings) {
    logger().warn("{}", warning);
  }
  return m;
}

bool EnergyMonitor::is_open(std::string_view name) const {
  std::lock_guard lock(mu_);
  return windows_.find(name) != windows_.end();
}

}  // namespace zeus::monitor
