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
