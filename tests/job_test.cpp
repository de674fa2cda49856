// job/: option resolution (code > ZEUS_* variable > default, and the errors), the train result
// file (Zeus's five keys and zeus-cpp's additions), and a single-process EnergyJob on a
// simulated V100 with the virtual clock driven step by step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "support/sim_job.h"
#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/contract/train_result.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/job_options.h"
#include "zeus/job/loader_pairing.h"
#include "zeus/job/messages.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::job {
namespace {

using contract::StopReason;
using contract::summary_line;
using contract::TrainResult;
using test::run_epoch;
using ::testing::HasSubstr;

// Every variable the resolution reads, unset for the test's scope unless given.
struct CleanEnv {
  std::vector<std::unique_ptr<test::ScopedEnv>> vars;
  explicit CleanEnv(const std::map<std::string, std::string>& set = {}) {
    for (const char* name :
         {"ZEUS_ETA_KNOB", "ZEUS_COST_THRESH", "ZEUS_TARGET_METRIC", "ZEUS_PROFILE_PARAMS",
          "ZEUS_LOG_DIR", "ZEUS_JOB_ID", "ZEUS_USE_OPTIMAL_PL", "ZEUS_DEVICE", "ZEUS_SIM_CLOCK",
          "ZEUS_MEASURE_ONLY", "ZEUS_MAX_EPOCHS"}) {
      const auto it = set.find(name);
      vars.push_back(std::make_unique<test::ScopedEnv>(
          name, it == set.end() ? std::nullopt : std::optional<std::string>(it->second)));
    }
  }
};

// The saved profile crosses ranks as two typed messages (no indices outside messages.cpp): every
// field comes back, a missing eval measurement stays missing, a short message is an error.
TEST(Messages, AProfileRoundTripsAndAShortOneIsRefused) {
  optimize::PowerProfile p;
  p.global_batch_size = 256;
  p.train[150'000] = {150'000, 41.5, 148.25};
  p.train[300'000] = {300'000, 52.0, 290.5};
  p.eval_throughput_ips = 90.0;
  p.eval_power_w = 200.0;
  const auto header = ProfileHeader::decode(ProfileHeader{p.train.size()}.encode());
  ASSERT_EQ(header.limits, std::optional<size_t>(2));
  const auto back = ProfileMessage::decode(ProfileMessage::encode(p), 2, 256);
  EXPECT_EQ(back.global_batch_size, 256);
  ASSERT_EQ(back.train.size(), 2u);
  EXPECT_DOUBLE_EQ(back.train.at(150'000).throughput_ips, 41.5);
  EXPECT_DOUBLE_EQ(back.train.at(300'000).power_w, 290.5);
  EXPECT_EQ(back.eval_power_w, std::optional<double>(200.0));
  p.eval_throughput_ips.reset();
  p.eval_power_w.reset();
  EXPECT_FALSE(ProfileMessage::decode(ProfileMessage::encode(p), 2, 256).eval_power_w);
  EXPECT_EQ(ProfileHeader::decode(ProfileHeader{}.encode()).limits, std::nullopt);
  std::vector<double> short_one = ProfileMessage::encode(p);
  short_one.pop_back();
  EXPECT_THROW((void)ProfileMessage::decode(short_one, 2, 256), Error);
}

// Note [loader pairing]: the rules both languages' loaders follow, by id.
TEST(LoaderPairing, OneTrainLoaderAndEvalLoadersInEitherOrder) {
  LoaderPairing pairing("TestLoader");
  const LoaderId early_eval = pairing.add_eval();  // before the train loader: allowed
  EXPECT_EQ(pairing.train_job(), nullptr) << "no train loader yet";
  const LoaderId train = pairing.add_train();
  EXPECT_EQ(pairing.train(), train);
  try {
    (void)pairing.add_train();
    FAIL() << "a second train loader";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("second train loader"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("TestLoader drives one job per process"));
  }
  EXPECT_NO_THROW(pairing.check_can_start_epochs());
  pairing.remove(early_eval);
  try {
    pairing.check_can_start_epochs();
    FAIL() << "epochs() without an eval loader";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the eval loader is missing: make a TestLoader"));
  }
  pairing.remove(train);
  pairing.remove(12345);  // unknown: ignored
  EXPECT_EQ(pairing.train(), std::nullopt);
  EXPECT_NO_THROW((void)pairing.add_train()) << "after the first left, a new one may join";
  EXPECT_EQ(pairing.eval_loaders(), 0u);
}

TEST(JobOptions, CodeBeatsEnvironmentBeatsDefaults) {
  CleanEnv env({{"ZEUS_TARGET_METRIC", "0.9"},
                {"ZEUS_ETA_KNOB", "0.3"},
                {"ZEUS_PROFILE_PARAMS", "5,20"},
                {"ZEUS_USE_OPTIMAL_PL", "False"},
                {"ZEUS_COST_THRESH", "1234.5"}});
  ResolvedJobOptions r = resolve_job_options({}, 4, 32, 2);
  EXPECT_EQ(r.target_metric, 0.9);
  EXPECT_EQ(r.eta, 0.3);
  EXPECT_EQ(r.warmup_iters, 5);
  EXPECT_EQ(r.profile_iters, 20);
  EXPECT_TRUE(r.observer_mode);
  EXPECT_EQ(r.cost_threshold, 1234.5);
  EXPECT_EQ(r.log_dir, "zeus_log");
  EXPECT_EQ(r.job_id, "zeus");
  EXPECT_EQ(r.device, "auto");
  EXPECT_EQ(r.global_batch_size, 64);
  EXPECT_EQ(r.max_epochs, 4);

  JobOptions code;
  code.eta = 0.8;
  code.target_metric = 0.5;
  code.warmup_iters = 2;
  code.observer_mode = false;
  code.log_dir = "mine";
  r = resolve_job_options(code, 4, 32, 2);
  EXPECT_EQ(r.eta, 0.8);
  EXPECT_EQ(r.target_metric, 0.5);
  EXPECT_EQ(r.warmup_iters, 2);
  EXPECT_EQ(r.profile_iters, 20);  // still from the variable
  EXPECT_FALSE(r.observer_mode);
  EXPECT_EQ(r.log_dir, "mine");
}

TEST(JobOptions, DefaultsWithoutVariables) {
  CleanEnv env(std::map<std::string, std::string>{{"ZEUS_TARGET_METRIC", "0.5"}});
  const ResolvedJobOptions r = resolve_job_options({}, 1, 8, 1);
  EXPECT_EQ(r.eta, 0.5);
  EXPECT_TRUE(std::isinf(r.cost_threshold));
  EXPECT_EQ(r.warmup_iters, 10);
  EXPECT_EQ(r.profile_iters, 40);
  EXPECT_FALSE(r.observer_mode);
  EXPECT_EQ(r.sim_clock, device::SimClock::kVirtual);
}

// zeus tune --policy lean caps a try's epochs with ZEUS_MAX_EPOCHS, below the program's limit.
TEST(JobOptions, MaxEpochsVariableCapsButNeverRaisesTheLimit) {
  CleanEnv env(
      std::map<std::string, std::string>{{"ZEUS_TARGET_METRIC", "0.5"}, {"ZEUS_MAX_EPOCHS", "3"}});
  EXPECT_EQ(resolve_job_options({}, 10, 8, 1).max_epochs, 3);
  EXPECT_EQ(resolve_job_options({}, 2, 8, 1).max_epochs, 2);
}

TEST(JobOptions, BadValuesNameTheVariableTheValueAndTheRange) {
  auto error_for = [](const std::map<std::string, std::string>& set) -> std::string {
    CleanEnv env(set);
    try {
      resolve_job_options({}, 3, 8, 1);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error_for({}), HasSubstr("ZEUS_TARGET_METRIC"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "x"}}), HasSubstr("ZEUS_TARGET_METRIC='x'"));
  const std::string eta = error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_ETA_KNOB", "2"}});
  EXPECT_THAT(eta, HasSubstr("ZEUS_ETA_KNOB"));
  EXPECT_THAT(eta, HasSubstr("[0, 1]"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_COST_THRESH", "-3"}}),
              HasSubstr("must be > 0"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_PROFILE_PARAMS", "10"}}),
              HasSubstr("ZEUS_PROFILE_PARAMS='10'"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_USE_OPTIMAL_PL", "maybe"}}),
              HasSubstr("expected true or false"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_JOB_ID", "a/b"}}),
              HasSubstr("no '/'"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_SIM_CLOCK", "fast"}}),
              HasSubstr("virtual or real"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_MAX_EPOCHS", "0"}}),
              HasSubstr("ZEUS_MAX_EPOCHS=0 must be at least 1"));
  EXPECT_THAT(error_for({{"ZEUS_TARGET_METRIC", "1"}, {"ZEUS_MAX_EPOCHS", "two"}}),
              HasSubstr("ZEUS_MAX_EPOCHS='two'"));
  CleanEnv env(std::map<std::string, std::string>{{"ZEUS_TARGET_METRIC", "1"}});
  EXPECT_THROW(resolve_job_options({}, 0, 8, 1), ConfigError);
  EXPECT_THROW(resolve_job_options({}, 1, 0, 1), ConfigError);
}

// One process, simulated V100, virtual clock: the job profiles every limit in epoch 0 and then
// runs at the cheapest; with a tiny threshold it stops at the start of epoch 1.
TEST(EnergyJob, SingleProcessProfilesThenStopsOnTheThreshold) {
  test::TempDir dir;
  CleanEnv env;
  JobOptions o = test::quick_sim_job(dir / "log");
  o.cost_threshold = 1.0;
  SingleProcess world;
  EnergyJob job(resolve_job_options(o, 5, 16, 1), world);
  ASSERT_EQ(job.next_epoch(), 0);
  job.begin_train_epoch(30);
  for (int i = 0; i < 30; ++i) {
    job.train_step_begin();
    job.train_step_end();
  }
  job.end_train_epoch();
  EXPECT_TRUE(job.profiling_done());
  job.begin_eval_epoch(5);
  for (int i = 0; i < 5; ++i)
    job.eval_step_end();
  job.end_eval_epoch();
  job.report_metric(0.5);
  EXPECT_THROW(job.next_epoch(), optimize::CostThresholdExceeded);
  ASSERT_TRUE(job.result());
  EXPECT_EQ(job.result()->stop_reason, StopReason::kCostThreshold);
  EXPECT_EQ(job.result()->windows.size(), 7u);
  EXPECT_TRUE(std::filesystem::exists(dir / "log" / "zeus+bs16.train.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "log" / "bs16.power.json"));
  EXPECT_EQ(job.current_power_limit_mw(), *job.optimal_power_limit_mw());
}

// Zeus synchronizes the device before every timestamp that opens or closes a measurement: the
// job calls the rank's hook at both ends of each profiling window (7 limits, then the eval
// window at the optimum) and of each train and eval loop, and nowhere on the step path.
TEST(EnergyJob, WaitsForTheDeviceBeforeEveryMeasurementTimestamp) {
  test::TempDir dir;
  CleanEnv env;
  SingleProcess world;
  int waits = 0;
  EnergyJob job(resolve_job_options(test::quick_sim_job(dir / "log"), 2, 16, 1), world,
                {.synchronize = [&] { ++waits; }});
  ASSERT_EQ(job.next_epoch(), 0);
  job.begin_train_epoch(30);
  EXPECT_EQ(waits, 1) << "the loop's start (the first window opens after the warmup)";
  for (int i = 0; i < 30; ++i) {
    job.train_step_begin();
    job.train_step_end();
  }
  job.end_train_epoch();
  // Each limit is set only once the device finished the steps before it, so that every step of
  // a warmup runs at the new limit: 7 candidates, then the optimum.
  EXPECT_EQ(waits, 2 * 7 + 2 + 8)
      << "7 windows and the train loop, each opened and closed, and 8 limits set";
  job.begin_eval_epoch(5);
  for (int i = 0; i < 5; ++i)
    job.eval_step_end();
  job.end_eval_epoch();
  EXPECT_EQ(waits, 2 * 7 + 2 + 8 + 2 + 2) << "the eval loop and its window at the optimum";
  const int before_steps = waits;
  job.report_metric(0.5);
  ASSERT_EQ(job.next_epoch(), 1);
  job.begin_train_epoch(30);
  for (int i = 0; i < 30; ++i) {
    job.train_step_begin();
    job.train_step_end();
  }
  EXPECT_EQ(waits, before_steps + 1) << "no waiting on the step path after profiling";
}

// A `break` inside a profiling window: the window is cancelled, the limit is profiled again in
// the next epoch, and the train result lists only windows that were measured (7, not 8).
TEST(EnergyJob, AnEpochLeftInsideAProfilingWindowRecordsNoWindowForIt) {
  test::TempDir dir;
  CleanEnv env;
  SingleProcess world;
  EnergyJob job(resolve_job_options(test::quick_sim_job(dir / "log"), 5, 16, 1), world);
  ASSERT_EQ(job.next_epoch(), 0);
  job.begin_train_epoch(30);
  for (int i = 0; i < 2; ++i) {  // warmup (1), then 1 of the 2 profiling steps at 250 W
    job.train_step_begin();
    job.train_step_end();
  }
  job.end_train_epoch();  // break
  job.begin_eval_epoch(5);
  for (int i = 0; i < 5; ++i)
    job.eval_step_end();
  job.end_eval_epoch();
  job.report_metric(0.5);
  ASSERT_EQ(job.next_epoch(), 1);
  run_epoch(job, 30, 5, 0.99);
  EXPECT_TRUE(job.profiling_done());
  EXPECT_EQ(job.next_epoch(), std::nullopt);
  ASSERT_TRUE(job.result());
  const auto& windows = job.result()->windows;
  ASSERT_EQ(windows.size(), 7u);
  std::set<int64_t> limits;
  for (const auto& w : windows) {
    EXPECT_EQ(w.epoch, 1) << "a window of epoch 0 was cancelled and must not be listed";
    limits.insert(w.power_limit_mw);
  }
  EXPECT_EQ(limits.size(), 7u) << "each limit measured once";
}

// Measure-only on a simulated V100: no limit ever set (the GPU stays at its limit), each epoch
// measured, no profile; the cost threshold still stops the job, forecast from the last epoch.
TEST(EnergyJob, MeasureOnlySetsNoLimitAndStillStopsOnTheThreshold) {
  test::TempDir dir;
  CleanEnv env;
  SingleProcess world;
  JobOptions o = test::quick_sim_job(dir / "log");
  o.measure_only = true;
  EnergyJob job(resolve_job_options(o, 5, 16, 1), world);
  ASSERT_EQ(job.next_epoch(), 0);
  EXPECT_TRUE(job.profiling_done());
  run_epoch(job, 30, 5, 0.5);
  ASSERT_EQ(job.next_epoch(), 1);
  run_epoch(job, 30, 5, 0.6);
  ASSERT_FALSE(job.result());
  EXPECT_EQ(job.current_power_limit_mw(), 250'000) << "the V100's own limit";
  EXPECT_FALSE(job.optimal_power_limit_mw());
  ASSERT_EQ(job.next_epoch(), 2);
  run_epoch(job, 30, 5, 0.99);
  EXPECT_EQ(job.next_epoch(), std::nullopt);
  ASSERT_TRUE(job.result());
  const TrainResult& r = *job.result();
  EXPECT_TRUE(r.measure_only);
  EXPECT_FALSE(r.profiled);
  EXPECT_TRUE(r.windows.empty());
  ASSERT_EQ(r.epochs.size(), 3u);
  for (const auto& e : r.epochs) {
    EXPECT_EQ(e.power_limit_mw, 250'000);
    EXPECT_GT(e.train_energy_j, 0);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "log" / "bs16.power.json"));
  EXPECT_THAT(summary_line(r), HasSubstr("measure-only: no limit set, the GPUs ran at 250 W"));

  // The threshold: a fresh log dir, stop when the next epoch would exceed 2.5 epochs' cost.
  test::TempDir dir2;
  JobOptions t = test::quick_sim_job(dir2 / "log");
  t.measure_only = true;
  t.cost_threshold = 2.5 * r.cost / 3.0;
  EnergyJob stopped(resolve_job_options(t, 5, 16, 1), world);
  ASSERT_EQ(stopped.next_epoch(), 0);
  run_epoch(stopped, 30, 5, 0.5);
  ASSERT_EQ(stopped.next_epoch(), 1);
  run_epoch(stopped, 30, 5, 0.5);
  EXPECT_THROW(stopped.next_epoch(), optimize::CostThresholdExceeded);
  EXPECT_EQ(stopped.result()->stop_reason, StopReason::kCostThreshold);
}

}  // namespace
}  // namespace zeus::job
