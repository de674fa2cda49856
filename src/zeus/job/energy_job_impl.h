// The private half of EnergyJob: the class that energy_job.cpp (the epoch protocol, the ledger)
// and energy_job_sync.cpp (the sync points and what they carry out on the node's GPUs) define.
// Included by those two files only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "zeus/contract/train_result.h"
#include "zeus/job/batch_size_trial.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/grid_limits.h"
#include "zeus/job/job_core.h"
#include "zeus/job/job_metrics.h"
#include "zeus/job/messages.h"
#include "zeus/job/node_limits.h"
#include "zeus/job/node_meter.h"
#include "zeus/job/planned_limits.h"
#include "zeus/job/progress_bar.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus::job {

// The shell around the job's pure parts (Note [pure cores]): the profiler and JobCore decide,
// this carries it out on the node's GPUs (NodeLimits, NodeMeter), the collectives and the
// rank's clock.
class EnergyJob::Impl {
 public:
  Impl(ResolvedJobOptions options, Collectives& collectives, RankDevice device,
       std::unique_ptr<RankClock> clock);

  // --- carrying out what the profiler decided (on every rank at the same step) ---
  void apply(const optimize::MaybeAction& action);
  void apply(const optimize::profiler_action::SetLimit& set);

  // Per-GPU limits (by rank) at a sync point, as apply(SetLimit) does for one limit; the drift
  // checks' span starts there.
  void apply_limits(const std::vector<int64_t>& limits_mw);
  void apply(const optimize::profiler_action::BeginWindow&);
  void apply(const optimize::profiler_action::EndWindow&);

  // Every rank cancels at the same step (the profiler's schedule is the same everywhere): no
  // collective is needed, and neither the window's energy nor its record is kept.
  void apply(const optimize::profiler_action::CancelWindow&) { meter_->end_window("profile"); }

  // --- the epoch protocol ---
  std::optional<int> next_epoch();
  void begin_train_epoch(int64_t iterations);
  void train_step_begin();
  void train_step_end();
  void end_train_epoch();

  // Every kDriftCheckSteps train steps at the plan: the ranks' own step times, and the limits
  // following a GPU whose pace changed (planned_limits.h).
  void check_pace();

  // Counting the waits at the gradient sync on (profiling, a pace sample) or off (Note [sampled
  // pace]). Turning it off on the machine's clock after steps in which no GradientSync counted a
  // wait says once that the plan runs on wall time (the program averages gradients another way).
  void count_waits(bool on);

  // After profiling (not in observer mode), the limit follows the grid's signal on the profile.
  void follow_grid();

  // Every kGridCheckSteps train steps and at each epoch's end: rank 0's reading of the signal,
  // and the limits the rule chose again (job/grid_limits.h).
  void read_grid();
  void begin_eval_epoch(int64_t iterations);
  void eval_step_end();
  void end_eval_epoch();

  void report_metric(double metric) { metric_ = metric; }
  void set_higher_is_better(bool higher_is_better) { o_.higher_is_better = higher_is_better; }

  const ResolvedJobOptions& options() const { return o_; }
  RankInfo ranks() const { return ranks_; }
  // Measuring only there is nothing to profile.
  bool profiling_done() const { return !profiler_ || profiler_->done(); }
  std::optional<int64_t> optimal_power_limit_mw() const {
    return profiler_ ? profiler_->optimal_limit_mw() : std::nullopt;
  }
  int64_t current_power_limit_mw() const { return current_limit_mw_; }
  const std::optional<contract::TrainResult>& result() const { return result_; }

 private:
  enum class Phase { kBetween, kTrain, kEval };

  // The train or the eval loops of the current epoch: the loop in progress (steps done of
  // total), and over the epoch's loops this rank's time and, on the local master, the node's
  // energy.
  struct LoopTally {
    const char* window;  // the EnergyMonitor window
    int64_t total = 0;
    int64_t done = 0;
    ClockReading t0;
    double elapsed_s = 0;
    double energy_j = 0;
    int64_t iterations = 0;
  };

  void open_loop(LoopTally& loop, Phase phase, int64_t iterations);
  void close_loop(LoopTally& loop);

  // Waits for the rank's device and hands the steps since the last sync point to its clock.
  void settle_device();

  // Every rank finished its preceding work (its device's queued kernels included) before `read`
  // runs, on the clock's reading taken after the first barrier, and none starts new work before
  // every rank's `read` ran (so a window's energy holds exactly its steps).
  void sync_point(const std::function<void(const ClockReading&)>& read);

  // The first half of a sync point: every rank's preceding work is done and settled; the clock's
  // reading at that moment. Its barrier carries the simulated clocks: every simulated GPU idles
  // until the slowest one's time, as the gradient sync would have made it (Note [the rank
  // clock]).
  ClockReading align();
  ProfileView profile_view() const;

  // Once profiling is done: when `need_eval`, only after the eval epoch at the optimum was
  // measured too; otherwise (the job ends) with what it has. The master writes the file.
  void save_profile(bool need_eval);
  void close_open_phases();
  void aggregate_epoch();
  void finish(contract::StopReason reason);

  // The master's push of the job's state (no-op without a Pushgateway). `decision`: the one just
  // made (its forecast); null: the job has ended.
  void push_state(const DecisionMessage* decision);
  void draw_progress(std::string_view split, const LoopTally& loop);

  ResolvedJobOptions o_;
  Collectives& coll_;
  RankInfo ranks_;
  RankDevice device_;
  std::unique_ptr<NodeGpus> gpus_;            // which GPUs
  std::unique_ptr<NodeLimits> limits_;        // their limits and journal
  std::unique_ptr<NodeMeter> meter_;          // their energy windows and power logs
  std::unique_ptr<RankClock> clock_;          // injected, or its simulated GPU's, or the machine's
  int64_t steps_unsettled_ = 0;               // steps since the clock's last settle
  std::chrono::nanoseconds own_at_align_{0};  // the rank's own time at the last sync point
  bool counting_waits_ = false;
  std::chrono::nanoseconds waits_at_arm_{0};
  int64_t steps_at_arm_ = 0;
  int64_t train_steps_ = 0;  // every train step of the job, all epochs
  bool said_wall_time_ = false;
  std::chrono::nanoseconds window_own_begin_{0};  // ... at the open window's start
  std::unique_ptr<GridLimits> grid_;        // the limit follows the grid's signal; null: no signal
  std::unique_ptr<PlannedLimits> planned_;  // data-parallel per-GPU limits; null: one
  PowerLimitRange range_;                   // the global master's GPUs'
  std::optional<JobCore> core_;             // the ledger and the decisions
  std::unique_ptr<JobMetrics> metrics_;     // the master's pushes, when there is a Pushgateway
  std::unique_ptr<optimize::PowerLimitProfiler> profiler_;  // null measuring only
  std::unique_ptr<BatchSizeTrial> trial_;  // the global master's, with a batch-size service
  bool profile_loaded_ = false;
  bool profile_saved_ = false;
  int64_t current_limit_mw_ = 0;

  int epoch_ = -1;
  Phase phase_ = Phase::kBetween;
  LoopTally train_{"train"};
  LoopTally eval_{"eval"};
  ClockReading window_begin_;
  std::optional<double> metric_;
  std::optional<contract::TrainResult> result_;
  bool progress_on_ = false;
  ProgressBar progress_;
};

}  // namespace zeus::job
