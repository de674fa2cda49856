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
      {"v100", "does not start with 'sim:'"}};
  for (const auto& [bad, why] : cases) {
    try {
      parse_sim_spec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("device '{}': {}", bad, why))) << bad;
      EXPECT_THAT(e.what(), HasSubstr("expected sim:<gpu>[:<workload>[:<batch size>]][@<state "
                                      "file>], e.g. sim:v100"))
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
  EXPECT_NEAR(static_cast<double>(*gpus.energy_mj(0) - e0) / 1000.0, 10 * gpus.idle_power_w(),
              0.01);
  EXPECT_EQ(gpus.power_mw(0), static_cast<int64_t>(gpus.idle_power_w() * 1000));
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
