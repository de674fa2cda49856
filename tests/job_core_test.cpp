// The job's pure core and its injected clock: JobCore decides from agreed numbers alone (no
// device, no collective, no clock), and an EnergyJob reads every measurement on the one clock it
// was given, which hears of the steps only at sync points.
#include "zeus/job/job_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include "support/sim_job.h"
#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/job_options.h"

namespace zeus::job {
namespace {

using Code = DecisionMessage::Code;

ResolvedJobOptions core_options(double target, int max_epochs, double threshold) {
  test::ScopedEnv no_threshold("ZEUS_COST_THRESH", std::nullopt);
  JobOptions o;
  o.target_metric = target;
  o.device = "sim:v100";
  o.cost_threshold = threshold;
  return resolve_job_options(o, max_epochs, 16, 1);
}

EpochMessage agreed(double train_s, double train_j) {
  EpochMessage m;
  m.train_time_s = train_s;
  m.train_energy_j = train_j;
  return m;
}

TEST(JobCore, DecidesFromTheLedgerAlone) {
  const RankInfo one{};
  JobCore core(core_options(0.9, 3, std::numeric_limits<double>::infinity()), one,
               {100'000, 300'000});
  const ProfileView measuring{};
  EXPECT_EQ(core.decide(-1, std::nullopt, true, measuring, 300'000).code, Code::kContinue);
  core.add_epoch(0, 100, 0, agreed(10, 2000), 300'000);
  EXPECT_EQ(core.decide(0, 0.5, true, measuring, 300'000).code, Code::kContinue);
  EXPECT_EQ(core.decide(0, 0.95, true, measuring, 300'000).code, Code::kTargetReached);
  EXPECT_EQ(core.decide(0, 0.95, false, measuring, 300'000).code, Code::kContinue)
      << "lower is better: 0.95 has not reached 0.9";
  EXPECT_EQ(core.decide(2, 0.5, true, measuring, 300'000).code, Code::kMaxEpochs);
  EXPECT_DOUBLE_EQ(core.total_time_s(), 10);
  EXPECT_DOUBLE_EQ(core.total_energy_j(), 2000);
}

TEST(JobCore, ForecastsAtTheLimitItRunsAtAndStopsAtTheThreshold) {
  const RankInfo one{};
  // eta 0.5, one 300 W GPU: cost = 0.5 * J + 150 * s. After one epoch of 10 s and 2000 J:
  // 2500; measuring only, the next epoch at the same rates costs as much again: 5000.
  JobCore core(core_options(0.9, 10, 4000), one, {100'000, 300'000});
  core.add_epoch(0, 100, 0, agreed(10, 2000), 300'000);
  const DecisionMessage measuring = core.decide(0, 0.5, true, ProfileView{}, 300'000);
  EXPECT_NEAR(measuring.forecast.predicted_cost, 5000, 1e-9);
  EXPECT_EQ(measuring.code, Code::kCostThreshold);
  // With a profile the next epoch runs at the limit in force: 200 W draws 100 W at 20 it/s (5 s,
  // 500 J for 100 iterations), cost 2500 + 250 + 750 = 3500 < 4000.
  ProfileView profiled{.profiling = true};
  optimize::PowerProfile p;
  p.train[300'000] = {300'000, 10, 200};
  p.train[200'000] = {200'000, 20, 100};
  p.optimal_power_limit_mw = 200'000;
  profiled.profile = p;
  const DecisionMessage at_optimum = core.decide(0, 0.5, true, profiled, 200'000);
  EXPECT_NEAR(at_optimum.forecast.predicted_cost, 3500, 1e-9);
  EXPECT_EQ(at_optimum.code, Code::kContinue);
  // Still profiling: no forecast, no stop.
  EXPECT_EQ(core.decide(0, 0.5, true, ProfileView{.profiling = true}, 300'000).code,
            Code::kContinue);
  // The result's savings: per step after profiling, 300 W costs 20 J and 0.1 s, 200 W 5 J and
  // 0.05 s.
  for (int i = 0; i < 10; ++i) {
    core.count_step_after_profiling();
  }
  const auto r = core.result(contract::StopReason::kMaxEpochs, profiled, "sim:v100");
  EXPECT_EQ(r.optimal_power_limit_mw, std::optional<int64_t>(200'000));
  EXPECT_NEAR(r.estimated_energy_saving_j, 150, 1e-9);
  EXPECT_NEAR(r.estimated_time_saving_s, 0.5, 1e-9);
  EXPECT_EQ(r.num_epochs, 1);
}

// A clock whose time is the steps settled so far, 0.25 s each: what it was told, and when.
class StepClock final : public RankClock {
 public:
  void settle(int64_t steps, bool busy) override {
    settled_steps += steps;
    ++settles;
    busy_ = busy;
    t_ += std::chrono::milliseconds(250) * steps;
  }
  ClockReading now() override {
    ++readings;
    return {t_, std::chrono::system_clock::time_point(t_)};
  }
  std::chrono::nanoseconds own_time() override { return t_; }
  int64_t settled_steps = 0;
  int settles = 0;
  int readings = 0;

 private:
  bool busy_ = false;
  std::chrono::nanoseconds t_{0};
};

TEST(EnergyJob, ReadsEveryMeasurementOnTheClockItIsGivenAndSettlesOnlyAtSyncPoints) {
  test::TempDir dir;
  test::ScopedEnv no_measure("ZEUS_MEASURE_ONLY", std::nullopt);
  test::ScopedEnv no_profile("ZEUS_PROFILE_PARAMS", std::nullopt);
  SingleProcess world;
  auto owned = std::make_unique<StepClock>();
  StepClock& clock = *owned;
  EnergyJob job(resolve_job_options(test::quick_sim_job(dir / "log"), 1, 16, 1), world, {},
                std::move(owned));
  ASSERT_EQ(job.next_epoch(), 0);
  job.begin_train_epoch(30);
  for (int i = 0; i < 30; ++i) {
    job.train_step_begin();
    job.train_step_end();
  }
  const int settles_in_epoch = clock.settles;
  job.end_train_epoch();
  job.begin_eval_epoch(4);
  for (int i = 0; i < 4; ++i) {
    job.eval_step_end();
  }
  job.end_eval_epoch();
  job.report_metric(0.5);
  ASSERT_FALSE(job.next_epoch());
  EXPECT_EQ(clock.settled_steps, 34) << "every step reaches the clock exactly once";
  // 7 windows opened and closed, 8 limits, the train loop opened: no settle per step.
  EXPECT_EQ(settles_in_epoch, 2 * 7 + 8 + 1);
  ASSERT_TRUE(job.result());
  const auto& r = *job.result();
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_DOUBLE_EQ(r.epochs[0].train_time_s, 30 * 0.25) << "the loop's time is the clock's";
  EXPECT_DOUBLE_EQ(r.epochs[0].eval_time_s, 4 * 0.25);
  ASSERT_EQ(r.windows.size(), 7u);
  for (const auto& w : r.windows) {
    // Each window holds 2 profiling steps; its record is on the same clock.
    EXPECT_EQ(w.end_unix_ns - w.begin_unix_ns, 500'000'000);
  }
}

}  // namespace
}  // namespace zeus::job
