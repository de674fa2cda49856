// `zeus tune` through the binary, with a fake training command (a shell script that writes a
// train result whose cost depends on the batch size): recurrences, thresholds, the history,
// resuming after SIGKILL, and bad input. The real example under `zeus tune` is in example_test.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/posix.h"
#include "zeus/contract/run_files.h"
#include "zeus/optimize/bso_policy.h"
#include "zeus/tune/tuner.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// cost = (bs - 64)^2 / 10 + 100, so 64 is the cheapest; 256 never reaches the target. When
// $SLOW_ON_CALL is N, the N-th call sleeps for a minute first (to be killed meanwhile).
constexpr const char* kFakeTrainer = R"(#!/bin/sh
bs=$1
echo "bs=$bs threshold=$ZEUS_COST_THRESH eta=$ZEUS_ETA_KNOB job=$ZEUS_JOB_ID cap=$ZEUS_MAX_EPOCHS" >> "$ZEUS_LOG_DIR/calls.log"
n=$(wc -l < "$ZEUS_LOG_DIR/calls.log")
# exec: the sleep itself gets the SIGTERM zeus tune arranges for its command when it dies.
if [ -n "$SLOW_ON_CALL" ] && [ "$n" -eq "$SLOW_ON_CALL" ]; then exec sleep 60; fi
reached=true
[ "$bs" -ge 256 ] && reached=false
cost=$(( (bs - 64) * (bs - 64) / 10 + 100 ))
printf '{"energy": %d, "time": 1.5, "cost": %d, "num_epochs": 2, "reached": %s}\n' \
  "$cost" "$cost" "$reached" > "$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$bs.train.json"
)";

struct Fixture {
  test::TempDir dir;
  fs::path script = dir / "trainer.sh";
  Fixture() { write_file_atomic(script, kFakeTrainer); }
  std::vector<std::string> tune_argv(const fs::path& log_dir, int recurrences) const {
    return {ZEUS_CLI_PATH,
            "tune",
            "--batch-sizes",
            "32,64,128,256",
            "--default-batch-size",
            "64",
            "--recurrences",
            std::to_string(recurrences),
            "--log-dir",
            log_dir.string(),
            "--eta",
            "0.5",
            "--",
            "/bin/sh",
            script.string(),
            "{bs}"};
  }
};

std::vector<int64_t> batch_sizes(const std::vector<tune::TuneTry>& tries) {
  std::vector<int64_t> out;
  for (const auto& t : tries)
    out.push_back(t.batch_size);
  return out;
}

TEST(ZeusTune, RunsRecurrencesFeedsTheBanditAndPassesTheThreshold) {
  Fixture f;
  const fs::path log = f.dir / "tune";
  const auto r = test::run_process(f.tune_argv(log, 3));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("recurrence 3/3 done"));
  const auto tries = tune::read_tries(log / contract::kTuneTriesName);
  ASSERT_GE(tries.size(), 3u);
  // The first try is the default batch size, with no threshold yet; it reaches the target.
  EXPECT_EQ(tries[0].batch_size, 64);
  EXPECT_TRUE(tries[0].reached);
  EXPECT_FALSE(std::isfinite(tries[0].cost_threshold));
  EXPECT_DOUBLE_EQ(tries[0].cost, 100);
  // Every recurrence ends with exactly one try that reached, whose recurrence cost sums its tries.
  std::set<int> done;
  double running = 0;
  for (const auto& t : tries) {
    running += t.cost;
    if (t.reached) {
      EXPECT_TRUE(done.insert(t.recurrence).second);
      EXPECT_DOUBLE_EQ(t.recurrence_cost, running);
      running = 0;
    }
    if (&t != &tries.front()) {
      // beta (2) x the cheapest recurrence so far (100 at bs 64).
      EXPECT_DOUBLE_EQ(t.cost_threshold, 200) << t.job_id;
    }
  }
  EXPECT_EQ(done, (std::set<int>{0, 1, 2}));
  // The command saw the thresholds and eta in its environment.
  const std::string calls = read_file(log / "calls.log");
  EXPECT_THAT(calls, HasSubstr("bs=64 threshold=inf eta=0.5 job=rec000+try0"));
  EXPECT_THAT(calls, HasSubstr("threshold=200"));
}

TEST(ZeusTune, ResumesAfterBeingKilledAndMakesTheSameDecisions) {
  Fixture f;
  // Reference: 4 recurrences without interruption.
  const fs::path ref = f.dir / "ref";
  ASSERT_EQ(test::run_process(f.tune_argv(ref, 4)).exit_code, 0);
  const auto want = batch_sizes(tune::read_tries(ref / contract::kTuneTriesName));

  const fs::path log = f.dir / "killed";
  {
    test::Child tuner(f.tune_argv(log, 4), {{"SLOW_ON_CALL", "3"}});
    // Wait for the third call to start, then kill the tuner in the middle of it.
    for (int i = 0; i < 300; ++i) {
      std::error_code ec;
      if (fs::exists(log / "calls.log", ec) &&
          std::count(std::istreambuf_iterator<char>(std::ifstream(log / "calls.log").rdbuf()),
                     std::istreambuf_iterator<char>(), '\n') >= 3)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    tuner.kill(SIGKILL);
    EXPECT_EQ(tuner.wait().signal, SIGKILL);
  }
  EXPECT_EQ(tune::read_tries(log / contract::kTuneTriesName).size(), 2u);
  const auto r = test::run_process(f.tune_argv(log, 4));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("resuming"));
  const auto tries = tune::read_tries(log / contract::kTuneTriesName);
  EXPECT_EQ(batch_sizes(tries), want);
  std::set<std::pair<int, int>> seen;
  for (const auto& t : tries)
    EXPECT_TRUE(seen.insert({t.recurrence, t.attempt}).second) << t.job_id;
  // Running again once done changes nothing.
  const auto again = test::run_process(f.tune_argv(log, 4));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(tune::read_tries(log / contract::kTuneTriesName).size(), tries.size());
}

// A stop reaches the whole command, and a command that ignores SIGTERM is killed after the grace
// period (before: one SIGTERM to the command's pid only, and zeus tune waited on it forever).
TEST(ZeusTune, AStopEndsACommandThatIgnoresSigtermAfterTheGracePeriod) {
  Fixture f;
  const fs::path started = f.dir / "started";
  const std::string mark = test::new_mark();
  test::Child tune({ZEUS_CLI_PATH, "tune", "--batch-sizes", "32,64", "--default-batch-size", "32",
                    "--log-dir", (f.dir / "tune").string(), "--grace-period", "1s", "--", "/bin/sh",
                    "-c", "trap '' TERM; sleep 60 & touch " + started.string() + "; wait", "{bs}"},
                   {{"ZEUS_TEST_MARK", mark}});
  ASSERT_TRUE(test::eventually([&] { return fs::exists(started); }, std::chrono::seconds(20)));
  tune.kill(SIGTERM);
  EXPECT_TRUE(
      test::eventually([&] { return !process_alive(tune.pid()); }, std::chrono::seconds(20)))
      << "zeus tune did not end after the grace period";
  tune.kill(SIGKILL);
  const test::ProcessResult r = tune.wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.out;
  EXPECT_TRUE(
      test::eventually([&] { return test::marked(mark).empty(); }, std::chrono::seconds(10)))
      << "left: " << ::testing::PrintToString(test::marked(mark));
}

TEST(ZeusTune, ADefaultBatchSizeOutsideTheListExitsTwoWithoutRunning) {
  Fixture f;
  const fs::path log = f.dir / "bad";
  auto argv = f.tune_argv(log, 2);
  argv[5] = "48";  // --default-batch-size not in the list
  const auto r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("48"));
  EXPECT_FALSE(fs::exists(log / "calls.log"));
}

TEST(ZeusTune, NoCommandExitsTwo) {
  Fixture f;
  const auto r =
      test::run_process({ZEUS_CLI_PATH, "tune", "--batch-sizes", "32,64", "--default-batch-size",
                         "64", "--log-dir", (f.dir / "bad").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no command"));
}

TEST(ZeusTune, ALogDirOfAnotherTuneRunIsNotResumedWithOtherOptions) {
  Fixture f;
  const fs::path log = f.dir / "other";
  ASSERT_EQ(test::run_process(f.tune_argv(log, 1)).exit_code, 0);
  auto argv = f.tune_argv(log, 1);
  argv[3] = "32,64,128";
  const auto r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("other options"));
}

TEST(ZeusTune, ACommandThatWritesNoResultStopsTheTunerAndRecordsNothing) {
  Fixture f;
  const auto r =
      test::run_process({ZEUS_CLI_PATH, "tune", "--batch-sizes", "32,64", "--default-batch-size",
                         "64", "--log-dir", (f.dir / "none").string(), "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("wrote 0 train results"));
  EXPECT_TRUE(tune::read_tries(f.dir / "none" / contract::kTuneTriesName).empty());
}

// --policy lean --lean gamma=0 over `recurrences` recurrences into `log`.
std::vector<std::string> lean_argv(const Fixture& f, const fs::path& log, int recurrences) {
  auto argv = f.tune_argv(log, recurrences);
  argv.insert(argv.begin() + 2, {"--policy", "lean", "--lean", "gamma=0"});
  return argv;
}

std::string lean_label() {
  return fmt::format("lean ({})", optimize::to_string(optimize::parse_lean_options("gamma=0")));
}

TEST(ZeusTune, LeanPolicyIsRecordedAndCapsDownwardTries) {
  Fixture f;
  const fs::path log = f.dir / "lean";
  const auto r = test::run_process(lean_argv(f, log, 2));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("policy " + lean_label()));
  const auto tries = tune::read_tries(log / contract::kTuneTriesName);
  ASSERT_GE(tries.size(), 2u);
  for (const auto& t : tries) {
    EXPECT_EQ(t.policy, lean_label());
  }
  // The fake trainer reports 2 epochs; the downward try after b0 (32) gets ceil(cap x 2).
  const int cap = static_cast<int>(std::ceil(optimize::parse_lean_options("gamma=0").cap * 2));
  EXPECT_EQ(tries[1].batch_size, 32);
  EXPECT_EQ(tries[1].epoch_cap, cap);
  const std::string calls = read_file(log / "calls.log");
  EXPECT_THAT(calls,
              HasSubstr(fmt::format("bs=32 threshold=200 eta=0.5 job=rec001+try0 cap={}", cap)));
  EXPECT_THAT(calls, HasSubstr("bs=64 threshold=inf eta=0.5 job=rec000+try0 cap=\n"));
}

// The same log dir under zeus, or lean with other knobs, is refused, naming how to resume.
TEST(ZeusTune, ALogDirTunedUnderLeanIsNotResumedUnderAnotherPolicy) {
  Fixture f;
  const fs::path log = f.dir / "lean";
  ASSERT_EQ(test::run_process(lean_argv(f, log, 2)).exit_code, 0);
  const size_t tried = tune::read_tries(log / contract::kTuneTriesName).size();
  auto r = test::run_process(f.tune_argv(log, 3));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("was tuned under policy " + lean_label() + ", not zeus"));
  EXPECT_THAT(r.err, HasSubstr("--policy lean --lean " +
                               optimize::to_string(optimize::parse_lean_options("gamma=0"))));
  auto argv = f.tune_argv(log, 3);
  argv.insert(argv.begin() + 2, {"--policy", "lean"});
  r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("was tuned under policy"));
  EXPECT_EQ(tune::read_tries(log / contract::kTuneTriesName).size(), tried) << "nothing ran";
}

// A tune.json from before policies holds a zeus run: it resumes under zeus only.
TEST(ZeusTune, ATuneLogFromBeforePoliciesResumesUnderZeusOnly) {
  Fixture f;
  const fs::path old = f.dir / "old";
  ASSERT_EQ(test::run_process(f.tune_argv(old, 1)).exit_code, 0);
  auto saved = nlohmann::json::parse(read_file(old / contract::kTuneOptionsName));
  saved.erase("policy");
  write_file_atomic(old / contract::kTuneOptionsName, saved.dump());
  EXPECT_EQ(test::run_process(f.tune_argv(old, 2)).exit_code, 0);
  auto argv = f.tune_argv(old, 3);
  argv.insert(argv.begin() + 2, {"--policy", "lean"});
  const auto r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("was tuned under policy zeus, not lean"));
}

TEST(ZeusTune, LeanKnobsWithoutThePolicyAndAnUnknownPolicyAreRefusedBeforeRunning) {
  Fixture f;
  auto argv = f.tune_argv(f.dir / "bad", 1);
  argv.insert(argv.begin() + 2, {"--lean", "cap=2"});
  auto r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("add --policy lean"));
  argv = f.tune_argv(f.dir / "bad", 1);
  argv.insert(argv.begin() + 2, {"--policy", "greedy"});
  r = test::run_process(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("choose zeus"));
  EXPECT_FALSE(fs::exists(f.dir / "bad" / "calls.log"));
}

}  // namespace
}  // namespace zeus
