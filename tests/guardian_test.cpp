// The guardian (launch/guardian.h): the one program that restores what a process left changed
// when it died. Run here as `zeus __guardian --pid P --journal J`, the form the Python
// watchdog's body and zeus run's sentinel share, over the fake NVML.
#include "zeus/launch/guardian.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/device/power_limit_journal.h"

namespace zeus::launch {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

// A journal as a killed process leaves it: GPU 0 was at `original_mw` before; returns the pid.
int64_t write_left_journal(const std::filesystem::path& path, int64_t original_mw) {
  device::PowerLimitJournal j = device::journal_of_this_process("nvml");
  test::Child gone({"/bin/true"});
  j.pid = gone.pid();
  j.pid_start = process_start_ticks(gone.pid());
  gone.wait();
  j.gpus = {{0, "GPU-00000000-0000-0000-0000-000000000000", original_mw}};
  device::write_journal(path, j);
  return j.pid;
}

TEST(Guardian, ArgumentsRoundTripAndMistakesAreNamed) {
  GuardianOptions o;
  o.owner_pid = 42;
  o.journals = {"/tmp/a.journal"};
  o.journal_dirs = {"/tmp/d"};
  o.node_rank = 3;
  o.grace_period = std::chrono::milliseconds(1500);
  o.retry_for = seconds(7);
  o.name = "n";
  const GuardianOptions back = parse_guardian_args(guardian_args(o));
  EXPECT_EQ(back.owner_pid, 42);
  EXPECT_EQ(back.journals, o.journals);
  EXPECT_EQ(back.journal_dirs, o.journal_dirs);
  EXPECT_EQ(back.node_rank, 3);
  EXPECT_EQ(back.grace_period, o.grace_period);
  EXPECT_EQ(back.retry_for, o.retry_for);
  EXPECT_EQ(back.name, "n");
  EXPECT_THROW(parse_guardian_args({"--pid", "1", "--bogus", "2"}), ConfigError);
  EXPECT_THROW(parse_guardian_args({"--pid", "x"}), ConfigError);
  EXPECT_THROW(parse_guardian_args({"--journal", "j"}), ConfigError) << "whom it guards";
  const auto r = test::run_process({ZEUS_CLI_PATH, "__guardian", "--pid", "1", "--bogus", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
}

// A process that died with GPU 0 lowered to 200 W (its original 300 W in its journal), GPU 0's
// setter failing with `set_error`; argv() is the guardian's command line for it.
class LeftLowered : public ::testing::Test {
 protected:
  void lower_with(int set_error) {
    pid_ = write_left_journal(journal_, 300'000);
    fake_.set_gpu_value(0, "limit_mw", 200'000);
    fake_.set_gpu_value(0, "faults", {{"set_error", set_error}});
  }
  std::vector<std::string> argv(int retry_for_s) const {
    return {ZEUS_CLI_PATH, "__guardian",      "--pid",         std::to_string(pid_),
            "--journal",   journal_.string(), "--retry-for-s", std::to_string(retry_for_s)};
  }

  test::FakeNvml fake_{test::four_a40s()};
  test::TempDir dir_;
  std::filesystem::path journal_ = dir_ / "gplo.journal";
  int64_t pid_ = 0;
};

TEST_F(LeftLowered, AFailedRestoreIsRetriedUntilTheGpuTakesIt) {
  lower_with(test::kNvmlErrorUnknown);
  test::Child guardian(argv(30), {}, test::Child::Stderr::kMerged);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(fake_.limit_mw(0), 200'000);
  EXPECT_TRUE(std::filesystem::exists(journal_)) << "a failed restore keeps its journal";
  fake_.set_gpu_value(0, "faults", nlohmann::json::object());
  EXPECT_TRUE(test::eventually([&] { return fake_.limit_mw(0) == 300'000; }, seconds(15)));
  const auto r = guardian.wait();
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("retrying in"));
  EXPECT_FALSE(std::filesystem::exists(journal_));
}

TEST_F(LeftLowered, AGpuThatIsGoneIsLeftInTheJournalForTheNextJob) {
  lower_with(test::kNvmlErrorGpuIsLost);
  const auto r = test::run_process(argv(30), seconds(10));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("retrying"))) << "a GPU that is gone is not retried";
  EXPECT_TRUE(std::filesystem::exists(journal_));
}

TEST_F(LeftLowered, RetriesEndAfterTheirWindowAndTheJournalStays) {
  lower_with(test::kNvmlErrorUnknown);
  const auto r = test::run_process(argv(2), seconds(20));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the journals stay for the next job"));
  EXPECT_TRUE(std::filesystem::exists(journal_));
}

}  // namespace
}  // namespace zeus::launch
