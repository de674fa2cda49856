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
    log->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::info);
    return log;
  }();
  return *instance;
}

}  // namespace zeus
