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
#include "zeus/common/posix.h"
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
  write_journal(journal, {.locator = "nvml",
                          .host = "host",
                          .pid = 1,
                          .gpus = {{0, "GPU-00000000-0000-0000-0000-000000000000", 200'000},
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

// A journal as a killed job leaves it: GPU 0's original limit, written by a process that is gone.
PowerLimitJournal stale_journal(int64_t original_mw) {
  PowerLimitJournal j = journal_of_this_process("nvml");
  test::Child gone({"/bin/true"});
  j.pid = gone.pid();
  j.pid_start = process_start_ticks(gone.pid());
  gone.wait();
  j.gpus = {{0, "GPU-00000000-0000-0000-0000-000000000000", original_mw}};
  return j;
}

TEST(Journal, TellsWhoseItIs) {
  PowerLimitJournal mine = journal_of_this_process("nvml");
  EXPECT_EQ(journal_owner(mine), JournalOwner::kThisProcess);
  EXPECT_EQ(journal_owner(stale_journal(1)), JournalOwner::kGone);
  test::Child sleeper({"/bin/sleep", "30"});
  PowerLimitJournal live = mine;
  live.pid = sleeper.pid();
  live.pid_start = process_start_ticks(sleeper.pid());
  EXPECT_EQ(journal_owner(live), JournalOwner::kAlive);
  live.pid_start = *live.pid_start + 1;  // the pid was reused by another process
  EXPECT_EQ(journal_owner(live), JournalOwner::kGone);
  sleeper.kill(SIGKILL);
  sleeper.wait();
  PowerLimitJournal other = mine;
  other.host = "some-other-node";
  EXPECT_EQ(journal_owner(other), JournalOwner::kOtherHost);
  EXPECT_THAT(describe_owner(other, JournalOwner::kOtherHost), HasSubstr("some-other-node"));
  other = mine;
  other.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_EQ(journal_owner(other), JournalOwner::kOtherBoot);
}

// The bug this guards against: a job SIGKILLed while profiling left GPU 0 at 225 W with a
// journal saying 280 W. The next job must put 280 W back before it reads "the limit it found",
// or it would restore 225 W at its end and delete the only record of 280 W.
TEST(PowerLimitGuard, RestoresAStaleJournalBeforeTakingTheGpus) {
  auto spec = site_gpus();
  spec[0].limit_mw = 225'000;  // as the killed job left it
  test::FakeNvml fake(spec);
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  write_journal(journal, stale_journal(280'000));
  {
    nvml::NvmlGpuSet gpus;
    PowerLimitGuard guard(gpus, {.journal_path = journal});
    EXPECT_EQ(fake.limit_mw(0), 280'000) << "restored before anything else";
    EXPECT_FALSE(std::filesystem::exists(journal)) << "its limits are back";
    guard.set_power_limit_mw(0, 150'000);
    EXPECT_THAT(guard.originals(), ElementsAre(Pair(0, 280'000)));
    EXPECT_EQ(read_journal(journal).pid, ::getpid()) << "now this job's";
  }
  EXPECT_EQ(fake.limit_mw(0), 280'000);
  EXPECT_FALSE(std::filesystem::exists(journal));
}

TEST(PowerLimitGuard, LeavesAJournalOfALiveJobOrAnotherHostAloneAndRefuses) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  test::Child sleeper({"/bin/sleep", "30"});
  PowerLimitJournal live = stale_journal(280'000);
  live.pid = sleeper.pid();
  live.pid_start = process_start_ticks(sleeper.pid());
  PowerLimitJournal other = stale_journal(280'000);
  other.host = "node-b";
  for (const auto& [j, says] :
       {std::pair{live, std::string("still running")}, std::pair{other, std::string("node-b")}}) {
    write_journal(journal, j);
    const std::string before = read_file(journal);
    nvml::NvmlGpuSet gpus;
    try {
      PowerLimitGuard guard(gpus, {.journal_path = journal});
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(says));
      EXPECT_THAT(e.what(), HasSubstr(journal.string()));
    }
    EXPECT_EQ(read_file(journal), before) << "never overwritten";
    EXPECT_EQ(fake.limit_mw(0), 300'000) << "not applied";
  }
  sleeper.kill(SIGKILL);
  sleeper.wait();
}

TEST(PowerLimitGuard, AJournalOfAPreviousBootIsSetAsideNotApplied) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  PowerLimitJournal old = stale_journal(150'000);
  old.boot_id = "00000000-0000-0000-0000-000000000000";
  write_journal(journal, old);
  {
    nvml::NvmlGpuSet gpus;
    PowerLimitGuard guard(gpus, {.journal_path = journal});
    EXPECT_EQ(fake.limit_mw(0), 300'000);
  }
  EXPECT_FALSE(std::filesystem::exists(journal));
  EXPECT_EQ(read_journal(journal.string() + ".previous-boot").gpus.at(0).limit_mw, 150'000);
}

TEST(RestoreLimits, ReportsAJournalThatIsNotAGoneProcesssUnlessForced) {
  test::FakeNvml fake(site_gpus());
  test::TempDir dir;
  const auto journal = dir / "power-limits.journal";
  PowerLimitJournal other = stale_journal(200'000);
  other.host = "node-b";
  write_journal(journal, other);
  const auto refused =
      test::run_process({ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string()});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("node-b"));
  EXPECT_THAT(refused.err, HasSubstr("on that machine"));
  EXPECT_EQ(fake.limit_mw(0), 300'000);
  PowerLimitJournal rebooted = stale_journal(200'000);
  rebooted.boot_id = "00000000-0000-0000-0000-000000000000";
  write_journal(journal, rebooted);
  const auto boot =
      test::run_process({ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string()});
  EXPECT_EQ(boot.exit_code, 2);
  EXPECT_THAT(boot.err, HasSubstr("rebooted"));
  const auto forced = test::run_process(
      {ZEUS_CLI_PATH, "restore-limits", "--journal", journal.string(), "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(fake.limit_mw(0), 200'000);
  EXPECT_FALSE(std::filesystem::exists(journal));
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
