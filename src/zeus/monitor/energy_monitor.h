// EnergyMonitor: energy and time of named, nestable measurement windows, as Zeus's
// ZeusMonitor: begin_window("epoch") ... end_window("epoch").
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"
#include "zeus/monitor/power_monitor.h"

namespace zeus::monitor {

struct Measurement {
  std::chrono::duration<double> elapsed{0};  // seconds
  std::vector<double> gpu_energy_j;          // per monitored GPU, in EnergyMonitorOptions order
  std::vector<double> cpu_energy_j;          // per CPU package
  std::vector<std::string> warnings;         // e.g. a window too short for the counter

  double total_energy_j() const;
};

struct EnergyMonitorOptions {
  std::vector<int> gpus;           // GPU indices; empty: every GPU
  device::CpuSet* cpus = nullptr;  // also measure every CPU package
  // For GPUs without an energy counter: the timeline to integrate. Null: the monitor starts
  // its own PowerMonitor for those GPUs at `fallback_period`.
  PowerMonitor* timeline = nullptr;
  std::chrono::nanoseconds fallback_period = std::chrono::milliseconds(100);
  // Windows shorter than this read a warning when measured with a hardware counter, whose
  // value updates about every 100 ms.
  std::chrono::nanoseconds counter_resolution = std::chrono::milliseconds(100);
};

// Contract: methods may be called from any thread. Window names are unique among open windows;
// windows may nest and overlap. Unknown or duplicate names throw ConfigError.
class EnergyMonitor {
 public:
  EnergyMonitor(device::GpuSet& gpus, EnergyMonitorOptions options = {});
  ~EnergyMonitor();
  EnergyMonitor(const EnergyMonitor&) = delete;
  EnergyMonitor& operator=(const EnergyMonitor&) = delete;

  void begin_window(std::string_view name);
  Measurement end_window(std::string_view name);
  bool is_open(std::string_view name) const;
  const std::vector<int>& gpus() const { return options_.gpus; }

 private:
  struct Window {
    SteadyTime start;
    std::vector<std::optional<int64_t>> gpu_energy_mj;  // nullopt: use the timeline
    std::vector<int64_t> cpu_energy_uj;
  };

  device::GpuSet& gpus_;
  EnergyMonitorOptions options_;
  std::unique_ptr<PowerMonitor> own_timeline_;
  PowerMonitor* timeline_ = nullptr;
  std::vector<size_t> timeline_device_;  // per monitored GPU: its index in timeline_->devices()
  mutable std::mutex mu_;
  std::map<std::string, Window, std::less<>> windows_;
};

}  // namespace zeus::monitor
