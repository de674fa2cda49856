#include "zeus/monitor/temperature_monitor.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::monitor {

TemperatureMonitor::TemperatureMonitor(device::GpuSet* gpus, TemperatureMonitorOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (options_.period < std::chrono::milliseconds(5)) {
    throw ConfigError("the temperature monitor's period must be at least 5 ms");
  }
  if (options_.gpus.empty()) {
    for (int g = 0; g < gpus_->count(); ++g) {
      options_.gpus.push_back(g);
    }
  }
  for (const int g : options_.gpus) {
    if (g < 0 || g >= gpus_->count()) {
      throw ConfigError(fmt::format("GPU {}: the set has GPUs 0..{}", g, gpus_->count() - 1));
    }
    samples_[g];
  }
  sample_once();
  thread_ = std::thread([this] { run(); });
}

TemperatureMonitor::~TemperatureMonitor() {
  stop();
}

void TemperatureMonitor::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void TemperatureMonitor::sample_once() {
  const auto now = std::chrono::system_clock::now();
  for (const int g : options_.gpus) {
    {
      std::lock_guard lock(mu_);
      if (std::find(unsupported_.begin(), unsupported_.end(), g) != unsupported_.end()) {
        continue;
      }
    }
    const device::GpuReading r = gpus_->read(g);  // throws DeviceError: the caller stops
    std::lock_guard lock(mu_);
    if (!r.temperature_c) {
      unsupported_.push_back(g);
      logger().warn("GPU {} ({}): no temperature sensor to read; it is left out", g,
                    gpus_->name(g));
      continue;
    }
    auto& q = samples_[g];
    if (!q.empty() && q.back().temperature_c == *r.temperature_c) {
      continue;  // unchanged: only changes are kept
    }
    q.push_back({now, *r.temperature_c});
    if (options_.capacity > 0 && q.size() > options_.capacity) {
      q.pop_front();
    }
  }
}

void TemperatureMonitor::run() {
  auto next = std::chrono::steady_clock::now();
  while (true) {
    next += options_.period;
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, next, [this] { return stop_; })) {
        return;
      }
    }
    try {
      sample_once();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      error_ = e.what();
      logger().warn("the temperature monitor stopped: {}", e.what());
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now > next + options_.period) {
      next = now;  // a missed tick is skipped, not bunched
    }
  }
}

std::vector<TemperatureSample> TemperatureMonitor::timeline(int gpu) const {
  std::lock_guard lock(mu_);
  const auto it = samples_.find(gpu);
  if (it == samples_.end()) {
    throw ConfigError(fmt::format("GPU {} is not monitored", gpu));
  }
  return {it->second.begin(), it->second.end()};
}

std::vector<int> TemperatureMonitor::unsupported() const {
  std::lock_guard lock(mu_);
  return unsupported_;
}

std::optional<std::string> TemperatureMonitor::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

}  // namespace zeus::monitor
