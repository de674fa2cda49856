// DistributedSampler with PyTorch's Python semantics and index sequence: shuffle with a
// generator seeded seed + epoch (randperm), pad by repeating from the start to a multiple of the
// world size (or drop the tail with drop_last), rank r takes r, r + world, r + 2 world, ...
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace zeus::distributed {

struct DistributedSamplerOptions {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

// Contract: call set_epoch(e) before each epoch's indices() (as in PyTorch); forgetting it
// repeats the previous epoch's order, which is detected and warned once.
class DistributedSampler {
 public:
  // Throws ConfigError for a rank outside 0..num_replicas-1 or an empty world.
  DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options);

  void set_epoch(int64_t epoch);
  // This rank's indices for the current epoch.
  std::vector<int64_t> indices();
  // Per rank, and over all ranks (after padding or dropping).
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }
  int64_t dataset_size() const { return dataset_size_; }
  const DistributedSamplerOptions& options() const { return options_; }

 private:
  int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
  std::optional<int64_t> last_epoch_served_;
  bool warned_ = false;
};

}  // namespace zeus::distributed
