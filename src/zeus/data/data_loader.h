// zeus::DataLoader: the C++ counterpart of Zeus's ZeusDataLoader, for single-process and
// data-parallel training. The train loader (max_epochs set) drives the epochs, profiles the GPU
// power limits just in time, applies the cheapest, and stops at the target metric, at
// max_epochs, or when the next epoch would exceed the cost threshold; the eval loader (no
// max_epochs) is measured alongside it. Design: docs/dataloader.md.
//
//   zeus::data::DataLoader train(train_set, {.batch_size = 64, .max_epochs = 10,
//                                            .distributed = zeus::data::Distributed::kDataParallel,
//                                            .job = {.target_metric = 0.88}});
//   zeus::data::DataLoader eval(test_set, {.batch_size = 256, .distributed = ...});
//   for (int epoch : train.epochs()) {
//     for (auto& batch : train) { ... }
//     for (auto& batch : eval) { ... }
//     train.report_metric(zeus::distributed::all_reduce_mean(accuracy));
//   }
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>

#include "zeus/job/energy_job.h"
#include "zeus/job/job_options.h"

namespace zeus::distributed {
class DistributedSampler;
}

namespace zeus::data {

struct Batch {
  at::Tensor data;
  at::Tensor target;
};

// A dataset that makes whole batches from sample indices. Contract: get_batch() may be called
// from several loader threads at once (num_workers > 0); size() is fixed.
class BatchDataset {
 public:
  virtual ~BatchDataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch get_batch(std::span<const int64_t> indices) = 0;
};

// In-memory tensors: sample i is row i of `data` and of `target`.
class TensorDataset final : public BatchDataset {
 public:
  // Throws ConfigError when the row counts differ.
  TensorDataset(at::Tensor data, at::Tensor target);
  int64_t size() const override;
  Batch get_batch(std::span<const int64_t> indices) override;

 private:
  at::Tensor data_;
  at::Tensor target_;
};

enum class Distributed {
  kNone,          // one process
  kDataParallel,  // zeus::distributed::init() was called; each rank loads its sampler shard
};

struct DataLoaderOptions {
  // Per rank; the global batch size (x world) names the files. With a batch-size service
  // (job.batch_size_service, ZEUS_BSO_SERVER_URL) the train loader runs at the size the service
  // hands out, and this one x world is the job's default there unless the options name one.
  int64_t batch_size = 0;
  std::optional<int> max_epochs;  // set: the train loader; unset: the eval loader
  Distributed distributed = Distributed::kNone;
  std::optional<bool> shuffle;  // default: the train loader shuffles, the eval loader does not
  uint64_t seed = 0;
  bool drop_last = false;
  int num_workers = 0;       // threads making batches ahead of the loop; 0: on the caller's thread
  int prefetch_batches = 2;  // per worker
  // Optional: a sampler of your own; it must match the dist context (world size, rank) and
  // the dataset's size. Default: one made from the options above.
  std::shared_ptr<distributed::DistributedSampler> sampler;
  // Where the batches go. A CUDA device: batches are pinned (on the loader threads when there
  // are any) and copied without blocking on a side stream, the next batch's copy overlapping
  // the current step; the energy job waits for the device before each measurement timestamp.
  // Unset: the CPU (batches as the dataset made them). Usually ctx.device().
  std::optional<c10::Device> device;
  job::JobOptions job;  // the train loader's energy options (eta, target, log dir, device...)
};

// Contract: one train loader and any eval loaders per process, made in either order (Note [loader
// pairing], job/loader_pairing.h), used from one thread; a
// loop over a loader may be left early (the next loop or epochs() closes it). In data-parallel
// mode every rank makes the same calls (they synchronize at epoch and profiling boundaries).
// Errors in the options, the devices or a saved profile are thrown from the constructor or the
// first epochs() step, on every rank, before any training step.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<BatchDataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(DataLoader* loader) : loader_(loader) {}
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const;

   private:
    DataLoader* loader_ = nullptr;
  };

  class EpochIterator {
   public:
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    EpochIterator() = default;
    explicit EpochIterator(DataLoader* loader);
    int operator*() const { return *epoch_; }
    EpochIterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !epoch_; }

   private:
    DataLoader* loader_ = nullptr;
    std::optional<int> epoch_;
  };

  struct EpochRange {
    DataLoader* loader;
    EpochIterator begin() const { return EpochIterator(loader); }
    std::default_sentinel_t end() const { return {}; }
  };

  // Train loader only: yields 0, 1, ... until the target is reached or max_epochs ran (then the
  // result file is written and the limits restored); throws optimize::CostThresholdExceeded on
  // every rank when the next epoch would reach the cost threshold.
  EpochRange epochs();
  Iterator begin();
  std::default_sentinel_t end() { return {}; }

  // Train loader only: the epoch's validation metric, already averaged across ranks.
  void report_metric(double metric);

  bool is_train() const;
  int64_t batches_per_epoch() const;
  int64_t batch_size() const;  // per rank: the options', or the batch-size service's
  int64_t global_batch_size() const;
  // Train loader only.
  job::EnergyJob& job();
  // Train loader only: set once epochs() ended.
  const std::optional<contract::TrainResult>& result() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::data

namespace zeus {
using data::DataLoader;
}
