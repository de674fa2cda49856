// EnergyJob with ranks as threads (support/thread_world.h): what only shows with several ranks
// (energy summed over nodes, time the slowest rank's, one decision for all, errors agreed on),
// in one process and in milliseconds. The same behaviour over real processes and Gloo is in
// loader_test and dist_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "support/sim_job.h"
#include "support/test_support.h"
#include "support/thread_world.h"
#include "zeus/common/errors.h"
#include "zeus/job/energy_job.h"
#include "zeus/optimize/early_stop.h"

using ::testing::HasSubstr;

namespace zeus::job {
namespace {

using contract::StopReason;
using contract::TrainResult;

// Two epochs of 30 train and 5 eval steps (profiling all 7 V100 limits in the first), then the
// job stops at max epochs. Returns the result every rank ended with.
TrainResult two_epochs(EnergyJob& job) {
  while (job.next_epoch()) {
    job.begin_train_epoch(30);
    for (int i = 0; i < 30; ++i) {
      job.train_step_begin();
      job.train_step_end();
    }
    job.end_train_epoch();
    job.begin_eval_epoch(5);
    for (int i = 0; i < 5; ++i) {
      job.eval_step_end();
    }
    job.end_eval_epoch();
    job.report_metric(0.5);
  }
  return *job.result();
}

TrainResult run_world(int world, int per_node, const std::filesystem::path& dir) {
  test::ScopedEnv no_state("ZEUS_SIM_STATE", std::nullopt);
  test::ThreadWorld threads(world, per_node);
  std::vector<TrainResult> results(static_cast<size_t>(world));
  const auto errors = test::run_ranks(threads, [&](int rank, Collectives& c) {
    EnergyJob job(resolve_job_options(test::quick_sim_job(dir), 2, 16, world), c);
    results[static_cast<size_t>(rank)] = two_epochs(job);
  });
  for (int r = 0; r < world; ++r) {
    if (errors[static_cast<size_t>(r)]) {
      std::rethrow_exception(errors[static_cast<size_t>(r)]);
    }
  }
  // One decision for all: every rank ends with the master's numbers.
  for (const auto& r : results) {
    EXPECT_EQ(r.energy_j, results[0].energy_j);
    EXPECT_EQ(r.time_s, results[0].time_s);
    EXPECT_EQ(r.num_epochs, results[0].num_epochs);
    EXPECT_EQ(r.optimal_power_limit_mw, results[0].optimal_power_limit_mw);
  }
  return results[0];
}

TEST(EnergyJobThreads, EnergyIsSummedOverNodesAndEveryRankDecidesAlike) {
  test::TempDir dir;
  const TrainResult one = run_world(1, 1, dir / "one");
  const TrainResult four = run_world(4, 2, dir / "four");  // 2 nodes of 2 simulated V100s
  EXPECT_EQ(four.world_size, 4);
  EXPECT_EQ(four.nodes, 2);
  EXPECT_EQ(four.num_epochs, 2);
  EXPECT_EQ(four.stop_reason, StopReason::kMaxEpochs);
  // The same steps on 4 GPUs at the same limits: 4x the energy, the same time (each rank's
  // virtual clock advances alike; the job's time is the slowest's, not the sum).
  EXPECT_NEAR(four.energy_j, 4 * one.energy_j, 0.01 * four.energy_j);
  EXPECT_NEAR(four.time_s, one.time_s, 0.01 * one.time_s);
  EXPECT_EQ(four.optimal_power_limit_mw, one.optimal_power_limit_mw);
  EXPECT_TRUE(std::filesystem::exists(dir / "four" / "zeus+bs64.train.json"));
}

TEST(EnergyJobThreads, TheThresholdStopsEveryRankAtTheSameEpoch) {
  test::TempDir dir;
  test::ScopedEnv no_state("ZEUS_SIM_STATE", std::nullopt);
  test::ThreadWorld threads(3, 3);
  std::mutex mu;
  int stopped = 0;
  const auto errors = test::run_ranks(threads, [&](int, Collectives& c) {
    JobOptions o = test::quick_sim_job(dir / "log");
    o.cost_threshold = 1.0;
    EnergyJob job(resolve_job_options(o, 5, 16, 3), c);
    try {
      two_epochs(job);
    } catch (const optimize::CostThresholdExceeded& e) {
      EXPECT_EQ(job.result()->num_epochs, 1);
      EXPECT_EQ(job.result()->stop_reason, StopReason::kCostThreshold);
      std::lock_guard lock(mu);
      ++stopped;
    }
  });
  for (const auto& e : errors) {
    EXPECT_FALSE(e);
  }
  EXPECT_EQ(stopped, 3);
}

TEST(EnergyJobThreads, AnErrorOnOneRankIsThrownOnEveryRankBeforeTraining) {
  test::TempDir dir;
  test::ThreadWorld threads(2, 2);
  const auto errors = test::run_ranks(threads, [&](int rank, Collectives& c) {
    JobOptions o = test::quick_sim_job(dir / "log");
    o.device = rank == 1 ? "sim:h100" : "sim:v100";  // rank 1 cannot open its GPUs
    EnergyJob job(resolve_job_options(o, 2, 16, 2), c);
  });
  ASSERT_TRUE(errors[0]);
  ASSERT_TRUE(errors[1]);
  try {
    std::rethrow_exception(errors[0]);
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed on rank 1"));
  }
  try {
    std::rethrow_exception(errors[1]);
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("h100"));
  }
}

TEST(ThreadWorld, MismatchedCollectivesFailEveryRank) {
  test::ThreadWorld threads(2, 1);
  const auto errors = test::run_ranks(threads, [](int rank, Collectives& c) {
    std::vector<double> v(rank == 0 ? 2 : 3, 1.0);
    c.all_reduce_sum(v);
  });
  ASSERT_TRUE(errors[0]);
  ASSERT_TRUE(errors[1]);
  try {
    std::rethrow_exception(errors[1]);
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("differs between ranks"));
  }
  // And the sums are sums, the broadcasts the root's.
  test::ThreadWorld ok(3, 3);
  const auto none = test::run_ranks(ok, [](int rank, Collectives& c) {
    std::vector<double> v{static_cast<double>(rank), 1.0};
    c.all_reduce_sum(v);
    EXPECT_EQ(v, (std::vector<double>{3.0, 3.0}));
    std::vector<double> b{static_cast<double>(rank)};
    c.broadcast(b, 2);
    EXPECT_EQ(b[0], 2.0);
  });
  for (const auto& e : none) {
    EXPECT_FALSE(e);
  }
  EXPECT_EQ(ok.completed(), 2);
}

}  // namespace
}  // namespace zeus::job
