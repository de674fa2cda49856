// Issue #38: every way a job can be started, against every way its log directory can be given,
// on the fake NVML (the code path of a real GPU) and on the simulated GPU. Each cell is a real
// job (examples/fashion_mnist on a slice of the data, one epoch, short profiling windows) that
// must end with every file of the run contract where it was asked for and nothing elsewhere (no
// stray zeus_log/), the GPUs' limits back where they were. The SIGKILL cells kill a worker in the
// middle of profiling under `zeus run`: the launcher settles the journal wherever the workers
// wrote it. Slurm's srun cells are in slurm_test.cpp (they need the Slurm fixture); the Python
// loader's and optimizer's in python/tests/test_run_dirs.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/run_dir_check.h"
#include "support/test_support.h"

namespace zeus {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using Way = test::LogDirWay;

enum class Start { kAlone, kZeusRun1, kZeusRun2, kLegacyLocalRank, kSpawn };
enum class Gpu { kNvml, kSim };

struct Cell {
  Start start;
  Way way;
  Gpu gpu;
};

std::string name_of(Start s) {
  switch (s) {
    case Start::kAlone:
      return "Alone";
    case Start::kZeusRun1:
      return "ZeusRun1";
    case Start::kZeusRun2:
      return "ZeusRun2";
    case Start::kLegacyLocalRank:
      return "LegacyLocalRank";
    case Start::kSpawn:
      return "Spawn";
  }
  return "?";
}

bool under_launcher(Start s) {
  return s == Start::kZeusRun1 || s == Start::kZeusRun2 || s == Start::kLegacyLocalRank;
}

int world_of(Start s) {
  return s == Start::kAlone || s == Start::kZeusRun1 ? 1 : 2;
}

// `program` (argv) started the cell's way, in the layout's working directory; its output.
test::ProcessResult run_started(Start start, const test::RunLayout& l,
                                std::vector<std::string> program,
                                const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv;
  if (under_launcher(start)) {
    argv = {ZEUS_CLI_PATH, "run", "--nproc-per-node", std::to_string(world_of(start)),
            "--standalone"};
    if (start == Start::kLegacyLocalRank) {
      argv.push_back("--local-rank-arg");
    }
    argv.insert(argv.end(), l.launcher_args.begin(), l.launcher_args.end());
  }
  if (start == Start::kSpawn) {
    program.insert(program.begin() + 1, {"--spawn", "2"});
  }
  argv.insert(argv.end(), program.begin(), program.end());
  test::Child child({"/bin/sh", "-c", test::shell_command_in(l.work, argv)}, env);
  return child.wait();
}

bool have_data() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

bool lowered_a_limit(const test::FakeNvml& nvml) {
  const auto history = nvml.limit_history();
  return std::any_of(history.begin(), history.end(),
                     [](const auto& set) { return set.second < 280'000; });
}

void expect_limits_restored(const test::FakeNvml& nvml, const std::string& output) {
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(nvml.limit_mw(g), 280'000) << "GPU " << g << "\n" << output;
  }
}

class RunDirMatrix : public ::testing::TestWithParam<Cell> {};

TEST_P(RunDirMatrix, EveryFileWhereItWasAskedForAndNothingElsewhere) {
  if (!have_data()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const Cell cell = GetParam();
  test::TempDir root;
  const test::RunLayout l = test::run_layout(cell.way, root.path());
  std::optional<test::FakeNvml> nvml;
  if (cell.gpu == Gpu::kNvml) {
    nvml.emplace(test::two_a40s_at_280w());
  }
  std::vector<std::string> program{ZEUS_EXAMPLE_PATH};
  for (const auto& list :
       {test::quick_fashion_mnist_args(cell.gpu == Gpu::kNvml, world_of(cell.start)),
        l.program_args}) {
    program.insert(program.end(), list.begin(), list.end());
  }
  const test::ProcessResult r = run_started(cell.start, l, program, test::quick_env(l));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("on " + std::to_string(world_of(cell.start)) + " rank(s)")) << r.out;
  const auto problems = test::run_dir_problems({.root = root.path(),
                                                .cwd = l.work,
                                                .program_dir = l.program_dir,
                                                .launcher_dir = l.launcher_dir,
                                                .world_size = world_of(cell.start),
                                                .simulated = cell.gpu == Gpu::kSim});
  EXPECT_THAT(problems, ::testing::IsEmpty()) << "files:\n" << test::tree(root.path()) << r.out;
  if (nvml) {
    EXPECT_TRUE(lowered_a_limit(*nvml)) << "the job profiled lower limits through NVML\n" << r.out;
    expect_limits_restored(*nvml, r.out);
  }
}

std::vector<Cell> cells() {
  const std::map<Start, std::vector<Way>> ways{
      {Start::kAlone,
       {Way::kDefault, Way::kProgramRelative, Way::kProgramAbsolute, Way::kEnv, Way::kCodeOverEnv}},
      {Start::kZeusRun1,
       {Way::kDefault, Way::kProgramRelative, Way::kEnv, Way::kLauncherAndProgram}},
      {Start::kZeusRun2,
       {Way::kDefault, Way::kProgramRelative, Way::kProgramAbsolute, Way::kEnv, Way::kCodeOverEnv,
        Way::kLauncherAndProgram}},
      {Start::kLegacyLocalRank, {Way::kDefault, Way::kProgramRelative, Way::kLauncherAndProgram}},
      {Start::kSpawn, {Way::kDefault, Way::kProgramRelative, Way::kProgramAbsolute, Way::kEnv}},
  };
  std::vector<Cell> all;
  for (const auto& [start, list] : ways) {
    for (Way way : list) {
      for (Gpu gpu : {Gpu::kNvml, Gpu::kSim}) {
        all.push_back({start, way, gpu});
      }
    }
  }
  return all;
}

std::string cell_name(const ::testing::TestParamInfo<Cell>& info) {
  return name_of(info.param.start) + "_" + test::name_of(info.param.way) + "_" +
         (info.param.gpu == Gpu::kNvml ? "Nvml" : "Sim");
}

INSTANTIATE_TEST_SUITE_P(StartTimesLogDir, RunDirMatrix, ::testing::ValuesIn(cells()), cell_name);

// A log directory that cannot be made (a file is in the way) stops every rank before training,
// the error naming the path, instead of one rank dying at its first power log and the other
// reporting a peer that probably died.
TEST(RunDir, ALogDirThatCannotBeMadeStopsEveryRankBeforeTrainingNamingIt) {
  if (!have_data()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  test::TempDir root;
  const test::RunLayout l = test::run_layout(Way::kProgramRelative, root.path());
  std::ofstream(l.work / "runs") << "a file where the log directory should go";
  test::FakeNvml nvml(test::two_a40s_at_280w());
  std::vector<std::string> program{ZEUS_EXAMPLE_PATH};
  for (const auto& list : {test::quick_fashion_mnist_args(true, 2), l.program_args}) {
    program.insert(program.end(), list.begin(), list.end());
  }
  const test::ProcessResult r = run_started(Start::kZeusRun2, l, program, test::quick_env(l));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot use 'runs/exp1/deep/er' (" +
                               (l.work / "runs/exp1/deep/er").string() + ")"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("'runs' is a file, not a directory")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("making the log directory failed on rank 0")) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("epoch 1/"))) << r.out;
  EXPECT_TRUE(nvml.limit_history().empty()) << "no limit set before training";
  EXPECT_FALSE(fs::exists(l.work / "zeus_log")) << test::tree(root.path());
}

// A limit setter holding GPU i at limits_mw[i] through a journal at `journal`, once ready.
std::unique_ptr<test::Child> hold_limits(const fs::path& journal,
                                         const std::vector<std::string>& limits_mw) {
  std::vector<std::string> argv{ZEUS_LIMIT_SETTER_PATH, "nvml", journal.string()};
  argv.insert(argv.end(), limits_mw.begin(), limits_mw.end());
  auto holder = std::make_unique<test::Child>(argv);
  EXPECT_TRUE(holder->wait_for_output("ready", std::chrono::seconds(30))) << journal;
  return holder;
}

// The same, SIGKILLed once its limits are set: its journal is left and its owner is gone.
void leave_journal_of_a_dead_process(const fs::path& journal,
                                     const std::vector<std::string>& limits_mw) {
  auto victim = hold_limits(journal, limits_mw);
  victim->kill(SIGKILL);
  victim->wait();
}

// A `zeus run` of /bin/true, one process on this node, journaling in `dir`.
test::ProcessResult next_run_in(const fs::path& dir) {
  return test::run_process({ZEUS_CLI_PATH, "run", "--nproc-per-node", "1", "--standalone",
                            "--log-dir", dir.string(), "/bin/true"});
}

// A Python optimizer's process journal (gplo-<host>-<pid>.journal) whose owner and watchdog are
// both gone is settled by the next `zeus run` that journals in that directory, before its workers
// start; one of a live process is left to it.
TEST(RunDir, TheLauncherSettlesAPythonOptimizersJournalWhoseOwnerIsGone) {
  test::FakeNvml nvml(test::two_a40s_at_280w());
  test::TempDir dir;
  const fs::path dead = dir / "gplo-node-1.journal";
  const fs::path live = dir / "gplo-node-2.journal";
  leave_journal_of_a_dead_process(dead, {"200000"});
  // The live holder changes GPU 0 from the dead one's 200 W to 250 W, and GPU 1.
  const auto holder = hold_limits(live, {"250000", "225000"});
  ASSERT_EQ(nvml.limit_mw(0), 250'000);
  const test::ProcessResult r = next_run_in(dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("restored the power limits")) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dead.string())) << r.err;
  EXPECT_FALSE(fs::exists(dead)) << "settled";
  EXPECT_EQ(nvml.limit_mw(0), 280'000) << "the dead process's original limit is back";
  EXPECT_TRUE(fs::exists(live)) << "a live process's journal is its own";
  EXPECT_EQ(nvml.limit_mw(1), 225'000) << "the live process's limit stays";
}

// A run that made this host its node 1 died with GPU 0 at 210 W and GPU 1 at 225 W, its journal
// power-limits.node1.journal; the next run here is node 0 of its own (before: it settled only
// power-limits.journal, so its workers took 210/225 W for the limits they found and put those
// back). It settles every node's journal whose owner is gone, before its workers start, and
// leaves one of a live process alone.
TEST(RunDir, TheNextRunSettlesTheJournalThisHostLeftAsAnotherNode) {
  test::FakeNvml nvml(test::two_a40s_at_280w());
  test::TempDir dir;
  const fs::path live = dir / "power-limits.node2.journal";
  const fs::path dead = dir / "power-limits.node1.journal";
  const auto holder = hold_limits(live, {"250000"});
  leave_journal_of_a_dead_process(dead, {"210000", "225000"});
  const test::ProcessResult r = next_run_in(dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("restored the power limits")) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dead.string())) << r.err;
  EXPECT_FALSE(fs::exists(dead)) << "settled";
  EXPECT_EQ(nvml.limit_mw(0), 250'000) << "back to what the dead run found: the live one's";
  EXPECT_EQ(nvml.limit_mw(1), 280'000);
  EXPECT_TRUE(fs::exists(live)) << "a live process's journal is its own";
}

// The same left journal, and a job started without a launcher (ZEUS_LOG_DIR its journal dir):
// the job settles it before it takes the GPUs, so the limits it restores at its end are the
// site's 280 W, not the dead run's.
TEST(RunDir, AJobWithoutALauncherSettlesTheJournalThisHostLeftAsAnotherNode) {
  test::FakeNvml nvml(test::two_a40s_at_280w());
  test::TempDir dir;
  const fs::path dead = dir / "power-limits.node1.journal";
  leave_journal_of_a_dead_process(dead, {"210000", "225000"});
  test::ScopedEnv log_dir("ZEUS_LOG_DIR", dir.path().string());
  test::ScopedEnv params("ZEUS_PROFILE_PARAMS", "1,2");
  test::ScopedEnv target("ZEUS_TARGET_METRIC", "0.5");
  const test::ProcessResult r =
      test::run_process({ZEUS_LOADER_WORKER_PATH, "--single", "--samples", "160", "--batch-size",
                         "4", "--max-epochs", "1", "--metrics", "0.1", "--step-ms", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("restored the power limits")) << r.out << r.err;
  EXPECT_FALSE(fs::exists(dead)) << "settled";
  EXPECT_FALSE(nvml.limit_history().empty()) << "the job did set limits";
  EXPECT_EQ(nvml.limit_mw(0), 280'000) << r.out << r.err;
  EXPECT_EQ(nvml.limit_mw(1), 280'000) << r.out << r.err;
}

// A worker SIGKILLed in the middle of profiling (it holds the lowered limits and their journal)
// under `zeus run`, each way of giving the directory: the launcher settles the journal where the
// workers wrote it, the limits come back to 280 W, and nothing is left elsewhere. The job is
// tests/support/loader_worker (synthetic data), whose log dir in code is --log-dir-in-code.
class KilledWorkerRunDir : public ::testing::TestWithParam<Way> {};

TEST_P(KilledWorkerRunDir, TheLauncherSettlesTheJournalWhereTheWorkersWroteIt) {
  test::TempDir root;
  test::RunLayout l = test::run_layout(GetParam(), root.path());
  for (auto& arg : l.program_args) {
    if (arg == "--log-dir") {
      arg = "--log-dir-in-code";
    }
  }
  test::FakeNvml nvml(test::two_a40s_at_280w());
  std::vector<std::string> program{
      ZEUS_LOADER_WORKER_PATH, "--samples", "800", "--batch-size", "4", "--max-epochs", "2",
      "--kill-at-step",        "20"};
  program.insert(program.end(), l.program_args.begin(), l.program_args.end());
  auto env = l.env;
  env["ZEUS_DEVICE"] = "nvml";
  env["ZEUS_PROFILE_PARAMS"] = "2,5";
  env["ZEUS_TARGET_METRIC"] = "0.5";
  const test::ProcessResult r = run_started(Start::kZeusRun2, l, program, env);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("restored the power limits")) << r.out;
  EXPECT_TRUE(lowered_a_limit(nvml)) << "the worker died holding a lowered limit\n" << r.out;
  expect_limits_restored(nvml, r.out);
  const auto problems = test::run_dir_problems({.root = root.path(),
                                                .cwd = l.work,
                                                .program_dir = l.program_dir,
                                                .launcher_dir = l.launcher_dir,
                                                .world_size = 2,
                                                .complete = false});
  EXPECT_THAT(problems, ::testing::IsEmpty()) << "files:\n" << test::tree(root.path()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(EachLogDir, KilledWorkerRunDir,
                         ::testing::Values(Way::kDefault, Way::kProgramRelative,
                                           Way::kProgramAbsolute, Way::kEnv, Way::kCodeOverEnv,
                                           Way::kLauncherAndProgram),
                         [](const ::testing::TestParamInfo<Way>& info) {
                           return test::name_of(info.param);
                         });

}  // namespace
}  // namespace zeus
