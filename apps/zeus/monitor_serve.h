// `zeus monitor --serve HOST:PORT`: the node exporter of nodes without zeusd, for as long as the
// monitor runs.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"

namespace zeus::cli {

class MetricsServe {
 public:
  virtual ~MetricsServe() = default;
  virtual std::string address() const = 0;
};

// Serves GET /metrics at `address` until the returned object is destroyed. NVML GPUs are read
// through NVML's telemetry, every GPU of the node; other backends (sim, zeusd) through `gpus`.
// Either set may be null. Throws ConfigError when this zeus was built without the HTTP server,
// or what the server throws (address in use), naming the address.
std::unique_ptr<MetricsServe> serve_metrics(const std::string& address, device::GpuSet* gpus,
                                            device::CpuSet* cpus, std::chrono::milliseconds period);

}  // namespace zeus::cli
