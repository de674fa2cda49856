#include "zeus/data/data_loader.h"

#include <ATen/Functions.h>
#include <fmt/format.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/distributed/backend.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/distributed_sampler.h"
#include "zeus/job/loader_pairing.h"

namespace zeus::data {

TensorDataset::TensorDataset(at::Tensor data, at::Tensor target)
    : data_(std::move(data)), target_(std::move(target)) {
  if (!data_.defined() || !target_.defined() || data_.dim() < 1 || target_.dim() < 1 ||
      data_.size(0) != target_.size(0)) {
    throw ConfigError(fmt::format(
        "TensorDataset: data and target must have the same number of rows (got {} and {})",
        data_.defined() && data_.dim() > 0 ? data_.size(0) : -1,
        target_.defined() && target_.dim() > 0 ? target_.size(0) : -1));
  }
}

int64_t TensorDataset::size() const {
  return data_.size(0);
}

Batch TensorDataset::get_batch(std::span<const int64_t> indices) {
  // from_blob does not copy; index_select does, so the batch owns its memory.
  const auto index = at::from_blob(const_cast<int64_t*>(indices.data()),
                                   {static_cast<int64_t>(indices.size())}, at::kLong);
  return {data_.index_select(0, index), target_.index_select(0, index)};
}

namespace {

class ContextCollectives final : public job::Collectives {
 public:
  explicit ContextCollectives(distributed::Context& ctx) : ctx_(ctx) {}
  job::RankInfo ranks() const override {
    return {ctx_.rank(), ctx_.world_size(), ctx_.local_rank(), ctx_.local_world_size(),
            ctx_.node_rank()};
  }
  void all_reduce_sum(std::span<double> values) override { ctx_.all_reduce_sum(values); }
  void broadcast(std::span<double> values, int root) override { ctx_.broadcast(values, root); }

 private:
  distributed::Context& ctx_;
};

// The CUDA device the batches go to (DataLoaderOptions::device), or std::nullopt for the CPU.
// "cuda" without an index is the dist context's device, else cuda:0.
std::optional<int> batch_cuda_device(const DataLoaderOptions& o, const distributed::Context* ctx,
                                     const char* role) {
  if (!o.device || !o.device->is_cuda()) {
    return std::nullopt;
  }
  int index = o.device->has_index() ? o.device->index() : 0;
  if (!o.device->has_index() && ctx != nullptr && ctx->on_cuda()) {
    index = ctx->device().index();
  }
  const int count = distributed::cuda::built_with_cuda() ? distributed::cuda::device_count() : 0;
  if (index >= count) {
    throw ConfigError(fmt::format(
        "{}: device {} was asked for, but {}; pass ctx.device() or leave the device unset (CPU)",
        role, o.device->str(),
        distributed::cuda::built_with_cuda()
            ? fmt::format("{} CUDA device(s) are visible", count)
            : std::string("this zeus-cpp is built against a libtorch without CUDA")));
  }
  return index;
}

// What the job needs of the rank's device: the CUDA device it trains on (the batches', else the
// dist context's), its UUID, and how to wait for it.
job::RankDevice rank_device(std::optional<int> batches_cuda, const distributed::Context* ctx) {
  std::optional<int> cuda = batches_cuda;
  if (!cuda && ctx != nullptr && ctx->on_cuda()) {
    cuda = ctx->device().index();
  }
  job::RankDevice d;
  if (cuda) {
    d.cuda_index = *cuda;
    d.cuda_uuid = distributed::cuda::device_uuid(*cuda);
    d.synchronize = [index = *cuda] { distributed::cuda::synchronize(index); };
  }
  return d;
}

// Batch `b` of an epoch whose sample order is `order` (the last one may be short), in pinned
// memory when it is to be copied to a CUDA device.
Batch make_batch(BatchDataset& dataset, const std::vector<int64_t>& order, int64_t batch_size,
                 int64_t b, bool pin) {
  const auto begin = static_cast<size_t>(b * batch_size);
  const size_t n = std::min(static_cast<size_t>(batch_size), order.size() - begin);
  Batch batch = dataset.get_batch(std::span(order).subspan(begin, n));
  if (pin) {
    batch.data = distributed::cuda::CopyStream::pin(batch.data);
    batch.target = distributed::cuda::CopyStream::pin(batch.target);
  }
  return batch;
}

// Makes an epoch's batches ahead of the loop on `workers` threads, handing them out in order;
// at most `depth` batches wait at a time. A worker's exception is rethrown by next().
class Prefetcher {
 public:
  Prefetcher(BatchDataset& dataset, const std::vector<int64_t>& order, int64_t batch_size,
             int64_t batches, int workers, int depth, bool pin)
      : dataset_(dataset),
        order_(order),
        batch_size_(batch_size),
        batches_(batches),
        depth_(std::max(1, depth)),
        pin_(pin) {
    for (int i = 0; i < workers; ++i) {
      threads_.emplace_back([this] { work(); });
    }
  }

  ~Prefetcher() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      t.join();
    }
  }

  Batch next() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return ready_.contains(consumed_); });
    auto node = ready_.extract(consumed_);
    ++consumed_;
    lock.unlock();
    cv_.notify_all();
    if (node.mapped().error) {
      std::rethrow_exception(node.mapped().error);
    }
    return std::move(node.mapped().batch);
  }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  void work() {
    for (;;) {
      int64_t b = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (made_ < batches_ && made_ < consumed_ + depth_); });
        if (stop_) {
          return;
        }
        b = made_++;
      }
      Slot slot;
      try {
        slot.batch = make_batch(dataset_, order_, batch_size_, b, pin_);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard lock(mu_);
        ready_.emplace(b, std::move(slot));
      }
      cv_.notify_all();
    }
  }

  BatchDataset& dataset_;
  const std::vector<int64_t>& order_;
  int64_t batch_size_;
  int64_t batches_;
  int64_t depth_;
  bool pin_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t made_ = 0;
  int64_t consumed_ = 0;
  std::map<int64_t, Slot> ready_;
  std::vector<std::thread> threads_;
};

}  // namespace

struct DataLoader::Impl {
  std::shared_ptr<BatchDataset> dataset;
  DataLoaderOptions o;
  bool train = false;
  std::unique_ptr<job::Collectives> collectives;
  std::shared_ptr<distributed::DistributedSampler> sampler;
  int64_t batches = 0;
  int world_size = 1;
  // Shared: an eval loop that runs while the train loader goes holds it (Note [loader pairing]).
  std::shared_ptr<job::EnergyJob> job;
  job::LoaderId pairing_id = 0;
  std::optional<int> epoch;  // the train loader's current epoch
  int64_t eval_passes = 0;

  // The loop in progress.
  bool active = false;
  std::shared_ptr<job::EnergyJob> measuring;  // the job this loop reports to
  std::vector<int64_t> order;
  int64_t next = 0;  // batches fetched
  Batch current;     // what the loop body sees
  Batch in_flight;   // CUDA: the next batch, its copy under way on the side stream
  std::unique_ptr<Prefetcher> prefetcher;
  std::unique_ptr<distributed::cuda::CopyStream>
      copier;  // set when the batches go to a CUDA device

  Batch fetch_host(int64_t b) {
    if (prefetcher) {
      return prefetcher->next();
    }
    return make_batch(*dataset, order, o.batch_size, b, copier != nullptr);
  }

  // Starts the copy of the next batch to the device (CUDA), so it overlaps the step that follows.
  void prefetch_to_device() {
    Batch host = fetch_host(next++);
    std::vector<at::Tensor> device = copier->start({host.data, host.target});
    in_flight = {device[0], device[1]};
  }

  // Makes the next batch `current`: on CUDA, the one whose copy is under way (and starts the
  // following one's); on the CPU, the dataset's next batch.
  void advance() {
    if (!copier) {
      current = fetch_host(next++);
      return;
    }
    if (!in_flight.data.defined()) {
      prefetch_to_device();
    }
    std::vector<at::Tensor> ready{in_flight.data, in_flight.target};
    copier->hand_over(ready);
    current = {ready[0], ready[1]};
    in_flight = {};
    if (next < batches) {
      prefetch_to_device();
    }
  }

  bool more() const { return next < batches || in_flight.data.defined(); }

  void close_loop();
};

namespace {

// The process's loaders (Note [loader pairing]): the eval loaders report to the train loader's
// job.
job::LoaderPairing& pairing() {
  static job::LoaderPairing p("zeus::DataLoader");
  return p;
}

}  // namespace

void DataLoader::Impl::close_loop() {
  if (!active) {
    return;
  }
  active = false;
  prefetcher.reset();
  current = {};
  in_flight = {};
  if (measuring != nullptr) {
    if (train) {
      measuring->end_train_epoch();
    } else {
      measuring->end_eval_epoch();
    }
  }
  measuring.reset();
}

DataLoader::DataLoader(std::shared_ptr<BatchDataset> dataset, DataLoaderOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dataset = std::move(dataset);
  m.o = std::move(options);
  m.train = m.o.max_epochs.has_value();
  const char* role = m.train ? "train loader" : "eval loader";
  if (!m.dataset) {
    throw ConfigError(fmt::format("{}: the dataset is null", role));
  }
  if (m.o.batch_size < 1) {
    throw ConfigError(
        fmt::format("{}: batch_size is {}; it must be at least 1", role, m.o.batch_size));
  }
  if (m.o.num_workers < 0 || m.o.prefetch_batches < 1) {
    throw ConfigError(fmt::format("{}: num_workers {} must be >= 0 and prefetch_batches {} >= 1",
                                  role, m.o.num_workers, m.o.prefetch_batches));
  }
  int rank = 0;
  distributed::Context* ctx = nullptr;
  if (m.o.distributed == Distributed::kDataParallel) {
    try {
      ctx = &distributed::current();
    } catch (const Error&) {
      throw ConfigError(fmt::format(
          "{}: distributed = DataParallel needs zeus::distributed::init() to be called first",
          role));
    }
    m.world_size = ctx->world_size();
    rank = ctx->rank();
    m.collectives = std::make_unique<ContextCollectives>(*ctx);
  } else {
    m.collectives = std::make_unique<job::SingleProcess>();
    const auto world = get_env(kEnvWorldSize);
    if (m.train && world && *world != "1") {
      logger().warn(
          "train loader: WORLD_SIZE={} but distributed = None: every process runs its own job on "
          "the same GPUs and log dir; set DataLoaderOptions::distributed = DataParallel",
          *world);
    }
  }
  const std::optional<int> cuda = batch_cuda_device(m.o, ctx, role);
  if (cuda) {
    m.copier = std::make_unique<distributed::cuda::CopyStream>(*cuda);
  }
  const int64_t n = m.dataset->size();
  if (m.o.sampler) {
    const auto& so = m.o.sampler->options();
    if (so.num_replicas != m.world_size || so.rank != rank) {
      throw ConfigError(fmt::format(
          "{}: the sampler is for rank {} of {}, but this process is rank {} of {}; make it with "
          "num_replicas = world size and rank = rank, or leave DataLoaderOptions::sampler unset",
          role, so.rank, so.num_replicas, rank, m.world_size));
    }
    if (m.o.sampler->dataset_size() != n) {
      throw ConfigError(fmt::format("{}: the sampler is for {} samples but the dataset has {}",
                                    role, m.o.sampler->dataset_size(), n));
    }
    m.sampler = m.o.sampler;
  } else {
    m.sampler = std::make_shared<distributed::DistributedSampler>(
        n, distributed::DistributedSamplerOptions{.num_replicas = m.world_size,
                                                  .rank = rank,
                                                  .shuffle = m.o.shuffle.value_or(m.train),
                                                  .seed = m.o.seed,
                                                  .drop_last = m.o.drop_last});
  }
  const int64_t per_rank = m.sampler->num_samples();
  const auto count_batches = [&] {
    m.batches = m.o.drop_last ? per_rank / m.o.batch_size
                              : (per_rank + m.o.batch_size - 1) / m.o.batch_size;
  };
  count_batches();
  if (m.train) {
    if (m.batches < 1) {
      throw ConfigError(fmt::format(
          "train loader: {} samples per rank make no batch of {} (drop_last); use a smaller "
          "batch size",
          per_rank, m.o.batch_size));
    }
    if (pairing().train()) {
      (void)pairing().add_train();  // throws: the process has a train loader (before the job)
    }
    const job::ResolvedJobOptions resolved =
        job::resolve_job_options(m.o.job, *m.o.max_epochs, m.o.batch_size, m.world_size);
    m.job = std::make_shared<job::EnergyJob>(resolved, *m.collectives, rank_device(cuda, ctx));
    // With a batch-size service the job runs at the size it was handed (the same on every rank).
    if (const int64_t handed = m.job->options().per_rank_batch_size; handed != m.o.batch_size) {
      m.o.batch_size = handed;
      count_batches();
      if (m.batches < 1) {
        throw ConfigError(fmt::format(
            "train loader: {} samples per rank make no batch of {} (drop_last), the size the "
            "batch-size service handed out; drop it from the service's batch sizes",
            per_rank, m.o.batch_size));
      }
    }
    m.pairing_id = pairing().add_train(m.job);
  } else {
    m.pairing_id = pairing().add_eval();
  }
}

DataLoader::~DataLoader() {
  impl_->prefetcher.reset();
  pairing().remove(impl_->pairing_id);
}

DataLoader::EpochRange DataLoader::epochs() {
  if (!impl_->train) {
    throw ConfigError("epochs() is for the train loader (the one with max_epochs)");
  }
  pairing().check_can_start_epochs();
  return {this};
}

DataLoader::EpochIterator::EpochIterator(DataLoader* loader) : loader_(loader) {
  loader_->impl_->close_loop();
  epoch_ = loader_->impl_->job->next_epoch();
  loader_->impl_->epoch = epoch_;
}

DataLoader::EpochIterator& DataLoader::EpochIterator::operator++() {
  loader_->impl_->close_loop();
  epoch_ = loader_->impl_->job->next_epoch();
  loader_->impl_->epoch = epoch_;
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  Impl& m = *impl_;
  m.close_loop();
  if (m.train) {
    if (!m.epoch) {
      throw ConfigError(
          "the train loader is iterated outside epochs(): write `for (int epoch : "
          "train_loader.epochs()) { for (auto& batch : train_loader) ... }`");
    }
    m.sampler->set_epoch(*m.epoch);
    m.measuring = m.job;
    m.measuring->begin_train_epoch(m.batches);
  } else {
    m.sampler->set_epoch(m.eval_passes++);
    m.measuring = pairing().train_job();
  }
  if (!m.train && m.measuring != nullptr) {
    m.measuring->begin_eval_epoch(m.batches);
  }
  m.order = m.sampler->indices();
  m.next = 0;
  m.active = true;
  if (m.batches == 0) {
    m.close_loop();
    return Iterator(this);
  }
  if (m.o.num_workers > 0) {
    m.prefetcher =
        std::make_unique<Prefetcher>(*m.dataset, m.order, m.o.batch_size, m.batches,
                                     m.o.num_workers, m.o.num_workers * m.o.prefetch_batches,
                                     /*pin=*/m.copier != nullptr);
  }
  m.advance();
  if (m.train) {
    m.measuring->train_step_begin();
  }
  return Iterator(this);
}

Batch& DataLoader::Iterator::operator*() const {
  return loader_->impl_->current;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  Impl& m = *loader_->impl_;
  if (!m.active) {
    return *this;
  }
  if (m.measuring != nullptr) {
    if (m.train) {
      m.measuring->train_step_end();
    } else {
      m.measuring->eval_step_end();
    }
  }
  if (!m.more()) {
    m.close_loop();
    return *this;
  }
  m.advance();
  if (m.train && m.measuring != nullptr) {
    m.measuring->train_step_begin();
  }
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const {
  return !loader_->impl_->active;
}

void DataLoader::report_metric(double metric) {
  if (!impl_->train) {
    throw ConfigError("report_metric() is for the train loader (the one with max_epochs)");
  }
  impl_->job->report_metric(metric);
}

bool DataLoader::is_train() const {
  return impl_->train;
}
int64_t DataLoader::batches_per_epoch() const {
  return impl_->batches;
}
int64_t DataLoader::batch_size() const {
  return impl_->o.batch_size;
}

int64_t DataLoader::global_batch_size() const {
  return impl_->o.batch_size * impl_->world_size;
}

job::EnergyJob& DataLoader::job() {
  if (!impl_->job) {
    throw ConfigError("job() is for the train loader (the one with max_epochs)");
  }
  return *impl_->job;
}

const std::optional<contract::TrainResult>& DataLoader::result() const {
  if (!impl_->job) {
    throw ConfigError("result() is for the train loader (the one with max_epochs)");
  }
  return impl_->job->result();
}

}  // namespace zeus::data
