#include "zeus/job/node_gpus.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "zeus/common/directories.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/discovery.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/device/visible_devices.h"
#include "zeus/job/run_dirs.h"

namespace zeus::job {
namespace {

std::string describe_visible() {
  const auto v = get_env_set(kEnvCudaVisibleDevices);
  return v ? "'" + *v + "'" : std::string("unset");
}

// "auto" or a backend of the machine's real GPUs (the registry's), which the job matches to its
// ranks' CUDA devices by UUID.
bool is_machine(const std::string& device) {
  const device::GpuBackend* b = device::find_gpu_backend(device);
  return device == "auto" || (b != nullptr && b->machine);
}

}  // namespace

// Note [which GPUs a node owns]:
//   1. Every rank finds the machine index (NVML's) of the GPU it trains on: by the CUDA
//      runtime's UUID when it trains on CUDA, else (a CPU rank) the GPU CUDA would number `local
//      rank` under its CUDA_VISIBLE_DEVICES; -1 when it has none. Every rank opens the machine's
//      GPUs for this (its CUDA_VISIBLE_DEVICES may differ from the local master's: `zeus run
//      --devices`).
//   2. One all-reduce of (node rank + 1, machine index + 1) slots per global rank: every rank
//      then knows which GPUs each node's ranks use.
//   3. Each local master opens exactly its node's distinct GPUs, in machine order, and owns them.
//   Errors in 1 and 3 are agreed on, so every rank throws before training.
NodeGpus::NodeGpus(const ResolvedJobOptions& options, Collectives& collectives,
                   const RankDevice& device)
    : o_(options), ranks_(collectives.ranks()) {
  if (o_.device.rfind("sim:", 0) == 0) {
    agree(collectives, "opening the simulated GPUs", [&] { open_simulated(); });
    map_simulated_ranks(collectives);
    return;
  }
  if (!is_machine(o_.device)) {
    agree(collectives, "opening the GPUs", [&] {
      (void)device::open_gpu_set(o_.device, {});  // its ConfigError names what is accepted
      throw ConfigError(
          fmt::format("device '{}': zeus::DataLoader controls real GPUs or sim:<gpu>", o_.device));
    });
  }
  int mine = -1;
  agree(collectives, "finding this rank's GPU", [&] { mine = resolve_rank_gpu(device); });
  const auto w = static_cast<size_t>(ranks_.world_size);
  std::vector<double> slots(2 * w, 0.0);
  slots[2 * static_cast<size_t>(ranks_.rank)] = ranks_.node_rank + 1;
  slots[2 * static_cast<size_t>(ranks_.rank) + 1] = mine + 1;
  collectives.all_reduce_sum(slots);
  std::vector<int> gpu_of_rank;  // this node's ranks' GPUs, by local position
  std::vector<int> node_ranks;
  for (size_t r = 0; r < w; ++r) {
    if (static_cast<int>(slots[2 * r]) - 1 == ranks_.node_rank) {
      node_ranks.push_back(static_cast<int>(r));
      gpu_of_rank.push_back(static_cast<int>(slots[2 * r + 1]) - 1);
    }
  }
  agree(collectives, "opening the node's GPUs", [&] {
    if (ranks_.is_local_master()) {
      take_node_gpus(gpu_of_rank, node_ranks);
    }
  });
}

NodeGpus::~NodeGpus() = default;

void NodeGpus::open_simulated() {
  device::sim::SimGpuSetOptions so = device::sim::parse_sim_spec(o_.device);
  so.clock = o_.sim_clock;
  // A mix names each local rank's GPU (its length is checked against the ranks by the set); one
  // model is simulated once per local rank.
  if (so.mix.size() <= 1) {
    so.gpu_count = std::max(so.gpu_count, ranks_.local_world_size);
  } else if (so.gpu_count < ranks_.local_world_size) {
    throw ConfigError(fmt::format(
        "device '{}' lists {} GPU(s), but node {} has {} local ranks; list one per local rank",
        o_.device, so.gpu_count, ranks_.node_rank, ranks_.local_world_size));
  }
  so.gpu_count_from_state = false;
  std::string_view state_dir_role = "directory of the simulated GPUs' state (sim:<gpu>@PATH)";
  if (so.state_path.empty()) {
    // One state per node and spec, so that ranks share their GPUs' limits and energy.
    so.state_path = o_.log_dir / contract::sim_state_name(ranks_.node_rank, so.gpu_count,
                                                          so.gpu_model, o_.device);
    state_dir_role = kLogDirRole;
  }
  make_directory(directory_of(so.state_path), state_dir_role);
  auto sim = std::make_unique<device::sim::SimGpuSet>(std::move(so));
  sim_ = sim.get();
  gpus_ = std::move(sim);
  if (!ranks_.is_local_master()) {
    return;  // the rank keeps its simulated GPU for its clock; the local master measures
  }
  std::vector<int> all;
  for (int g = 0; g < ranks_.local_world_size; ++g) {
    all.push_back(g);
  }
  owned_ = all;
  take_node_gpus({}, {});
}

// Local rank i trains on simulated GPU i: the local master learns each one's global rank.
void NodeGpus::map_simulated_ranks(Collectives& collectives) {
  const auto w = static_cast<size_t>(ranks_.world_size);
  std::vector<double> slots(2 * w, 0.0);
  slots[2 * static_cast<size_t>(ranks_.rank)] = ranks_.node_rank + 1;
  slots[2 * static_cast<size_t>(ranks_.rank) + 1] = ranks_.local_rank;
  collectives.all_reduce_sum(slots);
  if (!owns_gpus()) {
    return;
  }
  owned_ranks_.assign(owned_.size(), -1);
  for (size_t r = 0; r < w; ++r) {
    const auto local = static_cast<size_t>(slots[2 * r + 1]);
    if (static_cast<int>(slots[2 * r]) - 1 == ranks_.node_rank && local < owned_ranks_.size()) {
      owned_ranks_[local] = static_cast<int>(r);
    }
  }
}

int NodeGpus::resolve_rank_gpu(const RankDevice& device) {
  const auto machine =
      device::open_gpu_set(o_.device, {.respect_visible_devices = false, .zeusd_from_env = false});
  device::CudaDeviceRef ref;
  ref.runtime_uuid = device.cuda_uuid;
  // The runtime's view (CUDA's variable, or ROCm's HIP order and ROCR_/HIP_VISIBLE_DEVICES
  // composed), as positions in the machine-wide set: machine indices.
  ref.visible_devices = machine->runtime_visible_devices();
  ref.device_order = get_env_set(kEnvCudaDeviceOrder);
  // A CPU rank measures the GPU that zeus::distributed::init() would bind for it: cuda:<local
  // rank>, or the one device a launcher gave it (`zeus run --devices`).
  const bool one_of_its_own = ref.visible_devices &&
                              ref.visible_devices->find(',') == std::string::npos &&
                              !ref.visible_devices->empty();
  ref.index = device.cuda_index.value_or(one_of_its_own ? 0 : ranks_.local_rank);
  const auto match = device::match_cuda_device(ref, *machine);
  if (!match) {
    logger().warn(
        "rank {} (local rank {}) has no GPU of its own ({} GPU(s) on the machine, "
        "CUDA_VISIBLE_DEVICES {}); it is not measured",
        ranks_.rank, ranks_.local_rank, machine->count(), describe_visible());
    return -1;
  }
  if (match->note) {
    logger().warn("rank {}: {}", ranks_.rank, *match->note);
  }
  logger().debug("rank {} trains on the machine's GPU {} ({}, {}), found {}", ranks_.rank,
                 match->machine_index, machine->uuid(match->machine_index),
                 machine->name(match->machine_index), match->how);
  return match->machine_index;
}

// Local master: opens (real GPUs) or keeps (sim) the node's GPUs, checks them, and sets up the
// guard and the energy monitor.
void NodeGpus::take_node_gpus(const std::vector<int>& gpu_of_rank, const std::vector<int>& ranks) {
  if (!sim_) {
    std::set<int> distinct;
    std::vector<int> unmeasured;
    for (size_t i = 0; i < gpu_of_rank.size(); ++i) {
      if (gpu_of_rank[i] >= 0) {
        distinct.insert(gpu_of_rank[i]);
      } else {
        unmeasured.push_back(ranks[i]);
      }
    }
    if (distinct.empty()) {
      throw ConfigError(fmt::format(
          "node {}: none of its ranks ({}) uses a GPU of this machine (CUDA_VISIBLE_DEVICES {}); "
          "train on GPUs, or pass --device sim:<gpu> (ZEUS_DEVICE) to simulate",
          ranks_.node_rank, fmt::join(ranks, ","), describe_visible()));
    }
    if (!unmeasured.empty()) {
      logger().warn(
          "node {}: rank(s) {} use no GPU of this machine; only the others' GPUs are measured",
          ranks_.node_rank, fmt::join(unmeasured, ","));
    }
    const std::vector<int> indices(distinct.begin(), distinct.end());
    auto gpus = device::open_gpu_set(o_.device, {.machine_indices = indices});
    for (int g = 0; g < gpus->count(); ++g) {
      owned_.push_back(g);
      const auto users = std::count(gpu_of_rank.begin(), gpu_of_rank.end(), indices[g]);
      const auto first = std::find(gpu_of_rank.begin(), gpu_of_rank.end(), indices[g]);
      owned_ranks_.push_back(users == 1 ? ranks[static_cast<size_t>(first - gpu_of_rank.begin())]
                                        : -1);
      logger().info("node {} owns GPU {} ({}, {}, machine index {}) for its ranks",
                    ranks_.node_rank, g, gpus->uuid(g), gpus->name(g), gpus->machine_index(g));
    }
    if (const std::string through = gpus->limits_through(); !through.empty()) {
      logger().info(
          "node {}: power limits are set through {} (it restores them when this job's "
          "processes end)",
          ranks_.node_rank, through);
    }
    gpus_ = std::move(gpus);
  }
  range_ = gpus_->power_limit_constraints_mw(owned_.front());
  for (int g : owned_) {
    const auto r = gpus_->power_limit_constraints_mw(g);
    if (r.min_mw != range_.min_mw || r.max_mw != range_.max_mw) {
      throw ConfigError(fmt::format(
          "GPU {} ({}) has power-limit range {}-{} W but GPU {} has {}-{} W; zeus::DataLoader "
          "needs identical GPUs on a node",
          g, gpus_->name(g), mw_to_w(r.min_mw), mw_to_w(r.max_mw), owned_.front(),
          mw_to_w(range_.min_mw), mw_to_w(range_.max_mw)));
    }
  }
}

int64_t NodeGpus::current_limit_mw() {
  int64_t limit = 0;
  if (owns_gpus()) {
    for (int g : owned_) {
      limit = std::max(limit, gpus_->power_limit_mw(g));
    }
  }
  return limit;
}

std::string NodeGpus::locator() const {
  return gpus_ ? gpus_->locator() : std::string();
}

}  // namespace zeus::job
