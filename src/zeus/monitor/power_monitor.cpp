#include "zeus/monitor/power_monitor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "zeus/common/directories.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/power.h"
#include "zeus/common/units.h"

namespace zeus::monitor {

PowerMonitor::PowerMonitor(device::GpuSet* gpus, PowerMonitorOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (options_.period < kMinPeriod) {
    throw ConfigError(
        fmt::format("sampling period {} is below the minimum {}: NVML power readings "
                    "do not update faster; use a longer interval",
                    format_duration(options_.period), format_duration(kMinPeriod)));
  }
  if (options_.capacity < 2) {
    throw ConfigError(fmt::format("timeline capacity {} must be at least 2", options_.capacity));
  }
  if (gpus_ != nullptr) {
    if (options_.gpus.empty()) {
      for (int i = 0; i < gpus_->count(); ++i) {
        options_.gpus.push_back(i);
      }
    }
    for (const int gpu : options_.gpus) {
      gpus_->name(gpu);  // throws ConfigError for an index the set does not have
      devices_.push_back({MonitoredDevice::Kind::kGpu, gpu, fmt::format("gpu{}", gpu)});
    }
  } else if (!options_.gpus.empty()) {
    throw ConfigError("GPU indices given to a power monitor without GPUs");
  }
  if (options_.cpus != nullptr) {
    for (int cpu = 0; cpu < options_.cpus->count(); ++cpu) {
      devices_.push_back({MonitoredDevice::Kind::kCpu, cpu, fmt::format("cpu{}", cpu)});
    }
  }
  if (devices_.empty()) {
    throw ConfigError("nothing to monitor: no GPU and no CPU selected");
  }
  last_cpu_energy_.resize(devices_.size());
  if (!options_.csv_paths.empty()) {
    if (options_.csv_paths.size() != devices_.size()) {
      throw ConfigError(fmt::format("{} CSV paths given for {} monitored devices",
                                    options_.csv_paths.size(), devices_.size()));
    }
    try {
      for (const auto& path : options_.csv_paths) {
        make_directory(directory_of(path),
                       fmt::format("directory of power log '{}'", path.filename().string()));
        UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (fd.get() < 0) {
          throw_posix_error("opening power log", path.string(), errno);
        }
        csv_fds_.push_back(std::move(fd));
        write_all(csv_fds_.back().get(), kPowerLogHeader, "writing", path.string());
      }
    } catch (...) {
      // Only the files this constructor created (and truncated); a failure at the first open
      // leaves the rest untouched.
      for (size_t i = 0; i < csv_fds_.size(); ++i) {
        ::unlink(options_.csv_paths[i].c_str());
      }
      csv_fds_.clear();
      throw;
    }
  }
}

PowerMonitor::~PowerMonitor() {
  stop();
}

void PowerMonitor::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void PowerMonitor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

PowerSample PowerMonitor::take_sample(SteadyTime scheduled) {
  PowerSample sample;
  sample.power_mw.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    const MonitoredDevice& dev = devices_[i];
    if (dev.kind == MonitoredDevice::Kind::kGpu) {
      sample.power_mw.emplace_back(gpus_->power_mw(dev.index));
      continue;
    }
    const int64_t energy_uj = options_.cpus->energy_uj(dev.index);
    const SteadyTime now = std::chrono::steady_clock::now();
    std::optional<int64_t> power;
    if (const auto& last = last_cpu_energy_[i]; last && now > last->first) {
      const double dt_s = to_seconds(now - last->first);
      power = static_cast<int64_t>(uj_to_mj(energy_uj - last->second) / dt_s);  // mJ/s = mW
    }
    last_cpu_energy_[i] = std::pair{now, energy_uj};
    sample.power_mw.push_back(power);
  }
  // Stamp after reading so the time is that of the readings, not of the schedule.
  sample.time = std::chrono::steady_clock::now();
  sample.wall_time = std::chrono::system_clock::now();
  sample.lateness = sample.time - scheduled;
  return sample;
}

void PowerMonitor::write_csv(const PowerSample& sample) {
  if (csv_fds_.empty()) {
    return;
  }
  for (size_t i = 0; i < csv_fds_.size(); ++i) {
    if (!sample.power_mw[i]) {
      continue;
    }
    write_all(csv_fds_[i].get(), power_log_row(sample.wall_time, *sample.power_mw[i]),
              "appending to power log", options_.csv_paths[i].string());
  }
}

void PowerMonitor::run() {
  SteadyTime next = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (cv_.wait_until(lock, next, [this] { return stopping_; })) {
      break;
    }
    lock.unlock();
    try {
      PowerSample sample = take_sample(next);
      write_csv(sample);
      if (options_.on_sample) {
        options_.on_sample(sample);
      }
      lock.lock();
      timeline_.push_back(std::move(sample));
      if (timeline_.size() > options_.capacity) {
        timeline_.pop_front();
        ++dropped_;
      }
    } catch (const std::exception& e) {
      logger().error("power monitor stopped sampling: {}", e.what());
      lock.lock();
      error_ = std::current_exception();
      break;
    }
    next += options_.period;
    // After a stall longer than a period, skip the missed ticks instead of firing them at once.
    const SteadyTime now = std::chrono::steady_clock::now();
    if (next < now) {
      next += ((now - next) / options_.period + 1) * options_.period;
    }
  }
}

std::vector<PowerSample> PowerMonitor::timeline() const {
  std::lock_guard lock(mu_);
  return {timeline_.begin(), timeline_.end()};
}

size_t PowerMonitor::sample_count() const {
  std::lock_guard lock(mu_);
  return timeline_.size();
}

size_t PowerMonitor::dropped_count() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::exception_ptr PowerMonitor::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

std::optional<double> PowerMonitor::energy_j(size_t device, SteadyTime t0, SteadyTime t1) const {
  ZEUS_ASSERT(device < devices_.size(), "device {} of {}", device, devices_.size());
  std::vector<std::pair<SteadyTime, int64_t>> readings;
  {
    std::lock_guard lock(mu_);
    readings.reserve(timeline_.size());
    for (const auto& sample : timeline_) {
      if (sample.power_mw[device]) {
        readings.emplace_back(sample.time, *sample.power_mw[device]);
      }
    }
  }
  return integrate_power_j(readings, t0, t1);
}

std::optional<double> integrate_power_j(const std::vector<std::pair<SteadyTime, int64_t>>& readings,
                                        SteadyTime t0, SteadyTime t1) {
  if (t1 <= t0 || readings.size() < 2) {
    return t1 == t0 && !readings.empty() ? std::optional<double>(0.0) : std::nullopt;
  }
  // Power at time t, linear between readings, clamped to the nearest reading outside them.
  const auto power_at = [&](SteadyTime t) {
    const auto hi = std::lower_bound(readings.begin(), readings.end(), t,
                                     [](const auto& r, SteadyTime x) { return r.first < x; });
    if (hi == readings.begin()) {
      return static_cast<double>(hi->second);
    }
    if (hi == readings.end()) {
      return static_cast<double>(readings.back().second);
    }
    const auto lo = hi - 1;
    const double f = to_seconds(t - lo->first) / to_seconds(hi->first - lo->first);
    return static_cast<double>(lo->second) + f * static_cast<double>(hi->second - lo->second);
  };
  // The window must overlap the readings' span.
  if (t1 < readings.front().first || t0 > readings.back().first) {
    return std::nullopt;
  }
  const SteadyTime a = std::max(t0, readings.front().first);
  const SteadyTime b = std::min(t1, readings.back().first);
  double energy_mj = 0;  // mW * s
  SteadyTime prev_t = a;
  double prev_p = power_at(a);
  for (const auto& [t, p] : readings) {
    if (t <= a) {
      continue;
    }
    if (t >= b) {
      break;
    }
    energy_mj += 0.5 * (prev_p + static_cast<double>(p)) * to_seconds(t - prev_t);
    prev_t = t;
    prev_p = static_cast<double>(p);
  }
  const double end_p = power_at(b);
  energy_mj += 0.5 * (prev_p + end_p) * to_seconds(b - prev_t);
  // Parts of the window outside the readings' span: hold the edge readings.
  energy_mj += static_cast<double>(readings.front().second) * to_seconds(a - t0);
  energy_mj += static_cast<double>(readings.back().second) * to_seconds(t1 - b);
  return mj_to_j(energy_mj);
}

}  // namespace zeus::monitor
