// TemperatureMonitor: each GPU's temperature on one background thread at a fixed period,
// keeping a sample only when it changed (Zeus 0.16's deduplicated timeline), bounded per GPU.
// zeus_cpp.monitor.temperature.TemperatureMonitor is this over Python.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zeus/device/gpu_set.h"

namespace zeus::monitor {

struct TemperatureSample {
  std::chrono::system_clock::time_point time;
  double temperature_c = 0;
};

struct TemperatureMonitorOptions {
  std::vector<int> gpus;  // indices in the set; empty: every GPU
  std::chrono::nanoseconds period = std::chrono::seconds(1);  // >= 5 ms
  size_t capacity = 0;                                        // samples kept per GPU; 0: unbounded
};

// Contract: sampling starts at construction (the first reading is taken before it returns) and
// stops at stop() or destruction; every reader is thread-safe. A GPU without a temperature
// sensor is left out (unsupported() names it; a warning says so once); a device error on the
// thread stops sampling and error() says what it was.
class TemperatureMonitor {
 public:
  // Throws ConfigError for an unknown GPU or a period under 5 ms.
  TemperatureMonitor(device::GpuSet* gpus, TemperatureMonitorOptions options);
  ~TemperatureMonitor();
  TemperatureMonitor(const TemperatureMonitor&) = delete;
  TemperatureMonitor& operator=(const TemperatureMonitor&) = delete;

  void stop();
  // A GPU's samples, oldest first (only the changes).
  std::vector<TemperatureSample> timeline(int gpu) const;
  std::vector<int> unsupported() const;
  std::optional<std::string> error() const;

 private:
  void sample_once();
  void run();

  device::GpuSet* gpus_;
  TemperatureMonitorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<int, std::deque<TemperatureSample>> samples_;
  std::vector<int> unsupported_;
  std::optional<std::string> error_;
  std::thread thread_;
};

}  // namespace zeus::monitor
