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
// Either set may be null. `kubelet_socket` (not empty): each GPU's series are labelled with the
// pod, namespace and container the kubelet's pod-resources API says hold it (empty when none),
// refreshed every few seconds on a thread of its own. Throws ConfigError when this zeus was
// built without the HTTP server (or without gRPC, given a kubelet socket), or what the server
// throws (address in use), naming the address.
std::unique_ptr<MetricsServe> serve_metrics(const std::string& address, device::GpuSet* gpus,
                                            device::CpuSet* cpus, std::chrono::milliseconds period,
                                            const std::string& kubelet_socket = "");

}  // namespace zeus::cli
