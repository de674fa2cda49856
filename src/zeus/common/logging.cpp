#include "zeus/common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace zeus {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto log = spdlog::stderr_color_mt("zeus");
    log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [zeus pid %P] [%^%l%$] %v");
    // Read directly rather than through get_env(), which itself logs.
    const char* level = std::getenv("ZEUS_LOG_LEVEL");
    const std::string_view name = level != nullptr ? level : "info";
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

}  // namespace zeus
