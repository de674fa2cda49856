// The journal handshake end to end (contract/worker_env.h): a program that chose its own log dir
// in code journals where `zeus run` told it, and runs started at once from one directory keep
// their journals apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "loader_jobs.h"
#include "support/test_support.h"
#include "zeus/device/discovery.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DataLoaderEndToEnd, LimitsOfAProgramWithItsOwnLogDirAreRestoredByTheLauncher) {
  const Expected expected = expected_from_trace(0.5);
  test::TempDir dir;
  const fs::path launcher_log = dir / "launcher";
  const fs::path own = dir / "own";
  auto env = sim_env(dir / "ignored");
  env["ZEUS_LOG_DIR"] = "";
  Job job =
      run_job(env, {"--max-epochs", "3", "--kill-at-step", "20", "--log-dir-in-code", own.string()},
              {"--nproc-per-node", "2", "--standalone", "--log-dir", launcher_log.string()});
  EXPECT_NE(job.result.exit_code, 0) << job.output;
  EXPECT_THAT(job.output, HasSubstr("restored the power limits")) << job.output;
  std::string state;
  for (const auto& e : fs::directory_iterator(own))
    if (e.path().filename().string().starts_with(".sim-"))
      state = e.path().string();
  ASSERT_FALSE(state.empty()) << "the simulated GPUs live in the program's own log dir";
  test::ScopedEnv gpus("ZEUS_SIM_GPUS", "2");
  auto sim = device::open_gpu_set("sim:v100@" + state, {.sim_clock = device::SimClock::kVirtual});
  EXPECT_EQ(sim->power_limit_mw(0), expected.range.max_mw);
  EXPECT_EQ(sim->power_limit_mw(1), expected.range.max_mw);
  EXPECT_FALSE(fs::exists(own / "power-limits.journal")) << "the journal went where zeus run said";
  EXPECT_FALSE(fs::exists(launcher_log / "power-limits.journal")) << "and was settled there";
}

// Two runs at once from one working directory, neither launcher given a log dir, each program
// with the log dir it chose in code: each run journals in a directory of its own
// (zeus_log/.journals/<run>/), so neither takes the other's journal for a live job holding its
// GPUs (before: both used zeus_log/power-limits.journal and the second was refused), and
// nothing is left there afterwards.
TEST(DataLoaderEndToEnd, TwoRunsInOneDirectoryWithTheirOwnLogDirsKeepTheirJournalsApart) {
  test::TempDir dir;
  auto env = sim_env(dir / "ignored");
  env["ZEUS_LOG_DIR"] = "";
  std::vector<std::unique_ptr<test::Child>> runs;
  for (const char* name : {"a", "b"}) {
    std::string cmd = "cd '" + dir.path().string() + "' && exec " + ZEUS_CLI_PATH +
                      " run --nproc-per-node 2 --standalone";
    for (const auto& a : kWorker)
      cmd += " " + a;
    cmd += " --max-epochs 2 --metrics 0.1,0.9 --step-ms 5 --log-dir-in-code '" +
           (dir / name).string() + "'";
    runs.push_back(std::make_unique<test::Child>(
        std::vector<std::string>{"/bin/sh", "-c", cmd + " 2>&1"}, env));
  }
  for (auto& run : runs) {
    const test::ProcessResult r = run->wait();
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("still running"))) << r.out;
  }
  for (const char* name : {"a", "b"}) {
    bool has_result = false;
    for (const auto& e : fs::directory_iterator(dir / name))
      has_result = has_result || e.path().string().ends_with(".train.json");
    EXPECT_TRUE(has_result) << "run " << name << " wrote its result in its own log dir";
  }
  EXPECT_FALSE(fs::exists(dir / "zeus_log" / ".journals")) << "settled and removed";
}

}  // namespace
}  // namespace zeus
