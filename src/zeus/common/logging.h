// The project's one logger (spdlog, to stderr). Messages carry the process id; later the rank.
#pragma once

#include <spdlog/spdlog.h>

namespace zeus {

// The shared "zeus" logger; created on first use with the level from ZEUS_LOG_LEVEL.
spdlog::logger& logger();

}  // namespace zeus
