// The node exporter's engine: one thread reads every GPU and CPU package on a fixed period and
// keeps the latest readings; a scrape renders them (never touching NVML or RAPL, so Prometheus,
// however often it scrapes, costs the GPUs nothing). Every family is declared from the first
// scrape on, with or without series. Note [node metrics] in docs/metrics.md lists them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zeus/device/cpu_set.h"
#include "zeus/metrics/exposition.h"
#include "zeus/metrics/gpu_telemetry.h"

namespace zeus::metrics {

// Who holds a changed setting on a GPU (zeusd's leases): one info series each.
struct LimitHolder {
  int gpu = 0;
  std::string setting;  // "power_limit", ...
  int64_t pid = 0;
  int64_t uid = 0;
  std::string job;  // the holder's SLURM_JOB_ID or ZEUS_JOB_ID where readable, else ""
};

// Restores of changed settings: failed attempts since start, and those still to retry.
struct RestoreCounts {
  uint64_t failures = 0;
  uint64_t pending = 0;
};

struct NodeSamplerOptions {
  std::chrono::milliseconds period{1000};
  std::string host;  // the `host` label; empty: this machine's hostname
  // Called at each scrape (from the scraping thread); empty: the holder family has no series.
  std::function<std::vector<LimitHolder>()> holders;
  // zeusd's restores (Note [restore rule] in docs/security.md), called at each scrape; empty: the
  // families have no series.
  std::function<RestoreCounts()> restores;
  // More labels of a GPU's series (its value and its holders'), called at each scrape (the
  // kubelet's `pod`, `namespace` and `container` holding it: kube/pod_resources.h); empty: none.
  std::function<Labels(const GpuIdentity& gpu)> gpu_labels;
};

// Contract: `gpus` and `cpus` may be null (none of that kind) and must outlive the sampler.
// The constructor takes the first sample before it returns, so the first scrape has values;
// then the thread samples every period until destruction. A GPU or package whose read throws
// has no series until it reads again, and its error counter grows; the others are unaffected.
class NodeSampler {
 public:
  NodeSampler(GpuTelemetry* gpus, device::CpuSet* cpus, NodeSamplerOptions options);
  ~NodeSampler();
  NodeSampler(const NodeSampler&) = delete;
  NodeSampler& operator=(const NodeSampler&) = delete;

  // The families of the latest sample.
  std::vector<Family> families() const;
  // render(families()), counted as a scrape.
  std::string scrape() const;
  // Takes one sample now (tests; the thread calls it on its schedule).
  void sample_now();
  uint64_t samples() const;

 private:
  struct GpuState {
    std::optional<GpuReading> last;  // empty: the last read failed (or none yet)
    double integrated_energy_j = 0;  // where the GPU has no counter
    // When `last` was read, while it is the previous step of that integral.
    std::optional<std::chrono::steady_clock::time_point> last_time;
    uint64_t errors = 0;
  };
  struct CpuState {
    std::optional<double> energy_j;
    std::optional<double> dram_energy_j;
    uint64_t errors = 0;
  };
  void run();

  GpuTelemetry* gpus_;
  device::CpuSet* cpus_;
  NodeSamplerOptions options_;
  std::vector<std::string> cpu_names_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<GpuState> gpu_state_;
  std::vector<CpuState> cpu_state_;
  uint64_t samples_ = 0;
  mutable uint64_t scrapes_ = 0;
  double last_sample_duration_s_ = 0;
  double last_sample_unix_s_ = 0;
  std::thread thread_;
};

}  // namespace zeus::metrics
