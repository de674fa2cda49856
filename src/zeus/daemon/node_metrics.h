// zeusd's metrics endpoint (--metrics-bind-address): the node sampler over the GPUs and the
// daemon's RAPL packages, with the daemon's leases as the holder info series, served over TCP
// beside the API.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "zeus/daemon/lease_keeper.h"
#include "zeus/daemon/pods.h"
#include "zeus/device/cpu_set.h"
#include "zeus/exporter/metrics_server.h"
#include "zeus/metrics/gpu_telemetry.h"
#include "zeus/metrics/node_sampler.h"

namespace zeus::daemon {

struct MetricsOptions {
  std::string bind_address;  // empty: no metrics endpoint
  std::filesystem::path token_file;
  std::chrono::milliseconds period{1000};
  // The pod holding each GPU: `pod`, `namespace` and `container` on its series and its holders'
  // (empty values for a GPU no pod holds). Empty: no such labels.
  PodOfGpu pod_of;
};

class NodeMetrics {
 public:
  // `gpus` and `cpus` may be null, and must outlive this object: the daemon's own sets, read
  // here for telemetry beyond what the API reads. Without GPUs it serves the CPU families, and
  // the GPU ones without series.
  NodeMetrics(const MetricsOptions& options, device::GpuSet* gpus, device::CpuSet* cpus,
              const LeaseKeeper& leases);
  ~NodeMetrics();
  NodeMetrics(const NodeMetrics&) = delete;
  NodeMetrics& operator=(const NodeMetrics&) = delete;

  const std::string& address() const { return server_->address(); }

 private:
  std::unique_ptr<metrics::GpuTelemetry> gpus_;
  std::unique_ptr<metrics::NodeSampler> sampler_;
  std::unique_ptr<exporter::MetricsServer> server_;  // last: stops first
};

// The job a process belongs to, from its environment (SLURM_JOB_ID, else ZEUS_JOB_ID), or ""
// when it has neither or its /proc/<pid>/environ cannot be read.
std::string job_of_process(pid_t pid);

}  // namespace zeus::daemon
