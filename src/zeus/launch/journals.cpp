// settle_journals (supervisor.h): the launcher's restore of power-limit journals whose owner is
// gone.
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/launch/supervisor.h"

namespace zeus::launch {

void settle_journals(const std::vector<std::filesystem::path>& dirs, int node_rank,
                     const std::function<void(const std::string&)>& say) {
  for (const auto& dir : dirs) {
    const auto path = contract::journal_path(dir, node_rank);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      continue;
    }
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
      say(fmt::format(
          "could not restore the power limits in {}: {}; run `zeus restore-limits --journal {}` "
          "once the GPUs are reachable",
          path.string(), e.what(), path.string()));
    }
  }
}

}  // namespace zeus::launch
