// JobCore: what an EnergyJob decides, apart from how it measures. It keeps the epochs' ledger
// (the agreed records, the totals, the profiling windows) and, from those and the profile,
// decides whether the job goes on (the master's DecisionMessage) and what its result is. Pure:
// no device, no collective, no clock, no file; energy_job.cpp is the shell that measures, agrees
// and writes (Note [pure cores] in docs/architecture.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "zeus/common/power.h"
#include "zeus/contract/train_result.h"
#include "zeus/job/job_options.h"
#include "zeus/job/messages.h"
#include "zeus/optimize/cost.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::job {

// What the profiler knows when the core decides: nothing measuring only; the profile (with the
// optimum) once profiling is done.
struct ProfileView {
  bool profiling = false;                         // a profiler runs (not measure-only)
  bool loaded = false;                            // the profile came from the saved file
  std::optional<optimize::PowerProfile> profile;  // set once profiling is done
};

// Contract: one per rank, fed the same agreed numbers on every rank, so every rank's core holds
// the same ledger; decide() is meaningful on the global master (its metric decides).
class JobCore {
 public:
  JobCore(const ResolvedJobOptions& options, const RankInfo& ranks, PowerLimitRange range);

  // The epoch just aggregated: its iterations, the agreed EpochMessage, the limit it ran at.
  const contract::EpochRecord& add_epoch(int epoch, int64_t train_iterations,
                                         int64_t eval_iterations, const EpochMessage& agreed,
                                         int64_t limit_mw);
  // The metric the master broadcast for the last epoch.
  void set_last_metric(double metric);
  void add_window(const contract::WindowRecord& window) { windows_.push_back(window); }
  // One train step after profiling finished (for the estimated savings).
  void count_step_after_profiling() { ++iters_after_profiling_; }

  // The master's decision before epoch `epoch` + 1 (epoch -1: before the first). The metric's
  // direction is an argument, not the options' (report_metric may change it per epoch).
  DecisionMessage decide(int epoch, std::optional<double> metric, bool higher_is_better,
                         const ProfileView& profile, int64_t current_limit_mw) const;
  // The forecast's inputs: the last epoch's lengths and the profile's numbers at the limit the
  // job runs at; measuring only (no profile), the last epoch's own rates.
  optimize::EpochForecastInputs forecast_inputs(const ProfileView& profile,
                                                int64_t current_limit_mw) const;
  contract::TrainResult result(contract::StopReason reason, const ProfileView& profile,
                               const std::string& device) const;

  const optimize::CostModel& cost() const { return cost_; }
  double total_energy_j() const { return total_energy_j_; }
  double total_time_s() const { return total_time_s_; }
  const std::vector<contract::EpochRecord>& records() const { return records_; }

 private:
  ResolvedJobOptions o_;
  RankInfo ranks_;
  PowerLimitRange range_;
  optimize::CostModel cost_;
  double total_energy_j_ = 0;
  double total_time_s_ = 0;
  int64_t iters_after_profiling_ = 0;
  std::vector<contract::EpochRecord> records_;
  std::vector<contract::WindowRecord> windows_;
};

}  // namespace zeus::job
