#include "zeus/distributed/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::distributed {

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  if (options_.num_replicas < 1 || options_.rank < 0 || options_.rank >= options_.num_replicas) {
    throw ConfigError(fmt::format("DistributedSampler: rank {} is outside 0-{}", options_.rank,
                                  options_.num_replicas - 1));
  }
  if (dataset_size_ < 0) {
    throw ConfigError(fmt::format("DistributedSampler: dataset size {} is negative", dataset_size));
  }
  const int64_t world = options_.num_replicas;
  // As torch.utils.data.DistributedSampler: with drop_last, drop the tail so every rank gets
  // the same count; else round up and pad.
  num_samples_ = options_.drop_last && dataset_size_ % world != 0
                     ? (dataset_size_ - world + world - 1) / world
                     : (dataset_size_ + world - 1) / world;
  if (num_samples_ < 0) {
    num_samples_ = 0;
  }
}

void DistributedSampler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices() {
  if (options_.shuffle && last_epoch_served_ == epoch_ && !warned_) {
    warned_ = true;
    logger().warn(
        "DistributedSampler: epoch {} served twice; call set_epoch(epoch) before each epoch, or "
        "every epoch repeats the same order",
        epoch_);
  }
  last_epoch_served_ = epoch_;
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  if (options_.shuffle) {
    auto gen =
        at::make_generator<at::CPUGeneratorImpl>(options_.seed + static_cast<uint64_t>(epoch_));
    const at::Tensor perm = at::randperm(dataset_size_, gen, at::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    order.assign(p, p + dataset_size_);
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) {
      order[static_cast<size_t>(i)] = i;
    }
  }
  const auto total = static_cast<size_t>(total_size());
  if (!options_.drop_last && !order.empty()) {
    // Pad by repeating from the start (as many times as needed).
    const size_t n = order.size();
    for (size_t i = 0; order.size() < total; ++i) {
      order.push_back(order[i % n]);
    }
  }
  order.resize(std::min(order.size(), total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(options_.rank); i < order.size();
       i += static_cast<size_t>(options_.num_replicas)) {
    mine.push_back(order[i]);
  }
  return mine;
}

}  // namespace zeus::distributed
