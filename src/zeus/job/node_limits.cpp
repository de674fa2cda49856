#include "zeus/job/node_limits.h"

#include <filesystem>
#include <string>
#include <vector>

#include "zeus/common/directories.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/job/run_dirs.h"

namespace zeus::job {

NodeLimits::NodeLimits(const ResolvedJobOptions& options, NodeGpus& gpus)
    : measure_only_(options.measure_only), gpus_(gpus) {
  if (!gpus_.owns_gpus()) {
    return;
  }
  const auto journal = contract::journal_path(options.journal_dir, gpus_.ranks().node_rank);
  if (!measure_only_) {
    // Made here, not at the first limit: a directory that cannot be made fails the job before
    // training (the caller agrees), naming the path. Measuring only, nothing is journaled and
    // no directory is made.
    make_directory(options.journal_dir, kJournalDirRole);
    // What an earlier run left in this directory as another node (a host that was node 1 of that
    // run is node 0 of this one), or a Python optimizer's, goes back first too; a launcher did
    // so already, a job started without one finds them here. This node's own the guard settles.
    std::vector<std::filesystem::path> others;
    for (auto& path : contract::list_journals(options.journal_dir)) {
      if (path != journal) {
        others.push_back(std::move(path));
      }
    }
    device::settle_gone_journals(others,
                                 [](const std::string& line) { logger().warn("{}", line); });
    // The guard first restores what an earlier job left in the journal, then takes the GPUs.
    guard_ = std::make_unique<device::PowerLimitGuard>(
        *gpus_.gpu_set(), device::PowerLimitGuardOptions{.journal_path = journal});
  } else if (std::error_code ec; std::filesystem::exists(journal, ec)) {
    const device::PowerLimitJournal held = device::read_journal(journal);
    logger().warn(
        "{} holds limits an earlier job lowered ({}); measure-only sets no limit, so this job "
        "measures the GPUs as they are: `zeus restore-limits --journal {}` (as root) puts them "
        "back",
        journal.string(), device::describe_owner(held, device::journal_owner(held)),
        journal.string());
  }
}

NodeLimits::~NodeLimits() = default;

void NodeLimits::set_power_limit_mw(int64_t limit_mw) {
  ZEUS_ASSERT(!measure_only_, "a power limit ({} mW) set in measure-only mode", limit_mw);
  if (guard_) {
    for (int gpu : gpus_.owned()) {
      guard_->set_power_limit_mw(gpu, limit_mw);
    }
  }
}

void NodeLimits::set_power_limits_mw(std::span<const int64_t> by_rank) {
  ZEUS_ASSERT(!measure_only_, "per-GPU power limits set in measure-only mode");
  if (!guard_) {
    return;
  }
  const auto& owned = gpus_.owned();
  const auto& ranks = gpus_.owned_ranks();
  for (size_t k = 0; k < owned.size(); ++k) {
    const int r = ranks[k];
    ZEUS_ASSERT(r >= 0 && static_cast<size_t>(r) < by_rank.size(),
                "GPU {} has no rank of its own among {} limits", owned[k], by_rank.size());
    guard_->set_power_limit_mw(owned[k], by_rank[static_cast<size_t>(r)]);
  }
}

void NodeLimits::restore() {
  if (guard_) {
    guard_->restore();
  }
}

}  // namespace zeus::job
