#include "cli.h"

namespace zeus::cli {

int run_tune_command(const tune::TuneOptions& options, std::ostream& out, std::ostream& err) {
  return tune::run_tune(options, out, err);
}

}  // namespace zeus::cli
