// Server-sent power streams (Zeus 0.16's /gpu/stream_power and /cpu/stream_power): one poller per
// device kind reads only the devices someone listens to, at the configured rate, and publishes a
// device's value when it changed (GPU) or on change and first reading (CPU). A new subscriber
// gets each device's latest value at once, then changes; a slow one sees only the newest value
// of each device (bursts coalesce). Events are `data: <compact JSON>\n\n`, one device each.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zeus/daemon/gpu_control.h"
#include "zeus/device/cpu_set.h"
#include "zeus/http/server.h"

namespace zeus::daemon {

struct PowerStreamOptions {
  double gpu_poll_hz = 20;
  double cpu_poll_hz = 10;
};

class PowerStreams {
 public:
  // `cpus` may be null (no RAPL).
  PowerStreams(GpuControl& gpus, device::CpuSet* cpus, PowerStreamOptions options);
  ~PowerStreams();
  PowerStreams(const PowerStreams&) = delete;
  PowerStreams& operator=(const PowerStreams&) = delete;

  // Ids must be valid (the routes check them).
  std::unique_ptr<http::Stream> subscribe_gpus(const std::vector<int>& ids);
  std::unique_ptr<http::Stream> subscribe_cpus(const std::vector<int>& ids);
  // Subscribers now, over both kinds.
  int subscribers() const;

  struct Hub;  // one per device kind

 private:
  std::unique_ptr<Hub> gpu_hub_;
  std::unique_ptr<Hub> cpu_hub_;
};

}  // namespace zeus::daemon
