// `zeus run`: resolve the launch plan (all validation happens here, before any worker starts),
// then hand it to the supervisor.
#include <fmt/format.h>

#include <iostream>
#include <ostream>

#include "cli.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/launch/supervisor.h"

namespace zeus::cli {

int run_run(const launch::LaunchOptions& options, std::ostream& out, std::ostream& err) {
  launch::LaunchPlan plan;
  try {
    plan = launch::resolve(options, launch::default_launch_context());
  } catch (const ConfigError& e) {
    err << "zeus run: error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (options.log_dir.empty() && !plan.log_dir.empty()) {
    err << "zeus run: --tee/--redirects without --log-dir: worker logs go to "
        << plan.log_dir.string() << "\n";
  }
  launch::SupervisorIo io;
  // The journals a worker may leave: the log dir of its zeus::DataLoader (ZEUS_LOG_DIR, default
  // zeus_log/ in the working directory); the plan adds --log-dir.
  if (const auto dir = get_env(kEnvLogDir)) {
    io.journal_dirs.emplace_back(*dir);
  }
  io.journal_dirs.emplace_back("zeus_log");
  out.flush();
  err.flush();
  try {
    return launch::Supervisor(std::move(plan), std::move(io)).run();
  } catch (const Error& e) {
    err << "zeus run: error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace zeus::cli
