#include <fmt/format.h>

#include <ostream>

#include "cli.h"
#include "zeus/common/errors.h"
#include "zeus/device/power_limit_journal.h"

namespace zeus::cli {

int run_restore_limits(const RestoreLimitsCommandOptions& options, std::ostream& out,
                       std::ostream& err) {
  std::error_code ec;
  if (!std::filesystem::exists(options.journal, ec)) {
    // A journal is removed after a successful restore, so its absence means nothing is owed.
    out << fmt::format("zeus restore-limits: no journal at '{}': nothing to restore\n",
                       options.journal.string());
    return kExitOk;
  }
  try {
    // Whose the journal is: a live job's limits are not taken from it, and limits recorded on
    // another machine or before a reboot are not applied blindly.
    const device::PowerLimitJournal journal = device::read_journal(options.journal);
    const device::JournalOwner owner = device::journal_owner(journal);
    if (!options.force && owner != device::JournalOwner::kGone) {
      const std::string why =
          owner == device::JournalOwner::kOtherHost ? "run zeus restore-limits on that machine"
          : owner == device::JournalOwner::kOtherBoot
              ? "the driver reset those limits when the machine rebooted, so there is likely "
                "nothing to restore; --force applies it anyway"
              : "that job restores them itself when it ends (SIGTERM makes it end); --force takes "
                "them back now";
      err << fmt::format("zeus restore-limits: error: '{}' was written by {}: {}\n",
                         options.journal.string(), device::describe_owner(journal, owner), why);
      return kExitUsage;
    }
    const device::RestoreReport report = device::restore_from_journal(options.journal);
    for (const auto& line : report.lines) {
      out << "restored " << line << "\n";
    }
    out << fmt::format("zeus restore-limits: restored {} GPU(s) from '{}'\n", report.restored,
                       options.journal.string());
    return kExitOk;
  } catch (const ConfigError& e) {
    err << "zeus restore-limits: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << "zeus restore-limits: error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace zeus::cli
