// PowerLimitGuard and the journal: limits come back on return, exception, SIGTERM (the guard)
// and SIGKILL (`zeus restore-limits` from the journal). Asserted on the fake NVML's record.
#include "zeus/device/power_limit_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/device/sim/sim_gpu_set.h"

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

namespace zeus::device {
namespace {

// A site that runs its GPUs below the default on purpose: restore must keep that, not the max.
std::vector<test::FakeGpu> site_gpus() {
  auto gpus = test::four_a40s();
  gpus[1].limit_mw = 250'000;
  return gpus;
}

TEST(PowerLimitGuard, RestoresPreviousLimitsOnScopeExitAndRemovesJournal) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  {
    nvml::NvmlGpuSet gpus;
    PowerLimitGuard guard(gpus, {.journal_path = journal});
    guard.set_power_limit_mw(1, 150'000);
    guard.set_power_limit_mw(1, 125'000);
    guard.set_power_limit_mw(3, 200'000);
    EXPECT_THAT(guard.originals(), ElementsAre(Pair(1, 250'000), Pair(3, 300'000)));
    const PowerLimitJournal written = read_journal(journal);
    EXPECT_EQ(written.locator, "nvml");
    ASSERT_EQ(written.gpus.size(), 2u);
    EXPECT_EQ(written.gpus[0].uuid, "GPU-00000000-0000-0000-0000-000000000001");
    EXPECT_EQ(written.gpus[0].limit_mw, 250'000);
    EXPECT_EQ(fake.limit_mw(1), 125'000);
  }
  EXPECT_EQ(fake.limit_mw(1), 250'000);
  EXPECT_EQ(fake.limit_mw(3), 300'000);
  EXPECT_FALSE(std::filesystem::exists(journal));
  const auto history = fake.limit_history();
  ASSERT_EQ(history.size(), 5u);
  EXPECT_THAT(std::vector(history.end() - 2, history.end()),
              ::testing::UnorderedElementsAre(std::pair{1, int64_t{250'000}},
                                              std::pair{3, int64_t{300'000}}));
}

TEST(PowerLimitGuard, RestoresWhenAnExceptionUnwinds) {
  test::FakeNvml fake(site_gpus());
  nvml::NvmlGpuSet gpus;
  try {
    PowerLimitGuard guard(gpus, {});
    guard.set_power_limit_mw(0, 100'000);
    throw std::runtime_error("training failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(fake.limit_mw(0), 300'000);
}

TEST(PowerLimitGuard, BadLimitLeavesNoJournalAndNoChange) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  nvml::NvmlGpuSet gpus;
  PowerLimitGuard guard(gpus, {.journal_path = dir / "j"});
  EXPECT_THROW(guard.set_power_limit_mw(0, 50'000), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(dir / "j"));
  EXPECT_TRUE(guard.originals().empty());
  EXPECT_TRUE(fake.limit_history().empty());
}

TEST(PowerLimitGuard, PermissionDeniedKeepsNothingHalfDone) {
  test::FakeNvml fake(site_gpus());
  fake.set_fault("set_no_permission", true);
  nvml::NvmlGpuSet gpus;
  PowerLimitGuard guard(gpus, {});
  EXPECT_THROW(guard.set_power_limit_mw(0, 200'000), PermissionError);
  EXPECT_EQ(fake.limit_mw(0), 300'000);
}

TEST(PowerLimitGuard, WorksOnSimulatedGpus) {
  sim::SimGpuSetOptions options;
  options.gpu_count = 2;
  sim::SimGpuSet gpus(options);
  {
    PowerLimitGuard guard(gpus, {});
    guard.set_power_limit_mw(1, 150'000);
    EXPECT_EQ(gpus.power_limit_mw(1), 150'000);
  }
  EXPECT_EQ(gpus.power_limit_mw(1), 250'000);
}

TEST(PowerLimitGuard, SigtermInChildRestoresThenDiesBySigterm) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  test::Child child({ZEUS_LIMIT_SETTER_PATH, "nvml", journal.string(), "150000", "125000"});
  ASSERT_TRUE(child.wait_for_output("ready", 30s));
  EXPECT_EQ(fake.limit_mw(0), 150'000);
  EXPECT_EQ(fake.limit_mw(1), 125'000);
  EXPECT_TRUE(std::filesystem::exists(journal));
  child.kill(SIGTERM);
  const auto result = child.wait();
  EXPECT_EQ(result.signal, SIGTERM) << "the signal's default action must still run";
  EXPECT_EQ(fake.limit_mw(0), 300'000);
  EXPECT_EQ(fake.limit_mw(1), 250'000) << "restored to the site's limit, not the maximum";
  EXPECT_FALSE(std::filesystem::exists(journal));
}

TEST(PowerLimitGuard, IgnoredSighupStaysIgnoredUnderNohup) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  // As under nohup: the child inherits SIGHUP ignored across exec.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old {};
  ::sigaction(SIGHUP, &ignore, &old);
  test::Child child({ZEUS_LIMIT_SETTER_PATH, "nvml", journal.string(), "150000"});
  ::sigaction(SIGHUP, &old, nullptr);
  ASSERT_TRUE(child.wait_for_output("ready", 30s));
  child.kill(SIGHUP);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(fake.limit_mw(0), 150'000) << "the run goes on: limits stay set";
  child.kill(SIGTERM);
  EXPECT_EQ(child.wait().signal, SIGTERM);
  EXPECT_EQ(fake.limit_mw(0), 300'000);
}

TEST(PowerLimitGuard, SigkillInChildThenRestoreLimitsFromJournal) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  {
    // The victim sees GPUs 2 and 3 only, as a rank under CUDA_VISIBLE_DEVICES would.
    test::ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "2,3");
    test::Child child({ZEUS_LIMIT_SETTER_PATH, "nvml", journal.string(), "100000", "110000"});
    ASSERT_TRUE(child.wait_for_output("ready", 30s));
    child.kill(SIGKILL);
    EXPECT_EQ(child.wait().signal, SIGKILL);
  }
  EXPECT_EQ(fake.limit_mw(2), 100'000) << "SIGKILL cannot be caught: limits stay changed";
  EXPECT_EQ(fake.limit_mw(3), 110'000);
  ASSERT_TRUE(std::filesystem::exists(journal));

  const auto result =
      test::run_process({ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("restored 2 GPU(s)"));
  EXPECT_EQ(fake.limit_mw(2), 300'000);
  EXPECT_EQ(fake.limit_mw(3), 300'000);
  EXPECT_EQ(fake.limit_mw(1), 250'000);
  EXPECT_FALSE(std::filesystem::exists(journal));

  // Running it again is harmless.
  const auto again =
      test::run_process({ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string()});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_THAT(again.out, HasSubstr("nothing to restore"));
}

TEST(RestoreLimits, CorruptJournalIsUsageErrorAndKept) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  std::ofstream(journal)
      << "{\"format\": \"zeus-power-limits-journal\", \"version\": 1, \"gpus\": [";
  const auto result =
      test::run_process({ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("corrupt"));
  EXPECT_THAT(result.err, HasSubstr(journal.string()));
  EXPECT_TRUE(std::filesystem::exists(journal));
}

TEST(RestoreLimits, FailureKeepsJournalForRetry) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  write_journal(journal, {"nvml",
                          "host",
                          1,
                          {{0, "GPU-00000000-0000-0000-0000-000000000000", 200'000},
                           {9, "GPU-not-here", 200'000}}});
  try {
    restore_from_journal(journal);
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPU-not-here"));
    EXPECT_THAT(e.what(), HasSubstr("journal is kept"));
  }
  EXPECT_EQ(fake.limit_mw(0), 200'000) << "GPUs that can be restored are";
  EXPECT_TRUE(std::filesystem::exists(journal));
}

TEST(Journal, RejectsForeignFiles) {
  test::TempDir dir;
  std::ofstream(dir / "x") << R"({"format": "something", "version": 1})";
  EXPECT_THROW(read_journal(dir / "x"), ConfigError);
  std::ofstream(dir / "y") << R"({"format": "zeus-power-limits-journal", "version": 99})";
  EXPECT_THROW(read_journal(dir / "y"), ConfigError);
  std::ofstream(dir / "z") << R"({"format": "zeus-power-limits-journal", "version": 1,
      "locator": "nvml", "gpus": [{"index": 0, "uuid": "", "limit_mw": 5}]})";
  EXPECT_THROW(read_journal(dir / "z"), ConfigError);
}

}  // namespace
}  // namespace zeus::device
