#include "run_dir_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "zeus/contract/run_files.h"

namespace zeus::test {
namespace {

namespace fs = std::filesystem;

bool is_within(const fs::path& path, const fs::path& dir) {
  const auto rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

// `path` is `dir` or one of its parents.
bool leads_to(const fs::path& path, const fs::path& dir) {
  return is_within(dir, path);
}

void check_program_dir(const RunDirExpectation& e, std::vector<std::string>& problems) {
  std::error_code ec;
  if (!fs::is_directory(e.program_dir, ec)) {
    problems.push_back(
        fmt::format("the program's log directory {} was not made", e.program_dir.string()));
    return;
  }
  const contract::RunDirListing listing = contract::list_run_dir(e.program_dir);
  for (const auto& [path, node] : listing.journals) {
    problems.push_back(fmt::format("journal {} was left (node {})", path.string(), node));
  }
  if (e.simulated) {
    bool state = false;
    for (const auto& entry : fs::directory_iterator(e.program_dir, ec)) {
      state = state || entry.path().filename().string().starts_with(".sim-node");
    }
    if (!state) {
      problems.push_back(fmt::format("no simulated GPUs' state in {}", e.program_dir.string()));
    }
  }
  if (e.world_size > 0 && listing.power_logs.empty()) {
    problems.push_back(fmt::format("no power log in {}", e.program_dir.string()));
  }
  if (!e.complete) {
    return;
  }
  if (listing.train_results.size() != 1) {
    problems.push_back(fmt::format("{} train result(s) in {}, expected 1",
                                   listing.train_results.size(), e.program_dir.string()));
    return;
  }
  const int64_t bs = listing.train_results.front().second.global_batch_size;
  if (listing.power_profiles.size() != 1 || listing.power_profiles.front().second != bs) {
    problems.push_back(fmt::format("expected the power profile bs{}.power.json in {}", bs,
                                   e.program_dir.string()));
  }
  std::set<std::pair<int, int>> logs;  // (epoch, gpu)
  std::set<int> epochs;
  for (const auto& [path, name] : listing.power_logs) {
    if (name.global_batch_size != bs) {
      problems.push_back(fmt::format("power log {} is not of batch size {}", path.string(), bs));
    }
    logs.emplace(name.epoch, name.gpu);
    epochs.insert(name.epoch);
  }
  for (int epoch : epochs) {
    for (int gpu = 0; gpu < e.world_size; ++gpu) {
      if (!logs.contains({epoch, gpu})) {
        problems.push_back(fmt::format("no power log of GPU {} in epoch {} in {}", gpu, epoch,
                                       e.program_dir.string()));
      }
    }
  }
}

}  // namespace

std::vector<std::string> run_dir_problems(const RunDirExpectation& e) {
  std::vector<std::string> problems;
  check_program_dir(e, problems);
  static const std::regex kLauncherLog(R"(attempt_\d+/\d+/std(out|err)\.log)");
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(e.root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path path = it->path();
    const std::string name = path.filename().string();
    if (it->is_directory(ec)) {
      if (name == contract::kRunJournalsDirName) {
        problems.push_back(fmt::format("the runs' journal directory was left: {}", path.string()));
        continue;
      }
      const bool allowed =
          path == e.cwd || leads_to(path, e.program_dir) || is_within(path, e.program_dir) ||
          (e.launcher_dir && (leads_to(path, *e.launcher_dir) || is_within(path, *e.launcher_dir)));
      if (!allowed) {
        problems.push_back(fmt::format("a directory where none was asked for: {}", path.string()));
      }
      continue;
    }
    // Any journal: a node's, a Python optimizer's, or one of a kind yet to come.
    if (name.ends_with(".journal")) {
      problems.push_back(fmt::format("a journal was left: {}", path.string()));
      continue;
    }
    if (path.parent_path() == e.program_dir.lexically_normal()) {
      const bool contract_file =
          contract::parse_train_result_name(name) || contract::parse_power_profile_name(name) ||
          contract::parse_power_log_name(name) || (e.simulated && name.starts_with(".sim-node"));
      if (!contract_file) {
        problems.push_back(
            fmt::format("a file of no kind in the log directory: {}", path.string()));
      }
      continue;
    }
    if (e.launcher_dir && is_within(path, *e.launcher_dir)) {
      const std::string rel = path.lexically_relative(*e.launcher_dir).string();
      if (!std::regex_match(rel, kLauncherLog)) {
        problems.push_back(
            fmt::format("a file in the launcher's log directory that is not a "
                        "rank's log: {}",
                        path.string()));
      }
      continue;
    }
    problems.push_back(fmt::format("a file where none was asked for: {}", path.string()));
  }
  return problems;
}

std::string name_of(LogDirWay way) {
  switch (way) {
    case LogDirWay::kDefault:
      return "Default";
    case LogDirWay::kProgramRelative:
      return "ProgramRelative";
    case LogDirWay::kProgramAbsolute:
      return "ProgramAbsolute";
    case LogDirWay::kEnv:
      return "Env";
    case LogDirWay::kCodeOverEnv:
      return "CodeOverEnv";
    case LogDirWay::kLauncherAndProgram:
      return "LauncherAndProgram";
  }
  return "?";
}

RunLayout run_layout(LogDirWay way, const fs::path& root) {
  RunLayout l;
  l.work = root / "work";
  fs::create_directories(l.work);
  l.env = {{"ZEUS_LOG_DIR", ""}, {"ZEUS_JOURNAL_DIR", ""}};
  switch (way) {
    case LogDirWay::kDefault:
      l.program_dir = l.work / "zeus_log";
      break;
    case LogDirWay::kProgramRelative:
      l.program_dir = l.work / "runs/exp1/deep/er";
      l.program_args = {"--log-dir", "runs/exp1/deep/er"};
      break;
    case LogDirWay::kProgramAbsolute:
      l.program_dir = root / "abs/exp1/deep";
      l.program_args = {"--log-dir", l.program_dir.string()};
      break;
    case LogDirWay::kEnv:
      l.program_dir = l.work / "from-env/exp1/deep";
      l.env["ZEUS_LOG_DIR"] = "from-env/exp1/deep";
      break;
    case LogDirWay::kCodeOverEnv:
      l.program_dir = l.work / "in-code/exp1";
      l.program_args = {"--log-dir", "in-code/exp1"};
      l.env["ZEUS_LOG_DIR"] = "not-this/exp1";
      break;
    case LogDirWay::kLauncherAndProgram:
      l.program_dir = l.work / "program/exp1";
      l.launcher_dir = l.work / "launcher/exp1";
      l.program_args = {"--log-dir", "program/exp1"};
      l.launcher_args = {"--log-dir", "launcher/exp1"};
      break;
  }
  return l;
}

std::vector<std::string> quick_fashion_mnist_args(bool nvml, int world_size) {
  // 24 steps of 32 samples per rank: enough to profile the 5 (A40) or 7 (V100) limits of 1 + 2
  // iterations each in the first and only epoch.
  return {"--epochs",          "1",   "--limit-train", std::to_string(768 * world_size),
          "--limit-test",      "256", "--batch-size",  "32",
          "--target-accuracy", "0.1", "--device",      nvml ? "nvml" : "sim:v100"};
}

std::map<std::string, std::string> quick_env(const RunLayout& layout) {
  auto env = layout.env;
  env["ZEUS_PROFILE_PARAMS"] = "1,2";
  env["OMP_NUM_THREADS"] = "1";
  return env;
}

std::vector<FakeGpu> two_a40s_at_280w() {
  std::vector<FakeGpu> gpus = four_a40s();
  gpus.resize(2);
  for (auto& g : gpus) {
    g.limit_mw = 280'000;
    g.min_limit_mw = 200'000;
  }
  return gpus;
}

std::string shell_command_in(const fs::path& dir, const std::vector<std::string>& argv) {
  auto quoted = [](const std::string& word) {
    std::string q = "'";
    for (char c : word) {
      q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return q + "'";
  };
  std::string cmd = "cd " + quoted(dir.string()) + " && exec";
  for (const auto& a : argv) {
    cmd += " " + quoted(a);
  }
  return cmd + " 2>&1";
}

std::string tree(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().lexically_relative(dir).string() +
                    (it->is_directory(ec) ? "/" : ""));
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) {
    out += "  " + n + "\n";
  }
  return out;
}

}  // namespace zeus::test
