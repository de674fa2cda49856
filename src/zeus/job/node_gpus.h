// The GPUs of one node as an energy-optimized job uses them. Exactly the physical GPUs the node's
// ranks train on belong to the job, matched from each rank's CUDA device to the machine's GPUs by
// UUID (or, for a rank without a CUDA runtime, through CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER
// as CUDA reads them); the node's local master owns them. Ownership only: their power limits and
// journal are NodeLimits' (node_limits.h), their energy windows and power logs NodeMeter's
// (node_meter.h). Simulated GPUs (sim:) are one per local rank. No libtorch: what a rank trains
// on reaches this unit as a RankDevice from zeus_torch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/job/collectives.h"
#include "zeus/job/job_options.h"

namespace zeus::device::sim {
class SimGpuSet;
}  // namespace zeus::device::sim

namespace zeus::job {

// What one rank trains on, told by the loader (zeus_torch).
struct RankDevice {
  std::optional<int> cuda_index;         // the CUDA device number it trains on; unset: the CPU
  std::optional<std::string> cuda_uuid;  // that device's UUID from the CUDA runtime
  // Waits until the rank's device finished its queued work; empty on the CPU. The job calls it
  // before every timestamp that opens or closes a measurement, as Zeus does.
  std::function<void()> synchronize;
};

// Contract: made by every rank with the same options (construction is collective and agreed:
// an error on any rank is thrown on every rank). Afterwards only the local master holds devices;
// elsewhere only a simulated GPU is held, for the rank's clock (rank_clock.h). Used from one
// thread.
class NodeGpus {
 public:
  NodeGpus(const ResolvedJobOptions& options, Collectives& collectives, const RankDevice& device);
  ~NodeGpus();
  NodeGpus(const NodeGpus&) = delete;
  NodeGpus& operator=(const NodeGpus&) = delete;

  // Local master: the owned GPUs' common power-limit range (identical GPUs are required).
  PowerLimitRange range() const { return range_; }
  // Local master: the limit the owned GPUs run at now (the highest, if they differ).
  int64_t current_limit_mw();
  bool owns_gpus() const { return gpus_ != nullptr && !owned_.empty(); }
  int owned_count() const { return static_cast<int>(owned_.size()); }
  // What reopens the GPUs (for the result file); empty off the local master.
  std::string locator() const;
  // Local master: the GPUs and the indices of the owned ones; null and empty elsewhere.
  device::GpuSet* gpu_set() { return owns_gpus() ? gpus_.get() : nullptr; }
  const std::vector<int>& owned() const { return owned_; }
  const RankInfo& ranks() const { return ranks_; }
  // Local master: the global rank that trains on each owned GPU (owned()'s order), -1 for a GPU
  // two ranks share.
  const std::vector<int>& owned_ranks() const { return owned_ranks_; }

  // Simulated GPUs (one per local rank; every rank holds them, for its clock): null on real GPUs.
  bool simulated() const { return sim_ != nullptr; }
  device::sim::SimGpuSet* sim_gpus() { return sim_; }

 private:
  void open_simulated();
  void map_simulated_ranks(Collectives& collectives);
  int resolve_rank_gpu(const RankDevice& device);
  void take_node_gpus(const std::vector<int>& machine_indices, const std::vector<int>& ranks);

  ResolvedJobOptions o_;
  RankInfo ranks_;
  std::unique_ptr<device::GpuSet> gpus_;
  device::sim::SimGpuSet* sim_ = nullptr;
  std::vector<int> owned_;  // indices into gpus_
  std::vector<int> owned_ranks_;
  PowerLimitRange range_;
};

}  // namespace zeus::job
