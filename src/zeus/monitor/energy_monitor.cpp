#include "zeus/monitor/energy_monitor.h"

#include <fmt/format.h>

#include <algorithm>
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

namespace {

// The index of (kind, index) among the timeline's devices, if it samples it.
std::optional<size_t> find_device(const PowerMonitor* timeline, MonitoredDevice::Kind kind,
                                  int index) {
  if (timeline == nullptr) {
    return std::nullopt;
  }
  const auto& devices = timeline->devices();
  const auto it = std::find_if(devices.begin(), devices.end(), [&](const MonitoredDevice& d) {
    return d.kind == kind && d.index == index;
  });
  return it == devices.end() ? std::nullopt
                             : std::optional<size_t>(static_cast<size_t>(it - devices.begin()));
}

}  // namespace

EnergyMonitor::EnergyMonitor(device::GpuSet* gpus, EnergyMonitorOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (gpus_ == nullptr && !options_.gpus.empty()) {
    throw ConfigError("an EnergyMonitor without a GPU set cannot measure GPUs");
  }
  if (options_.gpus.empty() && gpus_ != nullptr) {
    for (int i = 0; i < gpus_->count(); ++i) {
      options_.gpus.push_back(i);
    }
  }
  std::vector<int> without_counter;
  for (const int gpu : options_.gpus) {
    if (!gpus_->has_energy_counter(gpu)) {
      without_counter.push_back(gpu);
    }
  }
  timeline_ = options_.timeline;
  if (!without_counter.empty() && timeline_ == nullptr) {
    PowerMonitorOptions monitor_options;
    monitor_options.gpus = without_counter;
    monitor_options.period = options_.fallback_period;
    own_timeline_ = std::make_unique<PowerMonitor>(gpus_, monitor_options);
    own_timeline_->start();
    timeline_ = own_timeline_.get();
  }
  for (const int gpu : options_.gpus) {
    gpu_timeline_.push_back(find_device(timeline_, MonitoredDevice::Kind::kGpu, gpu));
    if (!gpus_->has_energy_counter(gpu) && !gpu_timeline_.back()) {
      throw ConfigError(fmt::format(
          "GPU {} has no energy counter and the given power timeline does not sample it; add it "
          "to the PowerMonitor's GPUs",
          gpu));
    }
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      cpu_timeline_.push_back(find_device(timeline_, MonitoredDevice::Kind::kCpu, cpu));
    }
  }
}

EnergyMonitor::~EnergyMonitor() = default;

void EnergyMonitor::begin_window(std::string_view name) {
  Window window;
  for (const int gpu : options_.gpus) {
    window.gpu_energy_mj.push_back(gpus_->energy_mj(gpu));
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      window.cpu_energy_uj.push_back(options_.cpus->energy_uj(cpu));
      window.dram_energy_uj.push_back(options_.cpus->dram_energy_uj(cpu));
    }
  }
  // After the counter reads: the window spans them, so an average never exceeds the truth.
  window.start = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  if (!windows_.emplace(std::string(name), std::move(window)).second) {
    throw ConfigError(
        fmt::format("measurement window '{}' is already open; end it first or use "
                    "another name",
                    name));
  }
}

std::optional<double> EnergyMonitor::integral(std::optional<size_t> device, SteadyTime t0,
                                              SteadyTime t1) const {
  return device ? timeline_->energy_j(*device, t0, t1) : std::nullopt;
}

Measurement EnergyMonitor::end_window(std::string_view name, std::optional<SteadyTime> end_at) {
  const SteadyTime end = end_at.value_or(std::chrono::steady_clock::now());
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
  // A counter read at the window's end, or the samples where that read fails.
  const auto from_counter = [&](auto read, std::optional<size_t> device, const std::string& what,
                                double& energy_j, EnergySource& source,
                                std::optional<double>& compare_j) {
    try {
      energy_j = read();
      source = EnergySource::kCounter;
      compare_j = integral(device, window.start, end);
      used_counter = true;
    } catch (const DeviceError& e) {
      const auto samples = integral(device, window.start, end);
      if (!samples) {
        throw;
      }
      energy_j = *samples;
      source = EnergySource::kIntegral;
      m.warnings.push_back(
          fmt::format("window '{}': the energy counter of {} failed at the end "
                      "({}); its energy is the integral of the samples taken",
                      name, what, e.what()));
    }
  };
  for (size_t i = 0; i < options_.gpus.size(); ++i) {
    const int gpu = options_.gpus[i];
    double energy_j = 0;
    EnergySource source = EnergySource::kIntegral;
    std::optional<double> compare_j;
    if (window.gpu_energy_mj[i]) {
      from_counter(
          [&] {
            const auto now_mj = gpus_->energy_mj(gpu);
            ZEUS_ASSERT(now_mj.has_value(), "GPU {} lost its energy counter", gpu);
            return mj_to_j(*now_mj - *window.gpu_energy_mj[i]);
          },
          gpu_timeline_[i], fmt::format("GPU {}", gpu), energy_j, source, compare_j);
    } else {
      const auto samples = integral(gpu_timeline_[i], window.start, end);
      if (!samples) {
        m.warnings.push_back(fmt::format(
            "window '{}' ({}): too few power samples of GPU {} to integrate (period {}); energy "
            "reported as 0",
            name, format_duration(end - window.start), gpu, format_duration(timeline_->period())));
      }
      energy_j = samples.value_or(0.0);
    }
    m.gpu_energy_j.push_back(energy_j);
    m.gpu_source.push_back(source);
    m.gpu_integral_j.push_back(compare_j);
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      const auto c = static_cast<size_t>(cpu);
      double energy_j = 0;
      EnergySource source = EnergySource::kCounter;
      std::optional<double> compare_j;
      from_counter([&] { return uj_to_j(options_.cpus->energy_uj(cpu) - window.cpu_energy_uj[c]); },
                   cpu_timeline_[c], fmt::format("CPU package {}", cpu), energy_j, source,
                   compare_j);
      m.cpu_energy_j.push_back(energy_j);
      m.cpu_source.push_back(source);
      m.cpu_integral_j.push_back(compare_j);
      std::optional<double> dram_j;
      if (window.dram_energy_uj[c]) {
        const auto now_uj = options_.cpus->dram_energy_uj(cpu);
        ZEUS_ASSERT(now_uj.has_value(), "CPU package {} lost its DRAM counter", cpu);
        dram_j = uj_to_j(*now_uj - *window.dram_energy_uj[c]);
      }
      m.dram_energy_j.push_back(dram_j);
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
