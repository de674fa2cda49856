#include <fmt/format.h>

#include <ostream>

#include "cli.h"
#include "zeus/common/errors.h"

namespace zeus::cli {

// The library throws or returns; the exit codes are the CLI's: 2 nothing was run (bad options,
// another run's log dir), 1 a try failed, 128 + N stopped by signal N (resumable).
int run_tune_command(const tune::TuneOptions& options, std::ostream& out, std::ostream& err) {
  try {
    const tune::TuneOutcome outcome = tune::run_tune(options, out);
    if (outcome.stop_signal != 0) {
      err << fmt::format(
          "zeus tune: stopped by signal {} during recurrence {} try {} (not recorded); run the "
          "same command again to resume\n",
          outcome.stop_signal, outcome.recurrence, outcome.attempt);
      return 128 + outcome.stop_signal;
    }
    return kExitOk;
  } catch (const ConfigError& e) {
    err << "zeus tune: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << "zeus tune: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace zeus::cli
