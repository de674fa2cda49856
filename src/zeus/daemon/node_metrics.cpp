#include "zeus/daemon/node_metrics.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/daemon/leases.h"
#include "zeus/metrics/gpu_set_telemetry.h"

namespace zeus::daemon {

std::string job_of_process(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string slurm;
  std::string zeus;
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\0', start);
    end = end == std::string::npos ? env.size() : end;
    const std::string_view entry(env.data() + start, end - start);
    if (entry.starts_with("SLURM_JOB_ID=")) {
      slurm = entry.substr(13);
    } else if (entry.starts_with("ZEUS_JOB_ID=")) {
      zeus = entry.substr(12);
    }
    start = end + 1;
  }
  return slurm.empty() ? zeus : slurm;
}

NodeMetrics::NodeMetrics(const MetricsOptions& options, device::GpuSet* gpus, device::CpuSet* cpus,
                         const LeaseKeeper& leases) {
  if (gpus != nullptr) {
    gpus_ = std::make_unique<metrics::GpuSetTelemetry>(*gpus);
  }
  metrics::NodeSamplerOptions sampler;
  sampler.period = options.period;
  sampler.holders = [&leases] {
    std::vector<metrics::LimitHolder> out;
    for (const Lease& lease : leases.leases()) {
      if (lease.restore_pending) {
        continue;  // its holder ended: zeus_restores_pending counts it
      }
      for (const Holder& h : lease.holders) {
        out.push_back(metrics::LimitHolder{lease.gpu, std::string(setting_name(lease.setting)),
                                           h.pid, h.uid, job_of_process(h.pid)});
      }
    }
    return out;
  };
  if (options.pod_of) {
    sampler.gpu_labels = [pod_of = options.pod_of](const metrics::GpuIdentity& gpu) {
      return kube::owner_labels(pod_of(gpu.index));
    };
  }
  sampler.restores = [&leases] {
    return metrics::RestoreCounts{leases.restore_failures(), leases.pending_restores()};
  };
  sampler_ = std::make_unique<metrics::NodeSampler>(gpus_.get(), cpus, std::move(sampler));
  exporter::MetricsServerOptions server;
  server.bind_address = options.bind_address;
  server.token_file = options.token_file;
  server_ = std::make_unique<exporter::MetricsServer>(*sampler_, server);
}

NodeMetrics::~NodeMetrics() = default;

}  // namespace zeus::daemon
