#include "zeus/common/logging.h"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"

namespace zeus {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto log = spdlog::stderr_color_mt("zeus");
    log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [zeus pid %P] [%^%l%$] %v");
    // Not through get_env(), which itself logs.
    const std::string name = get_env_set(kEnvLogLevel).value_or("info");
    const auto parsed = spdlog::level::from_str(std::string(name));
    // from_str() maps unknown names to "off"; a typo must not silence every warning.
    if (parsed == spdlog::level::off && name != "off") {
      log->set_level(spdlog::level::info);
      log->warn(
          "ZEUS_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, off); using info",
          name);
    } else {
      log->set_level(parsed);
    }
    return log;
  }();
  return *instance;
}

void configure_rank_logging(const RankLoggingOptions& options) {
  spdlog::logger& log = logger();
  const std::string pattern =
      fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}/{} {} pid %P] [%^%l%$] %v", options.rank,
                  options.world_size, host_name());
  auto& sinks = log.sinks();
  // The first sink is the console; any file sink a previous call added is replaced.
  sinks.resize(1);
  sinks[0]->set_level(options.local_master || options.console_all_ranks ? spdlog::level::trace
                                                                        : spdlog::level::off);
  if (!options.file.empty()) {
    std::string path = options.file.string();
    for (size_t at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}")) {
      path.replace(at, 6, std::to_string(options.rank));
    }
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path));
    } catch (const spdlog::spdlog_ex& e) {
      throw IoError(fmt::format("cannot open log file '{}': {}", path, e.what()));
    }
  }
  log.set_pattern(pattern);
}

}  // namespace zeus
