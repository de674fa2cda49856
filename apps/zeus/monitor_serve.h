// `zeus monitor --serve HOST:PORT`: the node exporter of nodes without zeusd, for as long as the
// monitor runs.
#pragma once

#include <chrono>
#include <filesystem>
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

struct ServeOptions {
  std::string address;  // HOST:PORT
  std::chrono::milliseconds period{1000};
  // Not empty: each GPU's series are labelled with the pod, namespace and container the
  // kubelet's pod-resources API says hold it (empty when none), refreshed every few seconds on a
  // thread of its own.
  std::string kubelet_socket;
  // Not empty: scrapes must send this file's bearer token (exporter/metrics_server.h).
  std::filesystem::path token_file;
};

// Serves GET /metrics until the returned object is destroyed. NVML GPUs are read through
// NVML's telemetry, every GPU of the node; other backends (sim, zeusd) through `gpus`. Either
// set may be null. Throws ConfigError when this zeus was built without the HTTP server (or
// without gRPC, given a kubelet socket), or what the server throws (address in use, a token
// file others may read), naming the address or the file.
std::unique_ptr<MetricsServe> serve_metrics(const ServeOptions& options, device::GpuSet* gpus,
                                            device::CpuSet* cpus);

}  // namespace zeus::cli
