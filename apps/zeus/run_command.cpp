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

int run_run(const launch::LaunchOptions& options, std::ostream& out, std::ostream& err,
            const std::vector<EnvFlag>& env_flags) {
  launch::LaunchPlan plan;
  try {
    plan = launch::resolve(options, launch::default_launch_context());
  } catch (const ConfigError& e) {
    err << "zeus run: error: " << name_env_flags(e.what(), env_flags) << "\n";
    return kExitUsage;
  }
  if (options.log_dir.empty() && !plan.log_dir.empty()) {
    err << "zeus run: --tee/--redirects without --log-dir: worker logs go to "
        << plan.log_dir.string() << "\n";
  }
  launch::SupervisorIo io;
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
