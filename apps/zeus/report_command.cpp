#include <fmt/format.h>

#include <ostream>

#include "cli.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/report/report.h"

namespace zeus::cli {

int run_report(const ReportCommandOptions& options, std::ostream& out, std::ostream& err) {
  try {
    const report::RunData run = report::load_run(options.dir);
    const auto page = options.out.empty() ? options.dir / "report.html" : options.out;
    write_file_atomic(page, report::to_html(run));
    if (options.format == "md") {
      out << report::to_markdown(run);
    } else if (options.format == "json") {
      out << report::to_json(run);
    } else {
      for (const auto& [path, result] : run.results) {
        out << path.filename().string() << ": " << contract::summary_line(result) << "\n";
      }
    }
    (options.format == "html" ? out : err) << fmt::format("zeus report: wrote {}\n", page.string());
    return kExitOk;
  } catch (const ConfigError& e) {
    err << "zeus report: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << "zeus report: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace zeus::cli
