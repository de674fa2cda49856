// The project's one logger (spdlog, to stderr). Messages carry the process id, and once the
// process joins a distributed job, its rank: "[rank 3/8 gpu07 pid 4121]".
#pragma once

#include <spdlog/spdlog.h>

#include <filesystem>

namespace zeus {

// The shared "zeus" logger; created on first use with the level from ZEUS_LOG_LEVEL.
spdlog::logger& logger();

struct RankLoggingOptions {
  int rank = 0;
  int world_size = 1;
  bool local_master = true;
  // Console output from every rank; by default only local masters print, so a node of 8 ranks
  // shows one stream.
  bool console_all_ranks = false;
  // Also log to this file ("{rank}" is replaced by the rank), on every rank.
  std::filesystem::path file;
};

// Prefixes every message with the rank and host, and applies the console and file policy.
// Throws IoError naming the path when the file cannot be opened.
void configure_rank_logging(const RankLoggingOptions& options);

}  // namespace zeus
