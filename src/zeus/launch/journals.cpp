// settle_journals (supervisor.h): the launcher's restore of power-limit journals whose owner is
// gone: the node's journal and the Python optimizers' process journals in each directory.
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/device/restore_rule.h"
#include "zeus/launch/supervisor.h"

namespace zeus::launch {

int settle_journals(const std::vector<std::filesystem::path>& dirs, int node_rank,
                    const std::function<void(const std::string&)>& say) {
  int left = 0;
  std::vector<std::filesystem::path> journals;
  for (const auto& dir : dirs) {
    auto node_journal = contract::journal_path(dir, node_rank);
    if (std::error_code ec; std::filesystem::exists(node_journal, ec)) {
      journals.push_back(std::move(node_journal));
    }
    // A Python optimizer's own (its watchdog usually restored them already; not when it was
    // killed with the worker's group).
    for (auto& path : contract::list_process_journals(dir)) {
      journals.push_back(std::move(path));
    }
  }
  for (const auto& path : journals) {
    try {
      const device::PowerLimitJournal journal = device::read_journal(path);
      const device::JournalOwner owner = device::journal_owner(journal);
      if (owner != device::JournalOwner::kGone && owner != device::JournalOwner::kOtherBoot) {
        continue;  // a live job's (it restores them itself), or another node's on a shared dir
      }
      if (const auto settled = device::settle_stale_journal(path)) {
        say(*settled);
      }
    } catch (const Error& e) {
      if (std::error_code ec; !std::filesystem::exists(path, ec)) {
        continue;  // settled meanwhile by its owner's watchdog: nothing left to do
      }
      left += device::restore_target_gone(e) ? 0 : 1;
      say(fmt::format(
          "could not restore the power limits in {}: {}; run `zeus restore-limits --journal {}` "
          "once the GPUs are reachable",
          path.string(), e.what(), path.string()));
    }
  }
  return left;
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
