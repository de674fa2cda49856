// Per-GPU power limits in data-parallel EnergyJobs (ranks as threads over simulated GPUs with a
// straggler): the plan the job ends with is the planner's over the traces, it spends less than
// Zeus's one limit, a saved profile is planned again without profiling, and the plan follows a
// GPU that slows down mid-run. The same over real processes: loader_test's zeus run example.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <filesystem>
#include <functional>
#include <sstream>

#include "support/sim_job.h"
#include "support/test_support.h"
#include "support/thread_world.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/sync_wait.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/gpu_plan.h"
#include "zeus/job/messages.h"
#include "zeus/job/planned_limits.h"
#include "zeus/optimize/per_gpu_plan.h"
#include "zeus/optimize/power_profile.h"
#include "zeus/report/report.h"
#include "zeus/sim/data_parallel.h"
#include "zeus/trace/power_trace.h"

using ::testing::HasSubstr;

namespace zeus::job {
namespace {

using contract::TrainResult;

struct World {
  std::string device;
  int ranks = 4;
  int epochs = 3;
  int train_steps = 30;
  bool per_gpu = true;
  bool follow_pace = true;
  // Called on rank 0 after each epoch (before the next begins): a test's change of the machine.
  std::function<void(int epoch)> between_epochs;
};

TrainResult run(const World& w, const std::filesystem::path& dir) {
  test::ScopedEnv no_state("ZEUS_SIM_STATE", std::nullopt);
  test::ScopedEnv no_gpus("ZEUS_SIM_GPUS", std::nullopt);
  test::ScopedEnv no_plan("ZEUS_POWER_LIMIT_PLAN", std::nullopt);
  test::ThreadWorld threads(w.ranks, w.ranks);
  std::vector<TrainResult> results(static_cast<size_t>(w.ranks));
  const auto errors = test::run_ranks(threads, [&](int rank, Collectives& c) {
    JobOptions o = test::quick_sim_job(dir);
    o.device = w.device;
    o.per_gpu_limits = w.per_gpu;
    o.follow_gpu_pace = w.follow_pace;
    EnergyJob job(resolve_job_options(o, w.epochs, 16, w.ranks), c);
    while (auto epoch = job.next_epoch()) {
      test::run_epoch(job, w.train_steps, 5, 0.5);
      if (rank == 0 && w.between_epochs) {
        w.between_epochs(*epoch);
      }
    }
    results[static_cast<size_t>(rank)] = *job.result();
  });
  for (const auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  for (const auto& r : results) {
    EXPECT_EQ(r.power_limits_mw, results[0].power_limits_mw);  // one plan on every rank
  }
  return results[0];
}

// The train energy (J) and time (s) of the epochs from `first_epoch` on.
struct Spent {
  double energy_j = 0;
  double time_s = 0;
};
Spent train_from(const TrainResult& r, int first_epoch) {
  Spent s;
  for (const auto& e : r.epochs) {
    if (e.epoch >= first_epoch) {
      s.energy_j += e.train_energy_j;
      s.time_s += e.train_time_s;
    }
  }
  return s;
}

constexpr const char* kStraggler = "sim:v100,v100,v100*1.2,v100:cifar100:1024";

TEST(PerGpuJob, AStragglerJobEndsAtThePlanAndSpendsLessThanOneLimit) {
  test::TempDir dir;
  const TrainResult plan = run({.device = kStraggler}, dir / "plan");
  const TrainResult one = run({.device = kStraggler, .per_gpu = false}, dir / "one");
  // The planner over the traces (per epoch; the job's curves are per step: the same plan).
  const auto mix = trace::parse_gpu_mix("v100,v100,v100*1.2,v100");
  const auto curves = sim::trace_curves(mix, "cifar100", 1024, trace::trace_dir());
  const auto want =
      optimize::plan_per_gpu(curves, optimize::data_parallel_cost(curves, 0.5), {}).limits_mw;
  EXPECT_EQ(want, (std::vector<int64_t>{125'000, 125'000, 225'000, 125'000}));
  EXPECT_EQ(plan.power_limit_plan, "per_gpu");
  EXPECT_EQ(plan.power_limits_mw, want);
  EXPECT_EQ(one.power_limit_plan, "global");
  EXPECT_EQ(one.power_limits_mw, std::vector<int64_t>(4, 175'000))
      << "every plan records one limit per GPU (issue #52), Zeus's one limit too";
  EXPECT_EQ(one.optimal_power_limit_mw, std::optional<int64_t>(175'000));
  // After profiling (epoch 0), the plan spends less energy than the one limit, and no more time.
  EXPECT_LT(train_from(plan, 1).energy_j, 0.97 * train_from(one, 1).energy_j);
  EXPECT_LE(train_from(plan, 1).time_s, train_from(one, 1).time_s * 1.0001);
  EXPECT_GT(plan.estimated_plan_energy_saving_j, 0);
  EXPECT_TRUE(plan.replans.empty());
  // The profile keeps Zeus's keys and adds each GPU's curve and the plan; zeus report shows it.
  const auto run_dir = report::load_run(dir / "plan");
  ASSERT_EQ(run_dir.profiles.size(), 1u);
  const auto& profile = run_dir.profiles.front().second;
  EXPECT_EQ(profile.optimal_power_limit_mw, 175'000);

  EXPECT_EQ(profile.optimal_per_gpu_mw, want);
  ASSERT_EQ(profile.per_gpu.size(), 4u);
  EXPECT_EQ(profile.per_gpu[2].points.size(), 7u);
  EXPECT_THAT(report::to_markdown(run_dir), HasSubstr("per-GPU limits [125,125,225,125] W saved"));
  EXPECT_THAT(report::to_html(run_dir), HasSubstr("125, 125, 225, 125 W by rank (one limit would "
                                                  "be 175 W)"));
  // Measuring only, the saved curves say what the plan would save against the limit the GPUs
  // run at (their maximum, restored); no limit is set.
  test::ScopedEnv measure("ZEUS_MEASURE_ONLY", "true");
  const TrainResult watched = run({.device = kStraggler}, dir / "plan");
  EXPECT_TRUE(watched.measure_only);
  EXPECT_EQ(watched.power_limit_plan, "measure_only");
  EXPECT_EQ(watched.power_limits_mw, want);
  EXPECT_GT(watched.estimated_plan_energy_saving_j, 0);
  for (const auto& e : watched.epochs) {
    EXPECT_EQ(e.power_limit_mw, 250'000);
  }
  EXPECT_THAT(contract::summary_line(watched),
              HasSubstr("per-GPU limits [125,125,225,125] W would have saved"));
}

TEST(PerGpuJob, EqualGpusGetZeusChoiceAndASavedProfileIsPlannedWithoutProfiling) {
  test::TempDir dir;
  const TrainResult first = run({.device = "sim:v100:cifar100:1024", .ranks = 2}, dir.path());
  ASSERT_TRUE(first.optimal_power_limit_mw);
  EXPECT_EQ(first.power_limits_mw, std::vector<int64_t>(2, *first.optimal_power_limit_mw));
  EXPECT_TRUE(first.profiled);
  const TrainResult again = run({.device = "sim:v100:cifar100:1024", .ranks = 2}, dir.path());
  EXPECT_FALSE(again.profiled);
  EXPECT_EQ(again.power_limits_mw, first.power_limits_mw);
  EXPECT_TRUE(again.windows.empty());
}

// Heat: GPU 3 of four equal GPUs becomes 25% slower after the second epoch. The plan, Zeus's one
// limit until then, follows within two checks (200 steps) and then spends less than the plan
// that does not follow.
TEST(PerGpuJob, FollowsAGpuThatSlowsDownMidRun) {
  test::TempDir dir;
  const auto world = [&](const std::string& name, bool follow) {
    const std::string device =
        fmt::format("sim:v100,v100,v100,v100:cifar100:1024@{}", (dir / (name + ".state")).string());
    return World{.device = device,
                 .epochs = 4,
                 .train_steps = 300,
                 .follow_pace = follow,
                 .between_epochs = [device](int epoch) {
                   if (epoch == 1) {
                     device::sim::SimGpuSet node(device::sim::parse_sim_spec(device));
                     node.set_slowdown(3, 1.25);
                   }
                 }};
  };
  const TrainResult follow = run(world("follow", true), dir / "follow");
  const TrainResult stay = run(world("stay", false), dir / "stay");
  ASSERT_EQ(follow.replans.size(), 1u);
  const auto& replan = follow.replans.front();
  EXPECT_EQ(replan.epoch, 2);
  EXPECT_THAT(replan.reason, HasSubstr("GPU 3 now takes 1.25x its profiled step time"));
  EXPECT_EQ(replan.power_limits_mw, follow.power_limits_mw);
  // Before: every GPU at one limit; after: the three that wait run lower than the slow one.
  EXPECT_EQ(stay.power_limits_mw, std::vector<int64_t>(4, stay.power_limits_mw.front()));
  EXPECT_TRUE(stay.replans.empty());
  EXPECT_LT(follow.power_limits_mw[0], follow.power_limits_mw[3]);
  EXPECT_LT(train_from(follow, 3).energy_j, train_from(stay, 3).energy_j);
  EXPECT_LE(train_from(follow, 3).time_s, train_from(stay, 3).time_s * 1.0001);
}

TEST(GpuPlan, BusyPowerIsWhatTheWindowLeavesAfterTheWaits) {
  GpuPlan plan({40, 40}, {250'000, 250'000}, {});
  // A 2 s window of 10 steps: GPU 0 worked 1 s and waited 1 s at 40 W; GPU 1 worked all of it.
  const std::vector<double> own{1.0, 2.0};
  const std::vector<double> energy{200 + 40, 300};
  plan.add_window(250'000, 10, 2.0, own, energy);
  ASSERT_EQ(plan.curves()[0].points.size(), 1u);
  EXPECT_EQ(plan.curves()[0].points[0], (optimize::GpuLimitPoint{250'000, 0.1, 200}));
  EXPECT_EQ(plan.curves()[1].points[0], (optimize::GpuLimitPoint{250'000, 0.2, 150}));
  EXPECT_THROW(plan.add_window(250'000, 10, 2.0, std::vector<double>{1.0}, energy), ConfigError);
}

TEST(GpuPlan, APaceChangeIsActedOnWhenTwoChecksAgree) {
  GpuPlan plan({40, 40}, {250'000, 250'000}, {});
  for (int64_t limit : {250'000, 200'000, 150'000}) {
    const double t = 0.1 * 250'000 / static_cast<double>(limit);
    const std::vector<double> own{t * 10, t * 10};
    const std::vector<double> energy{t * 10 * limit / 1000.0, t * 10 * limit / 1000.0};
    plan.add_window(limit, 10, t * 10, own, energy);
  }
  const auto before = plan.plan().limits_mw;
  ASSERT_EQ(before[0], before[1]);
  const auto own_at = [&](double pace1) {
    const double t0 = 100 * plan.outcome().time_s;  // both GPUs at the same limit and pace 1
    return std::vector<double>{t0, t0 * pace1};
  };
  EXPECT_FALSE(plan.observe(100, own_at(1.02)));  // within the tolerance
  EXPECT_FALSE(plan.observe(100, own_at(1.5)));   // once: a suspect
  EXPECT_FALSE(plan.observe(100, own_at(1.0)));   // back: forgotten
  EXPECT_FALSE(plan.observe(100, own_at(1.5)));
  const auto reason = plan.observe(100, own_at(1.5));
  ASSERT_TRUE(reason);
  EXPECT_THAT(*reason, HasSubstr("GPU 1 now takes 1.50x"));
  EXPECT_DOUBLE_EQ(plan.pace()[1], 1.5);
  EXPECT_LT(plan.limits_mw()[0], plan.limits_mw()[1]);
}

TEST(JobMessages, WindowAndCurvesRoundTrip) {
  const RankInfo rank1{.rank = 1, .world_size = 2, .local_rank = 1, .local_world_size = 2};
  const RankInfo rank0{.rank = 0, .world_size = 2, .local_rank = 0, .local_world_size = 2};
  const std::vector<double> gpu_j{10, 20};
  const std::vector<int> gpu_ranks{0, 1};
  auto v0 = WindowMessage::contribution(rank0, WindowMessage::gather(2.0, 1.5, gpu_j, gpu_ranks));
  const auto v1 = WindowMessage::contribution(rank1, WindowMessage::gather(2.5, 2.5, {}, {}));
  for (size_t i = 0; i < v0.size(); ++i) {
    v0[i] += v1[i];
  }
  const WindowMessage w = WindowMessage::decode(v0, 2);
  EXPECT_DOUBLE_EQ(w.max_elapsed_s, 2.5);
  EXPECT_DOUBLE_EQ(w.energy_j, 30);
  EXPECT_EQ(w.own_s, (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(w.rank_gpu_energy_j, (std::vector<double>{10, 20}));
  const std::vector<optimize::GpuCurve> curves{
      {{{250'000, 0.1, 200}, {200'000, 0.12, 170}}, 40, 250'000},
      {{{300'000, 0.2, 250}}, 30, 300'000}};
  const auto head = CurvesMessage::header(curves);
  const auto body = CurvesMessage::encode(curves);
  EXPECT_EQ(body.size(), CurvesMessage::size(head));
  EXPECT_EQ(CurvesMessage::decode(head, body), curves);
  EXPECT_THROW(CurvesMessage::decode(head, std::vector<double>(body.begin(), body.end() - 1)),
               InternalError);  // the collectives' contract: a bug, not a peer's fault
  auto lying = body;
  lying[2] = 3;  // GPU 0 claims 3 points: the body ends inside GPU 1's
  EXPECT_THROW(CurvesMessage::decode(head, lying), DistError);
}

// Note [sampled pace] (issue #52): the waits at the gradient sync are counted (on CUDA a stream
// synchronize a step) while profiling and over each pace check's sample of kPaceSampleSteps, not
// for the whole job. Rank 0 looks after each of its train steps; rank 1 toggles the same
// process-wide switch at the same steps, a step or so apart, hence the tolerance.
TEST(PerGpuJob, TheWaitsAreCountedOnlyWhileProfilingAndOverThePaceSamples) {
  test::TempDir dir;
  test::ScopedEnv no_state("ZEUS_SIM_STATE", std::nullopt);
  test::ScopedEnv no_gpus("ZEUS_SIM_GPUS", std::nullopt);
  test::ScopedEnv no_plan("ZEUS_POWER_LIMIT_PLAN", std::nullopt);
  test::ThreadWorld threads(2, 2);
  std::vector<int> armed_steps;  // rank 0: per epoch
  std::vector<int> steps;
  const auto errors = test::run_ranks(threads, [&](int rank, Collectives& c) {
    JobOptions o = test::quick_sim_job(dir.path());
    o.device = "sim:v100,v100*1.2:cifar100:1024";
    o.per_gpu_limits = true;
    EnergyJob job(resolve_job_options(o, 2, 16, 2), c);
    while (auto epoch = job.next_epoch()) {
      const int n = *epoch == 0 ? 30 : 500;
      int armed = 0;
      job.begin_train_epoch(n);
      for (int i = 0; i < n; ++i) {
        job.train_step_begin();
        job.train_step_end();
        armed += sync_wait::armed() ? 1 : 0;
      }
      job.end_train_epoch();
      job.begin_eval_epoch(5);
      for (int i = 0; i < 5; ++i) {
        job.eval_step_end();
      }
      job.end_eval_epoch();
      job.report_metric(0.5);
      if (rank == 0) {
        armed_steps.push_back(armed);
        steps.push_back(n);
      }
    }
  });
  for (const auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  ASSERT_EQ(armed_steps.size(), 2u);
  EXPECT_GE(armed_steps[0], 20) << "profiling (7 limits x 3 steps) counts the waits";
  // After the plan, 5 checks in 500 steps, each over its last kPaceSampleSteps.
  const int sampled = static_cast<int>(steps[1] / kDriftCheckSteps * kPaceSampleSteps);
  EXPECT_NEAR(armed_steps[1], sampled, 12) << "of " << steps[1] << " steps";
  EXPECT_LT(armed_steps[1], steps[1] / 3) << "not the whole job";
  EXPECT_FALSE(sync_wait::armed()) << "the job ended disarmed";
}

// A job on the machine's clock whose program averages gradients without GradientSync: no wait is
// counted, so the plan runs on wall time; the master says so once, naming what to do.
TEST(PerGpuJob, APlanOnWallTimeIsSaidOnce) {
  test::TempDir dir;
  test::FakeNvml nvml(test::four_a40s());
  test::ScopedEnv no_plan("ZEUS_POWER_LIMIT_PLAN", std::nullopt);
  std::ostringstream said;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(said);
  logger().sinks().push_back(sink);
  test::ThreadWorld threads(2, 2);
  const auto errors = test::run_ranks(threads, [&](int, Collectives& c) {
    JobOptions o = test::quick_sim_job(dir.path());
    o.device = "nvml";
    o.per_gpu_limits = true;
    EnergyJob job(resolve_job_options(o, 2, 16, 2), c);
    while (auto epoch = job.next_epoch()) {
      test::run_epoch(job, *epoch == 0 ? 30 : 250, 2, 0.5);
    }
  });
  logger().sinks().pop_back();
  for (const auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  const std::string text = said.str();
  const auto first = text.find("no zeus::distributed::GradientSync counted a wait");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("no zeus::distributed::GradientSync counted a wait", first + 1),
            std::string::npos)
      << "said once";
  EXPECT_THAT(text, HasSubstr("ZEUS_POWER_LIMIT_PLAN=global"));
}

// Issue #52: a profile keeps each GPU's curve under its UUID and host. A rerun on the same GPUs
// finds its curves by them, whatever their order in the file; a rerun on other GPUs profiles
// again; a profile without curves (a global job's, Zeus's) is used with Zeus's one limit.
TEST(PerGpuJob, SavedCurvesAreFoundByGpuNotByRank) {
  test::TempDir dir;
  const World straggler{.device = "sim:v100,v100*1.2:cifar100:1024", .ranks = 2};
  const TrainResult first = run(straggler, dir.path());
  ASSERT_TRUE(first.profiled);
  ASSERT_LT(first.power_limits_mw[0], first.power_limits_mw[1])
      << "a plan that tells the GPUs apart";
  const auto file = contract::power_profile_path(dir.path(), 32);
  auto profile = optimize::power_profile_from_json(read_file(file), "profile");
  ASSERT_EQ(profile.per_gpu.size(), 2u);
  EXPECT_EQ(profile.per_gpu[0].uuid, "SIM-v100-0");
  EXPECT_EQ(profile.per_gpu[1].uuid, "SIM-v100-1");
  EXPECT_EQ(profile.per_gpu[0].host, host_name());
  // The file's curves in the other order: found by UUID, the same plan by rank.
  std::swap(profile.per_gpu[0], profile.per_gpu[1]);
  std::swap(profile.optimal_per_gpu_mw[0], profile.optimal_per_gpu_mw[1]);
  write_file_atomic(file, optimize::to_json(profile));
  const TrainResult again = run(straggler, dir.path());
  EXPECT_FALSE(again.profiled);
  EXPECT_EQ(again.power_limits_mw, first.power_limits_mw);
  // Curves of other GPUs (another node's): profiled again, and the file now holds these.
  for (auto& c : profile.per_gpu) {
    c.host = "another-node";
  }
  write_file_atomic(file, optimize::to_json(profile));
  const TrainResult other = run(straggler, dir.path());
  EXPECT_TRUE(other.profiled);
  EXPECT_EQ(optimize::power_profile_from_json(read_file(file), "profile").per_gpu[0].host,
            host_name());
  // No curves: Zeus's one limit from the file, and the log says why.
  profile.per_gpu.clear();
  profile.optimal_per_gpu_mw.clear();
  write_file_atomic(file, optimize::to_json(profile));
  std::ostringstream said;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(said);
  logger().sinks().push_back(sink);
  const TrainResult global = run(straggler, dir.path());
  logger().sinks().pop_back();
  EXPECT_FALSE(global.profiled);
  EXPECT_EQ(global.power_limits_mw, std::vector<int64_t>(2, profile.optimal_power_limit_mw));
  EXPECT_THAT(said.str(), HasSubstr("it has no per-GPU curves"));
}

}  // namespace
}  // namespace zeus::job
