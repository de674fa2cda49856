// PowerMonitor: samples GPU (and CPU package) power on a fixed schedule on one background thread,
// keeps a bounded timeline, and optionally logs CSV rows `Time,Power` per device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zeus/common/posix.h"
#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"

namespace zeus::monitor {

using SteadyTime = std::chrono::steady_clock::time_point;

// One tick of the schedule: a reading per monitored device, in the order of devices().
struct PowerSample {
  SteadyTime time;
  std::chrono::system_clock::time_point wall_time;
  std::chrono::nanoseconds lateness{0};          // how long after its scheduled time it was taken
  std::vector<std::optional<int64_t>> power_mw;  // nullopt: no reading (a CPU's first tick)
};

struct MonitoredDevice {
  enum class Kind { kGpu, kCpu };
  Kind kind;
  int index;          // in the GpuSet or CpuSet
  std::string label;  // "gpu0", "cpu0"
};

struct PowerMonitorOptions {
  std::vector<int> gpus;           // GPU indices; empty: every GPU of the set
  device::CpuSet* cpus = nullptr;  // also sample every CPU package (power from RAPL deltas)
  std::chrono::nanoseconds period = std::chrono::milliseconds(100);  // >= kMinPeriod
  size_t capacity = 1 << 16;  // samples kept; the oldest are dropped beyond it
  // One CSV file per device (same order as devices()), `Time,Power` with UTC nanosecond time
  // and integer mW, each row written with one write() and so never torn. Empty: no files.
  std::vector<std::filesystem::path> csv_paths;
  // Called on the sampling thread after each sample (keep it short).
  std::function<void(const PowerSample&)> on_sample;
};

inline constexpr std::chrono::nanoseconds kMinPeriod = std::chrono::milliseconds(5);

// Contract: construct, start(), then read timeline()/energy_j() from any thread; stop() (or the
// destructor) joins the thread. The schedule is `next += period` from start, so sampling cost
// does not accumulate as drift; a tick that is missed entirely is skipped, not bunched.
// A device error on the sampling thread stops sampling; error() returns it, and the timeline
// keeps what was measured until then. Constructor errors (bad period, unknown GPU, unwritable
// CSV path) throw ConfigError/IoError, and leave no CSV file behind.
class PowerMonitor {
 public:
  PowerMonitor(device::GpuSet* gpus, PowerMonitorOptions options);
  ~PowerMonitor();
  PowerMonitor(const PowerMonitor&) = delete;
  PowerMonitor& operator=(const PowerMonitor&) = delete;

  void start();
  void stop();

  const std::vector<MonitoredDevice>& devices() const { return devices_; }
  std::chrono::nanoseconds period() const { return options_.period; }
  std::vector<PowerSample> timeline() const;
  size_t sample_count() const;
  // Samples lost because the ring was full.
  size_t dropped_count() const;
  // Trapezoid integral of device `device`'s power over [t0, t1] in J, interpolating at the ends;
  // std::nullopt when the timeline has fewer than two readings overlapping the window.
  std::optional<double> energy_j(size_t device, SteadyTime t0, SteadyTime t1) const;
  // The first error of the sampling thread, or null.
  std::exception_ptr error() const;

 private:
  void run();
  PowerSample take_sample(SteadyTime scheduled);
  void write_csv(const PowerSample& sample);

  device::GpuSet* gpus_;
  PowerMonitorOptions options_;
  std::vector<MonitoredDevice> devices_;
  std::vector<UniqueFd> csv_fds_;
  // Previous CPU energy readings, for power from deltas (sampling thread only).
  std::vector<std::optional<std::pair<SteadyTime, int64_t>>> last_cpu_energy_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<PowerSample> timeline_;
  size_t dropped_ = 0;
  std::exception_ptr error_;
  std::thread thread_;
};

// The trapezoid integral over [t0, t1] of readings (time, mW) sorted by time, in J; readings
// are linearly interpolated at t0 and t1, and the edge readings held where the window reaches
// past them. std::nullopt with fewer than two readings, or a window outside their span.
std::optional<double> integrate_power_j(const std::vector<std::pair<SteadyTime, int64_t>>& readings,
                                        SteadyTime t0, SteadyTime t1);

}  // namespace zeus::monitor
