// The trace-driven simulator of recurring training jobs: Zeus's batch-size optimizer and JIT
// power-limit choice (the same optimize/ code the data loader uses) replayed over the measured
// traces, against the Default baseline (the default batch size at the maximum power limit).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimize/power_profile.h"
#include "zeus/trace/power_trace.h"
#include "zeus/trace/train_trace.h"

namespace zeus::sim {

// A recurring job of the paper: its workload, target and epoch limit (trace/power_trace.h).
using Job = trace::Workload;

// One GPU's view of one job: the join of the two traces (batch sizes present in both).
class WorkloadModel {
 public:
  // Throws ConfigError when the traces share no batch size for the job.
  WorkloadModel(std::string gpu, const Job& job, const trace::PowerTrace& power,
                const trace::TrainTrace& train);

  const std::string& gpu() const { return gpu_; }
  const Job& job() const { return job_; }
  const std::vector<int64_t>& batch_sizes() const { return batch_sizes_; }
  const std::vector<int64_t>& power_limits_w() const { return power_limits_w_; }
  // b0, capped at the largest batch size this GPU's traces have.
  int64_t default_batch_size() const { return default_batch_size_; }
  int64_t max_power_limit_w() const { return power_limits_w_.back(); }
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
  std::vector<int64_t> power_limits_w_;  // ascending, the limits measured for every batch size
  int64_t default_batch_size_ = 0;
  std::map<std::pair<int64_t, int64_t>, Point> points_;
  std::map<int64_t, std::vector<std::optional<int64_t>>> runs_;
};

struct SimulationOptions {
  double eta = 0.5;
  double beta = 2.0;
  int recurrences = 0;  // 0: 2 x |batch sizes| x |power limits|
  uint64_t seed = 1;
  optimize::SelectorOptions selector;
  int max_tries_per_recurrence = 20;
};

struct RecurrenceRecord {
  int64_t batch_size = 0;     // of the try that ended the recurrence
  int64_t power_limit_w = 0;  // its JIT-chosen limit
  double energy_j = 0;        // all tries of the recurrence
  double time_s = 0;
  double cost = 0;
  int tries = 0;
  bool reached = false;
};

struct StaticConfig {
  int64_t batch_size = 0;
  int64_t power_limit_w = 0;
  double energy_j = 0;  // expected per recurrence
  double time_s = 0;
  double cost = 0;
};

struct SimulationResult {
  std::string gpu;
  std::string workload;
  uint64_t seed = 0;
  std::vector<RecurrenceRecord> recurrences;
  double zeus_energy_j = 0;  // cumulative, failed and early-stopped tries included
  double zeus_time_s = 0;
  StaticConfig baseline;  // per recurrence; cumulative = x recurrences
  double baseline_energy_j = 0;
  double baseline_time_s = 0;
  double last10_energy_j = 0;  // mean over the last 10 recurrences
  double last10_time_s = 0;
  int64_t final_batch_size = 0;
  int64_t final_power_limit_w = 0;
  StaticConfig oracle;                      // the best static (b, pl) in hindsight
  std::map<int64_t, int64_t> jit_limits_w;  // batch size -> JIT choice

  double energy_savings() const { return 1.0 - zeus_energy_j / baseline_energy_j; }
  double time_change() const { return zeus_time_s / baseline_time_s - 1.0; }
  double last10_energy_savings() const { return 1.0 - last10_energy_j / baseline.energy_j; }
};

// Deterministic: the same model, options and seed give bit-identical results.
SimulationResult simulate(const WorkloadModel& model, const SimulationOptions& options);

}  // namespace zeus::sim
