// EnergyJob: the run time of one energy-optimized training job, behind zeus::DataLoader's train
// and eval loaders. Its NodeGpus own the node's GPUs on the local master (limits through a
// PowerLimitGuard with a journal, per-epoch power logs, energy windows), it runs the
// PowerLimitProfiler on every rank with the same schedule (measure-only mode: no profiling and
// no limit, each epoch measured at the GPUs' own limit), aggregates energy (sum over nodes)
// and time (max over ranks) so that every rank sees the same numbers, lets the global master
// decide (target, max epochs, cost threshold) and broadcast it, and has the global master write
// the files. No libtorch: the loader feeds it events.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "zeus/contract/train_result.h"
#include "zeus/job/collectives.h"
#include "zeus/job/job_options.h"
#include "zeus/job/node_gpus.h"
#include "zeus/job/rank_clock.h"

namespace zeus::job {

// Contract: every rank makes the same calls in the same order (they contain collectives):
//   EnergyJob job(...);                       // opens devices, loads bs{B}.power.json
//   while (auto epoch = job.next_epoch()) {   // may throw optimize::CostThresholdExceeded
//     job.begin_train_epoch(n); {train_step_begin(); train_step_end();} x n; end_train_epoch();
//     job.begin_eval_epoch(m); {eval_step_end();} x m; end_eval_epoch();
//     job.report_metric(metric);
//   }
// An epoch left early (a `break`) is closed by the next call. Construction errors (bad device,
// corrupt profile) are raised on every rank, before training starts. The step calls are the hot
// path: outside profiling windows they touch no device and no collective.
class EnergyJob {
 public:
  // `device` is what this rank trains on (its GPU, and how to wait for it before measuring);
  // `clock` what its measurements are read on (null: make_rank_clock's, the simulated GPU's or
  // the machine's).
  EnergyJob(ResolvedJobOptions options, Collectives& collectives, RankDevice device = {},
            std::unique_ptr<RankClock> clock = nullptr);
  ~EnergyJob();
  EnergyJob(const EnergyJob&) = delete;
  EnergyJob& operator=(const EnergyJob&) = delete;

  // The next epoch index, or std::nullopt when training is over (target reached or max epochs;
  // the result is then written and the limits restored). Throws CostThresholdExceeded on every
  // rank when the next epoch would reach the cost threshold (after the master wrote the result).
  std::optional<int> next_epoch();

  void begin_train_epoch(int64_t iterations);
  void train_step_begin();
  void train_step_end();
  void end_train_epoch();
  void begin_eval_epoch(int64_t iterations);
  void eval_step_end();
  void end_eval_epoch();
  // The epoch's validation metric, already averaged across ranks; the master's value decides.
  void report_metric(double metric);
  // As above, stating the metric's direction (Zeus's report_metric(metric, higher_is_better)):
  // it replaces JobOptions::higher_is_better from this epoch on.
  void report_metric(double metric, bool higher_is_better);

  const ResolvedJobOptions& options() const;
  RankInfo ranks() const;
  bool profiling_done() const;
  // Set once profiling is done (or the profile was loaded).
  std::optional<int64_t> optimal_power_limit_mw() const;
  // The power limit the job's GPUs run at now.
  int64_t current_power_limit_mw() const;
  // The result once training is over (on every rank; the master wrote it).
  const std::optional<contract::TrainResult>& result() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::job
