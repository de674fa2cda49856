// settle_journals (supervisor.h): the launcher's restore of power-limit journals whose owner is
// gone: every node's journal and the Python optimizers' process journals in each directory.
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "zeus/contract/run_files.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/launch/supervisor.h"

namespace zeus::launch {

int settle_journals(const std::vector<std::filesystem::path>& dirs,
                    const std::function<void(const std::string&)>& say) {
  std::vector<std::filesystem::path> journals;
  for (const auto& dir : dirs) {
    // Every node's, not only this node's: the run that left one here may have made this host
    // another node than this run does. A Python optimizer's own too (its watchdog usually
    // restored them already; not when it was killed with the worker's group).
    for (auto& path : contract::list_journals(dir)) {
      journals.push_back(std::move(path));
    }
  }
  return device::settle_gone_journals(journals, say);
}

std::vector<std::filesystem::path> missing_journal_dirs(const LaunchPlan& plan) {
  std::vector<std::filesystem::path> missing;
  std::error_code ec;
  for (auto dir = plan.journal_dir;
       !dir.empty() && dir != dir.root_path() &&
       !std::filesystem::exists(std::filesystem::symlink_status(dir, ec));
       dir = dir.parent_path()) {
    missing.push_back(dir);
  }
  return missing;
}

void remove_empty_journal_dirs(const LaunchPlan& plan,
                               const std::vector<std::filesystem::path>& made) {
  std::error_code ec;
  if (plan.run_journals_root) {
    for (const auto& dir : contract::list_run_journal_dirs(*plan.run_journals_root)) {
      std::filesystem::remove(dir, ec);  // only when empty
    }
    std::filesystem::remove(*plan.run_journals_root / contract::kRunJournalsDirName, ec);
  }
  for (const auto& dir : made) {
    if (!std::filesystem::remove(dir, ec) && std::filesystem::exists(dir, ec)) {
      break;  // not empty: neither is any parent
    }
  }
}

}  // namespace zeus::launch
