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

// Where a device's energy in a Measurement came from.
enum class EnergySource {
  kCounter,   // the device's energy counter (NVML's total energy, RAPL's energy_uj)
  kIntegral,  // the trapezoid integral of the timeline's power samples
};

struct Measurement {
  std::chrono::duration<double> elapsed{0};  // seconds
  std::vector<double> gpu_energy_j;          // per monitored GPU, in EnergyMonitorOptions order
  std::vector<double> cpu_energy_j;          // per CPU package
  // Per CPU package: its DRAM's energy, std::nullopt where the package has no DRAM zone.
  std::vector<std::optional<double>> dram_energy_j;
  std::vector<EnergySource> gpu_source;  // per monitored GPU
  std::vector<EnergySource> cpu_source;  // per CPU package
  // Where the energy came from a counter and the timeline samples that device too: the
  // integral of its samples over the same window, to compare the two (else nullopt).
  std::vector<std::optional<double>> gpu_integral_j;
  std::vector<std::optional<double>> cpu_integral_j;
  std::vector<std::string> warnings;  // e.g. a window too short for the counter

  double total_energy_j() const;
};

struct EnergyMonitorOptions {
  std::vector<int> gpus;           // GPU indices; empty: every GPU
  device::CpuSet* cpus = nullptr;  // also measure every CPU package
  // For GPUs without an energy counter, and for any device whose counter fails when a window
  // ends: the timeline to integrate. Null: the monitor starts its own PowerMonitor for the
  // GPUs without a counter at `fallback_period`.
  PowerMonitor* timeline = nullptr;
  std::chrono::nanoseconds fallback_period = std::chrono::milliseconds(100);
  // Windows shorter than this read a warning when measured with a hardware counter, whose
  // value updates about every 100 ms.
  std::chrono::nanoseconds counter_resolution = std::chrono::milliseconds(100);
};

// Contract: methods may be called from any thread. Window names are unique among open windows;
// windows may nest and overlap. Unknown or duplicate names throw ConfigError. A counter that
// fails when a window ends (a lost GPU) falls back, with a warning, to the timeline's samples
// of that device where the timeline has them; otherwise the device error propagates.
class EnergyMonitor {
 public:
  // `gpus` may be null: CPU packages only.
  EnergyMonitor(device::GpuSet* gpus, EnergyMonitorOptions options = {});
  ~EnergyMonitor();
  EnergyMonitor(const EnergyMonitor&) = delete;
  EnergyMonitor& operator=(const EnergyMonitor&) = delete;

  void begin_window(std::string_view name);
  // `end`: where the window ends for its elapsed time and its integrals (the last sample, say,
  // after the timeline stopped on an error); default now. Counters are read now.
  Measurement end_window(std::string_view name, std::optional<SteadyTime> end = std::nullopt);
  bool is_open(std::string_view name) const;
  const std::vector<int>& gpus() const { return options_.gpus; }

 private:
  struct Window {
    SteadyTime start;
    std::vector<std::optional<int64_t>> gpu_energy_mj;  // nullopt: use the timeline
    std::vector<int64_t> cpu_energy_uj;
    std::vector<std::optional<int64_t>> dram_energy_uj;
  };

  // The integral of timeline device `device` (nullopt: not sampled) over [t0, t1].
  std::optional<double> integral(std::optional<size_t> device, SteadyTime t0, SteadyTime t1) const;

  device::GpuSet* gpus_;
  EnergyMonitorOptions options_;
  std::unique_ptr<PowerMonitor> own_timeline_;
  PowerMonitor* timeline_ = nullptr;
  // Per monitored GPU and per CPU package: its index in timeline_->devices(), if sampled there.
  std::vector<std::optional<size_t>> gpu_timeline_;
  std::vector<std::optional<size_t>> cpu_timeline_;
  mutable std::mutex mu_;
  std::map<std::string, Window, std::less<>> windows_;
};

}  // namespace zeus::monitor
