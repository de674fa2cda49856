// One GPU's view of one recurring job: the join of the power trace (time and power per batch
// size and power limit) and the training trace (epochs to the target per run), as the
// simulator needs it. Power limits are per batch size: a trace may have measured different
// limits for different batch sizes (the RTX6000 movielens-1m rows have only 250 and 260 W at
// batch size 4), and Zeus profiles each batch size over its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zeus/trace/power_trace.h"
#include "zeus/trace/train_trace.h"

namespace zeus::sim {

// A recurring job of the paper: its workload, target and epoch limit (trace/power_trace.h).
using Job = trace::Workload;

class WorkloadModel {
 public:
  // Throws ConfigError when the traces share no batch size for the job.
  WorkloadModel(std::string gpu, const Job& job, const trace::PowerTrace& power,
                const trace::TrainTrace& train);

  const std::string& gpu() const { return gpu_; }
  const Job& job() const { return job_; }
  // Ascending: the batch sizes present in both traces.
  const std::vector<int64_t>& batch_sizes() const { return batch_sizes_; }
  // Ascending: the limits measured for this batch size.
  const std::vector<int64_t>& power_limits_w(int64_t batch_size) const;
  // Ascending: every limit measured for some batch size of the job (Zeus's |P|).
  const std::vector<int64_t>& all_power_limits_w() const { return all_power_limits_w_; }
  // b0, capped at the largest batch size this GPU's traces have.
  int64_t default_batch_size() const { return default_batch_size_; }
  // The job's maximum limit (MAXPOWER of the cost), and one batch size's.
  int64_t max_power_limit_w() const { return all_power_limits_w_.back(); }
  int64_t max_power_limit_w(int64_t batch_size) const { return power_limits_w(batch_size).back(); }
  // Zeus's default number of recurrences: 2 x |batch sizes| x |power limits|.
  int default_recurrences() const;
  // Iterations of one epoch at this batch size (the training set over the batch, rounded up).
  int64_t iterations_per_epoch(int64_t batch_size) const;
  double epoch_time_s(int64_t batch_size, int64_t power_limit_w) const;
  double epoch_energy_j(int64_t batch_size, int64_t power_limit_w) const;
  // The runs' target epochs (nullopt: never reached).
  const std::vector<std::optional<int64_t>>& runs(int64_t batch_size) const;

 private:
  struct Point {
    double time_s;
    double power_w;
  };
  const Point& point(int64_t batch_size, int64_t power_limit_w) const;

  std::string gpu_;
  Job job_;
  std::vector<int64_t> batch_sizes_;
  std::map<int64_t, std::vector<int64_t>> limits_w_;
  std::vector<int64_t> all_power_limits_w_;
  int64_t default_batch_size_ = 0;
  std::map<std::pair<int64_t, int64_t>, Point> points_;
  std::map<int64_t, std::vector<std::optional<int64_t>>> runs_;
};

}  // namespace zeus::sim
