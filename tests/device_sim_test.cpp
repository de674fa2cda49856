#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/device/discovery.h"
#include "zeus/device/sim/sim_gpu_set.h"

using namespace std::chrono_literals;
using ::testing::HasSubstr;

namespace zeus::device::sim {
namespace {

SimGpuSetOptions v100(int gpus = 1) {
  SimGpuSetOptions options;
  options.gpu_model = "v100";
  options.workload = "imagenet";
  options.gpu_count = gpus;
  return options;
}

TEST(ParseSimSpec, DefaultsAndFields) {
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", "3");
  test::ScopedEnv state("ZEUS_SIM_STATE", std::nullopt);
  auto o = parse_sim_spec("sim:a40");
  EXPECT_EQ(o.gpu_model, "a40");
  EXPECT_EQ(o.workload, "imagenet");
  EXPECT_FALSE(o.batch_size.has_value());
  EXPECT_EQ(o.gpu_count, 3);
  EXPECT_TRUE(o.state_path.empty());
  o = parse_sim_spec("sim:p100:librispeech:32@/tmp/state");
  EXPECT_EQ(o.workload, "librispeech");
  EXPECT_EQ(o.batch_size, 32);
  EXPECT_EQ(o.state_path, "/tmp/state");
}

TEST(ParseSimSpec, RejectsBadSpecsWithTheGrammar) {
  const std::pair<const char*, const char*> cases[] = {
      {"sim:", "no GPU model after 'sim:'"},
      {"sim:h100", "unknown simulated GPU 'h100'; choose a40, p100, rtx6000 or v100"},
      {"sim:v100:mnist", "unknown workload 'mnist'; the traces have: "},
      {"sim:v100:imagenet:0", "batch size '0' is not a positive integer"},
      {"sim:v100:imagenet:12x", "batch size '12x' is not a positive integer"},
      {"sim:v100:a:b:c", "4 fields where at most 3 (gpu, workload, batch size) go"},
      {"sim:v100@", "empty state file after '@'"},
      {"sim:v100,", "GPU entry '' names no model"},
      {"sim:v100,h100", "unknown simulated GPU 'h100'"},
      {"sim:v100*0", "slowdown '0' of GPU entry 'v100*0' is not a number > 0"},
      {"sim:v100,v100*fast", "slowdown 'fast' of GPU entry 'v100*fast' is not a number > 0"},
      {"v100", "does not start with 'sim:'"}};
  for (const auto& [bad, why] : cases) {
    try {
      parse_sim_spec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("device '{}': {}", bad, why))) << bad;
      EXPECT_THAT(e.what(),
                  HasSubstr("expected sim:<gpu>[*<slowdown>][,<gpu>[*<slowdown>]...][:<workload>[:"
                            "<batch size>]][@<state file>], e.g. sim:v100"))
          << bad;
    }
  }
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", "0");
  try {
    parse_sim_spec("sim:v100");
    ADD_FAILURE() << "ZEUS_SIM_GPUS=0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ZEUS_SIM_GPUS='0' must be an integer in 1-"));
  }
}

TEST(ParseSimSpec, OneEntryPerGpuWithSlowdowns) {
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", std::nullopt);
  test::ScopedEnv state("ZEUS_SIM_STATE", std::nullopt);
  auto o = parse_sim_spec("sim:v100,v100,v100*1.15,a40:cifar100:1024");
  EXPECT_EQ(o.gpu_count, 4);
  ASSERT_EQ(o.mix.size(), 4u);
  EXPECT_EQ(o.mix[2], (SimGpuEntry{"v100", 1.15}));
  EXPECT_EQ(o.mix[3], (SimGpuEntry{"a40", 1.0}));
  EXPECT_EQ(o.workload, "cifar100");
  EXPECT_EQ(o.batch_size, 1024);
  // One entry keeps its meaning: the count from ZEUS_SIM_GPUS, each GPU that entry.
  test::ScopedEnv three("ZEUS_SIM_GPUS", "3");
  o = parse_sim_spec("sim:v100*1.2");
  EXPECT_EQ(o.gpu_count, 3);
  EXPECT_EQ(o.mix, (std::vector<SimGpuEntry>{{"v100", 1.2}}));
  EXPECT_TRUE(parse_sim_spec("sim:v100").mix.empty());
  try {
    parse_sim_spec("sim:v100,a40");
    ADD_FAILURE() << "2 entries with ZEUS_SIM_GPUS=3 were accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("2 GPUs listed, but ZEUS_SIM_GPUS='3'"));
  }
}

TEST(SimGpuSet, EachGpuRunsItsOwnModelAndSlowdown) {
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", std::nullopt);
  test::ScopedEnv state("ZEUS_SIM_STATE", std::nullopt);
  SimGpuSet set(parse_sim_spec("sim:v100,v100*1.25,a40:imagenet:256"));
  ASSERT_EQ(set.count(), 3);
  EXPECT_EQ(set.locator(), "sim:v100,v100*1.25,a40:imagenet:256");
  EXPECT_EQ(set.model(2), "a40");
  EXPECT_EQ(set.power_limit_constraints_mw(2).max_mw, 300'000);
  EXPECT_EQ(set.power_limit_constraints_mw(0).max_mw, 250'000);
  EXPECT_DOUBLE_EQ(set.idle_power_w(2), 30.0);
  EXPECT_THAT(set.name(2), HasSubstr("A40"));
  EXPECT_THAT(set.describe(1), HasSubstr("1.25x slower"));
  // The slowdown stretches the step, not the power: the slow GPU spends 1.25x the energy.
  const auto fast = set.run_iterations(0, 10);
  const auto slow = set.run_iterations(1, 10);
  EXPECT_NEAR(static_cast<double>(slow.count()) / static_cast<double>(fast.count()), 1.25, 1e-6);
  EXPECT_NEAR(static_cast<double>(*set.energy_mj(1)) / static_cast<double>(*set.energy_mj(0)), 1.25,
              1e-3);
  EXPECT_EQ(set.power_mw(0), set.power_mw(1));
  // Heat: the GPU slows down mid-run, and its next steps take the new pace.
  set.set_slowdown(0, 1.5);
  EXPECT_NEAR(
      static_cast<double>(set.run_iterations(0, 10).count()) / static_cast<double>(fast.count()),
      1.5, 1e-6);
  EXPECT_THROW(set.set_slowdown(0, 0.0), ConfigError);
  EXPECT_EQ(set.trace_iteration_time(1, 250'000), set.trace_iteration_time(0, 250'000));
}

TEST(SimGpuSet, MixMustMatchTheCountAndTheStateFile) {
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", std::nullopt);
  test::ScopedEnv state("ZEUS_SIM_STATE", std::nullopt);
  test::TempDir dir;
  const std::string path = (dir.path() / "node.state").string();
  SimGpuSetOptions o = parse_sim_spec("sim:v100,v100*1.2@" + path);
  {
    SimGpuSet first(o);
    first.set_slowdown(1, 2.0);
    SimGpuSet second(o);  // the same node: the changed slowdown is shared
    EXPECT_DOUBLE_EQ(second.slowdown(1), 2.0);
  }
  try {
    SimGpuSet other(parse_sim_spec("sim:v100,v100*1.3@" + path));
    ADD_FAILURE() << "another mix was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds 2 x v100,v100*1.2:imagenet:256"));
  }
  o.gpu_count = 3;
  o.state_path.clear();
  try {
    SimGpuSet wrong(o);
    ADD_FAILURE() << "3 GPUs from a 2-entry mix were accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sim:v100,v100*1.2 lists 2 GPUs, but 3 are asked for"));
  }
}

TEST(SimGpuSet, ConstraintsComeFromTheTraces) {
  SimGpuSet gpus(v100(2));
  EXPECT_EQ(gpus.count(), 2);
  EXPECT_EQ(gpus.power_limit_constraints_mw(0).min_mw, 100'000);
  EXPECT_EQ(gpus.power_limit_constraints_mw(0).max_mw, 250'000);
  EXPECT_EQ(gpus.default_power_limit_mw(1), 250'000);
  EXPECT_EQ(gpus.power_limit_mw(1), 250'000);
  EXPECT_EQ(gpus.batch_size(), 256);
  EXPECT_EQ(gpus.locator(), "sim:v100:imagenet:256");
  EXPECT_NE(gpus.uuid(0), gpus.uuid(1));
  EXPECT_THAT(gpus.name(0), HasSubstr("V100"));
  EXPECT_THROW(gpus.set_power_limit_mw(0, 300'000), ConfigError);
  EXPECT_THROW(gpus.set_power_limit_mw(0, 99'000), ConfigError);
  EXPECT_THROW(gpus.power_mw(2), ConfigError);
}

TEST(SimGpuSet, VirtualClockReproducesTraceTimeAndEnergy) {
  SimGpuSet gpus(v100());
  const auto profile = trace::PowerTrace::load_gpu("v100").profile("imagenet", 256);
  const double iters_per_epoch = std::ceil(1'281'167.0 / 256.0);
  for (const int64_t limit_w : {250, 175, 100}) {
    gpus.set_power_limit_mw(0, limit_w * 1000);
    const auto e0 = *gpus.energy_mj(0);
    const auto t0 = gpus.now(0);
    const auto took = gpus.run_iterations(0, 100);
    const double expected_s =
        100 * profile.time_per_epoch_s(static_cast<double>(limit_w)) / iters_per_epoch;
    EXPECT_NEAR(std::chrono::duration<double>(took).count(), expected_s, 1e-6) << limit_w;
    EXPECT_EQ(gpus.now(0) - t0, took);
    const double energy_j = static_cast<double>(*gpus.energy_mj(0) - e0) / 1000.0;
    EXPECT_NEAR(energy_j, expected_s * profile.average_power_w(static_cast<double>(limit_w)), 0.01)
        << limit_w;
  }
  // Idle time accrues idle power only.
  const auto e0 = *gpus.energy_mj(0);
  gpus.idle(0, 10s);
  EXPECT_NEAR(static_cast<double>(*gpus.energy_mj(0) - e0) / 1000.0, 10 * gpus.idle_power_w(0),
              0.01);
  EXPECT_EQ(gpus.power_mw(0), static_cast<int64_t>(gpus.idle_power_w(0) * 1000));
}

TEST(SimGpuSet, LowerLimitIsSlowerAndDrawsLessPower) {
  SimGpuSet gpus(v100());
  const auto fast = gpus.iteration_time(0);
  gpus.set_busy(0, true);
  const auto power_fast = gpus.power_mw(0);
  gpus.set_power_limit_mw(0, 100'000);
  EXPECT_GT(gpus.iteration_time(0), fast);
  EXPECT_LT(gpus.power_mw(0), power_fast);
}

TEST(SimGpuSet, SharedStateFileCouplesProcesses) {
  test::TempDir dir;
  auto options = v100(2);
  options.state_path = dir / "sim.state";
  SimGpuSet master(options);
  // A limit the local master sets on GPU 1 slows rank 1's steps, even in another process.
  const auto before = master.iteration_time(1);
  const pid_t pid = ::fork();
  if (pid == 0) {
    SimGpuSet other(options);
    other.set_power_limit_mw(1, 100'000);
    ::_exit(other.power_limit_mw(1) == 100'000 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(master.power_limit_mw(1), 100'000);
  EXPECT_EQ(master.power_limit_mw(0), 250'000);
  EXPECT_GT(master.iteration_time(1), before);
  EXPECT_EQ(master.locator(), "sim:v100:imagenet:256@" + options.state_path.string());
}

TEST(SimGpuSet, MismatchedOrForeignStateFileIsRejected) {
  test::TempDir dir;
  auto options = v100(2);
  options.state_path = dir / "sim.state";
  SimGpuSet first(options);
  auto other = v100(4);
  other.state_path = options.state_path;
  try {
    SimGpuSet second(other);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(options.state_path.string()));
    EXPECT_THAT(e.what(), HasSubstr("2 x v100:imagenet:256"));
  }
  std::ofstream(dir / "junk") << "not a state file";
  other = v100(1);
  other.state_path = dir / "junk";
  EXPECT_THROW(SimGpuSet junk(other), ConfigError);
}

TEST(SimGpuSet, RealClockAccruesEnergyOverWallTime) {
  auto options = v100();
  options.clock = SimClock::kReal;
  options.start_busy = true;
  SimGpuSet gpus(options);
  const auto e0 = *gpus.energy_mj(0);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(100ms);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double energy_j = static_cast<double>(*gpus.energy_mj(0) - e0) / 1000.0;
  const double power_w = static_cast<double>(gpus.power_mw(0)) / 1000.0;
  EXPECT_NEAR(energy_j, power_w * seconds, power_w * 0.01);
}

TEST(OpenGpuSet, OpensSimBySpec) {
  test::ScopedEnv gpus_env("ZEUS_SIM_GPUS", "2");
  test::ScopedEnv state("ZEUS_SIM_STATE", std::nullopt);
  const auto gpus = open_gpu_set("sim:rtx6000:squad:32", {});
  EXPECT_EQ(gpus->count(), 2);
  EXPECT_EQ(gpus->locator(), "sim:rtx6000:squad:32");
}

}  // namespace
}  // namespace zeus::device::sim
