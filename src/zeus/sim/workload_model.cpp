#include "zeus/sim/workload_model.h"

#include <fmt/format.h>

#include <set>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::sim {

WorkloadModel::WorkloadModel(std::string gpu, const Job& job, const trace::PowerTrace& power,
                             const trace::TrainTrace& train)
    : gpu_(std::move(gpu)), job_(job) {
  std::map<int64_t, std::set<int64_t>> limits_by_bs;
  for (const auto& row : power.rows()) {
    if (iequals(row.dataset, job.dataset) && iequals(row.network, job.network) &&
        iequals(row.optimizer, job.optimizer)) {
      points_[{row.batch_size, row.power_limit_w}] = {row.time_per_epoch_s, row.average_power_w};
      limits_by_bs[row.batch_size].insert(row.power_limit_w);
    }
  }
  std::set<int64_t> all_limits;
  for (const int64_t bs :
       train.batch_sizes(job.dataset, job.network, job.optimizer, job.target_metric)) {
    const auto it = limits_by_bs.find(bs);
    if (it == limits_by_bs.end()) {
      continue;
    }
    batch_sizes_.push_back(bs);
    runs_[bs] = train.target_epochs(job.dataset, job.network, job.optimizer, bs, job.target_metric);
    limits_w_[bs].assign(it->second.begin(), it->second.end());
    all_limits.insert(it->second.begin(), it->second.end());
  }
  if (batch_sizes_.empty()) {
    throw ConfigError(fmt::format(
        "{} traces ({}) and the training trace share no batch size for {} ({}, {}, target {}); "
        "check the trace files",
        gpu_, power.source(), job.dataset, job.network, job.optimizer, job.target_metric));
  }
  all_power_limits_w_.assign(all_limits.begin(), all_limits.end());
  default_batch_size_ = batch_sizes_.front();
  for (const int64_t bs : batch_sizes_) {
    if (bs <= job.default_batch_size) {
      default_batch_size_ = bs;
    }
  }
}

const std::vector<int64_t>& WorkloadModel::power_limits_w(int64_t batch_size) const {
  const auto it = limits_w_.find(batch_size);
  ZEUS_ASSERT(it != limits_w_.end(), "batch size {} is not in the {} {} traces", batch_size, gpu_,
              job_.dataset);
  return it->second;
}

int WorkloadModel::default_recurrences() const {
  return static_cast<int>(2 * batch_sizes_.size() * all_power_limits_w_.size());
}

int64_t WorkloadModel::iterations_per_epoch(int64_t batch_size) const {
  return (job_.train_samples + batch_size - 1) / batch_size;
}

const WorkloadModel::Point& WorkloadModel::point(int64_t batch_size, int64_t power_limit_w) const {
  const auto it = points_.find({batch_size, power_limit_w});
  ZEUS_ASSERT(it != points_.end(), "no trace point for batch size {} at {} W", batch_size,
              power_limit_w);
  return it->second;
}

double WorkloadModel::epoch_time_s(int64_t batch_size, int64_t power_limit_w) const {
  return point(batch_size, power_limit_w).time_s;
}

double WorkloadModel::epoch_energy_j(int64_t batch_size, int64_t power_limit_w) const {
  const Point& p = point(batch_size, power_limit_w);
  return p.time_s * p.power_w;
}

const std::vector<std::optional<int64_t>>& WorkloadModel::runs(int64_t batch_size) const {
  return runs_.at(batch_size);
}

}  // namespace zeus::sim
