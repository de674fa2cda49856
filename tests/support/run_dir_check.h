// The guard of the run contract's places (issue #38): after a job, every file of the run contract
// is where it was asked for and nothing is anywhere else. Used by the start-method x log-directory
// matrix (run_dir_test.cpp) and its Slurm cells (slurm_test.cpp).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_support.h"

namespace zeus::test {

// The ways a job's log directory can be given.
enum class LogDirWay {
  kDefault,             // nothing given: zeus_log in the working directory
  kProgramRelative,     // the program's --log-dir (JobOptions::log_dir in code), relative, deep
  kProgramAbsolute,     // the same, absolute
  kEnv,                 // ZEUS_LOG_DIR, relative, deep
  kCodeOverEnv,         // --log-dir in code beats ZEUS_LOG_DIR, whose directory stays unmade
  kLauncherAndProgram,  // zeus run --log-dir (its own logs) beside the program's --log-dir
};
std::string name_of(LogDirWay way);

// Where one cell's files must go and how its command gives them, in the cell's temporary root:
// the job runs in root/work; an absolute directory lives in root/abs.
struct RunLayout {
  std::filesystem::path work;
  std::filesystem::path program_dir;
  std::optional<std::filesystem::path> launcher_dir;
  std::vector<std::string> launcher_args;  // after `zeus run`
  std::vector<std::string> program_args;   // after the program
  std::map<std::string, std::string> env;  // ZEUS_LOG_DIR and ZEUS_JOURNAL_DIR, set or emptied
};
// Makes root/work.
RunLayout run_layout(LogDirWay way, const std::filesystem::path& root);

// examples/fashion_mnist's flags for one quick epoch that profiles every limit of the fake A40s
// (nvml) or the simulated V100s with ZEUS_PROFILE_PARAMS=1,2, on `world_size` ranks.
std::vector<std::string> quick_fashion_mnist_args(bool nvml, int world_size);
// The environment of such a run, with the layout's.
std::map<std::string, std::string> quick_env(const RunLayout& layout);

// Two fake A40s at 280 W of 300 W (min 200 W: five limits to profile), so that a restore to the
// maximum instead of the original limit shows.
std::vector<FakeGpu> two_a40s_at_280w();

// `argv` as one /bin/sh word list, run in `dir`, stderr into stdout.
std::string shell_command_in(const std::filesystem::path& dir,
                             const std::vector<std::string>& argv);

struct RunDirExpectation {
  // Everything the run may have touched (its working directory and any absolute directory it
  // was given live under it): every file and directory there is checked.
  std::filesystem::path root;
  // The run's working directory (under root): there before the run, left as it was but for the
  // levels leading to the directories asked for.
  std::optional<std::filesystem::path> cwd;
  // Where the run contract's files must be (the program's log directory).
  std::filesystem::path program_dir;
  // `zeus run --log-dir`: the launcher's per-rank logs (attempt_N/RANK/std{out,err}.log) only.
  std::optional<std::filesystem::path> launcher_dir;
  int world_size = 1;
  // A job that ran to its end: one train result, one power profile of the same global batch
  // size, a power log of every GPU of the world in each epoch. A job that was killed: no result
  // is required, only that its files (power logs, the simulated GPUs' state) are in program_dir.
  bool complete = true;
  bool simulated = false;  // the simulated GPUs' state file is in program_dir
};

// What is wrong, one line per problem (empty: the contract holds). Journals count as problems
// anywhere: a run that ended, whichever way, leaves its limits restored and its journals settled.
std::vector<std::string> run_dir_problems(const RunDirExpectation& expected);

// Everything under `dir` (directories with a trailing '/'), relative to it, sorted: for failure
// messages.
std::string tree(const std::filesystem::path& dir);

}  // namespace zeus::test
