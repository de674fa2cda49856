// A data-parallel job's per-GPU power limits inside an EnergyJob: the exchanges they need (each
// GPU's idle power at the start, each rank's own step time at the drift checks), the plan made
// from the profiling windows (gpu_plan.h), its re-plans, and what it saved against Zeus's one
// limit, for the train result and the profile file. The job carries out the limits it returns at
// its sync points.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zeus/common/power.h"
#include "zeus/contract/train_result.h"
#include "zeus/job/collectives.h"
#include "zeus/job/gpu_plan.h"
#include "zeus/job/job_options.h"
#include "zeus/job/messages.h"
#include "zeus/job/node_gpus.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::job {

// Train steps between two checks of the GPUs' pace once the plan is set (Note [following a
// GPU's pace], gpu_plan.cpp): a changed pace is acted on at the second check that sees it.
inline constexpr int64_t kDriftCheckSteps = 100;
// Note [sampled pace]: a check measures only the last kPaceSampleSteps train steps before it.
// Telling a rank's own time from its wait at the gradient sync costs a stream synchronize per
// step on CUDA (common/sync_wait.h), so the job counts the waits (arms it) only while profiling
// and over these sampled steps, not for the whole job.
inline constexpr int64_t kPaceSampleSteps = 20;

// What a train step asks of the job (PlannedLimits::step).
enum class PaceStep {
  kNone,
  kSample,  // begin the sample: count the waits from here, and start_span() at this rank's time
  kCheck,   // the sample is done: check(), then stop counting
};

// Contract: every rank makes it and calls it at the same steps (its collectives match).
class PlannedLimits {
 public:
  // Collective, on every rank of a job that plans per GPU (several ranks, limits it may change).
  // Null on every rank when a GPU is shared by two ranks (the master says so once): the job then
  // plans Zeus's one limit.
  static std::unique_ptr<PlannedLimits> make(const ResolvedJobOptions& options,
                                             Collectives& collectives, NodeGpus& gpus,
                                             PowerLimitRange range);

  // Collective, measuring only: what the saved profile's per-GPU plan would save against every
  // GPU at `limit_mw`, the limit they run at (estimate_only); null when the job plans one limit
  // or the log dir has no curves of this job.
  static std::unique_ptr<PlannedLimits> make_estimate(const ResolvedJobOptions& options,
                                                      Collectives& collectives, NodeGpus& gpus,
                                                      PowerLimitRange range, int64_t limit_mw);

  // A profiling window closed at `limit_mw` (every GPU at it) after `iterations` steps.
  void add_window(int64_t limit_mw, int64_t iterations, const WindowMessage& window);
  // The saved profile's curves, when they are of this job's GPUs (by UUID and host; a profile
  // written before those were kept, by rank): std::nullopt. Otherwise why not, for a log line
  // (the job then profiles again).
  std::optional<std::string> load(const optimize::PowerProfile& saved);
  // Makes the plan and says so (master); returns each rank's limit.
  const std::vector<int64_t>& make_plan(int epoch);
  // Measure-only: the saved curves' plan is made but never set, and the steps count what it
  // would save against every GPU at `limit_mw`, the limit they run at. False when the curves are
  // not this job's or lack that limit.
  bool estimate_only(const optimize::PowerProfile& saved, int64_t limit_mw);
  bool planned() const { return planned_; }

  // The pace's sample begins where this rank's own time is `own_now` (the job counts the waits
  // from here: Note [sampled pace]).
  void start_span(std::chrono::nanoseconds own_now);
  // A train loop began: a sample under way is dropped (the eval steps between are not at the
  // plan's pace), and the steps to the next check count again from here.
  void restart_count();
  // Counts a train step run at the plan, and says what the job does next.
  PaceStep step();
  // Collective, at a sync point (own_now: this rank's own time there): the ranks' own times since
  // the span began. Returns the new limits when the plan changed.
  std::optional<std::vector<int64_t>> check(std::chrono::nanoseconds own_now, int epoch);

  // The grid's signal moved Zeus's knob to `eta` (job/grid_limits.h): the plan made again from
  // the same curves. Returns the new limits when they changed.
  std::optional<std::vector<int64_t>> follow_knob(double eta, int epoch);

  void fill(contract::TrainResult& result) const;
  void fill(optimize::PowerProfile& profile) const;

 private:
  PlannedLimits(Collectives& collectives, std::vector<double> idle_w, PowerLimitRange range,
                const ResolvedJobOptions& options);

  Collectives& coll_;
  RankInfo ranks_;
  GpuPlan plan_;
  bool planned_ = false;
  bool follow_pace_ = true;
  // Measure-only: what the steps are compared with (every GPU at the limit it runs at).
  std::optional<optimize::PlanOutcome> baseline_;
  std::vector<int64_t> first_plan_mw_;  // what profiling chose (the profile file keeps it)
  std::chrono::nanoseconds span_from_{0};
  int64_t span_steps_ = 0;
  int64_t since_check_ = 0;  // train steps since the last check (or the loop's start)
  bool sampling_ = false;    // start_span() was called for the coming check
  int64_t steps_ = 0;        // train steps at the plan, all epochs
  double saving_j_ = 0;
  double saving_s_ = 0;
  std::vector<contract::ReplanRecord> replans_;
  std::vector<std::pair<std::string, std::string>> gpu_ids_;  // by rank: (UUID, host)
};

}  // namespace zeus::job
